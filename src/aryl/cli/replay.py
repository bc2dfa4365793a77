"""``aryl replay`` and ``aryl compare``: trace replays through the simulator.

``aryl replay`` with no argument runs the ``aryl`` policy on the bundled
``itp-c07`` preset (half of the jobs made elastic, seed 0) with the bundled
inference profile, on the default cluster (docs/simulator.md), and prints the
summary.  ``aryl compare --policies fifo,aryl`` runs several policies on the
same input and prints one table with ratios against ``fifo`` (the paper's
"1.53x lower mean queuing delay / +26.9% usage" form).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from aryl.errors import InvalidInputError
from aryl.sim.config import DEFAULT_INFERENCE_SERVERS, DEFAULT_TRAINING_SERVERS

__all__ = ["compare_command", "replay_command"]


def _common(func: Any) -> Any:
    options = [
        click.option("--trace", "trace", default="itp-c07", show_default=True,
                     help="Trace path or preset (itp-c01..itp-c10, itp-all)."),
        click.option("--window", default=None,
                     help="Trace window: 'busiest-15d' or 'START,END' (submit times)."),
        click.option("--inference", default="bundled", show_default=True,
                     help="Inference demand: 'bundled' (daily profile), 'diurnal', 'none' "
                          "or a CSV time_s,servers_needed."),
        click.option("--training-servers", type=int, default=DEFAULT_TRAINING_SERVERS,
                     show_default=True, help="Training servers (8 GPUs each by default)."),
        click.option("--inference-servers", type=int, default=DEFAULT_INFERENCE_SERVERS,
                     show_default=True, help="Inference servers."),
        click.option("--gpus-per-server", type=int, default=8, show_default=True),
        click.option("--elastic-fraction", type=float, default=0.5, show_default=True,
                     help="Fraction of jobs made elastic when the trace has no scaling columns."),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Seed of the elastic synthesis and random choices."),
        click.option("--reclaim-policy", default="aryl", show_default=True,
                     help="aryl, random, fewest-jobs, most-idle, exact."),
        click.option("--backend", type=click.Choice(["native", "reference"]), default="native",
                     show_default=True, help="Kernel implementation."),
        click.option("--horizon", type=float, default=None,
                     help="Stop at this many seconds after the start; list unfinished jobs."),
        click.option("--check", is_flag=True, help="Run the invariant checker (slower)."),
        click.option("--keep-idle-loans", is_flag=True,
                     help="Loaning policies keep every borrowed server until it is reclaimed "
                          "(default: borrow only servers a pass uses, return empty ones)."),
        click.option("--out", "out", type=click.Path(file_okay=False), default=None,
                     help="Directory for per-job tables, summary JSON, time series."),
        click.option("--plot", is_flag=True, help="Write PNG figures (needs --out)."),
        click.option("--no-progress", is_flag=True, help="No progress bar."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _prepare(o: dict[str, Any]) -> tuple[Any, dict[str, Any], Any, Any]:
    """Load and synthesise the trace, build the config and the inference demand."""
    from aryl.sim import SimConfig
    from aryl.sim.adapters import load_inference_spec
    from aryl.traces import load_trace, synthesize_elastic

    try:
        trace = load_trace(o["trace"], window=o["window"], gpus_per_server=o["gpus_per_server"])
        trace = synthesize_elastic(trace, elastic_fraction=o["elastic_fraction"], seed=o["seed"],
                                   gpus_per_server=o["gpus_per_server"])
        jobs = trace.jobs
        t0 = float(jobs["submit_time_s"].iloc[0]) if len(jobs) else 0.0
        span = float(jobs["submit_time_s"].iloc[-1] - t0) if len(jobs) else 0.0
        cfg = SimConfig(
            n_training_servers=o["training_servers"],
            n_inference_servers=o["inference_servers"],
            gpus_per_server=o["gpus_per_server"],
            seed=o["seed"],
            reclaim_policy=o["reclaim_policy"],
            backend=o["backend"],
            horizon_s=None if o["horizon"] is None else t0 + o["horizon"],
            check=o["check"],
        )
        demand = load_inference_spec(o["inference"], cfg.n_inference_servers, t0, span, o["seed"])
    except InvalidInputError as exc:
        raise click.ClickException(str(exc)) from exc
    meta = dict(trace.meta)
    meta.setdefault("source", trace.source)
    return trace, meta, cfg, demand


def _run(
    trace: Any, policy: str, cfg: Any, demand: Any, show_progress: bool, keep_loans: bool = False
) -> Any:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from aryl.sim import simulate

    inference = demand if demand is not None else False
    opts = {"return_idle_loans": False} if keep_loans else None
    n = len(trace.jobs)
    if not show_progress or n < 2000:
        try:
            return simulate(trace, policy=policy, config=cfg, inference=inference,
                            policy_options=opts)
        except InvalidInputError as exc:
            raise click.ClickException(str(exc)) from exc
    with Progress(
        TextColumn(f"[bold]{policy}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,} jobs"),
        TimeElapsedColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task(policy, total=n)

        def cb(done: int, total: int, now: float) -> None:
            bar.update(task, completed=done)

        try:
            return simulate(trace, policy=policy, config=cfg, inference=inference, progress=cb,
                            policy_options=opts)
        except InvalidInputError as exc:
            raise click.ClickException(str(exc)) from exc


def _fmt(x: float | None, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.0f}{unit}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _write(res: Any, out: Path) -> list[Path]:
    from aryl._io import atomic_write_dataframe, atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    paths = [
        atomic_write_dataframe(res.jobs, out / "jobs.parquet"),
        atomic_write_dataframe(res.jobs, out / "jobs.csv"),
        atomic_write_dataframe(res.timeseries, out / "timeseries.csv"),
        atomic_write_dataframe(res.events, out / "events.csv.gz"),
        atomic_write_text(out / "summary.json", json.dumps(res.summary, indent=2, default=str)),
    ]
    return paths


def _summary_table(s: dict[str, Any]) -> Table:
    t = Table(title=f"aryl replay: policy {s['policy']}", show_header=True)
    t.add_column("measure")
    for c in ("mean", "p50", "p95", "p99"):
        t.add_column(c, justify="right")
    for key, label in (("queuing_delay_s", "queuing delay (s)"), ("jct_s", "JCT (s)"),
                       ("wait_s", "total wait (s)")):
        st = s[key]
        t.add_row(label, *(_fmt(st[c]) for c in ("mean", "p50", "p95", "p99")))
    return t


def _counts_table(s: dict[str, Any]) -> Table:
    t = Table(show_header=False)
    t.add_row("jobs finished / unfinished / infeasible",
              f"{s['n_finished']:,} / {s['n_unfinished']:,} / {s['n_infeasible']:,}")
    t.add_row("cluster usage (training + loaned)", _pct(s["cluster_usage"]))
    t.add_row("inference utilisation (with loans)",
              f"{_pct(s['inference_utilisation'])} ({_pct(s['inference_utilisation_with_loans'])})")
    t.add_row("preemptions (by reclaims)",
              f"{s['n_preemptions']:,} ({s['n_reclaim_preemptions']:,})")
    t.add_row("scale-ins / scale-outs / moves",
              f"{s['n_scale_in']:,} / {s['n_scale_out']:,} / {s['n_moves']:,}")
    t.add_row("loans / reclaims / returns",
              f"{s['n_loans']:,} / {s['n_reclaims']:,} / {s['n_loan_returns']:,}")
    t.add_row("makespan", f"{s['makespan_s'] / 86400:.2f} days")
    t.add_row("scheduler time per decision", f"{s['scheduler_ms_per_decision']:.3f} ms "
              f"({s['n_decisions']:,} decisions, {s['scheduler_time_s']:.2f} s)")
    return t


@click.command(name="replay")
@click.option("--policy", default="aryl", show_default=True,
              help="fifo, sjf, tiresias, aryl, aryl-no-loan, aryl-no-elastic, elastic-greedy.")
@_common
def replay_command(policy: str, **o: Any) -> None:
    """Replay a trace under one policy and print the summary."""
    if o["plot"] and not o["out"]:
        raise click.UsageError("--plot needs --out DIR")
    trace, _meta, cfg, demand = _prepare(o)
    res = _run(trace, policy, cfg, demand, not o["no_progress"], o["keep_idle_loans"])
    console = Console()
    s = res.summary
    console.print(_summary_table(s))
    console.print(_counts_table(s))
    if len(res.infeasible):
        console.print(f"[yellow]{len(res.infeasible)} job(s) can never fit the training "
                      "cluster (see jobs table, status 'infeasible')")
    if o["out"]:
        out = Path(o["out"])
        paths = _write(res, out)
        if o["plot"]:
            from aryl.sim.plot import plot_results

            paths += plot_results({policy: res}, out)
        console.print(f"wrote {len(paths)} files to {out}")


def _ratio(base: float | None, x: float | None) -> str:
    if base is None or x is None or x <= 0:
        return "-"
    return f"{base / x:.2f}x"


@click.command(name="compare")
@click.option("--policies", default="fifo,aryl", show_default=True,
              help="Comma-separated policies to run on the same input.")
@click.option("--baseline", default="fifo", show_default=True,
              help="Policy the ratios are against (run too if not listed).")
@_common
def compare_command(policies: str, baseline: str, **o: Any) -> None:
    """Replay a trace under several policies and print one table with ratios."""
    names = [p.strip() for p in policies.split(",") if p.strip()]
    if not names:
        raise click.UsageError("--policies is empty")
    if o["plot"] and not o["out"]:
        raise click.UsageError("--plot needs --out DIR")
    from aryl.policies import available_policies

    known = available_policies()
    for p in [*names, baseline]:
        if p not in known:
            raise click.UsageError(f"unknown policy {p!r}; choose from {', '.join(known)}")
    run_names = names if baseline in names else [baseline, *names]
    trace, _meta, cfg, demand = _prepare(o)
    results = {
        p: _run(trace, p, cfg, demand, not o["no_progress"], o["keep_idle_loans"])
        for p in run_names
    }
    b = results[baseline].summary
    t = Table(title=f"aryl compare ({len(trace.jobs):,} jobs, ratios vs {baseline})")
    for c in ("policy", "mean QD (s)", "p95 QD (s)", "mean JCT (s)", "p95 JCT (s)", "usage",
              "QD ratio", "JCT ratio", "usage gain"):
        t.add_column(c, justify="left" if c == "policy" else "right")
    t2 = Table(title="events and decision cost")
    for c in ("policy", "preemptions", "scale-in", "scale-out", "loans", "reclaims",
              "ms/decision"):
        t2.add_column(c, justify="left" if c == "policy" else "right")
    rows = []
    for p in names:
        s = results[p].summary
        qd, jct = s["queuing_delay_s"], s["jct_s"]
        gain = (
            f"{100 * (s['cluster_usage'] / b['cluster_usage'] - 1):+.1f}%"
            if s["cluster_usage"] and b["cluster_usage"] else "-"
        )
        row = {
            "policy": p,
            "mean_queuing_delay_s": qd["mean"],
            "p95_queuing_delay_s": qd["p95"],
            "mean_jct_s": jct["mean"],
            "p95_jct_s": jct["p95"],
            "cluster_usage": s["cluster_usage"],
            "queuing_delay_ratio": _ratio(b["queuing_delay_s"]["mean"], qd["mean"]),
            "jct_ratio": _ratio(b["jct_s"]["mean"], jct["mean"]),
            "usage_gain": gain,
            "n_preemptions": s["n_preemptions"],
            "n_scale_in": s["n_scale_in"],
            "n_scale_out": s["n_scale_out"],
            "n_loans": s["n_loans"],
            "n_reclaims": s["n_reclaims"],
            "n_loan_returns": s["n_loan_returns"],
            "scheduler_ms_per_decision": s["scheduler_ms_per_decision"],
        }
        rows.append(row)
        t.add_row(p, _fmt(qd["mean"]), _fmt(qd["p95"]), _fmt(jct["mean"]), _fmt(jct["p95"]),
                  _pct(s["cluster_usage"]), row["queuing_delay_ratio"], row["jct_ratio"], gain)
        t2.add_row(p, f"{s['n_preemptions']:,}", f"{s['n_scale_in']:,}",
                   f"{s['n_scale_out']:,}", f"{s['n_loans']:,}", f"{s['n_reclaims']:,}",
                   f"{s['scheduler_ms_per_decision']:.3f}")
    # wide enough for the table when the output is a file or a pipe
    console = Console(width=None if sys.stdout.isatty() else 120)
    console.print(t)
    console.print(t2)
    if o["out"]:
        import pandas as pd

        from aryl._io import atomic_write_dataframe

        out = Path(o["out"])
        n_files = 0
        for p, res in results.items():
            n_files += len(_write(res, out / p))
        atomic_write_dataframe(pd.DataFrame(rows), out / "compare.csv")
        n_files += 1
        if o["plot"]:
            from aryl.sim.plot import plot_results

            n_files += len(plot_results(results, out))
        console.print(f"wrote {n_files} files to {out}")
