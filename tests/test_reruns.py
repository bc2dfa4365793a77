"""Byte-identical reruns (issue 9 item 9): the same command twice writes the same bytes.

Wall-clock measures (scheduler time, time per decision) live in ``timing.json``
(listed in the manifest), never in ``summary.json`` or ``compare.csv``; every
other output file of ``aryl replay --out``, ``aryl compare --out`` and
``aryl trace convert`` is hashed after each of two runs of the same command.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.sim import SimConfig, simulate

TIMING_KEYS = {"scheduler_time_s", "scheduler_ms_per_decision"}


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _twice(args: list[str], root: Path) -> tuple[dict[str, str], dict[str, str]]:
    runner = CliRunner()
    first = runner.invoke(main, args)
    assert first.exit_code == 0, first.output
    before = _hashes(root)
    second = runner.invoke(main, args)
    assert second.exit_code == 0, second.output
    return before, _hashes(root)


def _same_but_timing(before: dict[str, str], after: dict[str, str]) -> None:
    assert before.keys() == after.keys()
    differ = {f for f in before if before[f] != after[f]}
    assert {Path(f).name for f in differ} <= {"timing.json"}, differ


def test_replay_out_twice_is_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "run"
    before, after = _twice(["replay", "--trace", "itp-c10", "--training-servers", "4",
                            "--inference-servers", "4", "--out", str(out), "--plot"], out)
    expected = {"jobs.parquet", "jobs.csv", "timeseries.csv", "events.csv.gz", "summary.json",
                "timing.json", "manifest.json"}
    assert expected <= set(before)
    assert any(f.endswith(".png") for f in before)
    _same_but_timing(before, after)
    summary = json.loads((out / "summary.json").read_text())
    timing = json.loads((out / "timing.json").read_text())
    assert not TIMING_KEYS & set(summary)
    assert set(timing) >= TIMING_KEYS
    assert timing["n_decisions"] == summary["n_decisions"] > 0
    assert "timing.json" in json.loads((out / "manifest.json").read_text())["files"]


def test_compare_out_twice_is_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    before, after = _twice(["compare", "--trace", "itp-c10", "--training-servers", "4",
                            "--inference-servers", "4", "--policies", "fifo,aryl",
                            "--out", str(out)], out)
    assert {"compare.csv", "fifo/timing.json", "aryl/timing.json", "aryl/summary.json"} \
        <= set(before)
    _same_but_timing(before, after)
    table = pd.read_csv(out / "compare.csv")
    assert not TIMING_KEYS & set(table.columns)


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_trace_convert_twice_is_byte_identical(tmp_path: Path, suffix: str) -> None:
    dest = tmp_path / f"t{suffix}"
    before, after = _twice(["trace", "convert", "itp-c10", str(dest), "--elastic-fraction",
                            "0.5", "--seed", "3"], tmp_path)
    assert before == after
    assert dest.name in before


def test_cli_still_prints_the_scheduler_time(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["replay", "--trace", "itp-c10", "--training-servers", "4",
                                  "--inference-servers", "4"])
    assert r.exit_code == 0, r.output
    assert "scheduler time per decision" in r.output
    r = CliRunner().invoke(main, ["compare", "--trace", "itp-c10", "--training-servers", "4",
                                  "--inference-servers", "4", "--policies", "fifo,aryl"])
    assert r.exit_code == 0, r.output
    assert "ms/decision" in r.output


def test_simresult_keeps_timing_apart_from_the_summary() -> None:
    jobs = pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [0.0, 1.0],
                         "duration_s": [10.0, 10.0], "gpus": [8, 8]})
    res = simulate(jobs, policy="fifo", inference=False,
                   config=SimConfig(n_training_servers=1, n_inference_servers=0))
    assert not TIMING_KEYS & set(res.summary)
    assert set(res.timing) == TIMING_KEYS | {"n_decisions"}
    # fifo on 1 server: b waits for a (finish at 10 s), so 1 * 10 - 1 = 9 s of delay / 2 jobs
    assert res.summary["queuing_delay_s"]["mean"] == 4.5
    per = res.timing["scheduler_ms_per_decision"]
    assert per == pytest.approx(1e3 * res.timing["scheduler_time_s"] / res.timing["n_decisions"])
