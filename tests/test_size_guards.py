"""Size guards run before the work they guard.

A trace whose second job arrives 1e12 s after the first (a duration that long is
refused by the trace check, ``long_duration``; an arrival that late is not): its
time series would have 3.3e9 rows at the default 300 s step. The guard used to fire
after the replay, which with the daily inference demand had built 5.5e8 demand steps
first (minutes, GBs or ``bad_alloc``). Here: the error names the setting to change,
no engine or demand series is built (the constructors are replaced by ones that
fail), and the peak of Python allocations and the wall time of the failing call are
bounded far above what the guard needs (a bound, not a timing of the normal path).
The bound on a run's end is checked by hand, against brute force over worker counts,
and against real replays (it never exceeds their end, so no valid run is refused).
Also the sweep grid and cluster sizing guards.
"""

from __future__ import annotations

import random
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.errors import InvalidInputError
from aryl.scheduling.registry import make_policy
from aryl.sim import SimConfig, simulate
from aryl.sim.jobs import build_job_table
from aryl.sim.setup import resolve_cluster, shortest_end_s, speed_model

BIG = pd.DataFrame({"job_id": ["z", "a"], "submit_time_s": [0.0, 1e12],
                    "duration_s": [1.0, 1.0], "gpus": [1, 1]})
BIG_CSV = "job_id,submit_time_s,duration_s,gpus\nz,0,1,1\na,1e12,1,1\n"
# 1e12 s / 300 s + 1 rows > 5,000,000; a step of 1e12 / 4,999,999 = 2.0e5 s would do
BIG_MESSAGE = (
    "timeseries_step_s: 300 s over a run of 1e+12 s or more (job 'a' cannot finish before "
    "t = 1e+12 s) gives more than 5,000,000 time-series rows; use a step of at least "
    "2e+05 s, or a horizon_s")


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building an engine or the default demand series fails the test."""
    import aryl.sim.adapters
    import aryl.sim.engine
    import aryl.sim.native

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the guard ran after the work it guards")

    monkeypatch.setattr(aryl.sim.engine.Engine, "__init__", refuse)
    monkeypatch.setattr(aryl.sim.native.NativeEngine, "__init__", refuse)
    monkeypatch.setattr(aryl.sim.adapters, "default_inference", refuse)
    monkeypatch.setattr(aryl.sim.adapters, "inference_schedule", refuse)


@pytest.mark.parametrize("engine", ["native", "python"])
@pytest.mark.parametrize("policy", ["fifo", "tiresias", "aryl"])
def test_the_time_series_guard_fires_before_the_demand_and_the_engine(
        no_work: None, engine: str, policy: str) -> None:
    tracemalloc.start()
    t = time.perf_counter()
    try:
        with pytest.raises(InvalidInputError) as info:
            simulate(BIG, policy=policy, config=SimConfig(engine=engine))
        elapsed = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value) == BIG_MESSAGE
    # the guard needs O(jobs) work: 20 MB and 20 s are far above it (the replay it
    # used to follow took minutes and GBs)
    assert peak < 20e6
    assert elapsed < 20.0


def test_a_horizon_lets_the_long_job_run(no_work: None) -> None:
    # the message's other way out: with a horizon the bound is capped there (set by
    # the last arrival, capped: -1; job z's own end, 1 s, is earlier)
    cfg = SimConfig(horizon_s=1e6)
    table = build_job_table(BIG, gpus_per_server=8, default_alpha=0.05)
    spec = resolve_cluster(cfg)
    assert shortest_end_s(table, cfg, spec, speed_model(cfg, spec), None, False) == (1e6, -1)


def _table(rows: list[dict[str, Any]]) -> Any:
    return build_job_table(pd.DataFrame(rows), gpus_per_server=8, default_alpha=0.05)


def _bound(rows: list[dict[str, Any]], policy: str, **cfg: Any) -> tuple[float, int]:
    c = SimConfig(**cfg)
    spec = resolve_cluster(c)
    return shortest_end_s(_table(rows), c, spec, speed_model(c, spec), None,
                          make_policy(policy).elastic)


def test_the_bound_on_a_runs_end_by_hand() -> None:
    rigid = dict(job_id="r", submit_time_s=10.0, duration_s=1000.0, gpus=4)
    # a rigid job on one type runs at speed 1 at best: 10 + 1000
    assert _bound([rigid], "fifo") == (1010.0, 0)
    # elastic, 1-GPU workers, base 4, max 16, traced 8, alpha 0.05:
    # T(16) = 16 / 1.75 = 9.142857, T(8) = 8 / 1.35 = 5.925926, rate = 1.542857;
    # 1000 / 1.542857 = 648.148 s, under aryl; fifo keeps the traced size: 1000 s
    el = dict(job_id="e", submit_time_s=0.0, duration_s=1000.0, gpus=8, gpus_per_worker=1,
              min_workers=4, max_workers=16, elastic=True, alpha=0.05)
    end, k = _bound([el], "aryl")
    assert k == 0
    assert end == pytest.approx(1000.0 / ((16 / 1.75) / (8 / 1.35)))
    assert _bound([el], "fifo") == (1000.0, 0)
    assert _bound([el], "aryl-no-elastic") == (1000.0, 0)
    # a job larger than the cluster is infeasible: it never runs, so the bound is the
    # last arrival (20 s), not 20 + 5000
    huge = dict(job_id="h", submit_time_s=20.0, duration_s=5000.0, gpus=64)
    assert _bound([rigid, huge], "fifo", n_training_servers=2) == (1010.0, 0)
    assert _bound([huge], "fifo", n_training_servers=2) == (20.0, -1)
    assert _bound([huge], "fifo", n_training_servers=8) == (5020.0, 0)


def test_the_bound_by_blocks_of_rows_is_the_bound_of_one_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bound is computed by blocks of rows (few temporaries on a large trace):
    with blocks of 2 or 3 rows it is the whole table's, to the bit, and names the
    same job, the first of two equal latest ends in two blocks; a NaN end (one
    argmax would pick it) leaves the last arrival, as before."""
    import numpy as np

    import aryl.sim.setup as setup

    rng = np.random.default_rng(4)
    rows = [dict(job_id=f"j{i}", submit_time_s=float(i), duration_s=float(d), gpus=int(g),
                 gpus_per_worker=1, min_workers=1 if e else int(g),
                 max_workers=int(2 * g) if e else int(g), elastic=bool(e),
                 alpha=float(a))
            for i, (d, g, e, a) in enumerate(zip(rng.integers(1, 60, 40), rng.choice([1, 2, 4], 40),
                                                 rng.random(40) < 0.5, rng.random(40),
                                                 strict=True))]
    rows[7]["duration_s"] = rows[31]["duration_s"] = 10_000.0  # equal: rows 7 and 31 ...
    rows[31]["submit_time_s"] = rows[7]["submit_time_s"]  # ... end together (7 first)
    rows.sort(key=lambda r: r["submit_time_s"])
    ids = [r["job_id"] for r in rows]
    assert (ids.index("j7"), ids.index("j31")) == (7, 8)  # in two blocks of 2 rows
    for policy in ("aryl", "fifo"):
        whole = _bound(rows, policy)
        assert whole[1] == 7
        for block in (2, 3):
            monkeypatch.setattr(setup, "_BLOCK", block)
            assert _bound(rows, policy) == whole
        monkeypatch.setattr(setup, "_BLOCK", 1 << 20)
    sub = np.array([0.0, 5.0, 9.0])
    assert setup._latest_done(sub, np.array([1.0, 99.0, 1.0]), np.array([1.0, np.nan, 1.0]),
                              np.ones(3, dtype=bool), np.inf, 9.0) == (9.0, -1)


def test_the_bound_with_faster_types(tmp_path: Path) -> None:
    # inference T4 GPUs at 2x the V100 (loaned_gpu_speed = 2): a rigid job could
    # run there twice as fast: 1000 / 2 = 500
    spec = tmp_path / "c.toml"
    spec.write_text('[[pools]]\nname = "t"\nrole = "training"\nn_servers = 1\n'
                    'gpus_per_server = 8\ngpu_type = "V100"\n[[pools]]\nname = "i"\n'
                    'role = "inference"\nn_servers = 1\ngpus_per_server = 8\n'
                    'gpu_type = "T4"\n')
    rigid = dict(job_id="r", submit_time_s=0.0, duration_s=1000.0, gpus=4)
    assert _bound([rigid], "aryl", cluster=str(spec), speed_model="parametric",
                  loaned_gpu_speed=2.0) == (500.0, 0)


def test_the_measured_bound_against_brute_force_over_worker_counts() -> None:
    # lyra (V100, A100, T4), measured speeds: rate = the best throughput over every
    # type and worker count up to the maximum, over the throughput at the traced size
    # on V100 (brute force with SpeedModel.throughput, one call per count)
    cfg = SimConfig(cluster="lyra")
    spec = resolve_cluster(cfg)
    model = speed_model(cfg, spec)
    rows = [dict(job_id=f"j{i}", submit_time_s=0.0, duration_s=1000.0, gpus=G,
                 gpus_per_worker=g, min_workers=b, max_workers=m, elastic=b != m, alpha=0.1)
            for i, (G, g, b, m) in enumerate([(8, 1, 4, 16), (4, 4, 1, 1), (16, 2, 4, 16),
                                              (2, 1, 2, 2)])]
    table = _table(rows)
    for i, fam in enumerate(["bert", "imagenet", "cifar10", "yolov3"]):
        sub = build_job_table(pd.DataFrame([rows[i]]), gpus_per_server=8, default_alpha=0.05)
        end, _ = shortest_end_s(sub, cfg, spec, model, [fam], True)
        g = int(table.gpus_per_worker[i])
        ref = int(table.traced_workers[i])
        top = max(int(table.max_workers[i]), ref)
        # replica counts up to top x g, any type (the bound allows any count, not only
        # multiples of g: at least the best over whole workers)
        best = max(model.throughput(fam, 0.1, t, r, 1) for t in spec.gpu_types
                   for r in range(1, top * g + 1))
        rate = best / model.throughput(fam, 0.1, model.reference_gpu_type, ref, g)
        assert end == pytest.approx(1000.0 / rate), fam
        whole = max(model.throughput(fam, 0.1, t, w, g) for t in spec.gpu_types
                    for w in range(1, top + 1))
        assert end <= 1000.0 * model.throughput(fam, 0.1, model.reference_gpu_type, ref, g) \
            / whole + 1e-9, fam


@pytest.mark.parametrize("engine", ["native", "python"])
def test_the_bound_never_exceeds_a_replays_end(engine: str) -> None:
    # random small traces (rigid and elastic, several policies, a typed cluster):
    # the replay's end is never before the bound, so the guard refuses no run
    # that would fit
    rng = random.Random(3)
    for case in range(12):
        n = rng.randint(1, 6)
        rows = []
        for i in range(n):
            G = rng.choice([1, 2, 4, 8, 16])
            el = rng.random() < 0.5
            rows.append(dict(job_id=f"j{i}", submit_time_s=float(rng.randint(0, 500)),
                             duration_s=float(rng.randint(10, 3000)), gpus=G,
                             gpus_per_worker=1 if el else min(G, 8),
                             min_workers=max(1, G // 2) if el else G // min(G, 8),
                             max_workers=2 * G if el else G // min(G, 8),
                             elastic=el, alpha=rng.choice([0.0, 0.05, 0.2])))
        jobs = pd.DataFrame(rows).sort_values("submit_time_s", kind="stable")
        policy = ["aryl", "fifo", "elastic-greedy", "tiresias"][case % 4]
        cluster = "lyra" if case % 3 == 0 else None
        shape: dict[str, Any] = ({"cluster": "lyra"} if cluster else
                                 {"n_training_servers": 3, "n_inference_servers": 2})
        cfg = SimConfig(engine=engine, seed=case, **shape)
        res = simulate(jobs, policy=policy, config=cfg)
        spec = resolve_cluster(cfg)
        model = speed_model(cfg, spec)
        table = build_job_table(jobs, gpus_per_server=8, default_alpha=0.05)
        from aryl.sim.setup import job_families

        fams = job_families(jobs, cfg, spec)
        if fams is not None:
            fams = [fams[int(i)] for i in table.input_rows()]
        end, _ = shortest_end_s(table, cfg, spec, model, fams, make_policy(policy).elastic)
        assert res.summary["end_s"] >= end - 1e-6, (case, policy, cluster)


# ------------------------------------------------------------------ the command line

def test_replay_and_compare_refuse_the_long_job_before_replaying(tmp_path: Path) -> None:
    trace = tmp_path / "big.csv"
    trace.write_text(BIG_CSV)
    for cmd in (["replay", "--policy", "fifo"], ["compare"]):
        t = time.perf_counter()
        r = CliRunner().invoke(main, [*cmd, "--trace", str(trace)])
        assert time.perf_counter() - t < 30.0, cmd  # minutes before the guard came first
        assert r.exit_code == 2, r.output  # an input error (the CLI exits 2 on every one)
        assert f"Error: {BIG_MESSAGE}" in " ".join(r.output.split()), cmd


def test_a_sweep_run_of_the_long_job_fails_at_once_with_the_message(tmp_path: Path) -> None:
    from aryl.sweep import parse_spec, plan_sweep
    from aryl.sweep.execute import execute_run
    from aryl.traces import load_trace

    trace = tmp_path / "big.csv"
    trace.write_text(BIG_CSV)
    run = plan_sweep(parse_spec({"grid": {"trace": str(trace), "policy": "aryl"}})).runs[0]
    t = time.perf_counter()
    with pytest.raises(InvalidInputError) as info:
        execute_run(run, load_trace(str(trace)))
    assert time.perf_counter() - t < 20.0
    assert str(info.value) == BIG_MESSAGE


def test_cluster_sizing_of_the_long_job_needs_no_time_series() -> None:
    # the probes keep only fifo's mean delay and use the coarsest step, so a 1e9 s
    # job is sized: on 1 server b waits 1e9 - 10 s behind a (mean delay ~5e8 >=
    # the 4,000 s target), on 2 both start at once (0 < target): the largest cluster
    # that still queues is 1 server, the inference side its minimum of 4
    from aryl.sim.sizing import size_cluster

    jobs = pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [0.0, 10.0],
                         "duration_s": [1e9, 100.0], "gpus": [8, 8]})
    t = time.perf_counter()
    size = size_cluster(jobs)
    assert time.perf_counter() - t < 20.0
    assert tuple(size) == (1, 4)
    assert size.rule == "target-delay"


def test_cluster_sizing_refuses_a_job_larger_than_any_replay_before_probing(
        no_work: None) -> None:
    from aryl.sim.sizing import size_cluster

    jobs = pd.DataFrame({"job_id": ["x"], "submit_time_s": [0.0], "duration_s": [1.0],
                         "gpus": [8 * 200_000]})
    with pytest.raises(InvalidInputError) as info:
        size_cluster(jobs)
    assert str(info.value) == (
        "jobs: job 'x' needs 200,000 servers of 8 GPUs, more than the 100,000 a replay may "
        "have (n_training_servers); use larger servers (gpus_per_server) or drop the job")


# ------------------------------------------------------------------ the sweep grid

def test_the_sweep_grid_size_is_checked_before_it_is_built() -> None:
    from aryl.sweep import parse_spec
    from aryl.sweep.spec import MAX_SWEEP_RUNS

    assert MAX_SWEEP_RUNS == 100_000
    # 3 x 1,000 x 1,000 = 3,000,000 runs: materialising them took GBs; refused first
    grid = {"trace": "itp-c10", "policy": ["fifo", "sjf", "aryl"],
            "seed": list(range(1000)), "peak_utilisation": [0.1 + i * 1e-4 for i in range(1000)]}
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInputError) as info:
            parse_spec({"grid": grid}, origin="s.toml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value) == (
        "s.toml: [grid]: 3,000,000 runs (policy 3 x peak_utilisation 1000 x seed 1000) "
        "exceed the 100,000 runs a spec may hold; shorten an axis or split the spec")
    assert peak < 50e6
    # the runs of the tables before count: a grid of 60,000 and a run table of 60,000
    ok = {"trace": "itp-c10", "policy": ["fifo", "sjf", "aryl"], "seed": list(range(200)),
          "peak_utilisation": [0.1 + i * 1e-3 for i in range(100)]}
    with pytest.raises(InvalidInputError) as info:
        parse_spec({"grid": ok, "run": [{"policy": "aryl"}] * 1 + [dict(ok)]},
                   origin="s.toml")
    assert str(info.value) == (
        "s.toml: [[run]] #2: 60,000 runs (policy 3 x peak_utilisation 100 x seed 200) "
        "after 80,000 of the tables before exceed the 100,000 runs a spec may hold; "
        "shorten an axis or split the spec")
    # policy options multiply too
    with pytest.raises(InvalidInputError) as info:
        parse_spec({"grid": {"trace": "itp-c10", "policy": "aryl", "policy_options": {
            "starvation_bound_s": list(range(400)),
            "return_idle_loans": [True, False] * 200}}}, origin="s.toml")
    assert str(info.value) == (
        "s.toml: [grid].policy_options: 160,000 combinations of options exceed the "
        "100,000 runs a spec may hold; shorten a list")


def test_the_guard_names_the_job_or_the_last_arrival(no_work: None) -> None:
    # b ends no earlier than 1e7 + 10 s: 1e7 + 10 rows at 1 s > 5,000,000
    rows = pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [0.0, 1e7],
                         "duration_s": [10.0, 10.0], "gpus": [1, 1]})
    with pytest.raises(InvalidInputError) as info:
        simulate(rows, policy="fifo", config=SimConfig(timeseries_step_s=1.0))
    assert str(info.value) == (
        "timeseries_step_s: 1 s over a run of 1e+07 s or more (job 'b' cannot finish before "
        "t = 1e+07 s) gives more than 5,000,000 time-series rows; use a step of at least "
        "2 s, or a horizon_s")
    # b larger than the 46 x 8 GPUs never runs: the last arrival sets the bound
    rows["gpus"] = [1, 1000]
    with pytest.raises(InvalidInputError) as info:
        simulate(rows, policy="fifo", config=SimConfig(timeseries_step_s=1.0))
    assert str(info.value) == (
        "timeseries_step_s: 1 s over a run of 1e+07 s or more (the last arrival is at "
        "t = 1e+07 s) gives more than 5,000,000 time-series rows; use a step of at least "
        "2 s, or a horizon_s")
