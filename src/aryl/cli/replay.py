"""``aryl replay`` and ``aryl compare``: trace replays through the simulator.

``aryl replay`` with no argument runs the ``aryl`` policy on the bundled
``itp-c07`` preset (half of the jobs made elastic, seed 0) with the bundled
inference profile, on the default cluster (docs/simulator.md), and prints the
summary.  ``aryl compare --policies fifo,aryl`` runs several policies on the
same input and prints one table with ratios against ``fifo`` (the paper's
"1.53x lower mean queuing delay / +26.9% usage" form; ratios are
baseline / policy, ``compare.csv`` stores them as numbers).

``--out DIR`` writes ``DIR/manifest.json`` listing the files of the run; a
re-run into the same directory deletes the files the previous manifest lists
and this run does not write, and never touches files no manifest lists.
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

from aryl.errors import InvalidInputError, TraceFormatError
from aryl.sim.config import DEFAULT_INFERENCE_SERVERS, DEFAULT_TRAINING_SERVERS

DEFAULT_TRACE = "itp-c07"
# Choices for click (checked against the registries in tests/test_replay_cli_fixes.py).
POLICIES = ("aryl", "aryl-no-elastic", "aryl-no-loan", "elastic-greedy", "fifo", "sjf",
            "tiresias")
RECLAIM_POLICIES = ("aryl", "random", "fewest-jobs", "most-idle", "exact")

__all__ = ["compare_command", "replay_command"]


_AUTO = "auto"


class _ServersType(click.ParamType):
    """A server count >= ``minimum``, or ``auto``."""

    name = "N|auto"

    def __init__(self, minimum: int) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: Any, ctx: Any) -> int | str:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        elif str(value).strip().lower() == _AUTO:
            return _AUTO
        else:
            try:
                n = int(str(value))
            except ValueError:
                self.fail(f"{value!r} is not a whole number or 'auto'", param, ctx)
        if n < self.minimum:
            self.fail(f"{n} must be >= {self.minimum}", param, ctx)
        return n


def _common(func: Any) -> Any:
    options = [
        click.option("--trace", "trace", default=DEFAULT_TRACE, show_default=True,
                     help="Trace path or preset (itp-c01..itp-c10, itp-all)."),
        click.option("--window", default=None,
                     help="Trace window: 'busiest-15d' or 'START,END' (submit times)."),
        click.option("--inference", default="bundled", show_default=True,
                     help="Inference demand: 'bundled' (daily profile), 'diurnal', 'none' "
                          "or a CSV time_s,servers_needed."),
        click.option("--training-servers", type=_ServersType(1), default=None,
                     help=f"Training servers (8 GPUs each by default) or 'auto' (sized "
                          f"from the trace, see docs/simulator.md).  [default: "
                          f"{DEFAULT_TRAINING_SERVERS}]"),
        click.option("--inference-servers", type=_ServersType(0), default=None,
                     help=f"Inference servers or 'auto' (16/46 of the training servers, "
                          f"at least 4).  [default: {DEFAULT_INFERENCE_SERVERS}]"),
        click.option("--drop-invalid", is_flag=True,
                     help="Drop bad trace rows (counted by kind) instead of failing."),
        click.option("--gpus-per-server", type=click.IntRange(min=1), default=8, show_default=True),
        click.option("--elastic-fraction", type=click.FloatRange(0.0, 1.0), default=0.5,
                     show_default=True,
                     help="Fraction of jobs made elastic when the trace has no scaling columns."),
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Seed of the elastic synthesis and random choices."),
        click.option("--reclaim-policy", type=click.Choice(RECLAIM_POLICIES), default="aryl",
                     show_default=True, help="Which loaned servers a reclaim returns."),
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


def _load(o: dict[str, Any], console: Console) -> Any:
    """Read the trace (``--drop-invalid`` drops bad rows and prints the counts)."""
    from aryl.traces import load_trace

    drop = o["drop_invalid"]
    try:
        trace = load_trace(o["trace"], window=o["window"], gpus_per_server=o["gpus_per_server"],
                           on_invalid="drop" if drop else "raise")
    except InvalidInputError as exc:
        # a bad data row (not the header, not the file as a whole) can be dropped
        row_error = isinstance(exc, TraceFormatError) and (exc.line or 0) > 1
        hint = " (use --drop-invalid to skip bad rows)" if row_error and not drop else ""
        where = "" if isinstance(exc, TraceFormatError) else "--trace/--window: "
        raise click.ClickException(f"{where}{exc}{hint}") from exc
    if drop:
        dropped = {k: int(v) for k, v in trace.dropped.items() if v}
        if dropped:
            kinds = ", ".join(f"{k}: {v:,}" for k, v in dropped.items())
            console.print(f"dropped {sum(dropped.values()):,} invalid row(s) ({kinds})")
        else:
            console.print("dropped 0 invalid rows")
    return trace


def _sizes(o: dict[str, Any], jobs: Any, console: Console) -> tuple[int, int]:
    """Resolve ``--training-servers`` / ``--inference-servers`` (numbers, ``auto`` or unset)."""
    n_train, n_inf = o["training_servers"], o["inference_servers"]
    if _AUTO in (n_train, n_inf):
        from aryl.experiment import size_cluster

        try:
            auto_train, auto_inf = size_cluster(jobs, gpus_per_server=o["gpus_per_server"])
        except InvalidInputError as exc:
            raise click.ClickException(f"--training-servers auto: {exc}") from exc
        if n_train == _AUTO:
            n_train = auto_train
        if n_inf == _AUTO:
            n_inf = auto_inf
        n_train = DEFAULT_TRAINING_SERVERS if n_train is None else n_train
        n_inf = DEFAULT_INFERENCE_SERVERS if n_inf is None else n_inf
        console.print(f"auto-sized cluster: {n_train} training + {n_inf} inference servers "
                      f"(largest training cluster on which strict fifo's mean queuing delay "
                      f"is still >= 4,000 s)")
    elif n_train is None and n_inf is None and o["trace"] != DEFAULT_TRACE:
        click.echo(f"hint: the default cluster ({DEFAULT_TRAINING_SERVERS} training + "
                   f"{DEFAULT_INFERENCE_SERVERS} inference servers) is sized for "
                   f"{DEFAULT_TRACE}; use --training-servers auto --inference-servers auto "
                   "to size it for this trace", err=True)
    if n_train is None:
        n_train = DEFAULT_TRAINING_SERVERS
    if n_inf is None:
        n_inf = DEFAULT_INFERENCE_SERVERS
    return int(n_train), int(n_inf)


def _prepare(o: dict[str, Any], console: Console) -> tuple[Any, dict[str, Any], Any, Any]:
    """Load and synthesise the trace, build the config and the inference demand."""
    from aryl.sim import SimConfig
    from aryl.sim.adapters import load_inference_spec
    from aryl.traces import synthesize_elastic

    horizon = o["horizon"]
    if horizon is not None and not (math.isfinite(horizon) and horizon > 0):
        raise click.ClickException(f"--horizon: must be a number of seconds > 0, got {horizon:g}")
    trace = _load(o, console)
    try:
        trace = synthesize_elastic(trace, elastic_fraction=o["elastic_fraction"], seed=o["seed"],
                                   gpus_per_server=o["gpus_per_server"])
    except InvalidInputError as exc:
        raise click.ClickException(f"elastic synthesis: {exc}") from exc
    jobs = trace.jobs
    n_train, n_inf = _sizes(o, jobs, console)
    try:
        t0 = float(jobs["submit_time_s"].iloc[0]) if len(jobs) else 0.0
        span = float(jobs["submit_time_s"].iloc[-1] - t0) if len(jobs) else 0.0
        cfg = SimConfig(
            n_training_servers=n_train,
            n_inference_servers=n_inf,
            gpus_per_server=o["gpus_per_server"],
            seed=o["seed"],
            reclaim_policy=o["reclaim_policy"],
            backend=o["backend"],
            horizon_s=None if horizon is None else t0 + horizon,
            check=o["check"],
        )
    except InvalidInputError as exc:
        # SimConfig names its field (gpus_per_server, ...): say the option instead
        msg = str(exc)
        field = msg.split(":", 1)[0]
        if field.isidentifier():
            msg = f"--{field.replace('_', '-')}{msg[len(field):]}"
        raise click.ClickException(msg) from exc
    try:
        demand = load_inference_spec(o["inference"], cfg.n_inference_servers, t0, span, o["seed"])
    except InvalidInputError as exc:
        msg = str(exc)
        if msg.startswith("spec:"):  # the library does not know the CLI's 'none'
            msg = ("expected 'bundled', 'diurnal', 'none' or a CSV of time_s,servers_needed, "
                   f"got {o['inference']!r}")
        raise click.ClickException(f"--inference: {msg}") from exc
    meta = dict(trace.meta)
    meta.setdefault("source", trace.source)
    return trace, meta, cfg, demand


def _run(
    trace: Any, policy: str, cfg: Any, demand: Any, show_progress: bool, keep_loans: bool = False,
    console: Console | None = None,
) -> Any:
    """Simulate one policy; a progress bar only on a terminal and for >= 2,000 jobs."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from aryl.sim import simulate

    inference = demand if demand is not None else False
    opts = {"return_idle_loans": False} if keep_loans else None
    n = len(trace.jobs)
    console = console if console is not None else Console()
    if not show_progress or n < 2000 or not console.is_terminal:
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
        console=console,
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


MANIFEST = "manifest.json"


def _write_manifest(out: Path, paths: list[Path], command: str) -> Path:
    """Write ``out/manifest.json`` and delete the stale files of an earlier run.

    The manifest lists the files this run wrote (relative to ``out``).  Files
    listed by a previous ``manifest.json`` in ``out`` and not written again are
    removed (then their folders, if left empty); files no manifest lists are
    never touched.
    """
    from aryl._io import atomic_write_text

    root = out.resolve()
    rel = sorted({str(Path(p).resolve().relative_to(root)) for p in paths})
    old: list[str] = []
    mpath = out / MANIFEST
    if mpath.is_file():
        try:
            old = [str(f) for f in json.loads(mpath.read_text()).get("files", [])]
        except (ValueError, AttributeError, OSError):
            old = []
    keep = set(rel)
    for f in old:
        if f in keep or f == MANIFEST:
            continue
        target = (root / f).resolve()
        if root not in target.parents or not target.is_file() or target.is_symlink():
            continue
        target.unlink()
        parent = target.parent
        while parent != root and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    return atomic_write_text(mpath, json.dumps({"command": command, "files": rel}, indent=2))


def _describe(trace: Any, cfg: Any, o: dict[str, Any]) -> str:
    """One line saying what is replayed: trace, jobs, cluster, elastic share, seed."""
    from rich.markup import escape

    label = escape(str(o["trace"])) + (f" (window {escape(o['window'])})" if o["window"] else "")
    return (f"{label}: {len(trace.jobs):,} jobs on {cfg.n_training_servers} training + "
            f"{cfg.n_inference_servers} inference servers ({cfg.gpus_per_server} GPUs each), "
            f"{100 * o['elastic_fraction']:.0f}% of jobs elastic, inference demand "
            f"{escape(str(o['inference']))}, seed {cfg.seed}")


def _summary_table(s: dict[str, Any]) -> Table:
    t = Table(title=f"aryl replay: policy {s['policy']}", show_header=True)
    t.add_column("measure")
    for c in ("mean", "p50", "p95", "p99"):
        t.add_column(c, justify="right")
    t.add_column("jobs with > 0", justify="right")
    for key, label, share in (
        ("queuing_delay_s", "queuing delay (s)", s.get("share_jobs_waited")),
        ("jct_s", "JCT (s)", None),
        ("wait_s", "total wait (s)", s.get("share_jobs_waited_total")),
    ):
        st = s[key]
        t.add_row(label, *(_fmt(st[c]) for c in ("mean", "p50", "p95", "p99")),
                  "" if share is None and key == "jct_s" else _pct(share))
    t.caption = "finished jobs; 'jobs with > 0': share that waited at all"
    return t


def _counts_table(s: dict[str, Any]) -> Table:
    t = Table(show_header=False)
    t.add_row("jobs finished / unfinished / infeasible",
              f"{s['n_finished']:,} / {s['n_unfinished']:,} / {s['n_infeasible']:,}")
    if s.get("n_not_arrived"):
        t.add_row("jobs not arrived by the horizon", f"{s['n_not_arrived']:,}")
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
@click.option("--policy", type=click.Choice(POLICIES), default="aryl", show_default=True,
              help="Scheduling policy (docs/simulator.md).")
@_common
def replay_command(policy: str, **o: Any) -> None:
    """Replay a trace under one policy and print the summary."""
    if o["plot"] and not o["out"]:
        raise click.UsageError("--plot needs --out DIR")
    console = Console()
    trace, _meta, cfg, demand = _prepare(o, console)
    console.print(_describe(trace, cfg, o))
    res = _run(trace, policy, cfg, demand, not o["no_progress"], o["keep_idle_loans"], console)
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
        paths.append(_write_manifest(out, paths, "replay"))
        console.print(f"wrote {len(paths)} files to {out}")


def _ratio(base: float | None, x: float | None) -> float:
    """``base / x`` (NaN when undefined)."""
    if base is None or x is None or x <= 0:
        return math.nan
    return base / x


def _fmt_ratio(r: float) -> str:
    return "-" if math.isnan(r) else f"{r:.2f}x"


def _fmt_gain(g: float) -> str:
    return "-" if math.isnan(g) else f"{100 * g:+.1f}%"


@click.command(name="compare")
@click.option("--policies", default="fifo,aryl", show_default=True,
              help="Comma-separated policies to run on the same input (each at most once).")
@click.option("--baseline", default="fifo", show_default=True,
              help="Policy the ratios are against (run too if not listed).")
@_common
def compare_command(policies: str, baseline: str, **o: Any) -> None:
    """Replay a trace under several policies and print one table with ratios.

    Ratios are baseline / policy (> 1: the policy is better); the usage gain is
    policy usage / baseline usage - 1.  ``compare.csv`` stores them as numbers.
    """
    names = [p.strip() for p in policies.split(",") if p.strip()]
    if not names:
        raise click.UsageError("--policies is empty")
    dups = sorted({p for p in names if names.count(p) > 1})
    if dups:
        raise click.UsageError(f"--policies lists {', '.join(dups)} more than once; "
                               "each policy writes one folder, list it once")
    if o["plot"] and not o["out"]:
        raise click.UsageError("--plot needs --out DIR")
    from aryl.policies import available_policies

    known = available_policies()
    for p in [*names, baseline]:
        if p not in known:
            raise click.UsageError(f"unknown policy {p!r}; choose from {', '.join(known)}")
    run_names = names if baseline in names else [baseline, *names]
    # wide enough for the table when the output is a file or a pipe
    console = Console(width=None if sys.stdout.isatty() else 160)
    trace, _meta, cfg, demand = _prepare(o, console)
    console.print(_describe(trace, cfg, o))
    results = {
        p: _run(trace, p, cfg, demand, not o["no_progress"], o["keep_idle_loans"], console)
        for p in run_names
    }
    b = results[baseline].summary
    t = Table(title=f"aryl compare ({len(trace.jobs):,} jobs); ratios = {baseline} / policy "
                    f"(> 1: better than {baseline}); usage gain = policy / {baseline} - 1")
    for c in ("policy", "mean QD (s)", "p95 QD (s)", "waited", "mean wait (s)", "mean JCT (s)",
              "p95 JCT (s)", "usage", "QD ratio", "JCT ratio", "usage gain", "preemptions"):
        t.add_column(c, justify="left" if c == "policy" else "right")
    t.caption = ("QD: queuing delay (first start - arrival); waited: share of jobs with QD > 0; "
                 "wait: total time queued, incl. after preemptions")
    t2 = Table(title="events and decision cost")
    for c in ("policy", "preemptions", "scale-in", "scale-out", "loans", "reclaims",
              "ms/decision"):
        t2.add_column(c, justify="left" if c == "policy" else "right")
    rows = []
    for p in run_names:
        s = results[p].summary
        qd, jct, wait = s["queuing_delay_s"], s["jct_s"], s["wait_s"]
        gain = (
            s["cluster_usage"] / b["cluster_usage"] - 1
            if s["cluster_usage"] and b["cluster_usage"] else math.nan
        )
        row = {
            "policy": p,
            "mean_queuing_delay_s": qd["mean"],
            "p95_queuing_delay_s": qd["p95"],
            "share_jobs_waited": s["share_jobs_waited"],
            "mean_wait_s": wait["mean"],
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
        t.add_row(p, _fmt(qd["mean"]), _fmt(qd["p95"]), _pct(s["share_jobs_waited"]),
                  _fmt(wait["mean"]), _fmt(jct["mean"]), _fmt(jct["p95"]),
                  _pct(s["cluster_usage"]), _fmt_ratio(row["queuing_delay_ratio"]),
                  _fmt_ratio(row["jct_ratio"]), _fmt_gain(gain), f"{s['n_preemptions']:,}")
        t2.add_row(p, f"{s['n_preemptions']:,}", f"{s['n_scale_in']:,}",
                   f"{s['n_scale_out']:,}", f"{s['n_loans']:,}", f"{s['n_reclaims']:,}",
                   f"{s['scheduler_ms_per_decision']:.3f}")
    console.print(t)
    console.print(t2)
    if o["out"]:
        import pandas as pd

        from aryl._io import atomic_write_dataframe

        out = Path(o["out"])
        paths: list[Path] = []
        for p, res in results.items():
            paths += _write(res, out / p)
        paths.append(atomic_write_dataframe(pd.DataFrame(rows), out / "compare.csv"))
        if o["plot"]:
            from aryl.sim.plot import plot_results

            paths += plot_results(results, out)
        paths.append(_write_manifest(out, paths, "compare"))
        console.print(f"wrote {len(paths)} files to {out}")
