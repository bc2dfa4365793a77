"""Simulator semantics faults of issue 9 (items 1, 3, 6, 7): each case with its right value.

Notation of the issue: ``name(submit s, GPUs, duration s)``; servers of 8 GPUs.
Item 2 (placement of extra workers) is in ``test_sim_extras_placement.py``,
item 8 (accounting) in ``test_sim_properties.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl.sim import SimConfig, SimResult, simulate
from aryl.traces.inference import InferenceDemand


def jobs_df(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Canonical jobs; rows without scaling columns are rigid (one server's worth per worker)."""
    out = []
    for r in rows:
        r = dict(r)
        if "min_workers" not in r:
            g = r.get("gpus_per_worker", r["gpus"] if r["gpus"] <= 8 else 8)
            r.setdefault("gpus_per_worker", g)
            r["min_workers"] = r["max_workers"] = r["gpus"] // g
        r.setdefault("alpha", 0.05)
        r.setdefault("elastic", r["max_workers"] > r["min_workers"])
        out.append(r)
    return pd.DataFrame(out).astype({
        "submit_time_s": "float64", "duration_s": "float64", "gpus": "int64",
        "gpus_per_worker": "int64", "min_workers": "int64", "max_workers": "int64",
        "elastic": "bool", "alpha": "float64",
    })


def run(rows: list[dict[str, Any]], policy: str, **cfg: Any) -> SimResult:
    inference = cfg.pop("inference", False)
    cfg.setdefault("n_inference_servers", 0)
    cfg.setdefault("check", True)
    return simulate(jobs_df(rows), policy=policy, config=SimConfig(**cfg), inference=inference)


def events_of(res: SimResult, job: str) -> list[tuple[float, str, int]]:
    ev = res.events[res.events["job_id"] == job]
    return list(zip(ev["time_s"].tolist(), ev["event"].tolist(), ev["workers"].tolist(),
                    strict=True))


def row(res: SimResult, job: str) -> pd.Series:
    return res.jobs.set_index("job_id").loc[job]


# ------------------------------------------------------------ 1. queue age


def _queue_age_rows() -> list[dict]:
    rows = [
        dict(job_id="P", submit_time_s=0, duration_s=2000, gpus=8),
        dict(job_id="A", submit_time_s=1, duration_s=1e6, gpus=8),
        dict(job_id="B", submit_time_s=2, duration_s=100, gpus=8),
    ]
    t, i = 3.0, 0
    while t <= 3000.0:  # a 1-GPU 30 s job every 20 s from t = 3 until t = 3000
        rows.append(dict(job_id=f"s{i}", submit_time_s=t, duration_s=30, gpus=1))
        t += 20.0
        i += 1
    return rows


QUEUE_AGE_CFG = dict(n_training_servers=1, n_inference_servers=1, loan_reserve_servers=0,
                     starvation_bound_s=1000.0,
                     inference=InferenceDemand(np.array([0.0, 1500.0]), np.array([0, 1]),
                                               n_servers=1))


@pytest.mark.parametrize("policy", ["aryl", "aryl-no-elastic"])
def test_requeued_job_keeps_its_queue_age_and_the_guard_skips_young_jobs(policy: str) -> None:
    # P runs on the training server over [0, 2000].  A (t = 1) runs on the loaned
    # inference server from t = 1; B (t = 2) and every 1-GPU job wait (no free GPU).
    # At 1500 the inference demand takes the server back: A is preempted.
    # At 2000 P ends.  Queue ages (time queued since the first arrival):
    #   A: 0 s (started at arrival) + 2000 - 1500 = 500 s < 1000 -> not starving
    #   B: 2000 - 2 = 1998 s -> starving; s0 (t = 3): 1997 s, ... s49 (t = 983): 1017 s
    # Oldest starving first: B (the largest age) takes the 8 free GPUs at 2000 and ends
    # at 2100.  (Before the fix the guard stopped at A, the heap top by arrival, whose
    # age counted from the reclaim: 2000 - 1500 < 1000; later A blocked everything and
    # B started at 1,002,573.)
    res = run(_queue_age_rows(), policy, **QUEUE_AGE_CFG)
    assert events_of(res, "B") == [(2.0, "arrive", 0), (2000.0, "start", 1),
                                   (2100.0, "finish", 0)]
    assert [e[:2] for e in events_of(res, "A")[:3]] == [(1.0, "arrive"), (1.0, "start"),
                                                       (1500.0, "preempt")]
    assert row(res, "B")["queuing_delay_s"] == 1998.0


def test_oldest_starving_job_first_under_sjf() -> None:
    # Same jobs under sjf (no loans): A waits from t = 1 on, B from t = 2.  At 2000 both
    # are starving (1999 s and 1998 s >= 1000): the oldest, A, starts at 2000 and runs
    # 1e6 s; B starts when A ends, at 1,002,000, and ends at 1,002,100.
    res = run(_queue_age_rows(), "sjf", n_training_servers=1, starvation_bound_s=1000.0)
    assert events_of(res, "A")[1] == (2000.0, "start", 1)
    assert events_of(res, "B")[1:] == [(1_002_000.0, "start", 1), (1_002_100.0, "finish", 0)]


def test_tiresias_requeues_by_first_arrival_not_by_preemption_time() -> None:
    # 2 servers; tiresias (levels at 3600 and 36000 GPU-s).  X (0, 8, 1e4) on s0,
    # Y (10, 8, 1e4) on s1; both cross 3600 GPU-s (level 1) at 450 s and 460 s.
    # Z1 (500, 8, 100): level 0, blocked; victims level > 0, latest arrival first: Y is
    # preempted at 500 (requeued at 500), Z1 runs [500, 600] on s1.
    # Z2 (550, 8, 100): blocked; victims: X (level 1; Z1 is level 0) -> X preempted at
    # 550, Z2 runs [550, 650] on s0.
    # At 600 Z1 ends: queue X (level 1, arrival 0, requeued 550), Y (level 1, arrival 10,
    # requeued 500): first arrival first, so X restarts at 600 (Y would by requeue time),
    # and Y at 650 when Z2 ends.
    rows = [
        dict(job_id="X", submit_time_s=0, duration_s=10_000, gpus=8),
        dict(job_id="Y", submit_time_s=10, duration_s=10_000, gpus=8),
        dict(job_id="Z1", submit_time_s=500, duration_s=100, gpus=8),
        dict(job_id="Z2", submit_time_s=550, duration_s=100, gpus=8),
    ]
    res = run(rows, "tiresias", n_training_servers=2)
    assert [e[:2] for e in events_of(res, "X")[:4]] == [
        (0.0, "arrive"), (0.0, "start"), (550.0, "preempt"), (600.0, "start")]
    assert [e[:2] for e in events_of(res, "Y")[:4]] == [
        (10.0, "arrive"), (10.0, "start"), (500.0, "preempt"), (650.0, "start")]
