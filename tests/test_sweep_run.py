"""Running a sweep: each row is the replay it names, results do not depend on the backend,
a rerun skips finished runs, and a failing or dying worker never leaves a half-written run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl.errors import InvalidInputError
from aryl.sweep import (
    WorkerLost,
    load_spec,
    parse_spec,
    read_jobs,
    read_runs,
    read_timeseries,
    run_sweep,
)
from aryl.sweep.execute import TIMING_COLUMNS
from aryl.sweep.store import finished_keys

TESTS = Path(__file__).resolve().parent

TINY = {
    "sweep": {"name": "tiny"},
    "grid": {"trace": "itp-c10", "policy": ["fifo", "aryl"], "seed": [0, 1],
             "n_training_servers": 2, "n_inference_servers": 2},
    "run": [{"policy": "aryl", "seed": 0, "reclaim_policy": "random",
             "elastic_fraction": 1.0, "peak_utilisation": 0.6}],
}


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The helper module, importable here and in spawned pool workers."""
    monkeypatch.syspath_prepend(str(TESTS))
    import sweep_helpers

    return sweep_helpers


def deterministic(df: pd.DataFrame) -> pd.DataFrame:
    """A runs table without its wall-clock columns, sorted by key."""
    return df.drop(columns=list(TIMING_COLUMNS)).sort_values("key").reset_index(drop=True)


@pytest.fixture(scope="module")
def serial_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serial") / "sweep"
    outcome = run_sweep(parse_spec(TINY), out, n_procs=1)
    assert (outcome.backend, outcome.n_done, outcome.n_skipped, outcome.failures) == (
        "serial", 5, 0, [])
    return out


def test_each_row_is_the_replay_it_names(serial_dir: Path) -> None:
    from aryl.sim import SimConfig, simulate
    from aryl.sim.adapters import default_inference
    from aryl.traces import load_trace, synthesize_elastic

    runs = read_runs(serial_dir)
    assert len(runs) == 5
    row = runs[(runs["reclaim_policy"] == "random")].iloc[0]
    # the same replay, called directly with the values the spec names
    trace = synthesize_elastic(load_trace("itp-c10"), elastic_fraction=1.0, seed=0)
    cfg = SimConfig(n_training_servers=2, n_inference_servers=2, seed=0,
                    reclaim_policy="random", record_events=False)
    res = simulate(trace, policy="aryl", config=cfg,
                   inference=default_inference(2, 0, peak_utilisation=0.6))
    s = res.summary
    assert row["mean_queuing_delay_s"] == s["queuing_delay_s"]["mean"]
    assert row["p95_jct_s"] == s["jct_s"]["p95"]
    assert row["cluster_usage"] == s["cluster_usage"]
    assert row["n_preemptions"] == s["n_preemptions"]
    assert row["n_loans"] == s["n_loans"]
    assert (row["elastic_fraction"], row["peak_utilisation"], row["seed"]) == (1.0, 0.6, 0)
    # derived measures, from their definitions
    assert row["preemptions_per_1000_jobs"] == pytest.approx(1000 * s["n_preemptions"] / 260)
    span = s["makespan_s"]
    serving = s["inference_utilisation"] * span * 2 * 8
    assert row["combined_usage"] == pytest.approx(
        (s["gpu_s_allocated"] + serving) / (span * (2 + 2) * 8), rel=1e-12)
    # the per-job table and the time series are the replay's
    jobs = read_jobs(serial_dir, [row["key"]])
    assert (jobs["run"] == row["key"]).all()
    pd.testing.assert_frame_equal(jobs.drop(columns="run"), res.jobs, check_dtype=False)
    ts = read_timeseries(serial_dir, [row["key"]]).drop(columns="run")
    pd.testing.assert_frame_equal(ts, res.timeseries)


def test_sweep_json_records_the_plan(serial_dir: Path) -> None:
    meta = json.loads((serial_dir / "sweep.json").read_text())
    assert meta["name"] == "tiny"
    assert len(meta["runs"]) == 5
    assert len(meta["entries"]) == 5
    assert {r["key"] for r in meta["runs"]} == finished_keys(serial_dir)
    assert meta["spec"]["grid"]["policy"] == ["fifo", "aryl"]


def test_process_pool_gives_the_serial_results(serial_dir: Path, tmp_path: Path) -> None:
    outcome = run_sweep(parse_spec(TINY), tmp_path / "pool", n_procs=2)
    assert (outcome.backend, outcome.n_done, outcome.failures) == ("pool", 5, [])
    pd.testing.assert_frame_equal(deterministic(read_runs(serial_dir)),
                                  deterministic(read_runs(tmp_path / "pool")))
    keys = sorted(finished_keys(serial_dir))
    pd.testing.assert_frame_equal(read_jobs(serial_dir, keys), read_jobs(tmp_path / "pool", keys))


def test_a_rerun_skips_finished_runs(tmp_path: Path, faults: Any) -> None:
    counting = faults.Counting
    executions = faults.executions
    out, log = tmp_path / "sweep", tmp_path / "log"
    log.mkdir()
    spec = parse_spec(TINY)
    first = run_sweep(spec, out, n_procs=1, run_fn=counting(log))
    assert (first.n_done, first.n_skipped) == (5, 0)
    assert sum(executions(log).values()) == 5
    again = run_sweep(spec, out, n_procs=2, run_fn=counting(log))
    assert (again.n_done, again.n_skipped) == (0, 5)
    assert sum(executions(log).values()) == 5  # nothing ran again
    # a lost run (its row deleted) is the only one run again; a grown spec adds its runs
    lost = sorted(finished_keys(out))[0]
    (out / "runs" / f"key={lost}.parquet").unlink()
    grown = dict(TINY, grid={**TINY["grid"], "seed": [0, 1, 2]})
    third = run_sweep(parse_spec(grown), out, n_procs=1, run_fn=counting(log))
    assert (third.n_done, third.n_skipped) == (3, 4)  # the lost run + fifo, aryl at seed 2
    counts = executions(log)
    assert counts[lost] == 2
    assert sum(counts.values()) == 8


def test_a_failing_run_is_reported_and_not_written(tmp_path: Path, faults: Any) -> None:
    spec = parse_spec(TINY)
    from aryl.sweep import plan_sweep

    bad = plan_sweep(spec).runs[1].key
    log = tmp_path / "log"
    log.mkdir()
    outcome = run_sweep(spec, tmp_path / "s", n_procs=2,
                        run_fn=faults.Raises(log, bad))
    assert outcome.n_done == 4
    assert len(outcome.failures) == 1
    label, msg = outcome.failures[0]
    assert label == "itp-c10 fifo seed=1"
    assert msg == f"RuntimeError: injected failure in {bad}"
    assert bad not in finished_keys(tmp_path / "s")
    assert not (tmp_path / "s" / "jobs" / f"run={bad}").exists()
    # a rerun retries exactly the failed run
    again = run_sweep(spec, tmp_path / "s", n_procs=1)
    assert (again.n_done, again.n_skipped, again.failures) == (1, 4, [])


def test_a_dead_pool_worker_keeps_finished_runs(tmp_path: Path, faults: Any) -> None:
    spec = parse_spec(TINY)
    from aryl.sweep import plan_sweep

    plan = plan_sweep(spec)
    victim = plan.runs[-1].key
    log = tmp_path / "log"
    log.mkdir()
    with pytest.raises(WorkerLost, match="a worker process died"):
        run_sweep(spec, tmp_path / "s", n_procs=2,
                  run_fn=faults.DieOnce(log, victim))
    done = finished_keys(tmp_path / "s")
    assert victim not in done
    for key in done:  # every visible run is complete: row, jobs and time series readable
        assert len(read_runs(tmp_path / "s", [key])) == 1
        assert len(read_jobs(tmp_path / "s", [key])) == 260
        assert len(read_timeseries(tmp_path / "s", [key])) > 0
    assert not list((tmp_path / "s").rglob(".*.tmp"))
    # the next run completes the sweep (the marker says the worker already died once)
    again = run_sweep(spec, tmp_path / "s", n_procs=2)
    assert again.n_done + again.n_skipped == 5
    assert again.failures == []


def test_a_write_interrupted_between_files_leaves_no_visible_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aryl.sweep.store as store

    real = store.atomic_write_bytes
    calls = {"n": 0}

    def flaky(path: Path, data: bytes) -> Path:
        calls["n"] += 1
        if calls["n"] == 6:  # 2nd run: jobs (4) and time series (5) written, its row (6) fails
            raise KeyboardInterrupt
        return real(path, data)

    monkeypatch.setattr(store, "atomic_write_bytes", flaky)
    spec = parse_spec(TINY)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "s", n_procs=1)
    assert len(finished_keys(tmp_path / "s")) == 1
    assert len(read_runs(tmp_path / "s")) == 1
    monkeypatch.setattr(store, "atomic_write_bytes", real)
    again = run_sweep(spec, tmp_path / "s", n_procs=1)
    assert (again.n_done, again.n_skipped) == (4, 1)


def test_an_interrupt_inside_mkstemp_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C can land after mkstemp created the file and before the writer's cleanup is
    # armed (seen once in a loaded run of test_sweep_interrupt): the temporary is made
    # here as mkstemp makes it, then the interrupt; the sweep's interrupt path removes it
    import tempfile

    import aryl.sweep.store as store

    def cut_short(path: Path, data: bytes) -> Path:
        tempfile.mkstemp(prefix=f".{Path(path).name}.", suffix=".tmp", dir=Path(path).parent)
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "atomic_write_bytes", cut_short)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(parse_spec(TINY), tmp_path / "s", n_procs=1)
    assert list((tmp_path / "s").rglob(".*.tmp")) == []
    assert finished_keys(tmp_path / "s") == set()


def test_bad_inputs_write_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "jobs.csv"
    bad.write_text("job_id,submit_time_s,duration_s,gpus\na,0,-5,1\n")
    spec = parse_spec({"grid": {"trace": str(bad), "policy": "fifo"}})
    with pytest.raises(InvalidInputError, match="line 2, column 'duration_s'"):
        run_sweep(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(InvalidInputError, match="n_procs"):
        run_sweep(parse_spec(TINY), tmp_path / "out", n_procs=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError, match="not a folder"):
        run_sweep(parse_spec(TINY), tmp_path / "file")


def test_two_sweeps_never_write_one_folder(tmp_path: Path) -> None:
    from aryl.sweep.store import lock_sweep

    (tmp_path / "s").mkdir()
    with lock_sweep(tmp_path / "s"), pytest.raises(InvalidInputError,
                                                   match="another sweep is writing"):
        run_sweep(parse_spec(TINY), tmp_path / "s", n_procs=1)


def test_bundled_specs_are_valid_and_paper_has_five_seeds() -> None:
    from aryl.sweep import bundled_spec

    for name in ("paper", "paper-quick"):
        spec = load_spec(bundled_spec(name))
        assert spec.baseline == "fifo"
    paper = load_spec(bundled_spec("paper"))
    assert {r.seed for r in paper.requests} == {0, 1, 2, 3, 4}
    sections = {dict(r.tags)["section"] for r in paper.requests}
    assert sections == {"headline", "ablation", "sensitivity", "knapsack", "reclaim", "hetero"}
    # every sweep tag names a parameter of its runs
    for r in paper.requests:
        sweep = dict(r.tags).get("sweep")
        if sweep:
            assert sweep in r.explicit, (sweep, r.explicit)
    with pytest.raises(InvalidInputError, match="no bundled sweep 'papr'"):
        bundled_spec("papr")


def test_mean_over_seeds_is_not_a_single_replay(serial_dir: Path) -> None:
    # the seed changes aryl's replay (elastic jobs, inference noise); fifo's does not
    runs = read_runs(serial_dir)
    grid = runs[runs["reclaim_policy"] == "aryl"]
    fifo = grid[grid["policy"] == "fifo"].sort_values("seed")
    aryl = grid[grid["policy"] == "aryl"].sort_values("seed")
    assert fifo["mean_jct_s"].nunique() == 1
    assert aryl["mean_jct_s"].nunique() == 2
    assert not math.isnan(float(np.mean(aryl["mean_jct_s"])))


def test_runs_on_a_cluster_spec_measure_its_pools(tmp_path: Path) -> None:
    """A sweep run on a cluster spec: its inference demand and combined usage use the
    spec's servers, and every pool's usage, goodput and JCT become measures."""
    from aryl.sim import SimConfig, simulate
    from aryl.sim.adapters import default_inference
    from aryl.sweep.execute import measures_of

    spec = tmp_path / "c.toml"
    spec.write_text('[[pools]]\nname = "a"\nrole = "training"\nn_servers = 2\n'
                    'gpus_per_server = 8\ngpu_type = "V100"\n\n'
                    '[[pools]]\nname = "t4"\nrole = "inference"\nn_servers = 3\n'
                    'gpus_per_server = 4\ngpu_type = "T4"\n')
    from aryl.traces import load_trace, synthesize_elastic

    jobs = synthesize_elastic(load_trace("itp-c10"), elastic_fraction=0.5, seed=0)
    cfg = SimConfig(cluster=str(spec), speed_model="parametric", loaned_gpu_speed=0.5)
    res = simulate(jobs, policy="aryl", config=cfg, inference=default_inference(3, 0))
    m = measures_of(res.summary, cfg)
    pools = {p["pool"]: p for p in res.summary["pools"]}
    u = pools["t4"]["usage"]
    assert (math.isnan(m["pool_t4_usage"]) if u is None else m["pool_t4_usage"] == u)
    assert m["pool_a_goodput"] == pools["a"]["goodput"]
    assert m["pool_a_jobs"] == pools["a"]["n_jobs_main"]
    # 2 x 8 training + 3 x 4 inference GPUs: 16 + 12 = 28 over the makespan
    span = res.summary["makespan_s"]
    serving = res.summary["inference_utilisation"] * span * 12
    assert m["combined_usage"] == (res.summary["gpu_s_allocated"] + serving) / (span * 28)
    assert (m["training_gpus"], m["inference_gpus"]) == (16, 12)


def test_a_sweep_runs_the_twins_by_name_with_the_built_ins_results(tmp_path: Path) -> None:
    # `aryl compare --policies` takes the twins' names (aryl-twin...): so does a sweep
    # spec, and a twin's runs measure what its built-in's do (the same replay)
    spec = parse_spec({"grid": {"trace": "itp-c10", "policy": ["aryl", "aryl-twin"],
                                "seed": [0, 1], "n_training_servers": 2,
                                "n_inference_servers": 2}})
    outcome = run_sweep(spec, tmp_path / "s", n_procs=1)
    assert (outcome.n_done, outcome.failures) == (4, [])
    runs = read_runs(tmp_path / "s")
    measures = [c for c in runs.columns if c.startswith(("mean_", "p95_", "n_"))
                and c not in TIMING_COLUMNS]
    assert "mean_jct_s" in measures
    by = {p: g.sort_values("seed")[measures].reset_index(drop=True)
          for p, g in runs.groupby("policy")}
    pd.testing.assert_frame_equal(by["aryl"], by["aryl-twin"])
    with pytest.raises(InvalidInputError, match=r"unknown policy 'tiresias-twin'"):
        parse_spec({"grid": {"trace": "itp-c10", "policy": "tiresias-twin"}})
