"""Every measure of the summary, computed by hand on a mixed cluster, both engines.

The cluster: two training pools of different sizes (``small``: 1 x 4-GPU V100,
server 0; ``big``: 1 x 8-GPU V100, server 1) and an inference pool of another
size and type (``inf``: 2 x 2-GPU T4, servers 2 and 3) whose GPUs run at half a
V100's speed (``loaned_gpu_speed = 0.5``, parametric speeds).  A measure whose
denominator took one server size (the first pool's, the training servers' for
loans ...) gives another value here; a range check would not see it.

The inference demand is 1 server all the time: server 2 serves, server 3 is idle
and loanable (``loan_reserve_servers = 0``).  Jobs (rigid, one worker each:
``g`` = the largest divisor of the GPUs that fits the 8-GPU server):

======  ======  ====  ========
job     submit  GPUs  duration
======  ======  ====  ========
A       0       8     100
B       0       4     200
C       10      2     40
D       20      8     30
======  ======  ====  ========

``aryl`` / ``aryl-no-elastic`` (loans, rigid jobs):

* t = 0: SJF order A (100 s), B (200 s).  A's 8-GPU worker fits only server 1;
  B's 4-GPU worker goes best fit on server 0 (4 free).  Server 3 is offered,
  unused, not borrowed.
* t = 10: C has no training GPU.  On the loaned T4 (speed 0.5) it ends at
  10 + 40 / 0.5 = 90; waiting for the V100s it would end at 100 + 40 = 140
  (A frees server 1 at 100): server 3 is borrowed, C runs there 10 .. 90.
* t = 20: D (8 GPUs) fits no server: it waits (nothing left to lend: 1 server
  serves, 1 is lent).
* t = 90: C finishes; server 3 has no worker and is returned.
* t = 100: A finishes; D starts on server 1, ends at 130.  t = 200: B finishes.

``fifo`` (no loans): A and B as above; C (first in arrival order) waits until A
ends at 100 and goes on server 1 (the only server with 2 free GPUs) 100 .. 140;
D needs all of server 1 and waits for C: 140 .. 170.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl.sim import SimConfig, SimResult, simulate
from aryl.traces.inference import InferenceDemand

ENGINES = ("native", "python")

_JOBS = pd.DataFrame({
    "job_id": ["A", "B", "C", "D"],
    "submit_time_s": [0.0, 0.0, 10.0, 20.0],
    "duration_s": [100.0, 200.0, 40.0, 30.0],
    "gpus": [8, 4, 2, 8],
})


def replay(spec: Path, policy: str, engine: str) -> SimResult:
    """The replay of the module docstring on ``spec`` (the ``mixed_cluster`` fixture's, T4s)."""
    cfg = SimConfig(cluster=str(spec), speed_model="parametric", loaned_gpu_speed=0.5,
                    loan_reserve_servers=0, loan_cooldown_s=0.0, timeseries_step_s=50.0,
                    engine=engine, check=True)
    demand = InferenceDemand(times_s=np.array([0.0]), servers_needed=np.array([1]),
                             n_servers=2)
    return simulate(_JOBS, policy=policy, config=cfg, inference=demand)


def stats(x: list[float]) -> dict[str, float]:
    """mean, p50, p95, p99 (numpy's linear interpolation, written out), max."""
    s = sorted(x)
    n = len(s)

    def q(p: float) -> float:
        pos = p * (n - 1)
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        return s[lo] + (pos - lo) * (s[hi] - s[lo])

    return {"mean": sum(s) / n, "p50": q(0.5), "p95": q(0.95), "p99": q(0.99), "max": s[-1]}


def close(d: dict[str, Any], want: dict[str, float]) -> None:
    assert set(d) == set(want)
    for k, v in want.items():
        assert d[k] == pytest.approx(v, rel=1e-12, abs=1e-9), k


# ------------------------------------------------------------------ aryl (loans)

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("policy", ["aryl", "aryl-no-elastic"])
def test_every_measure_with_a_loan_on_a_mixed_cluster(mixed_cluster: Callable[..., Path],
                                                      policy: str, engine: str) -> None:
    res = replay(mixed_cluster("T4"), policy, engine)
    jobs = res.jobs.set_index("job_id")
    assert jobs["status"].tolist() == ["finished"] * 4
    assert jobs["first_start_s"].to_dict() == {"A": 0.0, "B": 0.0, "C": 10.0, "D": 100.0}
    assert jobs["finish_s"].to_dict() == {"A": 100.0, "B": 200.0, "C": 90.0, "D": 130.0}
    # per job GPU-seconds: A 8 x 100, B 4 x 200, C 2 x 80 (on the T4), D 8 x 30
    assert jobs["gpu_s"].to_dict() == {"A": 800.0, "B": 800.0, "C": 160.0, "D": 240.0}
    assert jobs["main_pool"].to_dict() == {"A": "big", "B": "small", "C": "inf", "D": "big"}
    s = res.summary
    assert (s["n_jobs"], s["n_finished"], s["n_unfinished"], s["n_infeasible"]) == (4, 4, 0, 0)
    assert (s["start_s"], s["end_s"], s["makespan_s"]) == (0.0, 200.0, 200.0)
    # JCT: A 100, B 200, C 90 - 10 = 80, D 130 - 20 = 110
    # sorted 80, 100, 110, 200: p50 = 105, p95 at 2.85 = 110 + 0.85 x 90 = 186.5,
    # p99 at 2.97 = 110 + 0.97 x 90 = 197.3, mean 490 / 4 = 122.5
    close(s["jct_s"], {"mean": 122.5, "p50": 105.0, "p95": 186.5, "p99": 197.3, "max": 200.0})
    assert stats([100.0, 200.0, 80.0, 110.0]) == pytest.approx(
        {"mean": 122.5, "p50": 105.0, "p95": 186.5, "p99": 197.3, "max": 200.0})
    # queuing delay (= wait: nobody is preempted): only D, 100 - 20 = 80;
    # sorted 0, 0, 0, 80: p95 = 0.85 x 80 = 68, p99 = 0.97 x 80 = 77.6, mean 20
    delay = {"mean": 20.0, "p50": 0.0, "p95": 68.0, "p99": 77.6, "max": 80.0}
    close(s["queuing_delay_s"], delay)
    close(s["wait_s"], delay)
    assert s["share_jobs_waited"] == 0.25
    assert s["share_jobs_waited_total"] == 0.25
    # GPU-seconds allocated: 800 + 800 + 160 + 240 = 2,000, 160 of them on the loan
    assert s["gpu_s_allocated"] == pytest.approx(2000.0)
    assert s["gpu_s_allocated_on_loans"] == pytest.approx(160.0)
    # available: the training servers' 4 + 8 = 12 GPUs x 200 s = 2,400, plus the
    # loaned 2-GPU server x 80 s = 160 (not 80 s x 8 or x 4 GPUs): 2,560
    assert s["gpu_s_available"] == pytest.approx(2560.0)
    assert s["cluster_usage"] == pytest.approx(2000.0 / 2560.0)  # 0.78125
    assert s["training_usage_no_loans"] == pytest.approx(1840.0 / 2400.0)
    assert s["loan_usage"] == pytest.approx(160.0 / 160.0)
    # useful work, reference-GPU seconds (duration x traced GPUs): A 800, B 800,
    # C 40 x 2 = 80 (80 s on a half-speed T4 does 40 s of work), D 240: 1,920
    assert s["useful_gpu_s"] == pytest.approx(1920.0)
    assert s["goodput"] == pytest.approx(1920.0 / 2560.0)  # 0.75
    # inference: 1 of 2 servers serves all the time; server 3 lent 80 s of 200
    assert s["inference_utilisation"] == pytest.approx(200.0 / 400.0)
    assert s["inference_utilisation_with_loans"] == pytest.approx((200.0 + 80.0) / 400.0)
    assert s["mean_loaned_servers"] == pytest.approx(80.0 / 200.0)
    assert (s["n_loans"], s["n_loan_returns"], s["n_reclaims"]) == (1, 1, 0)
    assert (s["n_preemptions"], s["n_reclaim_preemptions"], s["n_scale_in"],
            s["n_scale_out"], s["n_moves"]) == (0, 0, 0, 0, 0)
    cl = s["cluster"]
    assert (cl["n_training_servers"], cl["n_inference_servers"]) == (2, 2)
    assert (cl["training_gpus"], cl["inference_gpus"]) == (12, 4)
    # per pool: small 4 GPUs x 200 s = 800 available, B's 800 allocated and useful;
    # big 8 x 200 = 1,600, A + D = 1,040; inf: available only on loan, 2 x 80 = 160,
    # C's 160 allocated, 80 useful.  JCT by main pool: small B 200, big A 100 and
    # D 110, inf C 80.
    pools = {p["pool"]: p for p in s["pools"]}
    want = {
        "small": ("training", "V100", 1, 800.0, 800.0, 800.0, 1, [200.0]),
        "big": ("training", "V100", 1, 1600.0, 1040.0, 1040.0, 2, [100.0, 110.0]),
        "inf": ("inference", "T4", 2, 160.0, 160.0, 80.0, 1, [80.0]),
    }
    assert list(pools) == ["small", "big", "inf"]
    for name, (role, gtype, n_srv, avail, alloc, useful, n_main, jct) in want.items():
        p = pools[name]
        assert (p["role"], p["gpu_type"], p["n_servers"]) == (role, gtype, n_srv), name
        assert p["gpu_s_available"] == pytest.approx(avail), name
        assert p["gpu_s_allocated"] == pytest.approx(alloc), name
        assert p["usage"] == pytest.approx(alloc / avail), name
        assert p["useful_gpu_s"] == pytest.approx(useful), name
        assert p["goodput"] == pytest.approx(useful / avail), name
        assert p["n_jobs_main"] == n_main, name
        close(p["jct_s"], stats(jct))
    # time series every 50 s, the value holding at each step time:
    #   t    queue  busy GPUs          loaned  running
    #   0    0      8 + 4 = 12         0       A, B
    #   50   1 (D)  12 + 2 (C) = 14    1       A, B, C
    #   100  0      4 + 8 (D) = 12     0       B, D
    #   150  0      4                  0       B
    #   200  0      0                  0       -
    ts = res.timeseries
    assert ts["time_s"].tolist() == [0.0, 50.0, 100.0, 150.0, 200.0]
    assert ts["queue_length"].tolist() == [0, 1, 0, 0, 0]
    assert ts["busy_gpus"].tolist() == [12, 14, 12, 4, 0]
    assert ts["loaned_servers"].tolist() == [0, 1, 0, 0, 0]
    assert ts["running_jobs"].tolist() == [2, 3, 2, 1, 0]
    assert ts["inference_servers_needed"].tolist() == [1, 1, 1, 1, 1]
    ev = res.events
    loans = ev[ev["event"].isin(["loan", "loan_return"])]
    assert loans[["time_s", "event", "workers"]].values.tolist() == [
        [10.0, "loan", 3], [90.0, "loan_return", 3]]


# ------------------------------------------------------------------ fifo (no loans)

@pytest.mark.parametrize("engine", ENGINES)
def test_every_measure_without_loans_on_a_mixed_cluster(mixed_cluster: Callable[..., Path],
                                                         engine: str) -> None:
    res = replay(mixed_cluster("T4"), "fifo", engine)
    jobs = res.jobs.set_index("job_id")
    assert jobs["first_start_s"].to_dict() == {"A": 0.0, "B": 0.0, "C": 100.0, "D": 140.0}
    assert jobs["finish_s"].to_dict() == {"A": 100.0, "B": 200.0, "C": 140.0, "D": 170.0}
    assert jobs["main_pool"].to_dict() == {"A": "big", "B": "small", "C": "big", "D": "big"}
    s = res.summary
    # JCT 100, 200, 130, 150: sorted 100, 130, 150, 200; p50 140, p95 at 2.85 =
    # 150 + 0.85 x 50 = 192.5, p99 at 2.97 = 198.5, mean 580 / 4 = 145
    close(s["jct_s"], {"mean": 145.0, "p50": 140.0, "p95": 192.5, "p99": 198.5, "max": 200.0})
    # delays 0, 0, 90, 120: p50 45, p95 at 2.85 = 90 + 0.85 x 30 = 115.5, p99 119.1
    close(s["queuing_delay_s"],
          {"mean": 52.5, "p50": 45.0, "p95": 115.5, "p99": 119.1, "max": 120.0})
    assert s["share_jobs_waited"] == 0.5
    # 800 + 800 + 80 + 240 = 1,920 GPU-seconds on 12 training GPUs x 200 s = 2,400
    assert s["gpu_s_available"] == pytest.approx(2400.0)
    assert s["cluster_usage"] == pytest.approx(1920.0 / 2400.0)
    assert s["training_usage_no_loans"] == pytest.approx(1920.0 / 2400.0)
    assert s["loan_usage"] is None
    assert s["goodput"] == pytest.approx(1920.0 / 2400.0)  # every job on V100s at its size
    assert s["inference_utilisation"] == pytest.approx(0.5)
    assert s["inference_utilisation_with_loans"] == pytest.approx(0.5)
    assert s["mean_loaned_servers"] == 0.0
    pools = {p["pool"]: p for p in s["pools"]}
    # big: 800 (A) + 80 (C) + 240 (D) = 1,120 of 1,600; the inference pool lent nothing
    assert pools["big"]["usage"] == pytest.approx(1120.0 / 1600.0)
    assert pools["small"]["usage"] == pytest.approx(1.0)
    assert pools["inf"]["gpu_s_available"] == 0.0
    assert pools["inf"]["usage"] is None
    assert pools["inf"]["goodput"] is None
    assert pools["inf"]["n_jobs_main"] == 0
    close(pools["big"]["jct_s"], stats([100.0, 130.0, 150.0]))
    # t = 0: A, B (12 GPUs), C and D not arrived; 50: C, D queued; 100: B + C
    # (4 + 2), D queued; 150: B + D (12); 200: nothing
    ts = res.timeseries
    assert ts["queue_length"].tolist() == [0, 2, 1, 0, 0]
    assert ts["busy_gpus"].tolist() == [12, 12, 6, 12, 0]
    assert ts["running_jobs"].tolist() == [2, 2, 2, 2, 0]
    assert ts["loaned_servers"].tolist() == [0, 0, 0, 0, 0]
