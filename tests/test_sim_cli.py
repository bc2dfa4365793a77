"""``aryl replay`` / ``aryl compare`` on a small canonical trace file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main


@pytest.fixture
def trace_csv(tmp_path: Path) -> Path:
    rows = [
        {"job_id": f"j{i}", "submit_time_s": 60.0 * i, "duration_s": 600.0 + 37 * (i % 7),
         "gpus": [1, 2, 4, 8][i % 4]}
        for i in range(60)
    ]
    path = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_replay_writes_outputs(trace_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(main, [
        "replay", "--trace", str(trace_csv), "--policy", "aryl", "--training-servers", "2",
        "--inference-servers", "2", "--check", "--out", str(out), "--plot",
    ])
    assert res.exit_code == 0, res.output
    assert "queuing delay" in res.output
    jobs = pd.read_parquet(out / "jobs.parquet")
    assert len(jobs) == 60
    assert (jobs["status"] == "finished").all()
    pd.testing.assert_frame_equal(jobs, pd.read_csv(out / "jobs.csv"), check_dtype=False)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "aryl"
    assert summary["n_finished"] == 60
    assert summary["config"]["n_training_servers"] == 2
    assert summary["trace"]["elastic_synthesis"]["elastic_fraction"] == 0.5
    ts = pd.read_csv(out / "timeseries.csv")
    assert ts["busy_gpus"].max() <= 32
    for name in ("cdf_jct.png", "cdf_queuing_delay.png", "busy_gpus.png", "loaned_servers.png"):
        assert (out / name).stat().st_size > 1000
    assert not list(out.glob("*.tmp*"))


def test_compare_prints_ratios_against_fifo(trace_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    res = CliRunner().invoke(main, [
        "compare", "--trace", str(trace_csv), "--policies", "aryl,sjf",
        "--training-servers", "2", "--inference-servers", "2", "--out", str(out),
    ])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(out / "compare.csv")
    # fifo is run as the baseline although not listed, and has its own 1.00x row
    assert table["policy"].tolist() == ["fifo", "aryl", "sjf"]
    fifo = json.loads((out / "fifo" / "summary.json").read_text())
    aryl = json.loads((out / "aryl" / "summary.json").read_text())
    expected = fifo["queuing_delay_s"]["mean"] / aryl["queuing_delay_s"]["mean"]
    assert table.loc[0, "queuing_delay_ratio"] == 1.0
    assert table.loc[1, "queuing_delay_ratio"] == pytest.approx(expected)
    assert table.loc[1, "usage_gain"] == pytest.approx(
        aryl["cluster_usage"] / fifo["cluster_usage"] - 1
    )
    assert table.loc[2, "share_jobs_waited"] == pytest.approx(
        json.loads((out / "sjf" / "summary.json").read_text())["share_jobs_waited"]
    )
    assert "QD ratio" in res.output
    assert f"{expected:.2f}x" in res.output  # formatted for the terminal only


def test_bad_arguments_are_reported(trace_csv: Path) -> None:
    r = CliRunner().invoke(main, ["replay", "--trace", str(trace_csv), "--policy", "nope",
                                  "--inference", "none"])
    assert r.exit_code == 2
    assert "Error: Invalid value for '--policy': unknown policy 'nope'; choose from aryl," \
        in r.output
    r = CliRunner().invoke(main, ["compare", "--trace", str(trace_csv), "--policies", "fifo,zzz"])
    assert r.exit_code == 2
    assert "Error: unknown policy 'zzz'; choose from aryl, aryl-no-elastic, " \
        "aryl-no-elastic-twin, aryl-no-loan, aryl-no-loan-twin, aryl-twin, elastic-greedy, " \
        "elastic-greedy-twin, fifo, fifo-backfill, fifo-backfill-twin, fifo-twin, sjf, " \
        "sjf-twin, tiresias (installed: `aryl policies`) or give module:Class" \
        in " ".join(r.output.split())
    r = CliRunner().invoke(main, ["replay", "--trace", str(trace_csv), "--plot"])
    assert r.exit_code == 2
    assert "Error: --plot needs --out DIR" in r.output


def test_keep_idle_loans_flag_restores_borrow_everything(trace_csv: Path, tmp_path: Path) -> None:
    runs = {}
    for flag in ([], ["--keep-idle-loans"]):
        out = tmp_path / ("keep" if flag else "return")
        res = CliRunner().invoke(main, [
            "replay", "--trace", str(trace_csv), "--policy", "aryl", "--training-servers", "1",
            "--inference-servers", "2", "--inference", "none", "--check", "--out", str(out),
            "--no-progress", *flag,
        ])
        assert res.exit_code == 0, res.output
        assert "returns" in res.output
        summary = json.loads((out / "summary.json").read_text())
        runs[bool(flag)] = summary
        # available GPU-seconds, from the event log: the training server for the whole
        # run plus 8 GPUs for every second a server is on loan (loan .. loan_return)
        ev = pd.read_csv(out / "events.csv.gz", keep_default_na=False)
        span = summary["end_s"] - summary["start_s"]
        held: dict[int, float] = {}
        loaned_s = 0.0
        for t, what, s in zip(ev["time_s"], ev["event"], ev["workers"], strict=True):
            if what == "loan":
                held[s] = t
            elif what in ("loan_return", "reclaim"):
                loaned_s += t - held.pop(s)
        loaned_s += sum(summary["end_s"] - t for t in held.values())
        assert summary["gpu_s_available"] == pytest.approx(8 * span + 8 * loaned_s, rel=1e-12)
        assert summary["n_loans"] == int((ev["event"] == "loan").sum())
        assert summary["n_loan_returns"] == int((ev["event"] == "loan_return").sum())
        # kept loans are held to the end; returned ones are not
        assert len(held) == (1 if flag else 0)
    keep, ret = runs[True], runs[False]
    assert keep["n_loan_returns"] == 0
    # no demand, default reserve of 1: one of the two idle servers is ever loanable
    assert keep["n_loans"] == 1
    assert ret["n_loan_returns"] == ret["n_loans"]
