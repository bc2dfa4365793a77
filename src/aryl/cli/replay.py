"""``aryl replay`` and ``aryl compare``: trace replays through the simulator.

``aryl replay`` with no argument runs the ``aryl`` policy on the bundled
``itp-c07`` preset (half of the jobs made elastic, seed 0) with the bundled
inference profile, on the default cluster (docs/simulator.md), and prints the
summary.  ``aryl compare --policies fifo,aryl`` runs several policies on the
same input and prints one table with ratios against ``fifo`` (the paper's
"1.53x lower mean queuing delay / +26.9% usage" form; ratios are
baseline / policy, ``compare.csv`` stores them as numbers).

Every knob (``aryl.sim.SimConfig``, the elastic synthesis, the inference
demand, the policy options) can be set with ``--set NAME=VALUE`` or
``--config FILE.toml`` (:mod:`aryl.cli.config`, docs/configuration.md); the
effective configuration is in ``summary.json`` (``config`` and ``run``),
``--json`` and ``--show-config``.  Tables are laid out to fit the terminal
(:mod:`aryl.cli._tables`).

``--out DIR`` is all-or-nothing: the files are written to a temporary sibling
folder that then replaces ``DIR`` as a whole, so ``DIR`` is always either the
previous run or the new one (Ctrl-C exits 130 and leaves it as it was).
``DIR/manifest.json`` lists the run's files; files a user added to ``DIR``
(listed by no manifest) are carried over to the new folder.  ``DIR`` must be
new, empty or an earlier aryl output, and writable: checked before the replay.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from aryl.cli._errors import InputError, check_out, interruptible
from aryl.cli._tables import Col, print_tables
from aryl.cli.config import AUTO, RunConfig, config_options, given, resolve
from aryl.errors import InvalidInputError, PolicyError, TraceFormatError
from aryl.sim.config import DEFAULT_INFERENCE_SERVERS, DEFAULT_TRAINING_SERVERS

DEFAULT_TRACE = "itp-c07"
# Choices for click (checked against the registries in tests/test_replay_cli_fixes.py).
POLICIES = ("aryl", "aryl-no-elastic", "aryl-no-loan", "elastic-greedy", "fifo",
            "fifo-backfill", "sjf", "tiresias")
RECLAIM_POLICIES = ("aryl", "random", "fewest-jobs", "most-idle", "exact")
# The trace formats of aryl.traces.load_trace (checked against its registry in the tests).
FORMATS = ("canonical", "itp", "philly", "helios", "pai2020", "alibaba2023")

__all__ = ["compare_command", "replay_command"]

_AUTO = AUTO

#: Dedicated options and the field each one sets when it is given.
OPTION_FIELDS: dict[str, tuple[str, str]] = {
    "training_servers": ("--training-servers", "sim.n_training_servers"),
    "inference_servers": ("--inference-servers", "sim.n_inference_servers"),
    "gpus_per_server": ("--gpus-per-server", "sim.gpus_per_server"),
    "cluster": ("--cluster", "sim.cluster"),
    "seed": ("--seed", "sim.seed"),
    "reclaim_policy": ("--reclaim-policy", "sim.reclaim_policy"),
    "backend": ("--backend", "sim.backend"),
    "engine": ("--engine", "sim.engine"),
    "check": ("--check", "sim.check"),
    "elastic_fraction": ("--elastic-fraction", "input.elastic_fraction"),
    "inference": ("--inference", "input.inference"),
    "inference_requests": ("--inference-requests", "serving.inference_requests"),
    "request_rate_scale": ("--request-rate-scale", "serving.request_rate_scale"),
    "autoscaler": ("--autoscaler", "serving.autoscaler"),
    "slo_s": ("--slo-s", "serving.slo_s"),
    "autoscaler_headroom": ("--autoscaler-headroom", "serving.autoscaler_headroom"),
    "reclaim_lead_s": ("--reclaim-lead-s", "serving.reclaim_lead_s"),
    "cold_start_s": ("--cold-start-s", "serving.cold_start_s"),
    "cold_start_trace": ("--cold-start-trace", "serving.cold_start_trace"),
}


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
                     help="Trace path or preset (itp-c01..itp-c10, itp-all); any format of "
                          "`aryl trace inspect` (docs/traces.md)."),
        click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                     help="Trace format (default: detected from the header)."),
        click.option("--tz", default=None,
                     help="Time zone of naive timestamps (Philly default America/Los_Angeles, "
                          "Helios Asia/Shanghai)."),
        click.option("--window", default=None,
                     help="Trace window: 'busiest-15d' or 'START,END' (submit times)."),
        click.option("--inference", default="bundled", show_default=True,
                     help="Inference demand: 'bundled' (daily profile), 'diurnal', 'none' "
                          "or a CSV time_s,servers_needed."),
        click.option("--inference-requests", default=None, metavar="PATH|PRESET",
                     help="Request-level inference: a request trace (Alibaba GenAI "
                          "lora_request_trace.csv, an Azure LLM trace, canonical "
                          "arrival_time_s,service_s, or azure-code / azure-conv); the "
                          "autoscaler's servers_needed replaces --inference and the "
                          "requests are replayed on the servers left serving (docs/model.md)."),
        click.option("--request-rate-scale", type=float, default=None,
                     help="Arrival-rate multiplier of the request trace (a larger service; "
                          "reported in the output).  [default: 1]"),
        click.option("--autoscaler", type=click.Choice(["erlang-c", "utilisation"]),
                     default=None, help="Inference autoscaler.  [default: erlang-c]"),
        click.option("--slo-s", type=float, default=None,
                     help="Waiting-time SLO of the requests, seconds.  [default: 60]"),
        click.option("--autoscaler-headroom", type=float, default=None,
                     help="Extra share of GPUs above the autoscaler's need.  [default: 0]"),
        click.option("--reclaim-lead-s", type=float, default=None,
                     help="Ask for inference servers this long ahead.  [default: 0]"),
        click.option("--cold-start-s", type=float, default=None,
                     help="Model load of a server back from a loan, seconds.  [default: 0]"),
        click.option("--cold-start-trace", default=None, metavar="CSV",
                     help="Measured model loads (ms, column 'value') to draw cold starts "
                          "from, e.g. basemodel_update_latency_anon.csv."),
        click.option("--request-table", is_flag=True,
                     help="Also write requests.parquet (one row per request; needs --out)."),
        click.option("--training-servers", type=_ServersType(1), default=None,
                     help=f"Training servers (8 GPUs each by default) or 'auto' (sized "
                          f"from the trace, see docs/simulator.md).  [default: "
                          f"{DEFAULT_TRAINING_SERVERS}]"),
        click.option("--inference-servers", type=_ServersType(0), default=None,
                     help=f"Inference servers or 'auto' (16/46 of the training servers, "
                          f"at least 4).  [default: {DEFAULT_INFERENCE_SERVERS}]"),
        click.option("--cluster", default=None, metavar="PRESET|FILE.toml",
                     help="GPU pools of several types: a preset ('default', 'lyra') or a "
                          "TOML file (docs/cluster.md); replaces --training-servers / "
                          "--inference-servers / --gpus-per-server."),
        click.option("--drop-invalid", is_flag=True,
                     help="Drop bad trace rows (counted by kind) instead of failing."),
        click.option("--gpus-per-server", type=click.IntRange(min=1), default=8, show_default=True),
        click.option("--elastic-fraction", type=click.FloatRange(0.0, 1.0), default=0.5,
                     show_default=True,
                     help="Fraction of jobs made elastic (for the elastic policies)."),
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Seed of the elastic synthesis and random choices."),
        click.option("--reclaim-policy", type=click.Choice(RECLAIM_POLICIES), default="aryl",
                     show_default=True, help="Which loaned servers a reclaim returns."),
        click.option("--backend", type=click.Choice(["native", "reference"]), default="native",
                     show_default=True, help="Kernel implementation."),
        click.option("--engine", type=click.Choice(["native", "python"]), default="native",
                     show_default=True,
                     help="Simulator engine: compiled (native) or Python (the reference "
                          "twin); identical results (docs/simulator.md)."),
        click.option("--horizon", type=float, default=None,
                     help="Stop at this many seconds after the start; list unfinished jobs."),
        click.option("--check", is_flag=True, help="Run the invariant checker (slower)."),
        click.option("--keep-idle-loans", is_flag=True,
                     help="Loaning policies keep every borrowed server until it is reclaimed "
                          "(default: borrow only servers a pass uses, return empty ones)."),
        click.option("--out", "out", type=click.Path(file_okay=False), default=None,
                     help="Directory for per-job tables, summary JSON, time series."),
        click.option("--plot", is_flag=True, help="Write PNG figures (needs --out)."),
        click.option("--json", "as_json", is_flag=True,
                     help="Print the summary as JSON on stdout (and nothing else; messages "
                          "go to stderr)."),
        click.option("--no-progress", is_flag=True, help="No progress bar."),
    ]
    for option in reversed(options):
        func = option(func)
    return config_options(func)


def _resolve(o: dict[str, Any]) -> RunConfig:
    """The effective configuration: defaults, --config, --set, then the options given."""
    ctx = click.get_current_context()
    options = {field: (name, o[param]) for param, (name, field) in OPTION_FIELDS.items()
               if given(ctx, param)}
    if o["keep_idle_loans"]:
        options["policy.return_idle_loans"] = ("--keep-idle-loans", False)
    rc = resolve(sections=("sim", "input", "policy", "serving"), config_file=o["config_file"],
                 sets=o["sets"], options=options)
    rp = rc.get("sim", "reclaim_policy")
    if rp not in RECLAIM_POLICIES:
        raise click.UsageError(f"reclaim_policy: expected one of {', '.join(RECLAIM_POLICIES)}, "
                               f"got {rp!r} (from {rc.source('sim', 'reclaim_policy')})")
    o["gpus_per_server"] = rc.get("sim", "gpus_per_server")  # the trace loader needs it
    return rc


def _console(o: dict[str, Any]) -> Console:
    """Messages and tables: stdout, or stderr when stdout carries --json or --show-config."""
    return Console(stderr=bool(o["as_json"] or o["show_config"]))


def _load(o: dict[str, Any], console: Console) -> Any:
    """Read the trace (``--drop-invalid`` drops bad rows and prints the counts).

    A trace left with no job (header-only file, every row dropped, a window
    that keeps none) is an error: there is nothing to replay.
    """
    from aryl.traces import load_trace
    from aryl.traces.validate import InvalidRowsError

    drop = o["drop_invalid"]
    try:
        trace = load_trace(o["trace"], window=o["window"], gpus_per_server=o["gpus_per_server"],
                           on_invalid="drop" if drop else "raise",
                           format=o["fmt"], tz=o["tz"])
    except InvalidRowsError as exc:  # bad data rows: say how many, by kind, and the flag
        raise InputError(exc.describe(drop_hint="--drop-invalid")) from exc
    except InvalidInputError as exc:
        where = "" if isinstance(exc, TraceFormatError) else "--trace/--window: "
        raise InputError(f"{where}{exc}") from exc
    dropped = {k: int(v) for k, v in trace.dropped.items() if v}
    if drop:
        if dropped:
            kinds = ", ".join(f"{k}: {v:,}" for k, v in dropped.items())
            console.print(f"dropped {sum(dropped.values()):,} invalid row(s) ({kinds})")
        else:
            console.print("dropped 0 invalid rows")
    if trace.n_jobs == 0:
        if "window" in trace.meta:
            w = trace.meta["window"]
            why = (f"the window [{w['start_s']:,.0f}, {w['end_s']:,.0f}) keeps none of its "
                   f"jobs ({w['n_before']:,} before, {w['n_after']:,} after)")
        elif dropped:
            why = (f"all {sum(dropped.values()):,} rows were dropped "
                   f"({', '.join(f'{k}: {v:,}' for k, v in dropped.items())})")
        else:
            why = "it has no job rows"
        raise InputError(f"--trace: nothing to replay in {o['trace']}: {why}")
    return trace


def _sizes(rc: RunConfig, o: dict[str, Any], jobs: Any, console: Console) -> tuple[int, int]:
    """Resolve the server counts (numbers or ``auto``) of the effective configuration."""
    n_train = rc.get("sim", "n_training_servers")
    n_inf = rc.get("sim", "n_inference_servers")
    if _AUTO in (n_train, n_inf):
        from rich.progress import TextColumn

        from aryl.cli._progress import make_progress
        from aryl.sim.sizing import size_cluster

        gps = rc.get("sim", "gpus_per_server")
        # fifo probe replays (about 10 s on Philly): a bar with an ETA on a terminal
        show = not o["no_progress"] and console.is_terminal
        try:
            if show:
                with make_progress(console, TextColumn("{task.completed}/{task.total} probes"),
                                   trailing="{task.fields[last]}") as bar:
                    task = bar.add_task("sizing the cluster (fifo replays)", total=None,
                                        last="")

                    def probe(done: int, total: int, n: int, delay_s: float) -> None:
                        bar.update(task, completed=done, total=total,
                                   last=f"{n} servers: mean delay {delay_s:,.0f} s")

                    sized = size_cluster(jobs, gpus_per_server=gps, progress=probe)
            else:
                sized = size_cluster(jobs, gpus_per_server=gps)
        except InvalidInputError as exc:
            raise InputError(f"--training-servers auto: {exc}") from exc
        auto_train, auto_inf = sized
        if n_train == _AUTO:
            n_train = auto_train
        if n_inf == _AUTO:
            n_inf = auto_inf
        console.print(f"auto-sized cluster: {n_train} training + {n_inf} inference servers "
                      f"({sized.reason})")
    elif (rc.source("sim", "n_training_servers") == "default"
          and rc.source("sim", "n_inference_servers") == "default"
          and o["trace"] != DEFAULT_TRACE):
        click.echo(f"hint: the default cluster ({DEFAULT_TRAINING_SERVERS} training + "
                   f"{DEFAULT_INFERENCE_SERVERS} inference servers) is sized for "
                   f"{DEFAULT_TRACE}; use --training-servers auto --inference-servers auto "
                   "to size it for this trace", err=True)
    return int(n_train), int(n_inf)


def _check_policy_options(rc: RunConfig, policies: list[str]) -> None:
    """Build each Python policy of the run with its options, before any trace is read.

    An unknown option or a value of the wrong type (checked by the policy's class
    against its ``defaults``) is an error, and so is a ``policy.NAME.OPTION`` whose
    NAME is no Python policy of this run (a registered policy's options are the
    ``[policy]`` fields): such an option would otherwise be dropped unseen.
    """
    from aryl.scheduling.registry import POLICIES, load_policy_class, resolve_policy

    used: set[str] = set()
    for p in policies:
        if p in POLICIES:
            continue
        cls: Any = load_policy_class(p)
        used |= {p, cls.policy_name()}
        try:
            resolve_policy(p, rc.options_for(p))
        except InvalidInputError as exc:
            raise InputError(str(exc)) from exc
    for pname, opts in rc.user_policy.items():
        if pname in used:
            continue
        opt = next(iter(opts))
        where = rc.sources.get(f"policy.{pname}.{opt}", "--set")
        if pname in POLICIES:
            why = (f"{pname!r} is a registered policy; its options are the [policy] "
                   "fields (`aryl config`), e.g. --set return_idle_loans=false")
        else:
            why = (f"no Python policy of this run is named {pname!r} (this run: "
                   f"{', '.join(policies)}; NAME is a policy's `name`, its entry point "
                   "or its module:Class)")
        raise InputError(f"policy.{pname}.{opt} (from {where}): {why}")


def _prepare(o: dict[str, Any], console: Console,
             policies: list[str]) -> tuple[Any, RunConfig, Any, Any]:
    """Resolve the configuration, check the policies' options, load and synthesise
    the trace, size the cluster, build the config and the inference demand."""
    from aryl.sim import SimConfig
    from aryl.sim.adapters import load_inference_spec
    from aryl.traces import synthesize_elastic

    horizon = o["horizon"]
    if horizon is not None and not (math.isfinite(horizon) and horizon > 0):
        raise InputError(f"--horizon: must be a number of seconds > 0, got {horizon:g}")
    rc = _resolve(o)  # every value checked before the trace is read
    _check_policy_options(rc, policies)
    inp = rc.input_options()
    spec = None
    if rc.get("sim", "cluster") is not None:
        if _AUTO in (rc.get("sim", "n_training_servers"), rc.get("sim", "n_inference_servers")):
            raise click.UsageError("--cluster gives the server counts: do not use 'auto'")
        spec = _cluster_spec(rc)
    # workers are sized to the replay's largest training server (a spec's pools)
    worker_gps = rc.get("sim", "gpus_per_server") if spec is None else max(
        (p.gpus_per_server for p in spec.training_pools), default=rc.get("sim", "gpus_per_server"))
    trace = _load(o, console)
    try:
        trace = synthesize_elastic(trace, elastic_fraction=inp.elastic_fraction,
                                   seed=rc.get("sim", "seed"), alpha_low=inp.alpha_low,
                                   alpha_high=inp.alpha_high,
                                   gpus_per_server=worker_gps,
                                   elastic_worker_gpus=inp.elastic_worker_gpus)
    except InvalidInputError as exc:
        raise InputError(f"elastic synthesis: {exc}") from exc
    jobs = trace.jobs
    if spec is not None:
        n_inf_spec = spec.n_inference_servers
    else:
        n_train, n_inf = _sizes(rc, o, jobs, console)
        src = {f: rc.source("sim", f) for f in ("n_training_servers", "n_inference_servers")}
        rc.set("sim", "n_training_servers", n_train,
               src["n_training_servers"]
               + (" (auto)" if rc.get("sim", "n_training_servers") == _AUTO else ""))
        rc.set("sim", "n_inference_servers", n_inf,
               src["n_inference_servers"]
               + (" (auto)" if rc.get("sim", "n_inference_servers") == _AUTO else ""))
        n_inf_spec = n_inf
    t0 = float(jobs["submit_time_s"].iloc[0]) if len(jobs) else 0.0
    span = float(jobs["submit_time_s"].iloc[-1] - t0) if len(jobs) else 0.0
    if horizon is not None:
        rc.set("sim", "horizon_s", t0 + horizon, "--horizon")
    try:
        cfg = SimConfig(**rc.values["sim"])
    except InvalidInputError as exc:  # checked in _resolve; kept for a clear message
        raise InputError(str(exc)) from exc
    try:
        demand = load_inference_spec(inp.inference, n_inf_spec, t0, span, cfg.seed,
                                     peak_utilisation=inp.peak_utilisation)
    except InvalidInputError as exc:
        raise InputError(f"inference: {exc}") from exc
    serving = rc.serving_options()
    if serving.inference_requests is not None:
        demand = _request_demand(rc, cfg, serving, t0, o)
    return trace, rc, cfg, demand


def _request_demand(rc: RunConfig, cfg: Any, serving: Any, t0: float, o: dict[str, Any]) -> Any:
    """The autoscaler's demand for the request trace (which it carries in ``meta``)."""
    from aryl.sim.serving import demand_from_requests, inference_server_gpus, load_serving_requests
    from aryl.sim.setup import resolve_cluster
    from aryl.traces.validate import InvalidRowsError

    if not cfg.record_events:
        raise click.UsageError("--inference-requests needs the event log: record_events=true")
    try:
        reqs = load_serving_requests(serving, seed=cfg.seed,
                                     on_invalid="drop" if o["drop_invalid"] else "raise")
        if serving.cold_start_trace is not None:  # checked before the replay, not after
            from aryl.traces.requests import read_load_latencies

            read_load_latencies(serving.cold_start_trace)
        gpus = inference_server_gpus(resolve_cluster(cfg))
        start = cfg.start_time_s if cfg.start_time_s is not None else t0
        demand = demand_from_requests(reqs, serving, n_servers=len(gpus),
                                      gpus_per_server=min(gpus.values(), default=1),
                                      start_s=start)
    except InvalidRowsError as exc:
        raise InputError(exc.describe(drop_hint="--drop-invalid")) from exc
    except InvalidInputError as exc:
        raise InputError(f"inference requests: {exc}") from exc
    demand.meta["request_trace"] = reqs
    return demand


def _serve(res: Any, demand: Any, rc: RunConfig) -> Any:
    """Replay the requests on the servers the replay left serving (None without requests)."""
    if "request_trace" not in getattr(demand, "meta", {}):
        return None
    from aryl.sim.serving import serve_result

    try:
        out = serve_result(res, demand.meta["request_trace"], rc.serving_options(),
                           demand=demand, backend=res.summary["config"]["backend"])
    except InvalidInputError as exc:
        raise InputError(f"inference requests: {exc}") from exc
    res.summary["serving"] = out.summary
    return out


def _print_serving(console: Console, s: dict[str, Any]) -> None:
    def f2(x: float | None) -> str:
        return "-" if x is None else f"{x:,.2f}"

    rows = [
        ("requests (rate scale)", f"{s['n_requests']:,} (x{s['request_rate_scale']:g})"),
        ("offered load (GPUs)", f"{s['offered_load_gpus']:.2f}"),
        ("mean servers needed (autoscaler)", f2(s.get("mean_servers_needed"))),
        ("latency p50 / p95 / p99 (s)",
         f"{f2(s['latency_p50_s'])} / {f2(s['latency_p95_s'])} / "
         f"{f2(s['latency_p99_s'])}"),
        (f"SLO attainment (wait <= {s['slo_s']:g} s)", _pct(s["slo_attainment"])),
        ("SLO attainment without loans", _pct(s["slo_attainment_no_loans"])),
        ("requests delayed by loans", f"{s['n_delayed_by_loans']:,}"),
        ("delay by loans mean / p99 / max (s)",
         f"{f2(s['loan_delay_mean_s'])} / {f2(s['loan_delay_p99_s'])} / "
         f"{f2(s['loan_delay_max_s'])}"),
        ("cold starts (server-s loading)",
         f"{s['n_cold_starts']:,} ({s['cold_start_server_s']:,.0f})"),
        ("requests never served", f"{s['n_unserved']:,}"),
    ]
    print_tables(console, [Col("inference requests", "left"), Col("value")],
                 [list(r) for r in rows])


def _cluster_spec(rc: RunConfig) -> Any:
    """The cluster spec of ``--cluster`` (errors name the option)."""
    from aryl.sim import SimConfig
    from aryl.sim.setup import resolve_cluster

    try:
        return resolve_cluster(SimConfig(cluster=rc.get("sim", "cluster")))
    except InvalidInputError as exc:
        raise click.UsageError(f"--cluster: {exc}") from None


def _cluster_text(cfg: Any) -> str:
    """``46 training + 16 inference servers (8 GPUs each)`` or the pools of a spec."""
    if cfg.cluster is None:
        return (f"{cfg.n_training_servers} training + {cfg.n_inference_servers} inference "
                f"servers ({cfg.gpus_per_server} GPUs each)")
    from aryl.sim.setup import resolve_cluster

    spec = resolve_cluster(cfg)
    parts = [f"{p.n_servers} {p.gpu_type} ({p.gpus_per_server} GPUs)" for p in spec.pools
             if p.role == "training"]
    inf = [f"{p.n_servers} {p.gpu_type} ({p.gpus_per_server} GPUs)" for p in spec.pools
           if p.role == "inference"]
    return (f"cluster {cfg.cluster}: training {' + '.join(parts) or 'none'}, "
            f"inference {' + '.join(inf) or 'none'}")


def _run(
    trace: Any, policy: str, cfg: Any, demand: Any, show_progress: bool,
    policy_options: dict[str, Any] | None = None, console: Console | None = None,
) -> Any:
    """Simulate one policy; a progress bar only on a terminal and for >= 2,000 jobs.

    ``trace`` may come as a one-item list the caller has let go of: the replay then
    holds the only reference to it, so that the trace's frame is freed once the
    engine has its own job columns, not held through the loop."""
    from rich.progress import TextColumn

    from aryl.cli._progress import make_progress
    from aryl.sim import simulate

    inference = demand if demand is not None else False
    opts = policy_options or None
    n = len((trace[0] if isinstance(trace, list) else trace).jobs)

    def given() -> Any:
        return trace.pop() if isinstance(trace, list) else trace

    console = console if console is not None else Console()
    if not show_progress or n < 2000 or not console.is_terminal:
        try:
            return simulate(given(), policy=policy, config=cfg, inference=inference,
                            policy_options=opts)
        except InvalidInputError as exc:
            raise InputError(str(exc)) from exc
        except PolicyError as exc:
            raise click.ClickException(str(exc)) from exc
    with make_progress(console, TextColumn("{task.completed:,}/{task.total:,} jobs")) as bar:
        task = bar.add_task(policy, total=n)

        def cb(done: int, total: int, now: float) -> None:
            bar.update(task, completed=done)

        try:
            return simulate(given(), policy=policy, config=cfg, inference=inference,
                            progress=cb, policy_options=opts)
        except InvalidInputError as exc:
            raise InputError(str(exc)) from exc
        except PolicyError as exc:
            raise click.ClickException(str(exc)) from exc


def _fmt(x: float | None, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.0f}{unit}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _jsonable(x: Any) -> Any:
    """Plain JSON values: numpy scalars to Python, NaN and infinities to null."""
    import numpy as np

    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return str(x)


def _dumps(x: Any) -> str:
    return json.dumps(_jsonable(x), indent=2, allow_nan=False)


def _write(res: Any, out: Path) -> list[Path]:
    from aryl._io import atomic_write_dataframe, atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    paths = [
        atomic_write_dataframe(res.jobs, out / "jobs.parquet"),
        atomic_write_dataframe(res.jobs, out / "jobs.csv"),
        atomic_write_dataframe(res.timeseries, out / "timeseries.csv"),
        atomic_write_dataframe(res.events, out / "events.csv.gz"),
        atomic_write_text(out / "summary.json", _dumps(res.summary)),
        # wall-clock measures differ run to run: their own file, so that every other
        # file of the same command is byte-identical on a rerun
        atomic_write_text(out / "timing.json", _dumps(res.timing)),
    ]
    return paths


MANIFEST = "manifest.json"


def _write_manifest(out: Path, paths: list[Path], command: str) -> Path:
    """Write ``out/manifest.json``: the command and the files of the run, relative to ``out``."""
    from aryl._io import atomic_write_text

    root = out.resolve()
    rel = sorted({str(Path(p).resolve().relative_to(root)) for p in paths})
    return atomic_write_text(out / MANIFEST,
                             json.dumps({"command": command, "files": rel}, indent=2))


def _check_out(o: dict[str, Any]) -> None:
    """Refuse an ``--out`` that cannot be written or replaced, before any work."""
    if not o["out"]:
        return
    from aryl._io import check_output_folder

    check_out(o["out"], "--out", folder=True)
    try:
        check_output_folder(o["out"], marker=MANIFEST)
    except InvalidInputError as exc:
        msg = str(exc)
        raise InputError(f"--out: {msg[5:] if msg.startswith('out: ') else msg}") from None


def _interrupt_text(o: dict[str, Any]) -> str:
    if o["out"]:
        return (f"{o['out']} is unchanged (the previous run, if any, is kept whole); run the "
                "same command again.")
    return "Nothing was written."


def _write_folder(out: Path, command: str, fill: Any) -> int:
    """Write the output folder all at once: ``fill(tmp)`` returns the paths it wrote."""
    from aryl._io import atomic_directory

    with atomic_directory(out, marker=MANIFEST, keep_unlisted=True) as tmp:
        paths = list(fill(tmp))
        paths.append(_write_manifest(tmp, paths, command))
    return len(paths)


def _elastic_policies(names: list[str]) -> list[str]:
    from aryl.scheduling.registry import policy_class_of as policy_class

    return [p for p in names if policy_class(p).elastic]


def _describe(trace: Any, cfg: Any, rc: RunConfig, o: dict[str, Any], policies: list[str]) -> str:
    """One line saying what is replayed: trace, jobs, cluster, elastic share, seed.

    The elastic share is claimed only for the policies that scale jobs; the
    others run every job at its traced size.
    """
    from rich.markup import escape

    inp = rc.input_options()
    label = escape(str(o["trace"])) + (f" (window {escape(o['window'])})" if o["window"] else "")
    elastic = _elastic_policies(policies)
    rigid = [p for p in policies if p not in elastic]
    share = f"{100 * inp.elastic_fraction:.0f}% of jobs elastic"
    if inp.elastic_worker_gpus != "one":
        share += f" ({inp.elastic_worker_gpus} workers)"
    if not elastic:
        jobs_text = f"every job at its traced size ({', '.join(rigid)} does not scale jobs)" \
            if len(rigid) == 1 else "every job at its traced size (no policy here scales jobs)"
    elif not rigid:
        jobs_text = share
    else:
        jobs_text = (f"{share} under {', '.join(elastic)}; traced sizes under "
                     f"{', '.join(rigid)}")
    return (f"{label}: {len(trace.jobs):,} jobs on {escape(_cluster_text(cfg))}, "
            f"{jobs_text}, inference demand {escape(str(inp.inference))}, seed {cfg.seed}")


def _print_summary(console: Console, s: dict[str, Any]) -> None:
    """The replay's measures: delay and JCT statistics, then counts, each fitting the width."""
    rows = []
    for key, label, share in (
        ("queuing_delay_s", "queuing delay (s)", s.get("share_jobs_waited")),
        ("jct_s", "JCT (s)", None),
        ("wait_s", "total wait (s)", s.get("share_jobs_waited_total")),
    ):
        st = s[key]
        rows.append([label, *(_fmt(st[c]) for c in ("mean", "p50", "p95", "p99")),
                     "" if share is None and key == "jct_s" else _pct(share)])
    cols = [Col("measure", "left"), *(Col(c) for c in ("mean", "p50", "p95", "p99")),
            Col("jobs with > 0")]
    print_tables(console, cols, rows, title=f"aryl replay: policy {s['policy']}",
                 caption=DELAY_NOTE)
    counts = [
        ("jobs finished", f"{s['n_finished']:,}"),
        ("jobs unfinished", f"{s['n_unfinished']:,}"),
        ("jobs infeasible", f"{s['n_infeasible']:,}"),
        *([("jobs not arrived by the horizon", f"{s['n_not_arrived']:,}")]
          if s.get("n_not_arrived") else []),
        ("cluster usage (training + loaned)", _pct(s["cluster_usage"])),
        ("goodput (useful work / GPU-s available)", _pct(s.get("goodput"))),
        ("inference utilisation", _pct(s["inference_utilisation"])),
        ("inference utilisation with loans", _pct(s["inference_utilisation_with_loans"])),
        ("preemptions", f"{s['n_preemptions']:,}"),
        ("preemptions by reclaims", f"{s['n_reclaim_preemptions']:,}"),
        ("scale-ins", f"{s['n_scale_in']:,}"),
        ("scale-outs", f"{s['n_scale_out']:,}"),
        ("moves", f"{s['n_moves']:,}"),
        ("loans", f"{s['n_loans']:,}"),
        ("reclaims", f"{s['n_reclaims']:,}"),
        ("loan returns", f"{s['n_loan_returns']:,}"),
        ("makespan (days)", f"{s['makespan_s'] / 86400:.2f}"),
        ("scheduling decisions", f"{s['n_decisions']:,}"),
        ("scheduler time (s)", f"{s['scheduler_time_s']:.2f}"),
        ("scheduler time per decision (ms)", f"{s['scheduler_ms_per_decision']:.3f}"),
    ]
    print_tables(console, [Col("count", "left"), Col("value")], [list(r) for r in counts],
                 caption=COUNTS_NOTE)
    pools = [p for p in s.get("pools", []) if p["gpu_s_available"] > 0]
    if len(pools) > 1:
        print_tables(
            console,
            [Col("pool", "left"), Col("GPU"), Col("usage"), Col("goodput"), Col("jobs"),
             Col("mean JCT (s)")],
            [[p["pool"], p["gpu_type"], _pct(p["usage"]), _pct(p["goodput"]),
              f"{p['n_jobs_main']:,}", _fmt(p["jct_s"]["mean"])] for p in pools],
            title="by pool",
            caption=POOLS_NOTE,
        )


#: What the numbers of ``aryl replay`` are (printed under its tables; also in --help).
DELAY_NOTE = (
    "Over finished jobs. queuing delay: first start - arrival; JCT: finish - arrival; "
    "total wait: all the time a job was queued, also after preemptions (>= its queuing "
    "delay); 'jobs with > 0': the share of jobs for which it is above 0."
)
COUNTS_NOTE = (
    "cluster usage: GPU-seconds allocated to training jobs / GPU-seconds available to "
    "them (training servers all the time, inference servers while on loan), first arrival "
    "to the end; goodput: useful work (traced duration x traced GPUs of the progress "
    "kept: no rolled-back work, no sub-linear speed-up of extra workers) / the same "
    "GPU-seconds. inference utilisation: server-seconds serving inference / inference "
    "server-seconds; with loans: plus the server-seconds on loan to training. moves: "
    "workers relocated at the same worker count (e.g. off a reclaimed server). loans: "
    "inference servers lent to training; reclaims: loans taken back when "
    "inference needs them (preempting or shrinking jobs); loan returns: loans given back "
    "empty. makespan: first arrival to the end. Details: docs/simulator.md, 'Measures'."
)
POOLS_NOTE = (
    "pool: servers of one role and GPU type (docs/cluster.md); GPU: that type; usage, "
    "goodput: as above within the pool (an inference pool counts only while on loan, so "
    "its usage is that of the loaned servers, not inference utilisation); jobs, mean "
    "JCT: the finished jobs whose most GPU-seconds were in the pool."
)


def _finish_run_config(res: Any, rc: RunConfig) -> None:
    """Record the effective configuration of every section in the summary (``run``)."""
    res.summary["run"] = rc.to_dict()


def _check_policy(spec: str) -> None:
    """A usage error unless ``spec`` is a registered policy, an entry point of
    ``aryl.policies`` or an importable ``module:Class`` (an ``aryl.Policy``)."""
    from aryl.scheduling.registry import POLICIES as REGISTERED
    from aryl.scheduling.registry import entry_point_policies, load_policy_class, twin_policies

    if spec in REGISTERED or spec in twin_policies():
        return
    if ":" not in spec and spec not in entry_point_policies():
        known = sorted([*REGISTERED, *twin_policies(), *entry_point_policies()])
        raise click.UsageError(f"unknown policy {spec!r}; choose from {', '.join(known)} "
                               "(installed: `aryl policies`) or give module:Class")
    try:
        load_policy_class(spec)
    except InvalidInputError as exc:
        raise click.UsageError(str(exc)) from None


def _policy_option(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        _check_policy(value)
    except click.UsageError as exc:
        raise click.BadParameter(exc.message, ctx=ctx, param=param) from None
    return value


@click.command(name="replay")
@click.option("--policy", default="aryl", show_default=True, callback=_policy_option,
              help=f"Scheduling policy: {', '.join(POLICIES)}; an installed one (`aryl "
                   "policies`) or module:Class (docs/policies.md).")
@_common
def replay_command(policy: str, **o: Any) -> None:
    """Replay a trace under one policy and print the summary.

    Any simulator, input or policy field can be set with --set NAME=VALUE or
    --config FILE.toml (`aryl config` lists them).

    \b
    The printed measures (each table has the same note under it;
    docs/simulator.md, "Measures", has every field of summary.json):
    queuing delay   first start - arrival, over finished jobs
    JCT             finish - arrival
    total wait      all the time a job was queued, also after preemptions
    cluster usage   GPU-s allocated to training / GPU-s available to it
                    (training servers always, inference servers while lent)
    goodput         useful work (traced duration x GPUs of the progress
                    kept) / the same GPU-s
    inference       serving server-s / inference server-s; "with loans"
     utilisation    adds the server-s lent to training
    moves           workers relocated at the same count
    loans, reclaims inference servers lent to training, taken back
    by pool         one row per pool (role and GPU type) of the cluster

    --out DIR is replaced as a whole (the previous run or the new one, never
    a mix; Ctrl-C exits 130 and leaves it as it was).
    """
    if o["plot"] and not o["out"]:
        raise click.UsageError("--plot needs --out DIR")
    _check_out(o)
    with interruptible(_interrupt_text(o)):
        _replay(policy, o)


def _replay(policy: str, o: dict[str, Any]) -> None:
    console = _console(o)
    trace, rc, cfg, demand = _prepare(o, console, [policy])
    if o["show_config"]:
        click.echo(rc.to_toml("aryl replay"), nl=False)
        return
    console.print(_describe(trace, cfg, rc, o, [policy]))
    if o["request_table"] and not o["out"]:
        raise click.UsageError("--request-table needs --out DIR")
    held = [trace]  # handed over: the replay frees the trace's frame (see _run)
    del trace
    res = _run(held, policy, cfg, demand, not o["no_progress"], rc.options_for(policy),
               console)
    _finish_run_config(res, rc)
    served = _serve(res, demand, rc)
    s = res.summary
    _print_summary(console, {**s, **res.timing})
    if served is not None:
        _print_serving(console, served.summary)
    if len(res.infeasible):
        console.print(f"[yellow]{len(res.infeasible)} job(s) can never fit the training "
                      "cluster (see jobs table, status 'infeasible')")
    if o["out"]:
        out = Path(o["out"])

        def fill(tmp: Path) -> list[Path]:
            paths = _write(res, tmp)
            if served is not None and o["request_table"]:
                from aryl._io import atomic_write_dataframe

                paths.append(atomic_write_dataframe(served.requests, tmp / "requests.parquet"))
            if o["plot"]:
                from aryl.sim.plot import plot_results

                paths += plot_results({policy: res}, tmp)
            return paths

        n_files = _write_folder(out, "aryl replay", fill)
        console.print(f"wrote {n_files} files to {out}")
    if o["as_json"]:
        click.echo(_dumps(s))


def _ratio(base: float | None, x: float | None) -> float:
    """``base / x`` (NaN when undefined)."""
    if base is None or x is None or x <= 0:
        return math.nan
    return base / x


def _fmt_ratio(r: float) -> str:
    return "-" if math.isnan(r) else f"{r:,.2f}x"


def _fmt_gain(g: float) -> str:
    return "-" if math.isnan(g) else f"{100 * g:+.1f}%"


#: compare's measures: (row label, key of the compare.csv row, formatter)
COMPARE_MEASURES: tuple[tuple[str, str, Any], ...] = (
    ("mean QD (s)", "mean_queuing_delay_s", _fmt),
    ("p95 QD (s)", "p95_queuing_delay_s", _fmt),
    ("waited", "share_jobs_waited", _pct),
    ("mean wait (s)", "mean_wait_s", _fmt),
    ("mean JCT (s)", "mean_jct_s", _fmt),
    ("p95 JCT (s)", "p95_jct_s", _fmt),
    ("usage", "cluster_usage", _pct),
    ("QD ratio", "queuing_delay_ratio", _fmt_ratio),
    ("JCT ratio", "jct_ratio", _fmt_ratio),
    ("usage gain", "usage_gain", _fmt_gain),
    ("preemptions", "n_preemptions", lambda v: f"{v:,}"),
    ("scale-ins", "n_scale_in", lambda v: f"{v:,}"),
    ("scale-outs", "n_scale_out", lambda v: f"{v:,}"),
    ("loans", "n_loans", lambda v: f"{v:,}"),
    ("reclaims", "n_reclaims", lambda v: f"{v:,}"),
    ("ms/decision", "scheduler_ms_per_decision", lambda v: f"{v:.3f}"),
)


def compare_rows(results: dict[str, Any], baseline: str) -> list[dict[str, Any]]:
    """One row of numbers per policy (the rows of ``compare.csv``), ratios against ``baseline``."""
    b = results[baseline].summary
    rows = []
    for p, res in results.items():
        s = res.summary
        qd, jct, wait = s["queuing_delay_s"], s["jct_s"], s["wait_s"]
        gain = (
            s["cluster_usage"] / b["cluster_usage"] - 1
            if s["cluster_usage"] and b["cluster_usage"] else math.nan
        )
        rows.append({
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
        })  # no wall-clock measure: compare.csv is the same on a rerun (timing.json has them)
    return rows


def print_compare(console: Console, rows: list[dict[str, Any]], baseline: str,
                  n_jobs: int) -> None:
    """The compare table: measures as rows, policies as columns, in groups fitting the width."""
    cols = [Col("measure", "left"), *(Col(r["policy"]) for r in rows)]
    cells = [[label, *(fmt(r[key]) for r in rows)] for label, key, fmt in COMPARE_MEASURES]
    print_tables(
        console, cols, cells,
        title=f"aryl compare ({n_jobs:,} jobs): ratios = {baseline} / policy (> 1: better "
              f"than {baseline}); usage gain = policy / {baseline} - 1",
        caption="QD: queuing delay (first start - arrival); waited: share of jobs with "
                "QD > 0; wait: total time queued, incl. after preemptions; ms/decision: "
                "scheduler time per scheduling pass",
    )


@click.command(name="compare")
@click.option("--policies", default="fifo,aryl", show_default=True,
              help="Comma-separated policies to run on the same input (each at most once): "
                   "registered names, installed ones (`aryl policies`) or module:Class.")
@click.option("--baseline", default="fifo", show_default=True,
              help="Policy the ratios are against (run too if not listed).")
@_common
def compare_command(policies: str, baseline: str, **o: Any) -> None:
    """Replay a trace under several policies and print one table with ratios.

    Ratios are baseline / policy (> 1: the policy is better); the usage gain is
    policy usage / baseline usage - 1.  ``compare.csv`` stores them as numbers.
    Any simulator, input or policy field can be set with --set NAME=VALUE or
    --config FILE.toml (`aryl config` lists them); every policy gets the same.
    """
    names = [p.strip() for p in policies.split(",")]
    if names == [""]:
        raise click.UsageError("--policies is empty")
    if "" in names:  # "fifo,,aryl" or a trailing comma: a name left out by mistake?
        raise click.UsageError(f"--policies {policies!r}: entry {names.index('') + 1} is "
                               "empty; give comma-separated names, e.g. fifo,aryl")
    dups = sorted({p for p in names if names.count(p) > 1})
    if dups:
        raise click.UsageError(f"--policies lists {', '.join(dups)} more than once; "
                               "each policy writes one folder, list it once")
    if o["plot"] and not o["out"]:
        raise click.UsageError("--plot needs --out DIR")
    for p in [*names, baseline]:
        _check_policy(p)
    run_names = names if baseline in names else [baseline, *names]
    _check_out(o)
    with interruptible(_interrupt_text(o)):
        _compare(run_names, baseline, o)


def _compare(run_names: list[str], baseline: str, o: dict[str, Any]) -> None:
    console = _console(o)
    trace, rc, cfg, demand = _prepare(o, console, run_names)
    if o["show_config"]:
        click.echo(rc.to_toml("aryl compare"), nl=False)
        return
    console.print(_describe(trace, cfg, rc, o, run_names))
    results = {
        p: _run(trace, p, cfg, demand, not o["no_progress"], rc.options_for(p), console)
        for p in run_names
    }
    for res in results.values():
        _finish_run_config(res, rc)
    served = {p: _serve(res, demand, rc) for p, res in results.items()}
    rows = compare_rows(results, baseline)
    shown = [{**r, "scheduler_ms_per_decision":
              results[r["policy"]].timing["scheduler_ms_per_decision"]} for r in rows]
    print_compare(console, shown, baseline, len(trace.jobs))
    for p, sv in served.items():
        if sv is not None:
            console.print(f"policy {p}:")
            _print_serving(console, sv.summary)
    if o["out"]:
        import pandas as pd

        from aryl._io import atomic_write_dataframe

        out = Path(o["out"])

        def fill(tmp: Path) -> list[Path]:
            paths: list[Path] = []
            for p, res in results.items():
                paths += _write(res, tmp / p)
                sv = served[p]
                if sv is not None and o["request_table"]:
                    paths.append(atomic_write_dataframe(sv.requests, tmp / p / "requests.parquet"))
            paths.append(atomic_write_dataframe(pd.DataFrame(rows), tmp / "compare.csv"))
            if o["plot"]:
                from aryl.sim.plot import plot_results

                paths += plot_results(results, tmp)
            return paths

        n_files = _write_folder(out, "aryl compare", fill)
        console.print(f"wrote {n_files} files to {out}")
    if o["as_json"]:
        click.echo(_dumps({
            "baseline": baseline,
            "compare": rows,
            "summaries": {p: res.summary for p, res in results.items()},
        }))
