"""Simulator: random small traces under every policy keep the invariants (hypothesis)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aryl.sim import SimConfig, simulate
from aryl.traces.inference import InferenceDemand

POLICIES = ["fifo", "sjf", "tiresias", "aryl", "aryl-no-loan", "aryl-no-elastic", "elastic-greedy"]


@st.composite
def scenario(draw: st.DrawFn) -> tuple[pd.DataFrame, InferenceDemand, int, int]:
    n = draw(st.integers(1, 25))
    rows = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 30.0, 200.0, 1500.0]))
        gpus = draw(st.sampled_from([1, 2, 4, 8, 12, 16]))
        elastic = draw(st.booleans())
        if elastic:
            gpw, lo, hi = 1, max(1, (gpus + 1) // 2), 2 * gpus
        else:
            gpw = max(d for d in range(1, 9) if gpus % d == 0)
            lo = hi = gpus // gpw
        rows.append(
            {"job_id": f"j{i}", "submit_time_s": t,
             # > 0: a zero duration is invalid for every input (aryl.traces.validate)
             "duration_s": float(draw(st.sampled_from([1, 50, 700, 4000]))), "gpus": gpus,
             "gpus_per_worker": gpw, "min_workers": lo, "max_workers": hi, "elastic": elastic,
             "alpha": draw(st.sampled_from([0.0, 0.05, 0.3]))}
        )
    n_inf = draw(st.integers(0, 3))
    steps = draw(st.lists(st.integers(0, n_inf), min_size=1, max_size=6))
    times = np.arange(len(steps), dtype=np.float64) * draw(st.sampled_from([300.0, 1000.0]))
    demand = InferenceDemand(times, np.array(steps, dtype=np.int64), n_servers=n_inf)
    return pd.DataFrame(rows), demand, draw(st.integers(1, 3)), n_inf


@settings(max_examples=100, deadline=None)
@given(scenario(), st.sampled_from(POLICIES), st.sampled_from([0.0, 100.0]))
def test_random_traces_keep_invariants(
    sc: tuple[pd.DataFrame, InferenceDemand, int, int], policy: str, grace: float
) -> None:
    jobs, demand, n_train, n_inf = sc
    cfg = SimConfig(n_training_servers=n_train, n_inference_servers=n_inf, loan_reserve_servers=0,
                    reclaim_grace_s=grace, check=True, checkpoint_interval_s=600.0)
    res = simulate(jobs, policy=policy, config=cfg, inference=demand if n_inf else False)
    j = res.jobs
    feasible = j["status"] != "infeasible"
    assert (j.loc[feasible, "status"] == "finished").all()
    fin = j[feasible]
    assert (fin["first_start_s"] >= fin["submit_time_s"]).all()
    assert (fin["finish_s"] >= fin["first_start_s"]).all()
    total = res.summary["gpu_s_allocated"]
    assert abs(res.jobs["gpu_s"].sum() - total) <= 1e-6 * max(1.0, total)
    starts = res.events[res.events["event"] == "finish"]["job_id"]
    assert starts.is_unique
    assert set(starts) == set(fin["job_id"])
    if policy == "fifo":
        dur = jobs.set_index("job_id")["duration_s"].reindex(fin["job_id"]).to_numpy()
        qd = fin["queuing_delay_s"].to_numpy()
        np.testing.assert_array_equal(fin["jct_s"].to_numpy(), qd + dur)


# ------------------------------------------------ accounting on every run (issue 9, item 8)

RECLAIM_POLICIES = ["aryl", "random", "fewest-jobs", "most-idle", "exact"]
STATUSES = {"finished", "unfinished", "not_arrived", "infeasible"}
SHARES = ("cluster_usage", "training_usage_no_loans", "loan_usage", "inference_utilisation",
          "inference_utilisation_with_loans", "share_jobs_waited", "share_jobs_waited_total")


@st.composite
def accounting_case(draw: st.DrawFn) -> tuple[pd.DataFrame, InferenceDemand | None, dict]:
    """Tiny cluster, rigid and elastic jobs of 1/2/4/8-GPU workers, demand steps."""
    rows = []
    t = 0.0
    for i in range(draw(st.integers(1, 10))):
        t += draw(st.sampled_from([0.0, 0.0, 10.0, 200.0, 1500.0]))
        g = draw(st.sampled_from([1, 1, 2, 4, 8]))
        if draw(st.booleans()):  # elastic: base .. max workers, traced in between
            lo = draw(st.integers(1, 3))
            hi = lo + draw(st.integers(1, 3))
            tw = draw(st.integers(lo, hi))
        else:
            lo = hi = tw = draw(st.integers(1, 3))
        rows.append({"job_id": f"j{i}", "submit_time_s": t,
                     "duration_s": float(draw(st.sampled_from([1, 50, 700, 4000, 20000]))),
                     "gpus": g * tw, "gpus_per_worker": g, "min_workers": lo, "max_workers": hi,
                     "elastic": hi > lo, "alpha": draw(st.sampled_from([0.0, 0.05, 0.3]))})
    n_inf = draw(st.sampled_from([0, 1, 2, 2, 3]))
    demand = None
    if n_inf:
        # from no demand (every server loanable) to random steps
        steps = [0, *draw(st.lists(st.integers(0, n_inf), min_size=1, max_size=8))]
        step_s = draw(st.sampled_from([60.0, 300.0, 300.0, 1000.0]))
        demand = InferenceDemand(np.arange(len(steps)) * step_s, np.array(steps), n_servers=n_inf)
    horizon = draw(st.sampled_from([None, None, 400.0, 3000.0, 20000.0]))
    cfg = dict(
        n_training_servers=draw(st.integers(1, 3)), n_inference_servers=n_inf,
        loan_reserve_servers=draw(st.sampled_from([0, 0, 1])),
        reclaim_grace_s=draw(st.sampled_from([0.0, 0.0, 100.0])),
        reclaim_policy=draw(st.sampled_from(RECLAIM_POLICIES)),
        loan_cooldown_s=draw(st.sampled_from([0.0, 600.0])),
        checkpoint_interval_s=600.0, starvation_bound_s=draw(st.sampled_from([0.0, 3000.0])),
        start_time_s=0.0, horizon_s=horizon, timeseries_step_s=100.0, check=True,
    )
    return pd.DataFrame(rows), demand, cfg


@settings(max_examples=300, deadline=None)
@given(accounting_case(), st.sampled_from([*POLICIES, "aryl", "aryl", "aryl-no-elastic"]))
def test_accounting_holds_on_random_runs(
    case: tuple[pd.DataFrame, InferenceDemand | None, dict], policy: str
) -> None:
    """Every share in [0, 1], no negative time, GPU-seconds add up, one state per job.

    Checked independently of ``sim.check`` (which also runs, ``check=True``):
    the summary's shares lie in [0, 1]; each job has exactly one of the four
    statuses and the summary counts them; finished jobs satisfy
    ``submit <= first start <= finish <= end`` with queuing delay, wait and JCT
    >= 0; unfinished jobs arrived by the end; jobs not arrived were submitted
    after the end and have no start, wait, JCT or GPU-seconds; without a
    horizon every feasible job finishes; the jobs' GPU-seconds sum to
    ``gpu_s_allocated`` <= ``gpu_s_available`` = training GPUs x span + GPUs of
    the loaned servers x time on loan (``mean_loaned_servers`` x span).
    """
    jobs, demand, cfg = case
    res = simulate(jobs, policy=policy, config=SimConfig(**cfg),
                   inference=demand if demand is not None else False)
    s, j = res.summary, res.jobs
    for what in ("n_unfinished", "n_not_arrived", "n_reclaims", "n_preemptions", "n_scale_in"):
        if s[what]:
            event(what)  # coverage (hypothesis --hypothesis-show-statistics)
    for key in SHARES:
        assert s[key] is None or 0.0 <= s[key] <= 1.0 + 1e-12, (key, s[key])
    assert set(j["status"]) <= STATUSES
    for st_ in STATUSES:
        assert s[f"n_{st_}"] == int((j["status"] == st_).sum())
    assert len(j) == s["n_jobs"] == len(jobs)
    start, end = s["start_s"], s["end_s"]
    span = end - start
    assert span >= 0
    if cfg["horizon_s"] is not None:
        assert end <= cfg["horizon_s"]
    else:
        assert set(j["status"]) <= {"finished", "infeasible"}
    fin = j[j["status"] == "finished"]
    assert (fin["submit_time_s"] <= fin["first_start_s"]).all()
    assert (fin["first_start_s"] <= fin["finish_s"]).all()
    assert (fin["finish_s"] <= end).all()
    for col in ("queuing_delay_s", "wait_s", "jct_s"):
        assert (fin[col] >= 0).all(), col
    assert (fin["jct_s"] >= fin["wait_s"] - 1e-6).all()
    unf = j[j["status"] == "unfinished"]
    assert (unf["submit_time_s"] <= end).all()
    assert ((unf["wait_s"] >= 0) & (unf["wait_s"] <= end - unf["submit_time_s"] + 1e-6)).all()
    na = j[j["status"] == "not_arrived"]
    assert (na["submit_time_s"] > end).all()
    assert na[["first_start_s", "wait_s", "jct_s", "queuing_delay_s"]].isna().all().all()
    assert (na["gpu_s"] == 0).all()
    assert (j["gpu_s"] >= 0).all()
    total = s["gpu_s_allocated"]
    assert j["gpu_s"].sum() == pytest.approx(total, rel=1e-9, abs=1e-6)
    S = 8
    avail = S * cfg["n_training_servers"] * span + S * s["mean_loaned_servers"] * span
    assert s["gpu_s_available"] == pytest.approx(avail, rel=1e-9, abs=1e-6)
    assert total <= s["gpu_s_available"] * (1 + 1e-12) + 1e-6
    assert s["gpu_s_allocated_on_loans"] <= total + 1e-6
    ts = res.timeseries
    assert (ts[["queue_length", "busy_gpus", "loaned_servers", "running_jobs"]] >= 0).all().all()
    assert ((ts["time_s"] >= start) & (ts["time_s"] <= end)).all()
