"""Benchmarks of Python policies (``aryl.Policy``) in the compiled event loop.

Two modes.

* pytest-benchmark (``python -m pytest bench/bench_policies.py --benchmark-only``,
  group ``policies``): the first 3,000 jobs of ``itp-c07`` under the compiled
  ``fifo``, a policy that decides nothing (the cost of the callback itself) and
  the guide's ``largest-first`` (docs/examples/largest_first.py).
* Full trace (``python bench/bench_policies.py [--markdown]``): ``itp-c07`` on the
  default cluster (46 + 16 servers) under the compiled ``fifo``, the do-nothing
  policy, the guide's ``largest-first`` (with and without ``only_starts``) and,
  on ``lyra``, its ``speed-aware-loans``; the Python engine's ``fifo`` and
  ``aryl`` as yardsticks of the machine's load, the ``aryl`` twin through the
  callback (``aryl-twin``, against the Python engine's replay of it); wall and CPU time of
  ``simulate`` (trace loading excluded), the time in the passes
  (``scheduler``), passes, ``decide`` calls and the time per pass;
  ``--markdown`` prints the section of docs/performance.md (``bench/report.py``
  includes it in the page it writes).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import aryl
from aryl.sim import SimConfig, simulate

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

from largest_first import LargestFirst  # noqa: E402 - from docs/examples
from speed_aware_loans import SpeedAwareLoans  # noqa: E402


class Nothing(aryl.Policy):
    """Decides nothing: what one callback costs (a pass, its arrays, the view)."""

    name = "nothing"

    def decide(self, view: aryl.PassView) -> None:
        return None


class QueueReader(Nothing):
    """Reads the queue and the free GPUs, decides nothing: what the view's arrays
    cost when a policy reads them."""

    name = "queue-reader"

    def decide(self, view: aryl.PassView) -> None:
        view.queue  # noqa: B018 - the read is the point
        view.free_gpus  # noqa: B018
        return None


class AlwaysCalled(LargestFirst):
    """The guide's largest-first without only_starts (called at every pass)."""

    name = "largest-first"
    only_starts = False


def _counted(pol: aryl.Policy, calls: list[int]) -> aryl.Policy:
    """``pol`` with its decide calls counted in ``calls[0]`` (same name and options)."""
    base = type(pol)

    def decide(self: aryl.Policy, view: aryl.PassView) -> Any:
        calls[0] += 1
        return base.decide(self, view)

    return type(base.__name__, (base,), {"decide": decide})(pol.options)


@functools.cache
def itp(n: int | None = None) -> pd.DataFrame:
    jobs = aryl.load_trace("itp-c07").jobs
    return jobs if n is None else jobs.iloc[:n].reset_index(drop=True)


@pytest.mark.benchmark(group="policies")
@pytest.mark.parametrize("which", ["fifo", "nothing", "largest-first"])
def test_policy_replay(benchmark: Any, which: str) -> None:
    pol: Any = {"fifo": "fifo", "nothing": Nothing(), "largest-first": LargestFirst()}[which]
    jobs = itp(3000)
    cfg = SimConfig(n_training_servers=12, n_inference_servers=4,
                    horizon_s=float(jobs["submit_time_s"].iloc[-1]) if which == "nothing"
                    else None)
    res = benchmark.pedantic(simulate, args=(jobs,), kwargs={"policy": pol, "config": cfg},
                             rounds=1, iterations=1)
    assert res.summary["n_jobs"] == 3000


def _case(label: str, pol: Any, cfg: SimConfig, jobs: pd.DataFrame) -> dict[str, Any]:
    from aryl.scheduling.twin import TwinPolicy

    calls = [0]
    if isinstance(pol, aryl.Policy) and not isinstance(pol, TwinPolicy):
        pol = _counted(pol, calls)
    c, t = time.process_time(), time.perf_counter()
    res = simulate(jobs, policy=pol, config=cfg)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    tm = res.timing
    return {"case": label, "jobs": len(jobs), "simulate_s": wall, "cpu_s": cpu,
            "scheduler_s": tm["scheduler_time_s"], "passes": tm["n_decisions"],
            "calls": calls[0] if isinstance(pol, aryl.Policy) else None,
            "us_per_pass": 1e6 * tm["scheduler_time_s"] / max(1, tm["n_decisions"]),
            "mean_qd_s": res.summary["queuing_delay_s"]["mean"]}


#: the rows of the page's table (labels are looked up by markdown())
NOTHING = "nothing (callback only, to the last arrival)"
READER = "queue-reader (reads queue and free GPUs, to the last arrival)"
LF = "largest-first (guide, example a)"
LF_ALL = "largest-first without only_starts"
ARYL_PY = "aryl, Python engine (yardstick)"


ARYL_C = "aryl (compiled)"
ARYL_TWIN = "aryl twin through the callback (aryl-twin)"


def _timed_twin(label: str, pol: Any, cfg: SimConfig, jobs: pd.DataFrame) -> dict[str, Any]:
    """A replay with the time inside the ``aryl`` twin's own ``ArylPolicy.decide``
    (``twin_decide_s``): the Python engine's ``aryl`` replay, or the twin through
    the callback (``ArylTwin``, its decide calls counted); both pay the same timer."""
    from aryl.scheduling.aryl import ArylPolicy
    from aryl.scheduling.twin import TwinPolicy

    spent = [0.0]
    calls = [0]
    orig = ArylPolicy.decide

    def timed(self: Any, st: Any, ctx: Any, plan: Any) -> None:
        t = time.perf_counter()
        calls[0] += 1
        orig(self, st, ctx, plan)
        spent[0] += time.perf_counter() - t

    ArylPolicy.decide = timed  # type: ignore[method-assign]
    try:
        row = _case(label, pol, cfg, jobs)
    finally:
        ArylPolicy.decide = orig  # type: ignore[method-assign]
    if isinstance(pol, TwinPolicy):
        row["calls"] = calls[0]
    return {**row, "twin_decide_s": spent[0]}


def _aryl_python(jobs: pd.DataFrame) -> dict[str, Any]:
    """The Python engine's ``aryl`` replay, with the time inside the twin's own
    ``ArylPolicy.decide``."""
    return _timed_twin(ARYL_PY, "aryl", SimConfig(engine="python"), jobs)


def _aryl_twin(jobs: pd.DataFrame) -> dict[str, Any]:
    """The same twin through the callback (``aryl.scheduling.twin.ArylTwin``, the
    compiled loop keeping the events, loans and accounting)."""
    from aryl.scheduling.twin import ArylTwin

    return _timed_twin(ARYL_TWIN, ArylTwin(), SimConfig(), jobs)


def _cases(jobs: pd.DataFrame) -> list[Any]:
    """The table's replays, each a thunk making its policy afresh."""
    last = float(jobs["submit_time_s"].iloc[-1])
    return [
        lambda: _case("fifo (compiled)", "fifo", SimConfig(), jobs),
        lambda: _case("fifo, Python engine (yardstick)", "fifo", SimConfig(engine="python"),
                      jobs),
        lambda: _case(ARYL_C, "aryl", SimConfig(), jobs),
        lambda: _aryl_python(jobs),
        lambda: _aryl_twin(jobs),
        lambda: _case(NOTHING, Nothing(), SimConfig(horizon_s=last), jobs),
        lambda: _case(READER, QueueReader(), SimConfig(horizon_s=last), jobs),
        lambda: _case(LF, LargestFirst(), SimConfig(), jobs),
        lambda: _case(LF_ALL, AlwaysCalled(), SimConfig(), jobs),
        lambda: _case("speed-aware-loans on lyra (guide, example b)", SpeedAwareLoans(),
                      SimConfig(cluster="lyra"), jobs),
    ]


#: rounds of the whole table; each row is its case's median-wall round
ROUNDS = 3


def full(rounds: int = ROUNDS) -> list[dict[str, Any]]:
    """Every case ``rounds`` times, the rounds interleaved (case 1..n, then again),
    after one unmeasured warm-up replay; per case the round of median wall time."""
    jobs = itp()
    cases = _cases(jobs)
    cases[0]()  # warm-up: imports, first-touch of the compiled module and the trace
    runs: list[list[dict[str, Any]]] = [[] for _ in cases]
    for _ in range(rounds):
        for i, case in enumerate(cases):
            runs[i].append(case())
    return [sorted(r, key=lambda row: row["simulate_s"])[len(r) // 2] for r in runs]


def markdown(rows: list[dict[str, Any]], load: tuple[str, str]) -> str:
    by = {r["case"]: r for r in rows}
    lf, aryl_py, aryl_c, nothing = by[LF], by[ARYL_PY], by[ARYL_C], by[NOTHING]
    tw = by[ARYL_TWIN]
    adapter_us = 1e6 * (tw["scheduler_s"] - tw["twin_decide_s"]) / max(1, tw["passes"])
    lines = [
        "## Python policies (`aryl.Policy`)",
        "",
        "<!-- Generated by `python bench/bench_policies.py --markdown` (bench/report.py "
        "includes it). -->",
        "",
        f"Measured on {time.strftime('%Y-%m-%d')} on {platform.system()} "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()} "
        f"(load average {load[0]} before the run, {load[1]} after: on a shared, busy "
        "machine wall times are upper bounds; `cpu` is the process's own CPU time), the "
        f"median-wall run of {ROUNDS} for each case (the rounds interleaved, after one "
        "warm-up replay), `itp-c07` (12,699 jobs) on the default cluster (46 + 16 servers) unless "
        "noted. `scheduler` is the wall time in the passes, the policy's Python code "
        "included; `calls` the passes in which `decide` was called (a policy with "
        "`only_starts` is skipped when nothing can start). `nothing` decides nothing, "
        "so its time per pass is the cost of the callback itself (the pass, the call, the "
        "view), here with a queue that grows to the whole trace; `queue-reader` also "
        "reads `queue` and `free_gpus` (the engine builds a per-pass array when it is "
        "first read, O(its length)).  The Python-engine rows (the reference twins, no "
        "callback) are yardsticks for the load.",
        "",
        "| case | simulate | cpu | scheduler | passes | calls | per pass | mean QD |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        qd = "-" if r["mean_qd_s"] is None else f"{r['mean_qd_s']:,.0f} s"
        calls = "-" if r["calls"] is None else f"{r['calls']:,}"
        lines.append(f"| {r['case']} | {r['simulate_s']:.2f} s | {r['cpu_s']:.2f} s | "
                     f"{r['scheduler_s']:.2f} s | {r['passes']:,} | {calls} | "
                     f"{r['us_per_pass']:.0f} µs | {qd} |")
    lines += [
        "",
        f"Against the targets of the policy API: the guide's `largest-first` ran "
        f"itp-c07 in {lf['simulate_s']:.2f} s ({lf['cpu_s']:.2f} s of CPU; target under "
        f"1 s), {aryl_py['simulate_s'] / lf['simulate_s']:.1f}x faster than the Python "
        f"engine's `aryl` replay of the same run; it was 14.0 s before the view was "
        "built on read and the example rewritten (the engine built every per-pass array "
        "at every pass, 580 µs per pass for `nothing`, now "
        f"{nothing['us_per_pass']:.0f} µs). "
        "The Python twin of `aryl` runs through this path as `aryl-twin` "
        "(`aryl.scheduling.twin`): an adapter keeps a `ClusterState` mirror of the "
        "compiled state in step from what changed since its previous call "
        "(`PassView.changes`, compiled, O(queued + running) compiled steps plus "
        "O(changes) Python objects per pass) and calls the twin's `decide` on it; "
        "its replay is bit-identical to the Python engine's (tests/test_twin_callback.py). "
        f"In this run it took {tw['simulate_s']:.2f} s ({tw['cpu_s']:.2f} s of CPU) "
        f"against the Python engine's {aryl_py['simulate_s']:.2f} s "
        f"({aryl_py['cpu_s']:.2f} s of CPU): "
        f"{aryl_py['simulate_s'] / tw['simulate_s']:.2f}x faster in wall time, "
        f"{aryl_py['cpu_s'] / tw['cpu_s']:.2f}x in CPU time (target: 2x).  Of it, the "
        f"twin's own `decide` took {tw['twin_decide_s']:.2f} s (in the Python engine "
        f"{aryl_py['twin_decide_s']:.2f} s), the rest of the passes (the compiled "
        f"pass, the call, the mirror's update) {adapter_us:.0f} µs per pass; the compiled "
        f"`aryl` replay took {aryl_c['simulate_s']:.2f} s.",
    ]
    return "\n".join(lines) + "\n"


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the docs section")
    args = ap.parse_args(argv)
    before = _load()
    rows = full()
    after = _load()
    print(pd.DataFrame(rows).to_string(index=False), file=sys.stderr)
    if args.markdown:
        print(markdown(rows, (before, after)))
    else:
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main(sys.argv[1:])
