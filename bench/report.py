"""Measure every speed and memory figure the docs quote, in one run, and write docs/performance.md.

Usage::

    python bench/report.py                       # prints the page
    python bench/report.py --out docs/performance.md
    ARYL_PHILLY_CSV=path/to/philly.csv python bench/report.py --out docs/performance.md
    ARYL_PHILLY_CSV=... python bench/report.py --million 1000000 --ten-million 10000000 \
        --out docs/performance.md            # + the million-job sections (minutes)
    ARYL_PHILLY_CSV=... python bench/report.py --only million,ten-million \
        --out docs/performance.md            # only those sections, the rest kept

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


def _replay(case: tuple[str, str, str | None, int, int], policy: str,
            engine: str) -> dict[str, float]:
    """One replay in this (fresh) process: load, synthesis and simulate times, peak RSS."""
    import resource

    import aryl.sim.adapters
    import aryl.sim.engine
    import aryl.sim.native  # noqa: F401  (imports are not part of the replay's time)
    from aryl.sim import SimConfig, simulate
    from aryl.traces import load_trace, synthesize_elastic

    _label, source, window, n_train, n_inf = case
    t = time.perf_counter()
    trace = load_trace(PHILLY if source == "philly" else source, window=window)
    load_s = time.perf_counter() - t
    trace = synthesize_elastic(trace, elastic_fraction=0.5, seed=0)
    cfg = SimConfig(n_training_servers=n_train, n_inference_servers=n_inf, engine=engine)
    t = time.perf_counter()
    res = simulate(trace, policy=policy, config=cfg)
    wall = time.perf_counter() - t
    return {"jobs": float(len(trace.jobs)), "load_s": load_s, "simulate_s": wall,
            "scheduler_s": float(res.timing["scheduler_time_s"]),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def replay_figures() -> list[dict[str, Any]]:
    """Each replay in a fresh process, with the Python engine (before: the engine of
    the reference twin) and the native one (after)."""
    ctx = mp.get_context("spawn")
    rows = []
    for case in REPLAYS:
        if case[1] == "philly" and not Path(PHILLY).is_file():
            continue
        for policy in ("fifo", "aryl"):
            for engine in ("python", "native"):
                with ctx.Pool(1) as pool:
                    r = pool.apply(_replay, (case, policy, engine))
                rows.append({"trace": case[0], "servers": f"{case[3]} + {case[4]}",
                             "policy": policy, "engine": engine, **r})
    return rows


def _floor_case(repeats: int) -> dict[str, float]:
    """aryl (native engine) on itp-c07 against the 60-line strict-FIFO floor, one process."""
    import aryl.sim.adapters
    import aryl.sim.engine
    import aryl.sim.native  # noqa: F401
    from aryl.sim import SimConfig, simulate
    from aryl.traces import load_trace, synthesize_elastic

    floor = _bench("bench_sim").strict_fifo_floor
    jobs = synthesize_elastic(load_trace("itp-c07"), elastic_fraction=0.5, seed=0).jobs
    out: dict[str, float] = {}
    out["floor_ms"] = 1e3 * median_s(lambda: floor(jobs, 46 * 8), repeats)
    for engine in ("native", "python"):
        cfg = SimConfig(engine=engine)
        n = repeats if engine == "native" else max(1, repeats // 5)
        out[f"aryl_{engine}_ms"] = 1e3 * median_s(
            lambda cfg=cfg: simulate(jobs, policy="aryl", config=cfg), n)
    out["ratio_native"] = out["aryl_native_ms"] / out["floor_ms"]
    out["ratio_python"] = out["aryl_python_ms"] / out["floor_ms"]
    return out


def floor_figures(repeats: int) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_floor_case, (repeats,))


#: aryl against fifo: fresh processes, and interleaved rounds in each
RATIO_PROCESSES, RATIO_ROUNDS = 9, 9


def _ratio_case(rounds: int) -> dict[str, float]:
    """``aryl_fifo_ratio`` in this (fresh) process."""
    return dict(_bench("bench_sim").aryl_fifo_ratio(rounds))


def ratio_figures(n_processes: int = RATIO_PROCESSES,
                  rounds: int = RATIO_ROUNDS) -> dict[str, float]:
    """``aryl`` against ``fifo`` (native engine, itp-c07) in ``n_processes`` fresh
    processes, one after another, each interleaving ``rounds`` rounds of the two
    (``aryl_fifo_ratio``).  A process's memory layout moves the two replays' times
    differently: on a shared 2-core machine one process's ratio ranges over about
    +-5% around the typical one, more than a round-to-round difference.  So every
    figure is the median over the processes of that process's figure, and the
    ratio's range over the processes is given (``simulate_ratio_min`` / ``_max``)."""
    ctx = mp.get_context("spawn")
    runs: list[dict[str, float]] = []
    for _ in range(n_processes):
        with ctx.Pool(1) as pool:
            runs.append(pool.apply(_ratio_case, (rounds,)))
    out = median_over_processes(runs)
    out["ratio_rounds"] = float(rounds)
    return out


def median_over_processes(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per key, the median of the processes' figures (``runs``: one dict a process, the
    same keys), the range of ``simulate_ratio`` (``simulate_ratio_min`` / ``_max``) and
    the count (``ratio_processes``).  Raises ValueError on no runs."""
    if not runs:
        raise ValueError("median_over_processes: no runs")
    out = {k: float(statistics.median(r[k] for r in runs)) for k in runs[0]}
    ratios = [r["simulate_ratio"] for r in runs]
    out["simulate_ratio_min"], out["simulate_ratio_max"] = min(ratios), max(ratios)
    out["ratio_processes"] = float(len(runs))
    return out


def schedule_figures(repeats: int) -> dict[str, float]:
    """One aryl.schedule call on bench_schedule.py's 5,000-server, 20,000-job state
    (warm: the state's queue index and native cache built by an earlier call)."""
    from aryl.scheduling import schedule

    st = _bench("bench_schedule").big_state()
    out: dict[str, float] = {}
    for backend in ("native", "reference"):
        n = repeats if backend == "native" else max(3, repeats // 5)
        out[f"{backend}_ms"] = 1e3 * median_s(lambda b=backend: schedule(st, backend=b), n)
    out["ratio"] = out["reference_ms"] / out["native_ms"]
    return out


def million_figures(n_jobs: int, policies: tuple[str, ...] = ("aryl", "fifo"),
                    out: Path = Path("results") / "bench-million") -> list[dict[str, Any]]:
    """bench_sim.py --million (native engine): each policy in its own process."""
    import json
    import subprocess

    rows = []
    for policy in policies:
        cmd = [sys.executable, str(BENCH / "bench_sim.py"), "--million-case", policy, "--jobs",
               str(n_jobs), "--out", str(out)]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def ten_million_figures(n_jobs: int, png: Path) -> dict[str, Any]:
    """``aryl`` alone on an ``n_jobs``-job Philly-shaped trace (bench_sim.py
    --million-case, its own process) and the plot of its time per 10,000 loop
    iterations (``png``); the load average before and after the run."""
    out = Path("results") / "bench-ten-million"
    before = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    row = million_figures(n_jobs, ("aryl",), out)[0]
    row["load_before"] = before
    row["load_after"] = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    _bench("bench_sim")._plot_million(out, ["aryl"], n_jobs, png)
    row["png"] = png.name
    return row


def million_section(million: list[dict[str, Any]]) -> list[str]:
    """The page's section on ``--million`` (empty without rows)."""
    if not million:
        return []
    lines = [
        "",
        "## A million jobs",
        "",
        f"A {million[0]['jobs']:,}-job Philly-shaped trace (`bench/philly_shaped.py`, "
        "seed 0, half elastic) on 94 + 33 servers, native engine, each policy in "
        "its own process, reading the trace from a Parquet file (written by a child "
        "process) as `aryl replay` does (`python bench/bench_sim.py --million`); wall "
        "time and peak memory of the replay process, loading and checking the trace "
        "included; time per 10,000 "
        "loop iterations (CPU) in the first and the last tenth of the run:",
        "",
        "| policy | wall | scheduler | peak memory | CPU per 10k iterations, first tenth "
        "| last tenth |",
        "|---|---|---|---|---|---|",
    ]
    for m in million:
        lines.append(
            f"| {m['policy']} | {m['wall_s']:.1f} s | {m['scheduler_s']:.1f} s | "
            f"{m['peak_rss_mb']:,.0f} MB | {1e3 * m['cpu_s_per_10k_iter_first_10pct']:.0f} "
            f"ms | {1e3 * m['cpu_s_per_10k_iter_last_10pct']:.0f} ms |")
    return lines


def ten_million_section(ten: dict[str, Any] | None) -> list[str]:
    """The page's section on ``--ten-million`` (empty without a run)."""
    if not ten:
        return []
    m = ten
    return [
        "",
        "## Ten million jobs",
        "",
        f"A {m['jobs']:,}-job Philly-shaped trace (`bench/philly_shaped.py`, seed 0, half "
        "elastic) at the generator's arrival rate (the full Philly table's average "
        f"load), so over about ten times a million jobs' span ({m['span_years']:.1f} years "
        "of arrivals), on the same 94 + 33 servers: the same load throughout, so the "
        "queue and the cost of a pass do not grow with the trace. `aryl`, native "
        "engine, in its own process (`python bench/bench_sim.py --million --jobs "
        f"{m['jobs']} --policies aryl`), load average {m['load_before']} before and "
        f"{m['load_after']} after:",
        "",
        "| | |",
        "|---|---|",
        f"| wall (the replay, loading and checking the trace included) | "
        f"{m['wall_s']:.1f} s |",
        f"| CPU | {m['cpu_s']:.1f} s |",
        f"| scheduler | {m['scheduler_s']:.1f} s |",
        f"| trace generation (a child process, before the replay) | "
        f"{m['generate_s']:.1f} s |",
        f"| peak memory (the replay process) | {m['peak_rss_mb']:,.0f} MB |",
        f"| memory at the end of the event loop | {m['rss_loop_end_mb']:,.0f} MB |",
        f"| loop iterations (event instants) | {m['iterations']:,} |",
        f"| events logged | {m['n_events']:,} |",
        f"| wall per 10,000 iterations, first tenth / last tenth | "
        f"{1e3 * m['s_per_10k_iter_first_10pct']:.0f} ms / "
        f"{1e3 * m['s_per_10k_iter_last_10pct']:.0f} ms |",
        f"| CPU per 10,000 iterations, first tenth / last tenth | "
        f"{1e3 * m['cpu_s_per_10k_iter_first_10pct']:.0f} ms / "
        f"{1e3 * m['cpu_s_per_10k_iter_last_10pct']:.0f} ms |",
        f"| jobs finished | {m['n_finished']:,} |",
        "",
        "Time per 10,000 loop iterations along the run, wall and CPU (rolling medians over "
        "25 blocks of 2,048 iterations; the series is "
        "`results/bench-ten-million/million-aryl.csv`):",
        "",
        f"![time per 10,000 loop iterations, {m['jobs']:,} jobs]({m['png']})",
    ]


def splice_sections(page: str, sections: list[str]) -> str:
    """``page`` with its ``## `` sections of the same headings as ``sections``
    (markdown lines) replaced by them; a new one goes after ``## A million jobs``
    (else before ``## Paired comparisons``, else at the end)."""
    text = "\n".join(sections).strip("\n")
    new = ["## " + b.rstrip("\n") + "\n" for b in ("\n" + text).split("\n## ")[1:]]
    parts = page.split("\n## ")  # every part but the last ends with its blank line
    head, body = parts[0], ["## " + b for b in parts[1:]]
    for sec in new:
        title = sec.splitlines()[0]
        same = [i for i, b in enumerate(body) if b.splitlines()[0] == title]
        if same:
            body[same[0]] = sec
            continue
        at = [i + 1 for i, b in enumerate(body) if b.startswith("## A million jobs")]
        if not at:
            at = [i for i, b in enumerate(body) if b.startswith("## Paired comparisons")]
        body.insert(at[0] if at else len(body), sec)
    return "\n".join([head, *body])


def render(rec: dict[str, float], mk: dict[str, float], replays: list[dict[str, Any]],
           meta: dict[str, str], sch: dict[str, float], fl: dict[str, float],
           million: list[dict[str, Any]], paired: dict[str, Any] | None = None,
           ten: dict[str, Any] | None = None) -> str:
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
        "## One scheduling pass (`aryl.schedule`)",
        "",
        "A busy cluster of 5,000 servers and 20,000 jobs (`bench/bench_schedule.py`, "
        "`big_state`), policy `aryl`, repeated calls on one state:",
        "",
        "| | median |",
        "|---|---|",
        f"| compiled pass (`backend=\"native\"`) | {sch['native_ms']:.2f} ms |",
        f"| Python pass (`backend=\"reference\"`) | {sch['reference_ms']:.1f} ms |",
        f"| speed-up | {sch['ratio']:.1f}x |",
        "",
        "## Replays (`aryl.simulate`)",
        "",
        "Half the jobs elastic (seed 0), the bundled inference profile, clusters sized "
        "as `--training-servers auto --inference-servers auto` does; `simulate` is the "
        "wall time of the replay (trace loading excluded), `scheduler` the policy's "
        "share of it. Engine `python`: the Python event loop and pass (the reference "
        "twin, before); `native`: the compiled ones (after, the default); both give "
        "identical results.",
        "",
        "| trace | jobs | servers | policy | engine | load trace | simulate | scheduler "
        "| peak memory |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in replays:
        lines.append(
            f"| {r['trace']} | {int(r['jobs']):,} | {r['servers']} | {r['policy']} | "
            f"{r['engine']} | {r['load_s']:.2f} s | {r['simulate_s']:.2f} s | "
            f"{r['scheduler_s']:.2f} s | {r['peak_mb']:,.0f} MB |")
    speedups = []
    for r in replays:
        if r["engine"] != "native":
            continue
        before = [x for x in replays if x["engine"] == "python" and x["trace"] == r["trace"]
                  and x["policy"] == r["policy"]]
        if before:
            speedups.append(f"{r['trace']} `{r['policy']}` "
                            f"{before[0]['simulate_s'] / r['simulate_s']:.0f}x")
    if speedups:
        lines += ["", "Speed-up of the native engine (simulate): " + ", ".join(speedups) + "."]
    if not any(r["trace"].startswith("Philly") for r in replays):
        lines += ["", "(No Philly rows: `ARYL_PHILLY_CSV` was not set.)"]
    lines += [
        "",
        "In one process, `aryl` on itp-c07 (46 + 16 servers) against a 60-line "
        "pure-Python strict-FIFO replay of the same trace (GPU counts only, "
        "`bench/bench_sim.py`, `strict_fifo_floor`):",
        "",
        "| | median | ratio to the floor |",
        "|---|---|---|",
        f"| strict-FIFO floor | {fl['floor_ms']:.0f} ms | 1 |",
        f"| `aryl`, native engine | {fl['aryl_native_ms']:.0f} ms | {fl['ratio_native']:.1f}x |",
        f"| `aryl`, Python engine | {fl['aryl_python_ms']:,.0f} ms | {fl['ratio_python']:.0f}x |",
        "",
        "The cost of `aryl`'s pass over the engine's: `aryl` against `fifo`, both native, "
        f"{fl['ratio_rounds']:.0f} rounds interleaved in one process (`aryl_fifo_ratio`; "
        "`python bench/bench_sim.py --ratio` runs one such process), in "
        f"{fl['ratio_processes']:.0f} fresh processes one after another; each figure is the "
        "median over the processes of that process's median (a process's memory layout "
        "moves the two replays' times differently; the ratio ranged from "
        f"{fl['simulate_ratio_min']:.2f}x to {fl['simulate_ratio_max']:.2f}x over the "
        "processes):",
        "",
        "| | `fifo` | `aryl` | aryl / fifo |",
        "|---|---|---|---|",
        f"| simulate | {fl['fifo_simulate_ms']:.0f} ms | {fl['aryl_simulate_ms']:.0f} ms | "
        f"{fl['simulate_ratio']:.2f}x |",
        f"| scheduler | {fl['fifo_scheduler_ms']:.1f} ms | {fl['aryl_scheduler_ms']:.1f} ms | "
        f"{fl['scheduler_ratio']:.1f}x |",
        "",
        "Where the difference goes (instruction counts of the pass's parts, and why skipping "
        "passes cannot close it): [architecture.md](architecture.md), \"What the Aryl pass "
        "costs against FIFO\".",
    ]
    lines += million_section(million)
    lines += ten_million_section(ten)
    lines += paired_section(paired)
    lines += ["", f"Command: `{meta['command']}`.", ""]
    return "\n".join(lines)


def paired_section(paired: dict[str, Any] | None) -> list[str]:
    """The page's section on ``bench/compare.py``, with its table when a comparison is given.

    ``paired`` is the document ``bench/compare.py --json`` writes (or None).
    """
    lines = [
        "",
        "## Paired comparisons (`bench/compare.py`)",
        "",
        "A change's effect on speed is measured against a git ref, not against the "
        "figures above (which come from another run, under another load): "
        "`python bench/compare.py --base REF [-k EXPR] [--bench-path bench/FILE.py]` "
        "builds a wheel of REF's tree and one of the working tree's (cached by a hash of the "
        "tree without `bench/`, `tests/`, `docs/`, `scripts/`, `.ci/` and the README, so "
        "sides that differ only there share one build), installs each into its own temporary "
        "virtual environment, and runs the same pytest-benchmark selection in both, "
        "`--pairs` times (default 5), the order swapped every pair (base, new; new, base; "
        "...), so a load that drifts over the comparison weighs on both sides. Each pair "
        "gives one ratio new/old of the two runs' median round times (`--stat min` or `mean` "
        "for those); the reported ratio is "
        "their geometric mean with a Student t interval (95%) over the pairs. Verdict with "
        "threshold t (`--threshold`, default 0.05): `slower` when the ratio exceeds 1 + t "
        "and the interval lies above 1, `faster` when it is below 1 / (1 + t) and the "
        "interval lies below 1, `same` when the whole interval lies within "
        "[1 / (1 + t), 1 + t], `unclear` otherwise. `--fail-on-slower` exits 1 on a "
        "`slower` benchmark; `--json FILE` writes the table, `--save-runs DIR` keeps each "
        "run's pytest-benchmark JSON (`pytest-benchmark compare DIR/*.json` lists them). "
        "CI runs HEAD against HEAD on one benchmark (one build for both sides).",
    ]
    if paired is None:
        return lines
    base = paired["base"]
    lines += [
        "",
        f"Working tree against `{base['ref']}` ({base['commit'][:10]}), {paired['pairs']} "
        f"pairs, selection `{paired['select'] or 'all'}`, {paired.get('stat', 'median')} "
        f"round times, threshold {paired['threshold']:g}:",
        "",
        "| benchmark | base | new | new/old | 95% interval | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in paired["benchmarks"]:
        lines.append(f"| `{r['name']}` | {1e3 * r['base_median_s']:.3g} ms | "
                     f"{1e3 * r['new_median_s']:.3g} ms | {r['ratio']:.3f} | "
                     f"{r['ratio_lo']:.3f} to {r['ratio_hi']:.3f} | {r['verdict']} |")
    return lines


def policies_section() -> str:
    """The page's last section, "Python policies": ``bench/bench_policies.py``'s
    full-trace cases, measured in this run, as its ``--markdown`` prints them
    (among them the row "aryl twin through the callback" with its wall and CPU
    time and the same-run ratios against the Python engine's ``aryl`` replay)."""
    pol = _bench("bench_policies")
    before = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = pol.full()
    return str(pol.markdown(rows, (before, ", ".join(f"{x:.1f}" for x in os.getloadavg()))))


def _count(text: str) -> int:
    """argparse type: a whole number >= 0 (0: the part is off)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def _positive(text: str) -> int:
    """argparse type: a whole number >= 1."""
    n = _count(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="Write the page here.")
    ap.add_argument("--repeats", type=_positive, default=50, help="Calls per kernel median.")
    ap.add_argument("--million", type=_count, default=0, metavar="N",
                    help="Also replay an N-job Philly-shaped trace (needs $ARYL_PHILLY_CSV; "
                         "minutes; e.g. 1000000).")
    ap.add_argument("--ten-million", type=_count, default=0, metavar="N",
                    help="Also replay an N-job Philly-shaped trace under aryl alone and plot "
                         "its time per 10,000 loop iterations (a PNG beside --out; needs "
                         "$ARYL_PHILLY_CSV; minutes; e.g. 10000000).")
    ap.add_argument("--only", default=None, metavar="PARTS",
                    help="Measure only these parts (comma-separated: million, ten-million) "
                         "and, with --out, replace their sections in the existing page "
                         "(the rest of it is kept as it is).")
    ap.add_argument("--paired", type=Path, default=None, metavar="JSON",
                    help="Include this `bench/compare.py --json` comparison in the page.")
    args = ap.parse_args(argv)
    paired = None
    if args.paired is not None:
        import json

        try:
            paired = json.loads(args.paired.read_text())
        except (OSError, ValueError) as exc:
            ap.error(f"--paired {args.paired}: {exc}")
    png = (args.out.parent if args.out is not None else Path("results") / "bench-ten-million"
           ) / "ten-million-time-per-10k.png"
    if args.only is not None:
        parts = [p.strip() for p in args.only.split(",") if p.strip()]
        bad = [p for p in parts if p not in ("million", "ten-million")]
        if bad or not parts:
            ap.error(f"--only: unknown part(s) {bad or parts}; choose from million, ten-million")
        if not Path(PHILLY).is_file():
            ap.error("--only: the million-job parts need $ARYL_PHILLY_CSV (the Philly table)")
        sections: list[str] = []
        if "million" in parts:
            sections += million_section(million_figures(args.million or 1_000_000))
        if "ten-million" in parts:
            sections += ten_million_section(ten_million_figures(args.ten_million or 10_000_000,
                                                               png))
        if args.out is None:
            print("\n".join(sections))
            return
        from aryl._io import atomic_write_text

        try:
            page = args.out.read_text(encoding="utf-8")
        except OSError as exc:
            ap.error(f"--only with --out {args.out}: the page to update cannot be read ({exc})")
        atomic_write_text(args.out, splice_sections(page, sections))
        print(f"wrote {args.out} ({', '.join(parts)})")
        return
    load_before = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    rec = reclaim_figures(args.repeats)
    mk = mckp_figures(args.repeats)
    sch = schedule_figures(max(5, args.repeats // 2))
    fl = floor_figures(max(3, args.repeats // 10))
    fl.update(ratio_figures())
    replays = replay_figures()
    million = million_figures(args.million) if args.million and Path(PHILLY).is_file() else []
    ten = (ten_million_figures(args.ten_million, png)
           if args.ten_million and Path(PHILLY).is_file() else None)
    meta = {
        "date": dt.date.today().isoformat(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
                   f"Python {platform.python_version()}",
        "load_before": load_before,
        "load_after": ", ".join(f"{x:.1f}" for x in os.getloadavg()),
        "command": "python bench/report.py" + (f" --million {args.million}" if million else "")
                   + (f" --ten-million {args.ten_million}" if ten else "")
                   + (f" --paired {args.paired}" if paired else "")
                   + (f" --out {args.out}" if args.out else ""),
    }
    page = render(rec, mk, replays, meta, sch, fl, million, paired, ten) + "\n" + policies_section()
    if args.out is None:
        print(page)
        return
    from aryl._io import atomic_write_text

    atomic_write_text(args.out, page)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
