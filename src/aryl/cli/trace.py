"""``aryl trace``: inspect and convert job traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from aryl.cli._errors import InputError, check_out
from aryl.errors import InvalidInputError

__all__ = ["trace_command"]

_FORMATS = ["canonical", "itp", "philly", "helios", "pai2020", "alibaba2023"]


def _load_options(func: Any) -> Any:
    options = [
        click.option("--format", "fmt", type=click.Choice(_FORMATS), default=None,
                     help="Input format (default: detected from the header)."),
        click.option("--window", default=None,
                     help="'busiest-15d' or 'START,END' (submit time in [START, END))."),
        click.option("--tz", default=None,
                     help="Time zone of naive timestamps (Philly default America/Los_Angeles, "
                          "Helios Asia/Shanghai)."),
        click.option("--drop-invalid", is_flag=True,
                     help="Drop invalid rows and count them instead of failing."),
        click.option("--gpus-per-server", type=int, default=8, show_default=True),
        click.option("--max-gpus", type=int, default=None,
                     help="GPUs the cluster can ever hold; larger jobs are invalid."),
        click.option("--no-multi-server", is_flag=True,
                     help="Jobs larger than one server are invalid."),
        click.option("--node-list", type=click.Path(exists=True, dir_okay=False),
                     default=None, help="Alibaba 2023 node list (per-node GPU capacity)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _load(trace: str, fmt: str | None, window: str | None, tz: str | None, drop_invalid: bool,
          gpus_per_server: int, max_gpus: int | None, no_multi_server: bool,
          node_list: str | None) -> Any:
    from aryl.traces import load_trace
    from aryl.traces.validate import InvalidRowsError

    try:
        return load_trace(trace, format=fmt, window=window, tz=tz,
                          on_invalid="drop" if drop_invalid else "raise",
                          gpus_per_server=gpus_per_server, max_gpus=max_gpus,
                          allow_multi_server=not no_multi_server, node_list=node_list)
    except InvalidRowsError as exc:
        raise InputError(exc.describe(drop_hint="--drop-invalid")) from exc
    except InvalidInputError as exc:
        raise InputError(str(exc)) from exc


def _num(value: float, fmt: str = "{:,.0f}") -> str:
    """Format a figure, '-' when it is undefined (no jobs, zero span)."""
    return fmt.format(value) if value == value and abs(value) != float("inf") else "-"


@click.group(name="trace")
def trace_command() -> None:
    """Inspect and convert job traces (paths or presets such as itp-c07)."""


@trace_command.command("inspect")
@click.argument("trace", default="itp-c07")
@_load_options
@click.option("--bins", type=click.IntRange(min=1, max=10_000), default=12, show_default=True,
              help="Time bins of the offered-load table.")
@click.option("--requests", "requests_format", default=None,
              type=click.Choice(["auto", "canonical", "alibaba-genai", "azure-llm"]),
              help="TRACE is an inference request trace (a path, or azure-code / azure-conv) "
                   "in this format ('auto': from the header).")
@click.option("--request-rate-scale", type=float, default=1.0, show_default=True,
              help="Request traces: arrival-rate multiplier (a larger service), seeded by --seed.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of --request-rate-scale.")
def inspect_command(trace: str, fmt: str | None, window: str | None, tz: str | None,
                    drop_invalid: bool, gpus_per_server: int, max_gpus: int | None,
                    no_multi_server: bool, node_list: str | None, bins: int,
                    requests_format: str | None, request_rate_scale: float, seed: int) -> None:
    """Summarise TRACE (a path or preset; default itp-c07): jobs, span, GPU sizes,
    durations, offered load, drops; with --requests, an inference request trace.

    \b
    span                 last submit - first submit
    GPU-hours            traced duration x traced GPUs, summed
    mean offered load    GPU-seconds between the first and the last submit
                         (each job at its traced size from its submit, no
                         queue) / the span: the mean of the table's bins
    work submitted/span  every GPU-second of the trace / the span: larger,
                         by the work that runs after the last submit
    """
    from aryl.traces.summary import gpu_histogram, offered_load, summarize

    if requests_format is not None:
        _inspect_requests(trace, None if requests_format == "auto" else requests_format, tz,
                          drop_invalid, bins, request_rate_scale, seed)
        return

    t = _load(trace, fmt, window, tz, drop_invalid, gpus_per_server, max_gpus,
              no_multi_server, node_list)
    s = summarize(t)
    console = Console()
    head = Table(title=f"trace {t.source} ({t.format})", show_header=False)
    head.add_row("jobs", f"{s['n_jobs']:,}")
    head.add_row("span", f"{s['span_s']:,.0f} s ({s['span_s'] / 86400:.2f} days)")
    head.add_row("first / last submit (s)",
                 f"{_num(s['first_submit_s'])} / {_num(s['last_submit_s'])}")
    head.add_row("GPU-hours", f"{s['gpu_hours']:,.0f}")
    head.add_row("mean offered load", f"{_num(s['mean_offered_load_gpus'], '{:,.1f}')} GPUs "
                 "(the mean of the offered-load table)")
    head.add_row("work submitted / span",
                 f"{_num(s['submitted_load_gpus'], '{:,.1f}')} GPUs (also counts the "
                 f"{_num(s['gpu_hours_after_last_submit'], '{:,.1f}')} GPU-hours run after "
                 "the last submit)")
    if "tz" in t.meta and t.n_jobs:
        import pandas as pd

        zone = str(t.meta["tz"])
        first, last = (pd.Timestamp(x, unit="s", tz="UTC").tz_convert(zone)
                       for x in (s["first_submit_s"], s["last_submit_s"]))
        head.add_row("first / last submit (local)",
                     f"{first:%Y-%m-%d %H:%M:%S %Z} / {last:%Y-%m-%d %H:%M:%S %Z}")
    if "tz" in t.meta:
        head.add_row("time zone", str(t.meta["tz"]))
    if "window" in t.meta:
        w = t.meta["window"]
        head.add_row("window", f"[{w['start_s']:,.0f}, {w['end_s']:,.0f}) ({w['spec']})")
    if "n_elastic" in s:
        head.add_row("elastic jobs", f"{s['n_elastic']:,}")
    console.print(head)

    hist = Table(title="GPU sizes")
    hist.add_column("GPUs", justify="right")
    hist.add_column("jobs", justify="right")
    hist.add_column("share", justify="right")
    for row in gpu_histogram(t).itertuples(index=False):
        hist.add_row(str(row.gpus), f"{row.n_jobs:,}", f"{row.share:.1%}")
    console.print(hist)

    dur = Table(title="duration (s)")
    for name in ("mean", "p50", "p90", "p95", "p99", "max"):
        dur.add_column(name, justify="right")
    dur.add_row(*(_num(s[k]) for k in ("duration_mean_s", "duration_p50_s",
                                            "duration_p90_s", "duration_p95_s",
                                            "duration_p99_s", "duration_max_s")))
    console.print(dur)

    load = Table(title="offered load (GPUs, jobs run at traced size from submit)",
                 caption="GPU-seconds inside each bin / its length, each job at its traced "
                         "size from its submit time, no queue; bins split first to last "
                         "submit", caption_justify="left")
    bins_df = offered_load(t, max(1, bins))
    if "tz" in t.meta:  # absolute (epoch) times: readable dates in the trace's time zone
        import pandas as pd

        zone = str(t.meta["tz"])
        widths = (bins_df["end_s"] - bins_df["start_s"]).to_numpy()
        stamp = "%Y-%m-%d %H:%M" if len(widths) == 0 or widths.min() >= 60 else \
            "%Y-%m-%d %H:%M:%S"  # bins under a minute need the seconds to differ

        def when(x: float) -> str:
            return pd.Timestamp(x, unit="s", tz="UTC").tz_convert(zone).strftime(stamp)

        load.add_column(f"from ({zone})", justify="right")
        load.add_column("to", justify="right")
        load.add_column("GPUs", justify="right")
        for start_s, end_s, gpus in zip(bins_df["start_s"].tolist(), bins_df["end_s"].tolist(),
                                        bins_df["gpus"].tolist(), strict=True):
            load.add_row(when(start_s), when(end_s), f"{gpus:,.1f}")
    else:  # relative times (ITP, PAI, Alibaba pods): seconds since the trace's origin
        load.add_column("from (s)", justify="right")
        load.add_column("to (s)", justify="right")
        load.add_column("GPUs", justify="right")
        for row in bins_df.itertuples(index=False):
            load.add_row(f"{row.start_s:,.0f}", f"{row.end_s:,.0f}", f"{row.gpus:,.1f}")
    console.print(load)

    _print_drops(console, t.dropped)


def _print_drops(console: Console, dropped: dict[str, int]) -> None:
    """The table of rows dropped by kind (``(none)`` when nothing was)."""
    drops = Table(title="rows dropped")
    drops.add_column("kind")
    drops.add_column("rows", justify="right")
    for kind, count in dropped.items():
        drops.add_row(kind, f"{count:,}")
    if not dropped:
        drops.add_row("(none)", "0")
    console.print(drops)


def _inspect_requests(trace: str, fmt: str | None, tz: str | None, drop_invalid: bool,
                      bins: int, rate_scale: float, seed: int) -> None:
    from aryl.traces.requests import load_requests, scale_rate, summarize_requests
    from aryl.traces.validate import InvalidRowsError

    try:
        t = load_requests(trace, format=fmt, tz=tz,
                          on_invalid="drop" if drop_invalid else "raise")
        t = scale_rate(t, rate_scale, seed=seed)
    except InvalidRowsError as exc:
        raise InputError(exc.describe(drop_hint="--drop-invalid")) from exc
    except InvalidInputError as exc:
        raise InputError(str(exc)) from exc
    s = summarize_requests(t, bins)
    console = Console()
    head = Table(title=f"request trace {t.source} ({t.format})", show_header=False)
    head.add_row("requests", f"{s['n_requests']:,}")
    head.add_row("span", f"{s['span_s']:,.0f} s ({s['span_s'] / 86400:.2f} days)")
    head.add_row("arrival rate", f"{_num(s['rate_per_s'], '{:,.3f}')} /s")
    head.add_row("mean offered load", f"{_num(s['offered_load_gpus'], '{:,.2f}')} GPUs")
    head.add_row("models", f"{s['n_models']:,}")
    head.add_row("rate scale", f"{t.meta.get('rate_scale', 1.0):g}")
    for key in ("tz", "gpu_type", "prefill_tokens_per_s", "decode_tokens_per_s"):
        if key in t.meta:
            head.add_row(key.replace("_", " "), str(t.meta[key]))
    console.print(head)
    svc = Table(title="service time (GPU-seconds)")
    for name in ("mean", "p50", "p95", "p99", "max"):
        svc.add_column(name, justify="right")
    svc.add_row(*(_num(s[f"service_{k}_s"], "{:,.2f}") for k in ("mean", "p50", "p95", "p99",
                                                                  "max")))
    console.print(svc)
    load = Table(title="offered load (GPUs, service GPU-seconds by arrival bin)")
    for name in ("from (s)", "to (s)", "requests", "GPUs"):
        load.add_column(name, justify="right")
    for row in s["bins"].itertuples(index=False):
        load.add_row(f"{row.start_s:,.0f}", f"{row.end_s:,.0f}", f"{row.n_requests:,}",
                     f"{row.offered_load_gpus:,.2f}")
    console.print(load)
    _print_drops(console, t.dropped)


@trace_command.command("convert")
@click.argument("src")
@click.argument("out", type=click.Path(dir_okay=False))
@_load_options
@click.option("--elastic-fraction", type=float, default=None,
              help="Also synthesise elastic jobs (fraction of jobs made elastic).")
@click.option("--seed", type=int, default=0, show_default=True, help="Synthesis seed.")
def convert_command(src: str, out: str, fmt: str | None, window: str | None, tz: str | None,
                    drop_invalid: bool, gpus_per_server: int, max_gpus: int | None,
                    no_multi_server: bool, node_list: str | None,
                    elastic_fraction: float | None, seed: int) -> None:
    """Convert SRC (path or preset) to canonical OUT (.csv, .csv.gz, .parquet), atomically."""
    from aryl.traces import synthesize_elastic, write_trace

    check_out(out, "OUT", folder=False)
    if not Path(out).name.lower().endswith((".csv", ".csv.gz", ".parquet", ".pq")):
        # refused before the trace is read (a large one takes a while)
        raise InputError(f"OUT: cannot tell the output format of {out!r} "
                         "(use a .csv, .csv.gz, .parquet or .pq suffix)")
    t = _load(src, fmt, window, tz, drop_invalid, gpus_per_server, max_gpus,
              no_multi_server, node_list)
    if t.n_jobs == 0:  # aryl refuses to replay a trace with no job: do not write one
        n_dropped = {k: int(v) for k, v in t.dropped.items() if v}
        if "window" in t.meta:
            why = f"the window {t.meta['window']['spec']!r} keeps none of its jobs"
        elif n_dropped:
            why = (f"all {sum(n_dropped.values()):,} rows were dropped "
                   f"({', '.join(f'{k}: {v:,}' for k, v in n_dropped.items())})")
        else:
            why = "it has no job rows"
        raise InputError(f"{src}: nothing to write to {out}: {why}")
    try:
        if elastic_fraction is not None:
            t = synthesize_elastic(t, elastic_fraction=elastic_fraction, seed=seed,
                                   gpus_per_server=gpus_per_server)
        path = write_trace(t, Path(out))
    except InvalidInputError as exc:
        raise InputError(str(exc)) from exc
    except OSError as exc:  # read-only location, disk full, ...
        raise click.ClickException(f"cannot write {out!r}: {exc.strerror or exc}") from exc
    dropped = ", ".join(f"{k}={v}" for k, v in t.dropped.items()) or "none"
    click.echo(f"wrote {path}: {t.n_jobs} jobs ({t.format}); dropped: {dropped}")
