"""``aryl replay`` / ``aryl compare``: fixes from the new-user test (2026-11-30)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.sim import SimConfig, simulate


def _csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture
def trace_csv(tmp_path: Path) -> Path:
    rows = [
        {"job_id": f"j{i}", "submit_time_s": 60.0 * i, "duration_s": 600.0 + 37 * (i % 7),
         "gpus": [1, 2, 4, 8][i % 4]}
        for i in range(40)
    ]
    return _csv(tmp_path / "t.csv", rows)


def _small(trace: Path, *extra: str) -> list[str]:
    return ["--trace", str(trace), "--training-servers", "2", "--inference-servers", "2",
            "--inference", "none", *extra]


# 1 ---------------------------------------------------------------- horizon
@pytest.mark.parametrize("h", ["-5", "0"])
def test_horizon_not_positive_is_refused_in_one_line(trace_csv: Path, h: str) -> None:
    for cmd in ("replay", "compare"):
        r = CliRunner().invoke(main, [cmd, *_small(trace_csv, "--horizon", h)])
        assert r.exit_code == 2, r.output
        lines = r.output.strip().splitlines()
        assert len(lines) == 1, r.output
        assert lines[0].startswith("Error: --horizon")
        assert "> 0" in lines[0]


# 2 ------------------------------------------- one warning for infeasible jobs
def test_infeasible_jobs_give_one_warning_with_the_count(
    trace_csv: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="aryl.sim.engine"):
        # one training server of 1 GPU: the 30 jobs of 2, 4 or 8 GPUs can never fit
        r = CliRunner().invoke(main, ["replay", "--trace", str(trace_csv), "--policy", "fifo",
                                      "--training-servers", "1", "--gpus-per-server", "1",
                                      "--inference-servers", "2"])
    assert r.exit_code == 0, r.output
    recs = [x for x in caplog.records if "never fit" in x.getMessage()]
    warnings = [x for x in recs if x.levelno == logging.WARNING]
    debugs = [x for x in recs if x.levelno == logging.DEBUG]
    assert len(warnings) == 1
    assert warnings[0].getMessage().startswith("30 job(s) can never fit")
    expected = sorted(f"j{i}" for i in range(40) if i % 4 != 0)
    assert sorted(x.args[0] for x in debugs) == expected  # type: ignore[index]
    assert "30 job(s) can never fit" in r.output


# 3 --------------------------------------------------- share of jobs that waited
def test_share_of_jobs_that_waited_hand_computed() -> None:
    # one 8-GPU server: b waits 90 s for a, c (1 GPU) arrives after a finished
    jobs = pd.DataFrame({
        "job_id": ["a", "b", "c"], "submit_time_s": [0.0, 10.0, 500.0],
        "duration_s": [100.0, 100.0, 50.0], "gpus": [8, 8, 1],
    })
    res = simulate(jobs, policy="fifo", inference=False,
                   config=SimConfig(n_training_servers=1, n_inference_servers=0))
    assert res.jobs["queuing_delay_s"].tolist() == [0.0, 90.0, 0.0]
    assert res.summary["share_jobs_waited"] == pytest.approx(1 / 3)
    assert res.summary["share_jobs_waited_total"] == pytest.approx(1 / 3)
    assert res.summary["queuing_delay_s"]["p50"] == 0.0


def test_replay_and_compare_show_share_waited_and_ratio_direction(
    trace_csv: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r"
    r = CliRunner().invoke(main, ["replay", "--policy", "fifo",
                                  *_small(trace_csv, "--out", str(out))])
    assert r.exit_code == 0, r.output
    jobs = pd.read_csv(out / "jobs.csv")
    s = json.loads((out / "summary.json").read_text())
    share = float((jobs["queuing_delay_s"] > 0).mean())
    assert 0 < share < 1
    assert s["share_jobs_waited"] == pytest.approx(share)
    assert "jobs with > 0" in r.output
    assert f"{100 * share:.1f}%" in r.output

    out = tmp_path / "c"
    r = CliRunner().invoke(main, ["compare", "--policies", "fifo,tiresias",
                                  *_small(trace_csv, "--out", str(out))])
    assert r.exit_code == 0, r.output
    assert "ratios = fifo / policy" in r.output
    for col in ("waited", "mean wait (s)", "preemptions"):
        assert col in r.output
    table = pd.read_csv(out / "compare.csv")
    tir = json.loads((out / "tiresias" / "summary.json").read_text())
    row = table.set_index("policy").loc["tiresias"]
    assert row["mean_wait_s"] == pytest.approx(tir["wait_s"]["mean"])
    assert row["n_preemptions"] == tir["n_preemptions"]
    assert row["share_jobs_waited"] == pytest.approx(tir["share_jobs_waited"])


# 4 -------------------------------------------------------------------- plots
def test_plots_show_zero_delays_capacities_and_demand(
    trace_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aryl.sim.plot as plot

    figs: dict[str, Any] = {}
    real_save = plot._save

    def save(fig: Any, path: Path) -> Path:
        figs[path.name] = fig
        return real_save(fig, path)

    monkeypatch.setattr(plot, "_save", save)
    out = tmp_path / "p"
    r = CliRunner().invoke(main, [
        "compare", "--trace", str(trace_csv), "--policies", "fifo,aryl", "--training-servers",
        "1", "--inference-servers", "3", "--inference", "none", "--out", str(out), "--plot",
    ])
    assert r.exit_code == 0, r.output
    fifo = pd.read_csv(out / "fifo" / "jobs.csv")
    zero = float((fifo["queuing_delay_s"] == 0).mean())
    ax = figs["cdf_queuing_delay.png"].axes[0]
    assert ax.get_xscale() == "symlog"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == f"fifo ({100 * zero:.1f}% wait 0 s)"
    line = ax.get_lines()[0]
    assert line.get_xdata()[0] == 0.0
    assert line.get_ydata()[0] == pytest.approx(zero)
    # busy GPUs: honest label, training capacity line (8 GPUs) and training + loaned
    ax = figs["busy_gpus.png"].axes[0]
    assert "loaned" in ax.get_title()
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "training GPUs (8)" in texts
    assert "aryl: training + loaned GPUs" in texts
    aryl_ts = pd.read_csv(out / "aryl" / "timeseries.csv")
    assert aryl_ts["busy_gpus"].max() > 8  # jobs on loaned servers are counted
    # legend outside the data area (anchored right of the axes)
    for name in ("cdf_jct.png", "cdf_queuing_delay.png", "busy_gpus.png"):
        leg = figs[name].axes[0].get_legend()
        assert leg.get_bbox_to_anchor().x0 > figs[name].axes[0].get_window_extent().x1
    # loaned servers: demand overlay and a zoom panel
    fig = figs["loaned_servers.png"]
    assert len(fig.axes) == 2
    assert "zoom" in fig.axes[1].get_title()
    assert fig.axes[1].get_xlim()[1] - fig.axes[1].get_xlim()[0] == pytest.approx(3.0)


def test_timeseries_records_the_inference_demand(tmp_path: Path) -> None:
    jobs = pd.DataFrame({"job_id": ["a"], "submit_time_s": [0.0], "duration_s": [7200.0],
                         "gpus": [1]})
    from aryl.traces.inference import InferenceDemand

    demand = InferenceDemand(times_s=np.array([0.0, 3600.0]), servers_needed=np.array([1, 3]),
                             n_servers=4)
    res = simulate(jobs, policy="fifo", inference=demand,
                   config=SimConfig(n_training_servers=1, n_inference_servers=4))
    ts = res.timeseries.set_index("time_s")["inference_servers_needed"]
    assert ts.loc[0.0] == 1
    assert ts.loc[3300.0] == 1
    assert ts.loc[3600.0] == 3
    assert ts.loc[7200.0] == 3


# 5 ------------------------------------------------------------------ outputs
def test_jobs_table_has_traced_duration_and_alpha(tmp_path: Path) -> None:
    rows = [{"job_id": f"k{i}", "submit_time_s": 10.0 * i, "duration_s": 100.0 + i,
             "gpus": 2, "gpus_per_worker": 1, "min_workers": 1 if i % 2 == 0 else 2,
             "max_workers": 4 if i % 2 == 0 else 2, "elastic": i % 2 == 0, "alpha": 0.01 * i}
            for i in range(5)]
    trace = _csv(tmp_path / "a.csv", rows)
    out = tmp_path / "o"
    r = CliRunner().invoke(main, ["replay", "--policy", "fifo", *_small(trace, "--out", str(out))])
    assert r.exit_code == 0, r.output
    for jobs in (pd.read_csv(out / "jobs.csv"), pd.read_parquet(out / "jobs.parquet")):
        by_id = jobs.set_index("job_id")
        for row in rows:
            assert by_id.loc[row["job_id"], "duration_s"] == row["duration_s"]
            assert by_id.loc[row["job_id"], "alpha"] == pytest.approx(row["alpha"])
        assert jobs.set_index("job_id")["elastic"].tolist() == [True, False, True, False, True]


def test_no_progress_bar_when_stdout_is_not_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rich.progress

    class Boom:
        def __init__(self, *a: Any, **k: Any) -> None:
            raise AssertionError("progress bar on a non-terminal")

    monkeypatch.setattr(rich.progress, "Progress", Boom)
    rows = [{"job_id": f"j{i}", "submit_time_s": float(i), "duration_s": 5.0, "gpus": 1}
            for i in range(2100)]
    trace = _csv(tmp_path / "big.csv", rows)
    r = CliRunner().invoke(main, ["replay", "--policy", "fifo", *_small(trace)])
    assert r.exit_code == 0, r.output
    assert not r.output.startswith("\n")


def test_compare_manifest_removes_only_its_own_stale_files(trace_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "m"
    args = _small(trace_csv, "--out", str(out))
    r = CliRunner().invoke(main, ["compare", "--policies", "fifo,sjf", *args, "--plot"])
    assert r.exit_code == 0, r.output
    (out / "notes.txt").write_text("mine")  # a user's file in an aryl output folder
    (out / "sjf" / "mine.txt").write_text("also mine")  # in a folder of the old run
    first = json.loads((out / "manifest.json").read_text())
    assert "sjf/summary.json" in first["files"]
    assert "busy_gpus.png" in first["files"]
    assert "notes.txt" not in first["files"]
    r = CliRunner().invoke(main, ["compare", "--policies", "fifo", *args])
    assert r.exit_code == 0, r.output
    second = json.loads((out / "manifest.json").read_text())
    assert not (out / "sjf" / "summary.json").exists()
    assert not (out / "busy_gpus.png").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "sjf" / "mine.txt").read_text() == "also mine"
    on_disk = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert on_disk == sorted([*second["files"], "manifest.json", "notes.txt", "sjf/mine.txt"])
    assert second["command"] == "aryl compare"


def test_out_that_aryl_did_not_write_is_refused_before_the_replay(
    trace_csv: Path, tmp_path: Path
) -> None:
    out = tmp_path / "m"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    for cmd in ("replay", "compare"):
        r = CliRunner().invoke(main, [cmd, *_small(trace_csv, "--out", str(out))])
        assert r.exit_code == 2, r.output
        assert "is a non-empty folder that aryl did not write" in r.output
        assert "aryl replay: policy" not in r.output
        assert "aryl compare (" not in r.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_compare_refuses_duplicate_policies(trace_csv: Path) -> None:
    r = CliRunner().invoke(main, ["compare", "--policies", "fifo,aryl,fifo", *_small(trace_csv)])
    assert r.exit_code == 2
    assert "fifo more than once" in r.output


# 6 -------------------------------------------------------------- auto sizing
def test_auto_sizes_match_size_cluster_and_hint_for_other_traces(
    trace_csv: Path, tmp_path: Path
) -> None:
    from aryl.experiment import size_cluster
    from aryl.traces import load_trace

    expected = size_cluster(load_trace(str(trace_csv)).jobs)
    out = tmp_path / "auto"
    r = CliRunner().invoke(main, [
        "replay", "--trace", str(trace_csv), "--policy", "fifo", "--inference", "none",
        "--training-servers", "auto", "--inference-servers", "auto", "--out", str(out),
    ])
    assert r.exit_code == 0, r.output
    cfg = json.loads((out / "summary.json").read_text())["config"]
    assert (cfg["n_training_servers"], cfg["n_inference_servers"]) == expected
    assert f"auto-sized cluster: {expected[0]} training + {expected[1]} inference" in r.output
    assert "hint" not in r.output
    # sizes not given on a non-default trace: defaults, with a hint
    r = CliRunner().invoke(main, ["replay", "--trace", str(trace_csv), "--policy", "fifo",
                                  "--inference", "none", "--out", str(tmp_path / "d")])
    assert r.exit_code == 0, r.output
    assert "hint:" in r.output
    assert "--training-servers auto" in r.output
    cfg = json.loads((tmp_path / "d" / "summary.json").read_text())["config"]
    assert (cfg["n_training_servers"], cfg["n_inference_servers"]) == (46, 16)
    r = CliRunner().invoke(main, ["replay", "--policy", "fifo", *_small(trace_csv)])
    assert "hint:" not in r.output
    r = CliRunner().invoke(main, ["replay", *_small(trace_csv)[:2], "--training-servers", "x"])
    assert r.exit_code == 2
    assert "'auto'" in r.output


# 7 ------------------------------------------------------------- drop invalid
def test_drop_invalid_and_the_hint_in_the_error(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("job_id,submit_time_s,duration_s,gpus\na,0,100,8\nb,10,100,\nc,200,50,1\n")
    for cmd in ("replay", "compare"):
        r = CliRunner().invoke(main, [cmd, *_small(trace)])
        assert r.exit_code == 2
        assert "line 3" in r.output
        assert "--drop-invalid" in r.output
    out = tmp_path / "o"
    r = CliRunner().invoke(main, ["replay", "--policy", "fifo",
                                  *_small(trace, "--drop-invalid", "--out", str(out))])
    assert r.exit_code == 0, r.output
    assert "dropped 1 invalid row(s) (missing_value: 1)" in r.output
    assert pd.read_csv(out / "jobs.csv")["job_id"].tolist() == ["a", "c"]
