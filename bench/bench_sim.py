"""Benchmarks of the simulator: engine overhead (fifo) vs decision cost (aryl).

Two modes.

* pytest-benchmark (``python -m pytest bench/bench_sim.py --benchmark-only``):
  the first 3,000 jobs of ``itp-c07`` (half elastic, seed 0) on a proportionally
  smaller cluster, under ``fifo`` (engine overhead), ``aryl`` and
  ``elastic-greedy``, plus a 60-line pure-Python strict-FIFO simulator as the
  floor.  Compare medians within the ``sim`` group (same run).
* Full traces (``python bench/bench_sim.py``): ``fifo`` and ``aryl`` on
  ``itp-c07`` (46 + 16 servers), the full Philly table (96 + 16) and the
  Philly busiest 15-day window (80 + 16), with wall time, scheduler time, the
  peak RSS and a cProfile split of kernel vs engine time (``--profile``:
  kernel = ``solve_mckp``, the JCT table build and ``reclaim``).
  Cluster sizes: chosen so that ``fifo`` queues for thousands of seconds on
  average (docs/simulator.md).
"""

from __future__ import annotations

import functools
import heapq
import os
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from aryl.sim import SimConfig, simulate

# The Microsoft Philly job table is not bundled (no licence file): pass its path in
# $ARYL_PHILLY_CSV.
PHILLY = os.environ.get("ARYL_PHILLY_CSV", "")


@functools.cache
def itp_head(n: int = 3000) -> pd.DataFrame:
    from aryl.traces import load_trace, synthesize_elastic

    tr = load_trace("itp-c07")
    tr = tr.replace(jobs=tr.jobs.iloc[:n].reset_index(drop=True))
    return synthesize_elastic(tr, elastic_fraction=0.5, seed=0).jobs


def strict_fifo_floor(jobs: pd.DataFrame, n_gpus: int) -> float:
    """A minimal strict-FIFO simulator (GPU counts only, no placement): mean JCT."""
    sub = jobs["submit_time_s"].tolist()
    dur = jobs["duration_s"].tolist()
    gpus = jobs["gpus"].tolist()
    free = n_gpus
    running: list[tuple[float, int]] = []
    queue: list[int] = []
    total_jct = 0.0
    i, n = 0, len(sub)
    head = 0
    now = 0.0
    while i < n or running or head < len(queue):
        t_arr = sub[i] if i < n else float("inf")
        t_fin = running[0][0] if running else float("inf")
        if t_fin <= t_arr:
            now, j = heapq.heappop(running)
            free += gpus[j]
            total_jct += now - sub[j]
        else:
            now = t_arr
            queue.append(i)
            i += 1
        while head < len(queue) and gpus[queue[head]] <= free:
            j = queue[head]
            head += 1
            free -= gpus[j]
            heapq.heappush(running, (now + dur[j], j))
    return total_jct / max(n, 1)


def _cfg(n_train: int) -> SimConfig:
    return SimConfig(n_training_servers=n_train, n_inference_servers=4)


@pytest.mark.benchmark(group="sim")
def test_floor_strict_fifo(benchmark: Any) -> None:
    jobs = itp_head()
    mean = benchmark(strict_fifo_floor, jobs, 11 * 8)
    assert mean > 0


@pytest.mark.benchmark(group="sim")
@pytest.mark.parametrize("policy", ["fifo", "aryl", "elastic-greedy"])
def test_replay_itp_head(benchmark: Any, policy: str) -> None:
    jobs = itp_head()
    res = benchmark.pedantic(
        simulate, args=(jobs,), kwargs={"policy": policy, "config": _cfg(11)}, rounds=3,
        iterations=1,
    )
    assert res.summary["n_finished"] == len(jobs)
    benchmark.extra_info.update(
        mean_queuing_delay_s=res.summary["queuing_delay_s"]["mean"],
        scheduler_time_s=res.timing["scheduler_time_s"],
    )


# ---------------------------------------------------------------- full traces


def _load(name: str) -> pd.DataFrame:
    from aryl.traces import load_trace, synthesize_elastic

    if name == "itp-c07":
        tr = load_trace("itp-c07")
    elif name == "philly":
        tr = load_trace(PHILLY)
    else:
        tr = load_trace(PHILLY, window="busiest-15d")
    return synthesize_elastic(tr, elastic_fraction=0.5, seed=0).jobs


def _profile_split(jobs: pd.DataFrame, policy: str, cfg: SimConfig) -> dict[str, float]:
    import cProfile
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    simulate(jobs, policy=policy, config=cfg)
    pr.disable()
    st = pstats.Stats(pr)
    total = 0.0
    kernels = 0.0
    for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        if func in ("solve_mckp", "jct_reduction_table") and file.endswith("elastic.py"):
            kernels += ct
        # the simulator builds the JCT table with the kernel's own arithmetic, unchecked
        if func == "_table_unchecked" and file.endswith("adapters.py"):
            kernels += ct
        if func == "reclaim" and file.endswith("reclaiming.py"):
            kernels += ct
    total = st.total_tt  # type: ignore[attr-defined]
    return {"profiled_total_s": total, "kernels_s": kernels, "kernel_share": kernels / total}


def main(argv: list[str]) -> None:
    import resource

    if "-h" in argv or "--help" in argv:
        print("usage: python bench/bench_sim.py [--profile]\n\n"
              "fifo and aryl on itp-c07, the full Philly table and its busiest 15 days\n"
              "(Philly rows need $ARYL_PHILLY_CSV, the path of the Philly job table);\n"
              "--profile adds the kernel-vs-engine split of aryl's time.")
        return
    profile = "--profile" in argv
    cases = [("itp-c07", 46), ("philly", 96), ("philly-busiest-15d", 80)]
    if not PHILLY or not Path(PHILLY).is_file():
        print(f"Philly table not found at {PHILLY!r} (set ARYL_PHILLY_CSV): itp-c07 only")
        cases = cases[:1]
    rows = []
    for name, n_train in cases:
        jobs = _load(name)
        floor_t = time.perf_counter()
        strict_fifo_floor(jobs, n_train * 8)
        floor_t = time.perf_counter() - floor_t
        for policy in ("fifo", "aryl"):
            cfg = SimConfig(n_training_servers=n_train, n_inference_servers=16)
            t = time.perf_counter()
            res = simulate(jobs, policy=policy, config=cfg)
            wall = time.perf_counter() - t
            s = res.summary
            row = {
                "trace": name,
                "jobs": len(jobs),
                "servers": f"{n_train}+16",
                "policy": policy,
                "wall_s": round(wall, 2),
                "scheduler_s": round(res.timing["scheduler_time_s"], 2),
                "floor_fifo_s": round(floor_t, 2),
                "mean_qd_s": round(s["queuing_delay_s"]["mean"]),
                "p95_qd_s": round(s["queuing_delay_s"]["p95"]),
                "mean_jct_s": round(s["jct_s"]["mean"]),
                "usage": round(s["cluster_usage"], 3),
                "preemptions": s["n_preemptions"],
            }
            if profile and policy == "aryl":
                row.update({k: round(v, 3) for k, v in _profile_split(jobs, policy, cfg).items()})
            rows.append(row)
            print(row, flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(pd.DataFrame(rows).to_string(index=False))
    print(f"peak RSS {peak_mb:.0f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
