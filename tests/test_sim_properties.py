"""Simulator: random small traces under every policy keep the invariants (hypothesis)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
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
