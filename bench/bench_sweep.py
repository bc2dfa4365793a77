"""Benchmarks of `aryl sweep`: its overhead per run, and Ray against the process pool.

Two modes.

* pytest-benchmark (``python -m pytest bench/bench_sweep.py --benchmark-only``):
  a 4-run sweep of ``itp-c10`` in this process (group ``sweep``), a smoke
  test of the machinery; ``ARYL_BENCH_FULL=1`` adds the same sweep on a
  2-process pool.
* Figures (``python bench/bench_sweep.py [--runs N] [--no-ray]``), on ``itp-c07``
  (46 + 16 servers, fifo and aryl, seeds 0..N/2-1), all in one run:

  1. **overhead per run**: the sweep executed in this process (``-j 1``): wall
     time of the execution phase minus the sum of the replays' own time
     (:func:`aryl.sim.simulate`), per run, as a share of the mean replay.  What
     remains is the sweep's own work: elastic synthesis, inference demand,
     Parquet encoding and the atomic writes of the row, per-job table and time
     series.  The process pool adds its start-up once per sweep (reported).
  2. **Ray vs pool on 2 cores**: the same runs on a 2-process pool and on a
     local Ray with 2 CPUs (started before the timing, as a cluster one
     connects to would be; its start-up is reported apart); the ratio of the
     two execution times.

Timings vary with the machine's load: compare the figures of one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from aryl.sweep import parse_spec, read_runs, run_sweep

FULL = os.environ.get("ARYL_BENCH_FULL", "") not in ("", "0")

SMALL = {"grid": {"trace": "itp-c10", "policy": ["fifo", "aryl"], "seed": [0, 1],
                  "n_training_servers": 2, "n_inference_servers": 2}}


def itp_c07(n_runs: int) -> dict[str, Any]:
    """fifo and aryl on itp-c07 (the simulator's default 46 + 16 servers), n_runs in all."""
    return {"grid": {"trace": "itp-c07", "policy": ["fifo", "aryl"],
                     "seed": list(range(max(1, n_runs // 2))),
                     "n_training_servers": 46, "n_inference_servers": 16}}


@pytest.mark.benchmark(group="sweep")
def test_sweep_in_process(benchmark: Any, tmp_path: Path) -> None:
    spec = parse_spec(SMALL)
    counter = iter(range(1_000_000))

    def once() -> Any:
        return run_sweep(spec, tmp_path / f"s{next(counter)}", n_procs=1)

    outcome = benchmark.pedantic(once, rounds=1, iterations=1)
    assert (outcome.n_done, outcome.failures) == (4, [])


@pytest.mark.benchmark(group="sweep")
@pytest.mark.skipif(not FULL, reason="spawns a process pool; set ARYL_BENCH_FULL=1")
def test_sweep_process_pool(benchmark: Any, tmp_path: Path) -> None:
    spec = parse_spec(SMALL)
    counter = iter(range(1_000_000))

    def once() -> Any:
        return run_sweep(spec, tmp_path / f"p{next(counter)}", n_procs=2)

    outcome = benchmark.pedantic(once, rounds=1, iterations=1)
    assert (outcome.n_done, outcome.failures) == (4, [])


def _timed(spec: Any, root: Path, **kwargs: Any) -> Any:
    if root.exists():
        shutil.rmtree(root)
    t0 = time.perf_counter()
    outcome = run_sweep(spec, root, **kwargs)
    outcome.total_s = time.perf_counter() - t0  # type: ignore[attr-defined]
    assert outcome.failures == [], outcome.failures
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="runs per sweep (default 8)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray comparison")
    args = parser.parse_args(argv)
    spec = parse_spec(itp_c07(args.runs))
    n = len(spec.requests)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # 1. overhead per run, in this process (nothing else shares the core)
        s = _timed(spec, root / "serial", n_procs=1)
        per_run = (s.elapsed_s - s.replay_s) / n
        driver = (s.elapsed_s - s.run_s) / n
        print(f"itp-c07, {n} runs (fifo and aryl, 46 + 16 servers)")
        print(f"  in-process: execution {s.elapsed_s:.2f} s, replays {s.replay_s:.2f} s; "
              f"sweep overhead {per_run * 1e3:.0f} ms per run = "
              f"{100 * per_run / (s.replay_s / n):.2f}% of the mean replay "
              f"({s.replay_s / n:.2f} s)")
        print(f"    of which in the driver (atomic writes, progress): {driver * 1e3:.0f} ms")
        runs = read_runs(root / "serial")
        for pol, grp in runs.groupby("policy", sort=False):
            worker = float((grp["run_s"] - grp["replay_s"]).mean())
            replay = float(grp["replay_s"].mean())
            print(f"    {pol:>5}: replay {replay:.3f} s; worker overhead (synthesis, "
                  f"inference, Parquet encoding) {worker * 1e3:.0f} ms; with the driver's "
                  f"{100 * (worker + driver) / replay:.2f}% of the replay")
        # 2. pool vs Ray, 2 workers each
        p = _timed(spec, root / "pool", n_procs=2)
        print(f"  process pool, 2 workers: execution {p.elapsed_s:.2f} s (includes spawning "
              f"the workers), {s.elapsed_s / p.elapsed_s:.2f}x the in-process speed")
        if args.no_ray:
            return 0
        try:
            import logging

            import ray
        except ImportError:
            print("  Ray: not installed (pip install 'aryl[ray]')")
            return 0
        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
        init_s = time.perf_counter() - t0
        try:
            r = _timed(spec, root / "ray", n_procs=2, ray="local")
        finally:
            ray.shutdown()
        print(f"  Ray, 2 CPUs: execution {r.elapsed_s:.2f} s (ray.init {init_s:.1f} s before, "
              "not counted)")
        print(f"  Ray / pool execution time: {r.elapsed_s / p.elapsed_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
