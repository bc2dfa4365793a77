"""Measure every speed and memory figure the docs quote, in one run, and write docs/performance.md.

Usage::

    python bench/report.py                       # prints the page
    python bench/report.py --out docs/performance.md
    ARYL_PHILLY_CSV=path/to/philly.csv python bench/report.py --out docs/performance.md

The README and the other pages quote figures only from this page (a test
checks it), so they always come from one run on one machine.  Medians of
repeated calls (``time.perf_counter``); each replay runs in its own fresh
process, which also gives its peak memory (``ru_maxrss``).  Ratios compare
numbers measured in the same run.  Absolute times depend on the machine and on
its load, which the page records.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent

PHILLY = os.environ.get("ARYL_PHILLY_CSV", "")
#: (label, source, window, training servers, inference servers): the sizes
#: ``--training-servers auto --inference-servers auto`` gives (docs/simulator.md).
REPLAYS = [
    ("itp-c07", "itp-c07", None, 46, 16),
    ("Philly, busiest 15 days", "philly", "busiest-15d", 76, 26),
    ("Philly, full table", "philly", None, 94, 33),
]


def _bench(name: str) -> Any:
    """A benchmark module of this folder (for its seeded instance builders)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_s(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``fn()`` over ``repeats`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def reclaim_figures(repeats: int) -> dict[str, float]:
    from aryl.reclaiming import reclaim

    req = _bench("bench_reclaim").big_request()
    native = median_s(lambda: reclaim(req), repeats)
    reference = median_s(lambda: reclaim(req, backend="reference"), max(3, repeats // 20))
    return {"native_ms": 1e3 * native, "reference_ms": 1e3 * reference,
            "ratio": reference / native}


def mckp_figures(repeats: int) -> dict[str, float]:
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp

    from aryl.elastic import solve_mckp

    instance = _bench("bench_mckp").instance

    out: dict[str, float] = {}
    for kind, size in (("concave", "S"), ("concave", "M"), ("concave", "L"),
                       ("concave", "XL"), ("correlated", "L")):
        v, w, cap = instance(kind, size)
        out[f"{kind}_{size}_ms"] = 1e3 * median_s(lambda v=v, w=w, cap=cap:
                                                  solve_mckp(v, w, cap), repeats)
    for size in ("S", "M"):
        v, w, cap = instance("concave", size)
        ref = median_s(lambda v=v, w=w, cap=cap: solve_mckp(v, w, cap, backend="reference"), 3)
        out[f"reference_{size}_ratio"] = 1e3 * ref / out[f"concave_{size}_ms"]

    v, w, cap = instance("concave", "S")
    n, k = v.shape
    ok = ~np.isnan(v)
    c = -np.where(ok, v, 0.0).ravel()
    rows = np.zeros((n, n * k))
    for i in range(n):
        rows[i, i * k:(i + 1) * k] = 1.0
    cons = [LinearConstraint(rows, 0, 1), LinearConstraint(np.where(ok, w, 0).ravel()[None, :],
                                                           0, cap)]

    def solve_milp() -> None:
        milp(c, constraints=cons, integrality=np.ones(n * k), bounds=Bounds(0, ok.ravel() * 1.0),
             options={"mip_rel_gap": 0})

    out["milp_S_ratio"] = 1e3 * median_s(solve_milp, 3) / out["concave_S_ms"]
    return out


def _replay(case: tuple[str, str, str | None, int, int], policy: str) -> dict[str, float]:
    """One replay in this (fresh) process: load, synthesis and simulate times, peak RSS."""
    import resource

    from aryl.sim import SimConfig, simulate
    from aryl.traces import load_trace, synthesize_elastic

    _label, source, window, n_train, n_inf = case
    t = time.perf_counter()
    trace = load_trace(PHILLY if source == "philly" else source, window=window)
    load_s = time.perf_counter() - t
    trace = synthesize_elastic(trace, elastic_fraction=0.5, seed=0)
    cfg = SimConfig(n_training_servers=n_train, n_inference_servers=n_inf)
    t = time.perf_counter()
    res = simulate(trace, policy=policy, config=cfg)
    wall = time.perf_counter() - t
    return {"jobs": float(len(trace.jobs)), "load_s": load_s, "simulate_s": wall,
            "scheduler_s": float(res.summary["scheduler_time_s"]),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def replay_figures() -> list[dict[str, Any]]:
    ctx = mp.get_context("spawn")
    rows = []
    for case in REPLAYS:
        if case[1] == "philly" and not Path(PHILLY).is_file():
            continue
        for policy in ("fifo", "aryl"):
            with ctx.Pool(1) as pool:
                r = pool.apply(_replay, (case, policy))
            rows.append({"trace": case[0], "servers": f"{case[3]} + {case[4]}",
                         "policy": policy, **r})
    return rows


def render(rec: dict[str, float], mk: dict[str, float], replays: list[dict[str, Any]],
           meta: dict[str, str]) -> str:
    lines = [
        "# Performance: speed and memory, measured in one run",
        "",
        "<!-- Generated by `python bench/report.py --out docs/performance.md`; do not edit. "
        "README.md and the other pages quote their figures from here "
        "(tests/test_docs_selfcontained.py checks it). -->",
        "",
        f"Measured on {meta['date']} on {meta['machine']} (load average "
        f"{meta['load_before']} before the run, {meta['load_after']} after: the machine is "
        "shared, so absolute times vary from run to run; ratios within this page are "
        "measured side by side). Medians of repeated calls; each replay ran in a fresh "
        "process, whose peak memory is given.",
        "",
        "## Reclaim (`aryl.reclaim`)",
        "",
        "5,000 loaned servers of 8 GPUs, 20,000 jobs, return 1,000 servers "
        "(`bench/bench_reclaim.py`, `big_request`):",
        "",
        "| | median |",
        "|---|---|",
        f"| native (`reclaim(request)`, validated request) | {rec['native_ms']:.2f} ms |",
        f"| Python twin (`backend=\"reference\"`) | {rec['reference_ms']:.0f} ms |",
        f"| native speed-up | {rec['ratio']:.0f}x |",
        "",
        "## Elastic allocation (`aryl.solve_mckp`, exact)",
        "",
        "Seeded instances of `bench/bench_mckp.py` (concave JCT-reduction curves unless "
        "noted; jobs x options, capacity in GPUs):",
        "",
        "| instance | median |",
        "|---|---|",
        f"| 100 x 8, capacity 800 | {mk['concave_S_ms']:.2f} ms |",
        f"| 1,000 x 16, capacity 4,000 | {mk['concave_M_ms']:.2f} ms |",
        f"| 5,000 x 16, capacity 16,000 | {mk['concave_L_ms']:.1f} ms |",
        f"| 5,000 x 64, capacity 20,000 | {mk['concave_XL_ms']:.1f} ms |",
        f"| 5,000 x 16, strongly correlated | {mk['correlated_L_ms']:.1f} ms |",
        "",
        f"The textbook-DP Python twin is {mk['reference_S_ratio']:.0f}x slower at 100 jobs "
        f"and {mk['reference_M_ratio']:.0f}x at 1,000; `scipy.optimize.milp` (exact, "
        f"`mip_rel_gap=0`) {mk['milp_S_ratio']:,.0f}x slower at 100 jobs.",
        "",
        "## Replays (`aryl.simulate`)",
        "",
        "Half the jobs elastic (seed 0), the bundled inference profile, clusters sized "
        "as `--training-servers auto --inference-servers auto` does; `simulate` is the "
        "wall time of the replay (trace loading excluded), `scheduler` the policy's "
        "share of it.",
        "",
        "| trace | jobs | servers | policy | load trace | simulate | scheduler | peak memory |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in replays:
        lines.append(
            f"| {r['trace']} | {int(r['jobs']):,} | {r['servers']} | {r['policy']} | "
            f"{r['load_s']:.2f} s | {r['simulate_s']:.1f} s | {r['scheduler_s']:.1f} s | "
            f"{r['peak_mb']:,.0f} MB |")
    if not any(r["trace"].startswith("Philly") for r in replays):
        lines += ["", "(No Philly rows: `ARYL_PHILLY_CSV` was not set.)"]
    lines += ["", f"Command: `{meta['command']}`.", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="Write the page here.")
    ap.add_argument("--repeats", type=int, default=50, help="Calls per kernel median.")
    args = ap.parse_args(argv)
    load_before = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    rec = reclaim_figures(args.repeats)
    mk = mckp_figures(args.repeats)
    replays = replay_figures()
    meta = {
        "date": dt.date.today().isoformat(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
                   f"Python {platform.python_version()}",
        "load_before": load_before,
        "load_after": ", ".join(f"{x:.1f}" for x in os.getloadavg()),
        "command": "python bench/report.py" + (f" --out {args.out}" if args.out else ""),
    }
    page = render(rec, mk, replays, meta)
    if args.out is None:
        print(page)
        return
    from aryl._io import atomic_write_text

    atomic_write_text(args.out, page)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
