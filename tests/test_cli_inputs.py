"""Same input options everywhere: ``replay``/``compare`` take ``--format`` and ``--tz`` like
``trace inspect/convert``; ``--json`` prints the summary, and only it, on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.cli.replay import FORMATS


@pytest.fixture(scope="module")
def philly_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a Philly-format table (naive local timestamps), 40 jobs 7 minutes apart
    start = pd.Timestamp("2017-10-09 06:00:00")
    rows = [
        {"timestamp": (start + pd.Timedelta(minutes=7 * i)).strftime("%Y-%m-%d %H:%M:%S"),
         "duration": 900.0 + 61 * (i % 5), "num_gpus": [1, 2, 4, 8, 16][i % 5],
         "gpu_time": 0.0, "cluster": f"vc{i % 3}"}
        for i in range(40)
    ]
    path = tmp_path_factory.mktemp("philly") / "philly.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_formats_are_the_loaders() -> None:
    from aryl.cli.trace import _FORMATS
    from aryl.traces.readers import FORMATS as registry

    assert set(FORMATS) == set(registry) == set(_FORMATS)


def _json(args: list[str]) -> dict[str, object]:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return dict(json.loads(r.stdout))  # stdout is the JSON document and nothing else


def test_any_format_replays_without_converting(philly_csv: Path, tmp_path: Path) -> None:
    cluster = ["--training-servers", "2", "--inference-servers", "2", "--inference", "none"]
    direct = _json(["replay", "--trace", str(philly_csv), "--format", "philly", "--tz", "UTC",
                    *cluster, "--json"])
    canon = tmp_path / "canon.csv"
    r = CliRunner().invoke(main, ["trace", "convert", str(philly_csv), str(canon), "--tz", "UTC"])
    assert r.exit_code == 0, r.output
    converted = _json(["replay", "--trace", str(canon), *cluster, "--json"])
    for key in ("jct_s", "queuing_delay_s", "n_preemptions", "n_loans", "cluster_usage"):
        assert direct[key] == converted[key], key
    assert direct["trace"]["tz"] == "UTC"  # type: ignore[index]
    assert direct["n_finished"] == 40
    # the 16-GPU jobs need two servers: fifo really ran the traced sizes
    assert direct["n_infeasible"] == 0


def test_tz_reaches_the_loader(philly_csv: Path) -> None:
    la = _json(["compare", "--trace", str(philly_csv), "--policies", "fifo",
                "--training-servers", "2", "--inference", "none", "--json"])
    utc = _json(["compare", "--trace", str(philly_csv), "--policies", "fifo", "--tz", "UTC",
                 "--training-servers", "2", "--inference", "none", "--json"])
    s_la = la["summaries"]["fifo"]  # type: ignore[index]
    s_utc = utc["summaries"]["fifo"]  # type: ignore[index]
    assert s_la["trace"]["tz"] == "America/Los_Angeles"  # the Philly default
    assert s_utc["trace"]["tz"] == "UTC"
    # 06:00 local on 2017-10-09 is 13:00 UTC in Los Angeles (PDT, UTC-7): the clock
    # starts 7 hours later on the absolute (epoch) time base than when read as UTC
    assert s_la["start_s"] - s_utc["start_s"] == 7 * 3600
    assert s_utc["start_s"] == pd.Timestamp("2017-10-09 06:00:00", tz="UTC").timestamp()
    # relative timing is unchanged, so are the measures
    assert s_la["jct_s"] == s_utc["jct_s"]


def test_format_option_is_used(philly_csv: Path) -> None:
    r = CliRunner().invoke(main, ["replay", "--trace", str(philly_csv), "--format", "itp"])
    assert r.exit_code != 0
    assert "submission_time" in r.output  # the itp reader's own column, not detection


def test_json_is_the_summary_file(philly_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    r = CliRunner().invoke(main, ["replay", "--trace", str(philly_csv), "--training-servers", "2",
                                  "--inference-servers", "2", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    printed = json.loads(r.stdout)
    assert printed == json.loads((out / "summary.json").read_text())
    assert "wrote" in r.stderr
    assert "aryl replay" in r.stderr
    assert printed["run"]["sim"]["n_training_servers"] == 2
    r = CliRunner().invoke(main, ["compare", "--trace", str(philly_csv), "--policies",
                                  "fifo,aryl", "--training-servers", "2", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [row["policy"] for row in doc["compare"]] == ["fifo", "aryl"]
    aryl = doc["summaries"]["aryl"]
    fifo = doc["summaries"]["fifo"]
    ratio = fifo["jct_s"]["mean"] / aryl["jct_s"]["mean"]
    assert doc["compare"][1]["jct_ratio"] == pytest.approx(ratio)
    # aryl (borrowing idle inference servers) never queues here: the ratio is undefined,
    # which strict JSON writes as null (json.loads above would accept NaN; check the text)
    assert aryl["queuing_delay_s"]["mean"] == 0
    assert doc["compare"][1]["queuing_delay_ratio"] is None
    assert "NaN" not in r.stdout
