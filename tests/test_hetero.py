"""Heterogeneous GPU pools: pool choice, per-type knapsacks, per-pool measures, identity.

Hand-computed two-pool scenarios (a job that should wait for a training GPU
rather than start on a slow loaned one, and the reverse), the per-type MCKP
against ``scipy.optimize.milp`` on the joint problem with one capacity per GPU
type, per-pool usage and goodput by hand, and the bit-for-bit identity of the
heterogeneous path with the homogeneous replay when every speed ratio is 1.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl.scheduling import ClusterState, SchedulerConfig, schedule
from aryl.scheduling.speed import SpeedModel
from aryl.sim import SimConfig, simulate
from aryl.traces import load_trace, synthesize_elastic


def _spec(tmp_path: Path, pools: list[tuple[str, str, int, int, str]]) -> str:
    text = "".join(
        f'[[pools]]\nname = "{n}"\nrole = "{r}"\nn_servers = {k}\ngpus_per_server = {g}\n'
        f'gpu_type = "{t}"\n\n'
        for n, r, k, g, t in pools
    )
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    return str(path)


def _jobs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows).astype({"submit_time_s": "float64", "duration_s": "float64",
                                      "gpus": "int64"})


@pytest.fixture
def two_pools(tmp_path: Path) -> str:
    # one 8-GPU V100 training server, one 8-GPU T4 inference server
    return _spec(tmp_path, [("v100", "training", 1, 8, "V100"),
                            ("t4", "inference", 1, 8, "T4")])


def _run(cluster: str, rows: list[dict[str, Any]], **kw: Any) -> Any:
    cfg = SimConfig(cluster=cluster, speed_model="parametric", loaned_gpu_speed=0.25,
                    loan_reserve_servers=0, check=True, **kw)
    return simulate(_jobs(rows), policy="aryl", inference=False, config=cfg)


def test_a_short_job_starts_on_a_slow_loaned_server(two_pools: str) -> None:
    # A (t=0, 8 GPUs, 1000 s) holds the V100 server until 1000.  B (t=1, 8 GPUs,
    # 100 s): on the loaned T4 (speed 0.25) it would end at 1 + 100 / 0.25 = 401;
    # waiting for the V100 server: 1000 + 100 = 1100 (estimate 999 + 100 from t=1).
    # 401 < 1100: B starts at once on the T4 and ends at 401.
    res = _run(two_pools, [
        dict(job_id="A", submit_time_s=0, duration_s=1000, gpus=8),
        dict(job_id="B", submit_time_s=1, duration_s=100, gpus=8),
    ])
    j = res.jobs.set_index("job_id")
    assert j.loc["B", "first_start_s"] == 1.0
    assert j.loc["B", "finish_s"] == 401.0
    assert j.loc["B", "main_pool"] == "t4"
    assert j.loc["A", "main_pool"] == "v100"
    assert res.summary["n_loans"] == 1
    # per pool: v100 8 GPUs x 1000 s available and used; t4 on loan 1..401 (returned
    # when idle), 8 x 400 = 3200 GPU-s, all used.  Useful work (reference GPU-s):
    # A 1000 x 8 = 8000, B 100 x 8 = 800; goodput t4 = 800 / 3200 = 0.25,
    # overall 8800 / 11200.
    pools = {p["pool"]: p for p in res.summary["pools"]}
    assert pools["v100"]["gpu_s_available"] == 8000.0
    assert pools["v100"]["usage"] == 1.0
    assert pools["t4"]["gpu_s_available"] == 3200.0
    assert pools["t4"]["usage"] == 1.0
    assert pools["t4"]["goodput"] == pytest.approx(0.25, rel=1e-12)
    assert pools["v100"]["goodput"] == pytest.approx(1.0, rel=1e-12)
    assert res.summary["goodput"] == pytest.approx(8800 / 11200, rel=1e-12)
    assert pools["t4"]["jct_s"]["mean"] == 400.0
    assert pools["v100"]["jct_s"]["mean"] == 1000.0


def test_a_long_job_waits_for_the_fast_training_server(two_pools: str) -> None:
    # B (t=1, 8 GPUs, 1000 s): on the T4 it would end at 1 + 1000 / 0.25 = 4001;
    # waiting: 999 + 1000 from t=1, i.e. 2000 < 4001: B waits, starts on the V100
    # server when A ends at 1000 and ends at 2000.  Nothing is borrowed.
    res = _run(two_pools, [
        dict(job_id="A", submit_time_s=0, duration_s=1000, gpus=8),
        dict(job_id="B", submit_time_s=1, duration_s=1000, gpus=8),
    ])
    j = res.jobs.set_index("job_id")
    assert j.loc["B", "first_start_s"] == 1000.0
    assert j.loc["B", "finish_s"] == 2000.0
    assert j.loc["B", "main_pool"] == "v100"
    assert res.summary["n_loans"] == 0


def test_the_fastest_training_type_is_chosen() -> None:
    # Two training servers: V100 (factor 1) and FAST (factor 2, parametric).  One job
    # of 8 one-GPU workers, 1000 s left, starts on the FAST server (index 1) and
    # runs at speed 2 (ends after 500 s).
    st_ = ClusterState(config=SchedulerConfig(loan_reserve_servers=0),
                       speeds=SpeedModel("V100", factors={"FAST": 2.0}))
    for sid, typ in (("a", "V100"), ("b", "FAST")):
        st_.add_server(sid, role="training", gpus=8, gpu_type=typ)
    j = st_.add_job("J", arrival_s=0.0, gpus_per_worker=1, ref_workers=8, remaining_s=1000.0)
    st_.enqueue(j, 0.0)
    plan = schedule(st_, policy="aryl")
    assert [(x, p) for x, p, _ in plan.starts] == [(j, {1: 8})]
    after = plan.apply(st_)
    assert after.speed[j] == 2.0


def _fingerprint(res: Any) -> str:
    h = hashlib.sha256()
    cols = ["job_id", "status", "first_start_s", "finish_s", "n_preemptions", "n_scale_in",
            "n_scale_out", "n_moves", "gpu_s"]
    for c in cols:
        a = res.jobs[c].to_numpy()
        h.update("|".join(map(str, a.tolist())).encode() if a.dtype == object else a.tobytes())
    ev = res.events
    h.update(ev.to_csv(index=False).encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def c01() -> pd.DataFrame:
    tr = load_trace("itp-c01")
    return synthesize_elastic(tr, elastic_fraction=0.5, seed=2).jobs


@pytest.mark.parametrize("policy", ["aryl", "fifo", "elastic-greedy"])
def test_every_speed_ratio_one_reproduces_the_homogeneous_replay(
    c01: pd.DataFrame, tmp_path: Path, policy: str
) -> None:
    # Two training pools and an inference pool of three GPU type names, every speed
    # ratio 1 (parametric, no factor) and types free to mix: bit for bit the
    # homogeneous replay on the same servers (5 + 3 training, 4 inference).
    spec = _spec(tmp_path, [("a", "training", 5, 8, "V100"), ("b", "training", 3, 8, "A100"),
                            ("i", "inference", 4, 8, "T4")])
    kw = dict(loan_reserve_servers=0, check=True)
    het = simulate(c01, policy=policy, config=SimConfig(
        cluster=spec, speed_model="parametric", mix_gpu_types=True, **kw))
    hom = simulate(c01, policy=policy, config=SimConfig(
        n_training_servers=8, n_inference_servers=4, **kw))
    assert _fingerprint(het) == _fingerprint(hom)
    if policy == "aryl":
        assert hom.summary["n_loans"] > 0
        assert hom.summary["n_scale_out"] > 0


def test_the_default_preset_is_the_homogeneous_default(c01: pd.DataFrame) -> None:
    a = simulate(c01, policy="aryl", config=SimConfig(cluster="default",
                                                       speed_model="parametric"))
    b = simulate(c01, policy="aryl", config=SimConfig())
    assert _fingerprint(a) == _fingerprint(b)


def test_lyra_replays_with_checks(c01: pd.DataFrame) -> None:
    res = simulate(c01.iloc[:300], policy="aryl", config=SimConfig(cluster="lyra", check=True))
    s = res.summary
    assert [p["pool"] for p in s["pools"]] == ["v100", "a100", "t4"]
    assert s["cluster"]["speed_model"]["table"] == "bundled"
    assert set(res.jobs["main_pool"]) <= {"v100", "a100", "t4", ""}
    assert sum(p["gpu_s_allocated"] for p in s["pools"]) == pytest.approx(s["gpu_s_allocated"])


# ------------------------------------------------ the per-type knapsack vs MILP


@st.composite
def typed_case(draw: st.DrawFn) -> Any:
    types = draw(st.lists(st.sampled_from([("A", 1.0), ("B", 0.5), ("C", 1.5)]), min_size=2,
                          max_size=3, unique_by=lambda x: x[0]))
    servers = [(t, draw(st.integers(2, 8))) for t, _ in types for _ in range(
        draw(st.integers(1, 2)))]
    jobs = [(draw(st.sampled_from([200.0, 1000.0, 5000.0])), draw(st.integers(1, 2)),
             draw(st.integers(1, 4)), draw(st.sampled_from([0.0, 0.1, 0.4])))
            for _ in range(draw(st.integers(1, 5)))]
    return types, jobs, servers


@settings(max_examples=60, deadline=None)
@given(case=typed_case())
def test_per_type_knapsacks_are_the_joint_optimum(case: Any) -> None:
    """``aryl`` on a state of several GPU types (parametric factors), elastic jobs of
    1-GPU workers queued: after the base phase, the extra workers of each type's jobs
    maximise the total JCT reduction subject to one GPU capacity per type, as the
    joint MILP (every class, every type's capacity) says."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    types, jobs, servers = case
    factors = dict(types)
    st_ = ClusterState(config=SchedulerConfig(rescale_pause_s=30.0),
                       speeds=SpeedModel(types[0][0], factors={
                           t: f / factors[types[0][0]] for t, f in factors.items()}))
    for i, (t, gpus) in enumerate(servers):
        st_.add_server(f"s{i}", role="training", gpus=gpus, gpu_type=t)
    for i, (rem, b, extra, a) in enumerate(jobs):
        j = st_.add_job(f"j{i}", arrival_s=float(i), gpus_per_worker=1, ref_workers=b,
                        remaining_s=rem, min_workers=b, max_workers=b + extra, elastic=True,
                        alpha=a)
        st_.enqueue(j, float(i))
    plan = schedule(st_, policy="aryl-no-loan")
    started = {j: p for j, p, _ in plan.starts}
    if not started:
        return
    # per type: the GPUs left after every started job's base workers
    cap: dict[str, int] = {t: 0 for t, _ in types}
    for _s, (t, gpus) in enumerate(servers):
        cap[t] += gpus
    job_type: dict[int, str] = {}
    for j, p in started.items():
        base_servers = sorted(p)
        job_type[j] = servers[base_servers[0]][0]
        cap[job_type[j]] -= st_.min_workers[j]
    # the oracle's values: R / T_t(b) - R / T_t(b + k), R in units of T_ref(ref) x s
    def thr(j: int, t: str, w: int) -> float:
        a = st_.alpha[j]
        return factors[t] / factors[types[0][0]] * (w / (1.0 + a * (w - 1)))

    var: list[tuple[int, int]] = []
    val: list[float] = []
    for j in started:
        t = job_type[j]
        b = st_.min_workers[j]
        ref = st_.ref_workers[j]
        r = st_.remaining_s[j] * (ref / (1.0 + st_.alpha[j] * (ref - 1)))
        for k in range(1, st_.max_workers[j] - b + 1):
            var.append((j, k))
            val.append(r / thr(j, t, b) - r / thr(j, t, b + k))
    if not var:
        return
    n = len(var)
    rows = []
    ub = []
    for j in started:  # at most one option per job
        rows.append([1.0 if var[i][0] == j else 0.0 for i in range(n)])
        ub.append(1.0)
    for t in cap:  # one capacity per type
        rows.append([float(var[i][1]) if job_type[var[i][0]] == t else 0.0 for i in range(n)])
        ub.append(float(cap[t]))
    res = milp(-np.array(val), constraints=LinearConstraint(np.array(rows), -np.inf, ub),
               integrality=np.ones(n), bounds=Bounds(0, 1),
               options={"mip_rel_gap": 0.0})
    assert res.success
    best = -res.fun
    got = 0.0
    for j, p in started.items():
        k = sum(p.values()) - st_.min_workers[j]
        if k:
            got += val[var.index((j, k))]
    assert got == pytest.approx(best, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_worker_larger_than_one_types_servers_goes_to_the_other_type(
    tmp_path: Path, engine: str
) -> None:
    # Training pools: "small" 2 servers of 4 GPUs (type FAST, first, so tried first on a
    # speed tie) and "big" 1 server of 8 GPUs (V100).  One rigid job of one 8-GPU worker,
    # 100 s: it fits no 4-GPU server, so it goes to the 8-GPU server at t=0 and ends at
    # 100 (the reference type's speed; before the fix gang placement divided by zero).
    spec = _spec(tmp_path, [("small", "training", 2, 4, "FAST"),
                            ("big", "training", 1, 8, "V100"),
                            ("i", "inference", 1, 8, "T4")])
    rows = [dict(job_id="J", submit_time_s=0, duration_s=100, gpus=8, gpus_per_worker=8,
                 min_workers=1, max_workers=1, elastic=False, alpha=0.0)]
    for policy in ("fifo", "sjf", "tiresias", "fifo-backfill", "aryl"):
        res = simulate(_jobs(rows), policy=policy, inference=False, config=SimConfig(
            cluster=spec, speed_model="parametric", loaned_gpu_speed=0.5, engine=engine,
            check=True))
        j = res.jobs.set_index("job_id")
        assert (j.loc["J", "first_start_s"], j.loc["J", "finish_s"]) == (0.0, 100.0), policy
        assert j.loc["J", "main_pool"] == "big", policy


def test_loaned_gpu_speed_needs_an_inference_type_of_its_own() -> None:
    from aryl.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="loaned_gpu_speed: the inference servers are "
                                                "of the reference GPU type"):
        simulate(_jobs([dict(job_id="a", submit_time_s=0, duration_s=10, gpus=1)]),
                 policy="aryl", config=SimConfig(loaned_gpu_speed=0.5))
