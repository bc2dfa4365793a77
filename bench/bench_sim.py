"""Benchmarks of the simulator: engine overhead (fifo) vs decision cost (aryl).

Two modes.

* pytest-benchmark (``python -m pytest bench/bench_sim.py --benchmark-only``):
  the first 3,000 jobs of ``itp-c07`` (half elastic, seed 0) on a proportionally
  smaller cluster, under ``fifo`` (engine overhead), ``aryl`` and
  ``elastic-greedy``, each with the native engine and the Python one (its
  reference twin), plus a 60-line pure-Python strict-FIFO simulator as the
  floor.  Compare medians within the ``sim`` group (same run).
* Full traces (``python bench/bench_sim.py [--engine python|native]``): ``fifo``
  and ``aryl`` with both engines (before: Python, after: native) on
  ``itp-c07`` (46 + 16 servers), the full Philly table (96 + 16) and the
  Philly busiest 15-day window (80 + 16), with wall time and its ratio to the
  strict-FIFO floor of the same trace (``x_floor``), scheduler time, the
  peak RSS and a cProfile split of kernel vs engine time (``--profile``:
  kernel = ``solve_mckp``, the JCT table build and ``reclaim``).
  Cluster sizes: chosen so that ``fifo`` queues for thousands of seconds on
  average (docs/simulator.md).
* A million jobs (``python bench/bench_sim.py --million [--jobs N] [--out DIR]``,
  several minutes, never part of the pytest run): a 1,000,000-job Philly-shaped
  trace (``bench/philly_shaped.py``, seed 0: arrivals resampled by hour of the
  week at the full table's average load, sizes and durations resampled from its
  rows; half the jobs elastic, seed 0) under ``aryl`` and ``fifo`` on 94 + 33
  servers.  Each policy runs in its own process, so its peak RSS is its own; the
  progress callback (every 2048 loop iterations, each one event instant) gives
  the wall and CPU time per 10,000 iterations from start to end (CPU time is
  the steadier figure on a shared machine), and the RSS along the way
  (``rss_loop_end_mb``: at the end of the event loop, before the results are
  built; ``peak_rss_mb`` includes building them).  Writes
  ``million-<policy>.csv`` (that series, with the RSS) and
  ``million-time-per-10k.png`` to ``--out`` (default ``results/bench-million/``).
"""

from __future__ import annotations

import functools
import heapq
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl._io import atomic_write_dataframe
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


def _cfg(n_train: int, engine: str = "native") -> SimConfig:
    return SimConfig(n_training_servers=n_train, n_inference_servers=4, engine=engine)


@pytest.mark.benchmark(group="sim")
def test_floor_strict_fifo(benchmark: Any) -> None:
    jobs = itp_head()
    mean = benchmark(strict_fifo_floor, jobs, 11 * 8)
    assert mean > 0


@pytest.mark.benchmark(group="sim")
@pytest.mark.parametrize("engine", ["native", "python"])
@pytest.mark.parametrize("policy", ["fifo", "aryl", "elastic-greedy"])
def test_replay_itp_head(benchmark: Any, policy: str, engine: str) -> None:
    jobs = itp_head()
    res = benchmark.pedantic(
        simulate, args=(jobs,), kwargs={"policy": policy, "config": _cfg(11, engine)},
        rounds=3, iterations=1,
    )
    assert res.summary["n_finished"] == len(jobs)
    benchmark.extra_info.update(
        mean_queuing_delay_s=res.summary["queuing_delay_s"]["mean"],
        scheduler_time_s=res.timing["scheduler_time_s"],
    )


# ---------------------------------------------------------------- full traces


@functools.cache
def itp_c07() -> pd.DataFrame:
    """The whole ``itp-c07`` trace, half elastic (seed 0), as docs/performance.md uses it."""
    return _load("itp-c07")


def _timed_replay(jobs: pd.DataFrame, policy: str, scheduler_s: list[float]) -> Any:
    res = simulate(jobs, policy=policy, config=SimConfig(engine="native"))
    scheduler_s.append(float(res.timing["scheduler_time_s"]))
    return res


@pytest.mark.benchmark(group="sim-itp-c07")
@pytest.mark.parametrize("policy", ["fifo", "aryl"])
def test_replay_itp_c07_native(benchmark: Any, policy: str) -> None:
    """The whole itp-c07 trace on the default cluster (46 + 16 servers), native engine:
    ``aryl``'s median against ``fifo``'s in the same run is the cost of the pass
    (``aryl_fifo_ratio`` interleaves the two in one process and prints the ratio)."""
    jobs = itp_c07()
    sched: list[float] = []
    res = benchmark.pedantic(_timed_replay, args=(jobs, policy, sched), rounds=5, iterations=1,
                             warmup_rounds=1)
    assert res.summary["n_finished"] == len(jobs)
    benchmark.extra_info.update(scheduler_time_s=float(np.median(sched)))


def aryl_fifo_ratio(rounds: int = 7) -> dict[str, float]:
    """``aryl`` against ``fifo`` on the whole itp-c07 (46 + 16 servers, native engine),
    in this process, the two interleaved round by round (after one warm-up of each) so
    that a load drifting over the run weighs on both.

    Returns
    -------
    dict
        Medians over ``rounds`` of ``simulate`` wall time (``<policy>_simulate_ms``,
        trace loading excluded) and of the time in the passes
        (``<policy>_scheduler_ms``), and their ratios aryl / fifo
        (``simulate_ratio``, ``scheduler_ratio``).
    """
    jobs = itp_c07()
    wall: dict[str, list[float]] = {"fifo": [], "aryl": []}
    sched: dict[str, list[float]] = {"fifo": [], "aryl": []}
    for r in range(rounds + 1):
        for policy in ("fifo", "aryl") if r % 2 else ("aryl", "fifo"):
            t = time.perf_counter()
            s: list[float] = []
            _timed_replay(jobs, policy, s)
            if r:  # round 0 warms up
                wall[policy].append(time.perf_counter() - t)
                sched[policy].append(s[0])
    out = {}
    for policy in ("fifo", "aryl"):
        out[f"{policy}_simulate_ms"] = 1e3 * float(np.median(wall[policy]))
        out[f"{policy}_scheduler_ms"] = 1e3 * float(np.median(sched[policy]))
    out["simulate_ratio"] = out["aryl_simulate_ms"] / out["fifo_simulate_ms"]
    out["scheduler_ratio"] = out["aryl_scheduler_ms"] / out["fifo_scheduler_ms"]
    return out



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


# ---------------------------------------------------------------- a million jobs

MILLION_SERVERS = (94, 33)  # training + inference, as for the full Philly table
ITER_PER_CALL = 2048  # the simulator's progress callback period (loop iterations)


def _rss_mb() -> float:
    """Current resident set size in MB (Linux /proc; NaN elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return float("nan")


def _million_case(policy: str, n_jobs: int, out: Path) -> dict[str, Any]:
    """One policy on the Philly-shaped trace, in this process: summary + series CSV."""
    import resource

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import philly_shaped
    from aryl.traces import Trace, synthesize_elastic

    t = time.perf_counter()
    jobs = philly_shaped.generate(n_jobs, 0, PHILLY)
    jobs = synthesize_elastic(Trace(jobs=jobs), elastic_fraction=0.5, seed=0).jobs
    gen_s = time.perf_counter() - t
    rss_before = _rss_mb()
    series: list[tuple[float, float, int, float, float]] = []
    start, start_cpu = time.perf_counter(), time.process_time()

    def progress(done: int, n: int, sim_time_s: float) -> None:
        series.append((time.perf_counter() - start, time.process_time() - start_cpu, done,
                       sim_time_s, _rss_mb()))

    n_train, n_inf = MILLION_SERVERS
    cfg = SimConfig(n_training_servers=n_train, n_inference_servers=n_inf)
    res = simulate(jobs, policy=policy, config=cfg, progress=progress)
    wall = time.perf_counter() - start
    cpu = time.process_time() - start_cpu
    frame = pd.DataFrame(series, columns=["wall_s", "cpu_s", "jobs_done", "sim_time_s",
                                          "rss_mb"])
    # Every call but the last closes a block of ITER_PER_CALL loop iterations; the
    # first block also holds the set-up (job table, engine) and the last call comes
    # at the end, after a partial block: the series per 10,000 iterations leaves both
    # out (NaN).
    iterations = np.arange(1, len(frame) + 1, dtype=np.float64) * ITER_PER_CALL
    iterations[-1] = np.nan
    frame.insert(0, "iterations", iterations)
    scale = 10_000 / ITER_PER_CALL
    frame["s_per_10k_iter"] = frame["wall_s"].diff() * scale
    frame["cpu_s_per_10k_iter"] = frame["cpu_s"].diff() * scale
    frame.loc[frame.index[-1], ["s_per_10k_iter", "cpu_s_per_10k_iter"]] = np.nan
    per_10k = frame["s_per_10k_iter"].dropna()
    cpu_10k = frame["cpu_s_per_10k_iter"].dropna()
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_dataframe(frame, out / f"million-{policy}.csv")
    s = res.summary
    tenth = max(1, len(per_10k) // 10)
    if per_10k.empty:  # a tiny trace: fewer than three progress calls
        per_10k = cpu_10k = pd.Series([np.nan])
    return {
        "policy": policy,
        "jobs": n_jobs,
        "servers": f"{n_train}+{n_inf}",
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "scheduler_s": round(res.timing["scheduler_time_s"], 1),
        "generate_s": round(gen_s, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rss_before_sim_mb": round(rss_before),
        "rss_loop_end_mb": round(float(frame["rss_mb"].iloc[-1])),
        "first_block_s": round(float(frame["wall_s"].iloc[0]), 1),
        "iterations": int((len(frame) - 1) * ITER_PER_CALL),  # whole blocks of 2048
        "s_per_10k_iter_first_10pct": round(float(per_10k.iloc[:tenth].median()), 3),
        "s_per_10k_iter_last_10pct": round(float(per_10k.iloc[-tenth:].median()), 3),
        "cpu_s_per_10k_iter_first_10pct": round(float(cpu_10k.iloc[:tenth].median()), 3),
        "cpu_s_per_10k_iter_last_10pct": round(float(cpu_10k.iloc[-tenth:].median()), 3),
        "n_finished": s["n_finished"],
        "mean_qd_s": round(s["queuing_delay_s"]["mean"]),
        "mean_jct_s": round(s["jct_s"]["mean"]),
    }


def _plot_million(out: Path, policies: list[str], n_jobs: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for policy in policies:
        f = pd.read_csv(out / f"million-{policy}.csv")
        line = ax.plot(f["iterations"] / 1e6, f["s_per_10k_iter"], label=f"{policy} (wall)",
                       lw=0.8)
        ax.plot(f["iterations"] / 1e6, f["cpu_s_per_10k_iter"], label=f"{policy} (CPU)",
                lw=0.8, ls="--", color=line[0].get_color())
    ax.set_xlabel("loop iterations (millions)")
    ax.set_ylabel("seconds per 10,000 iterations")
    n_train, n_inf = MILLION_SERVERS
    ax.set_title(f"{n_jobs:,}-job Philly-shaped trace, {n_train} + {n_inf} servers")
    ax.legend()
    fig.tight_layout()
    path = out / "million-time-per-10k.png"
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def million(argv: list[str]) -> None:
    """``--million``: each policy in a fresh process (its own peak RSS), then a table."""
    n_jobs = int(argv[argv.index("--jobs") + 1]) if "--jobs" in argv else 1_000_000
    out = Path("results") / "bench-million"
    if "--out" in argv:
        out = Path(argv[argv.index("--out") + 1])
    policies = ["aryl", "fifo"]
    if not PHILLY or not Path(PHILLY).is_file():
        print(f"Philly table not found at {PHILLY!r} (set ARYL_PHILLY_CSV)")
        return
    rows = []
    for policy in policies:
        cmd = [sys.executable, __file__, "--million-case", policy, "--jobs", str(n_jobs),
               "--out", str(out)]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(row, flush=True)
        rows.append(row)
    print(pd.DataFrame(rows).to_string(index=False))
    print(f"series and plot: {_plot_million(out, policies, n_jobs)}")


def main(argv: list[str]) -> None:
    import resource

    if "-h" in argv or "--help" in argv:
        print("usage: python bench/bench_sim.py [--profile] [--engine python|native]\n"
              "       python bench/bench_sim.py --million [--jobs N] [--out DIR]\n"
              "       python bench/bench_sim.py --ratio\n\n"
              "fifo and aryl on itp-c07, the full Philly table and its busiest 15 days,\n"
              "with the Python engine (before) and the native one (after), each against\n"
              "the 60-line strict-FIFO floor timed in the same process\n"
              "(Philly rows need $ARYL_PHILLY_CSV, the path of the Philly job table);\n"
              "--profile adds the kernel-vs-engine split of aryl's time.\n"
              "--million: aryl and fifo on a 1,000,000-job Philly-shaped trace, 94 + 33\n"
              "servers (wall time, peak RSS, time per 10,000 loop iterations; minutes).\n"
              "--ratio: aryl / fifo on itp-c07 (native engine, simulate and scheduler\n"
              "time), interleaved in this process.")
        return
    if "--million-case" in argv:
        policy = argv[argv.index("--million-case") + 1]
        n_jobs = int(argv[argv.index("--jobs") + 1])
        out = Path(argv[argv.index("--out") + 1])
        print(json.dumps(_million_case(policy, n_jobs, out)))
        return
    if "--million" in argv:
        million(argv)
        return
    if "--ratio" in argv:
        r = aryl_fifo_ratio()
        print(f"itp-c07, 46 + 16 servers, native engine, median of 7 interleaved rounds:\n"
              f"simulate: aryl {r['aryl_simulate_ms']:.0f} ms, fifo {r['fifo_simulate_ms']:.0f} ms,"
              f" ratio {r['simulate_ratio']:.2f}\n"
              f"scheduler: aryl {r['aryl_scheduler_ms']:.1f} ms, fifo "
              f"{r['fifo_scheduler_ms']:.1f} ms, ratio {r['scheduler_ratio']:.1f}")
        return
    profile = "--profile" in argv
    engines = ["python", "native"]
    if "--engine" in argv:
        engines = [argv[argv.index("--engine") + 1]]
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
        for policy, engine in [(p, e) for p in ("fifo", "aryl") for e in engines]:
            cfg = SimConfig(n_training_servers=n_train, n_inference_servers=16, engine=engine)
            t = time.perf_counter()
            res = simulate(jobs, policy=policy, config=cfg)
            wall = time.perf_counter() - t
            s = res.summary
            row = {
                "trace": name,
                "jobs": len(jobs),
                "servers": f"{n_train}+16",
                "policy": policy,
                "engine": engine,
                "wall_s": round(wall, 2),
                "x_floor": round(wall / floor_t, 1),
                "scheduler_s": round(res.timing["scheduler_time_s"], 2),
                "floor_fifo_s": round(floor_t, 2),
                "mean_qd_s": round(s["queuing_delay_s"]["mean"]),
                "p95_qd_s": round(s["queuing_delay_s"]["p95"]),
                "mean_jct_s": round(s["jct_s"]["mean"]),
                "usage": round(s["cluster_usage"], 3),
                "preemptions": s["n_preemptions"],
            }
            if profile and policy == "aryl" and engine == "python":
                row.update({k: round(v, 3) for k, v in _profile_split(jobs, policy, cfg).items()})
            rows.append(row)
            print(row, flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(pd.DataFrame(rows).to_string(index=False))
    print(f"peak RSS {peak_mb:.0f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
