"""Training pools of different server sizes: every place that took one size.

Gang placement (both engines), the EASY reservation of ``fifo-backfill``, every
policy on a 1 x 4 + 1 x 8 GPU cluster, the infeasibility rule and its message,
and the worker size of the synthesised scaling columns on every path (``simulate``,
``aryl replay``, ``aryl sweep``).  Values by hand, the arithmetic in comments.
"""

from __future__ import annotations

import io
import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.scheduling import ClusterState, SchedulerConfig, schedule
from aryl.scheduling.placement import gang_place
from aryl.sim import SimConfig, simulate

ENGINES = ("native", "python")
BACKENDS = ("native", "reference")
POLICIES = ("fifo", "fifo-backfill", "sjf", "tiresias", "aryl", "aryl-no-loan",
            "aryl-no-elastic", "elastic-greedy")

@pytest.fixture
def spec_path(mixed_cluster: Callable[..., Path]) -> Path:
    # 1 x 4 + 1 x 8 GPU training pools, 2 x 2-GPU V100 inference servers (tests/conftest.py)
    return mixed_cluster("V100")


# ------------------------------------------------------------------ gang placement

SIZES = [4, 8, 8, 2]  # servers 0..3


def test_gang_place_takes_each_servers_own_size() -> None:
    every = range(4)
    # 1 worker of 8 GPUs: only the 8-GPU servers hold it; a whole free one, best fit
    # (tie 8 / 8 free: the lower id).  With server 0's size for all (4) it fit nowhere.
    assert gang_place([4, 8, 8, 2], every, 1, 8, SIZES) == {1: 1}
    assert gang_place([4, 8, 8, 2], every, 1, 8, 4) is None
    # 6 one-GPU workers fit one server (capacity 8 > 6): best fit, server 1
    assert gang_place([4, 8, 8, 2], every, 6, 1, SIZES) == {1: 6}
    # 12: no server holds them; whole free servers by capacity (8, 8, 4, 2): 1 takes 8,
    # 2 would take 8 > 4 left: skipped, 0 takes the 4 left
    assert gang_place([4, 8, 8, 2], every, 12, 1, SIZES) == {1: 8, 0: 4}
    # 10: 1 takes 8, 2 left: 2 (8) and 0 (4) are skipped, 3 (2) takes them whole
    assert gang_place([4, 8, 8, 2], every, 10, 1, SIZES) == {1: 8, 3: 2}
    # servers 1 and 2 partly busy (5 and 3 free): 6 workers fit no single server;
    # whole free: 0 (4), 3 (2): exactly 6
    assert gang_place([4, 5, 3, 2], every, 6, 1, SIZES) == {0: 4, 3: 2}
    # 7: 0 and 3 whole (6), the last worker best fit among 1 (5 free) and 2 (3): 2
    assert gang_place([4, 5, 3, 2], every, 7, 1, SIZES) == {0: 4, 3: 2, 2: 1}
    # 2-GPU workers (capacities 2, 4, 4, 1), free [4, 6, 8, 2]: 11 workers: whole
    # 2 (4), 0 (2), 3 (1): 4 left = 8 GPUs, the most any other server has is 6: None
    assert gang_place([4, 6, 8, 2], every, 11, 2, SIZES) is None
    # 9: the same whole servers, 2 workers (4 GPUs) left on server 1 (6 free, 2 < 4)
    assert gang_place([4, 6, 8, 2], every, 9, 2, SIZES) == {2: 4, 0: 2, 3: 1, 1: 2}
    # a worker larger than every server: None
    assert gang_place([4, 8, 8, 2], every, 1, 16, SIZES) is None


def test_gang_place_with_one_size_is_the_homogeneous_rule() -> None:
    # a list of equal sizes and the single size give the same placement, for
    # random free lists, worker sizes and counts (the old one-size rule)
    rng = random.Random(7)
    for _ in range(3000):
        n = rng.randint(1, 6)
        size = rng.choice([4, 8])
        free = [rng.choice([0, 1, 2, 3, size // 2, size - 1, size, size]) for _ in range(n)]
        g = rng.choice([1, 2, 3, 4, 8])
        w = rng.randint(1, 12)
        assert gang_place(free, range(n), w, g, [size] * n) == gang_place(
            free, range(n), w, g, size), (free, w, g, size)


Running = tuple[tuple[str, int, int, dict[int, int], float], ...]


def state(sizes: list[int], backend: str, running: Running = ()) -> ClusterState:
    """Training servers of ``sizes``; ``running``: (id, g, w, placement, remaining s)."""
    st = ClusterState(config=SchedulerConfig(backend=backend, loan_reserve_servers=0))
    for i, s in enumerate(sizes):
        st.add_server(f"t{i}", role="training", gpus=s)
    for name, g, w, place, rem in running:
        j = st.add_job(name, arrival_s=0.0, gpus_per_worker=g, ref_workers=w, remaining_s=rem)
        st.enqueue(j, 0.0)
        st.start(j, place, 0.0)
    return st


def queue(st: ClusterState, name: str, t: float, g: int, w: int, rem: float) -> None:
    j = st.add_job(name, arrival_s=t, gpus_per_worker=g, ref_workers=w, remaining_s=rem)
    st.enqueue(j, t)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("free_jobs", "g", "w", "want"), [
    ((), 8, 1, {1: 1}),
    ((), 1, 12, {1: 8, 0: 4}),
    ((), 1, 10, {1: 8, 3: 2}),
    # busy: 3 GPUs of server 1, 5 of server 2 -> free [4, 5, 3, 2]
    ((("R1", 1, 3, {1: 3}, 50.0), ("R2", 1, 5, {2: 5}, 50.0)), 1, 7, {0: 4, 3: 2, 2: 1}),
])
@pytest.mark.parametrize("policy", ["fifo", "fifo-backfill", "sjf", "tiresias"])
def test_every_gang_policy_places_on_mixed_sizes_in_both_passes(
        backend: str, free_jobs: Any, g: int, w: int, want: dict[int, int],
        policy: str) -> None:
    st = state(SIZES, backend, free_jobs)
    queue(st, "X", 0.0, g, w, 10.0)
    plan = schedule(st, policy=policy)
    assert [(st.job_id[j], p) for j, p, _ in plan.starts] == [("X", want)]


# ------------------------------------------------------------------ EASY reservation

@pytest.mark.parametrize("backend", BACKENDS)
def test_the_easy_reservation_counts_only_servers_that_hold_the_heads_worker(
        backend: str) -> None:
    # Servers t0 (4 GPUs, S0 on all of it until 50), t1 (4, empty), t2 (8, S1 until
    # 100).  Head H: one 8-GPU worker, so only t2 can ever hold it: its shadow time is
    # 100 (S1's end), extra GPUs 0.  Counting every training GPU, S0's 4 GPUs at 50
    # plus t1's 4 would give a shadow of 50.  C (one 4-GPU worker, 70 s) ends at 70 <=
    # 100: backfilled on t1 (the only server with 4 free).  L (4 GPUs, 500 s, after
    # the shadow) would also go on t1, which H cannot use: allowed too, but t1 is
    # then full, so only C starts (C is first in arrival order).
    st = state([4, 4, 8], backend, (("S0", 4, 1, {0: 1}, 50.0), ("S1", 8, 1, {2: 1}, 100.0)))
    queue(st, "H", 0.0, 8, 1, 10.0)
    queue(st, "C", 1.0, 4, 1, 70.0)
    plan = schedule(st, policy="fifo-backfill")
    assert [(st.job_id[j], p, r.label) for j, p, r in plan.starts] == [
        ("C", {1: 1}, "backfill")]
    # a long job on a server the head cannot use does not delay it: allowed
    st = state([4, 4, 8], backend, (("S0", 4, 1, {0: 1}, 50.0), ("S1", 8, 1, {2: 1}, 100.0)))
    queue(st, "H", 0.0, 8, 1, 10.0)
    queue(st, "L", 1.0, 4, 1, 500.0)
    plan = schedule(st, policy="fifo-backfill")
    assert [(st.job_id[j], p, r.label) for j, p, r in plan.starts] == [
        ("L", {1: 1}, "backfill")]
    # on the head's server it would: t2 half busy (S1 on 4 of 8 GPUs until 100), t1
    # (4) busy until 1,000; H needs t2 whole at 100, extra 0.  L (4 GPUs, 500 s)
    # fits only t2's free half and ends after 100: refused.  A short one (50 s) fits.
    for rem, want in ((500.0, []), (50.0, [("L", {2: 1}, "backfill")])):
        st = state([4, 4, 8], backend, (("S1", 4, 1, {2: 1}, 100.0),
                                        ("S2", 4, 1, {1: 1}, 1000.0),
                                        ("S3", 4, 1, {0: 1}, 1000.0)))
        queue(st, "H", 0.0, 8, 1, 10.0)
        queue(st, "L", 1.0, 4, 1, rem)
        plan = schedule(st, policy="fifo-backfill")
        assert [(st.job_id[j], p, r.label) for j, p, r in plan.starts] == want, rem


def test_mixed_size_plans_match_between_the_passes_on_random_states() -> None:
    # the compiled pass and the Python twin agree on random mixed-size states
    rng = random.Random(11)
    for case in range(150):
        sizes = [rng.choice([2, 4, 8]) for _ in range(rng.randint(2, 4))]
        plans = []
        for b in BACKENDS:
            r2 = random.Random(case)
            st = state(sizes, b)
            for i in range(r2.randint(0, 3)):  # a few running jobs, one worker each
                s = r2.randrange(len(sizes))
                gg = r2.choice([1, 2])
                if st.free[s] >= gg:
                    j = st.add_job(f"R{i}", arrival_s=0.0, gpus_per_worker=gg, ref_workers=1,
                                   remaining_s=r2.choice([20.0, 60.0, 200.0]))
                    st.enqueue(j, 0.0)
                    st.start(j, {s: 1}, 0.0)
            for i in range(r2.randint(1, 4)):
                queue(st, f"Q{i}", float(i), r2.choice([1, 2, 4, 8]), r2.randint(1, 3),
                      r2.choice([10.0, 50.0, 400.0]))
            policy = ["fifo", "fifo-backfill", "sjf", "tiresias"][case % 4]
            plan = schedule(st, policy=policy)
            plans.append(([(j, p) for j, p, _ in plan.starts], plan.preemptions))
        assert plans[0] == plans[1], (case, sizes)


# ------------------------------------------------------------------ every policy, both engines

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("policy", POLICIES)
def test_an_8_gpu_job_starts_at_once_on_4_and_8_gpu_pools(spec_path: Path, policy: str,
                                                          engine: str) -> None:
    # the case: one job (0 s, 8 GPUs, 100 s); its one 8-GPU worker fits the
    # 8-GPU server: it starts at 0 and ends at 100 under every policy
    jobs = pd.DataFrame({"job_id": ["a"], "submit_time_s": [0.0], "duration_s": [100.0],
                         "gpus": [8]})
    res = simulate(jobs, policy=policy, inference=False,
                   config=SimConfig(cluster=str(spec_path), engine=engine, check=True))
    row = res.jobs.iloc[0]
    assert (row["status"], row["first_start_s"], row["finish_s"]) == ("finished", 0.0, 100.0)
    assert row["main_pool"] == "big"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("policy", ["fifo", "fifo-backfill", "sjf", "tiresias"])
def test_a_gang_spans_servers_of_two_sizes(spec_path: Path, policy: str, engine: str) -> None:
    # 12 one-GPU workers (an elastic-column trace pinned rigid at 12 x 1): the 8-GPU
    # server whole, then the 4-GPU server whole: one start of 12 workers at 0
    jobs = pd.DataFrame({"job_id": ["a"], "submit_time_s": [0.0], "duration_s": [100.0],
                         "gpus": [12], "gpus_per_worker": [1], "min_workers": [12],
                         "max_workers": [12], "elastic": [False], "alpha": [0.05]})
    res = simulate(jobs, policy=policy, inference=False,
                   config=SimConfig(cluster=str(spec_path), engine=engine, check=True))
    row = res.jobs.iloc[0]
    assert (row["status"], row["first_start_s"], row["finish_s"]) == ("finished", 0.0, 100.0)
    assert row["gpu_s"] == 1200.0
    # usage 1,200 / (12 GPUs x 100 s) = 1
    assert res.summary["cluster_usage"] == pytest.approx(1.0)


@pytest.mark.parametrize("engine", ENGINES)
def test_infeasible_on_mixed_pools_names_each_pool(spec_path: Path, engine: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    # 12 GPUs: workers of 6 (the largest divisor of 12 that fits the 8-GPU server),
    # one per 8-GPU server: 2 workers need two 8-GPU servers, there is one
    jobs = pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [0.0, 0.0],
                         "duration_s": [100.0, 10.0], "gpus": [12, 4]})
    with caplog.at_level(logging.WARNING, logger="aryl"):
        res = simulate(jobs, policy="fifo", inference=False,
                       config=SimConfig(cluster=str(spec_path), engine=engine))
    assert res.jobs.set_index("job_id")["status"].to_dict() == {
        "a": "infeasible", "b": "finished"}
    assert ("1 job(s) can never fit the training cluster (1 server x 4 GPUs + 1 server x 8 "
            "GPUs); reported as infeasible (status 'infeasible' in the jobs table), e.g. a"
            ) in caplog.text


# ------------------------------------------------------------------ worker sizes on every path

_FOUR = """
[[pools]]
name = "four"
role = "training"
n_servers = 2
gpus_per_server = 4
gpu_type = "V100"

[[pools]]
name = "inf"
role = "inference"
n_servers = 1
gpus_per_server = 4
gpu_type = "V100"
"""


def test_the_cli_sizes_workers_to_the_clusters_servers(tmp_path: Path) -> None:
    # 2 x 4-GPU servers, one 8-GPU job: workers of 4 (not of 8, gpus_per_server's
    # default), one per server: it runs 0 .. 100 (before: infeasible)
    spec = tmp_path / "four.toml"
    spec.write_text(_FOUR)
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,gpus\na,0,100,8\n")
    for cmd in (["replay", "--policy", "fifo"], ["replay", "--policy", "aryl"]):
        r = CliRunner().invoke(main, [*cmd, "--trace", str(trace), "--cluster", str(spec),
                                      "--inference", "none", "--json"])
        assert r.exit_code == 0, r.output
        s = json.loads(r.stdout)
        assert (s["n_finished"], s["n_infeasible"]) == (1, 0), cmd
        assert s["jct_s"]["mean"] == 100.0 or cmd[-1] == "aryl", cmd


def test_a_sweep_sizes_workers_to_the_clusters_servers(tmp_path: Path) -> None:
    from aryl.sweep import parse_spec, plan_sweep
    from aryl.sweep.execute import execute_run
    from aryl.traces import load_trace

    spec = tmp_path / "four.toml"
    spec.write_text(_FOUR)
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,gpus\na,0,100,8\n")
    sweep = parse_spec({"grid": {"trace": str(trace), "policy": "fifo", "cluster": str(spec),
                                 "inference": "none", "elastic_fraction": 0.0}})
    run = plan_sweep(sweep).runs[0]
    out = execute_run(run, load_trace(str(trace)))
    jobs = pd.read_parquet(io.BytesIO(out.jobs))
    # one rigid job of 8 GPUs as 2 workers of 4: finished at 100
    assert jobs[["status", "gpus_per_worker", "finish_s"]].values.tolist() == [
        ["finished", 4, 100.0]]


def test_the_worker_server_size_of_a_replay(spec_path: Path) -> None:
    from aryl.sim.setup import worker_server_gpus

    assert worker_server_gpus(SimConfig(cluster=str(spec_path))) == 8
    assert worker_server_gpus(SimConfig(gpus_per_server=4)) == 4
    assert worker_server_gpus(SimConfig(n_training_servers=0, gpus_per_server=2)) == 2


# ------------------------------------------------------------------ the loan decision

@pytest.mark.parametrize("backend", BACKENDS)
def test_the_wait_for_a_faster_type_counts_only_servers_that_hold_the_worker(
        backend: str) -> None:
    # Fast training servers: f0, f1 (4 GPUs, each busy until 10 s) and f2 (8 GPUs,
    # busy until 1,000 s); a slow idle inference server s0 (8 GPUs, half speed).  N:
    # one 8-GPU worker, 100 s of work: 200 s on s0 now.  Waiting: only f2 holds its
    # worker, free at 1,000: 1,000 + 100 = 1,100 > 200, so N starts on s0.  Counting
    # every fast GPU, f0 and f1 give 8 GPUs at 10 s: 10 + 100 = 110 < 200 and N would
    # wait (and at 10 s, with 8 GPUs "free", wait again, until 1,000).
    from aryl.scheduling import Reason
    from aryl.scheduling.speed import SpeedModel

    st = ClusterState(config=SchedulerConfig(backend=backend, loan_reserve_servers=0),
                      speeds=SpeedModel("fast", factors={"slow": 0.5}))
    for i, gpus in enumerate([4, 4, 8]):
        st.add_server(f"f{i}", role="training", gpus=gpus, gpu_type="fast")
    st.add_server("s0", role="inference", gpus=8, gpu_type="slow", status="idle")
    for name, g, s, rem in (("R0", 4, 0, 10.0), ("R1", 4, 1, 10.0), ("R2", 8, 2, 1000.0)):
        j = st.add_job(name, arrival_s=0.0, gpus_per_worker=g, ref_workers=1, remaining_s=rem,
                       alpha=0.0)
        st.enqueue(j, 0.0)
        st.start(j, {s: 1}, 0.0)
    queue(st, "N", 0.0, 8, 1, 100.0)
    plan = schedule(st, policy="aryl")
    assert [(st.job_id[j], p) for j, p, _ in plan.starts] == [("N", {3: 1})]
    assert plan.borrowed_servers == [(3, Reason.LOAN_FOR_BASE)]
