"""``aryl sweep``: grids of replays on all cores or on a Ray cluster, and their report."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.progress import MofNCompleteColumn
from rich.table import Table

from aryl.cli._errors import (
    EXIT_INTERRUPTED,
    InputError,
    check_out,
    first_interrupt_only,
)
from aryl.cli._progress import make_progress
from aryl.errors import ArylError

__all__ = ["EXIT_INTERRUPTED", "first_interrupt_only", "sweep_command"]


class _SweepGroup(click.Group):
    """``aryl sweep SPEC ...`` is short for ``aryl sweep run SPEC ...``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["run", *args]
        return super().parse_args(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # a spec path where a subcommand name would be: the `run` command (see parse_args)
        return super().get_command(ctx, cmd_name) or self.commands.get("run")


@click.group("sweep", cls=_SweepGroup)
def sweep_command() -> None:
    """Run a sweep spec (`aryl sweep SPEC.toml --out DIR`) or report on one.

    `aryl sweep SPEC.toml --out DIR` is short for `aryl sweep run SPEC.toml --out DIR`.
    docs/sweep.md describes the spec, the dataset and the statistics.
    """


def run_with_progress(console: Console, call: Any, **kwargs: Any) -> Any:
    """Call ``call(progress=..., status=..., **kwargs)`` under a progress bar."""
    with make_progress(console, MofNCompleteColumn(), trailing="{task.fields[last]}",
                       transient=False) as bar:
        task = bar.add_task("runs", total=None, last="")

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, last=label)

        def status(message: str) -> None:
            bar.update(task, last=message)

        return call(progress=progress, status=status, **kwargs)


def report_interrupt(console: Console, outcome: Any, data_dir: Path) -> None:
    """Tell what a Ctrl-C left: the runs kept, and how to resume."""
    n_total = outcome.n_planned
    n_kept = outcome.n_skipped + outcome.n_done
    console.print(
        f"[bold]Interrupted.[/bold] {n_kept} of {n_total} runs are finished and kept in "
        f"{data_dir}/ (no worker left running); run the same command again to resume."
    )


def exit_interrupted(outcome: Any) -> NoReturn:
    """Exit with status 130 once the interrupted work is cleaned up.

    Every file is already written and every worker ended (the pool's by
    SIGTERM/SIGKILL, Ray's by its shutdown), so the process leaves at once
    (``os._exit``): the interpreter's own teardown can take seconds after Ray
    (its and Arrow's native libraries) and, after a process pool whose workers
    were killed, can block for good (the pool's queue feeder thread, joined at
    exit, may wait on a pipe no worker reads).  In-process sweeps and click's
    test runner exit normally.
    """
    if (getattr(outcome, "backend", None) in ("ray", "pool")
            and sys.stdout is sys.__stdout__):
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        logging.shutdown()
        os._exit(EXIT_INTERRUPTED)
    sys.exit(EXIT_INTERRUPTED)


def _failures(console: Console, failures: list[tuple[str, str]]) -> None:
    table = Table(title=f"{len(failures)} runs failed (not written; a rerun retries them)")
    table.add_column("run", overflow="fold")
    table.add_column("error", overflow="fold")
    for label, msg in failures:
        table.add_row(label, msg)
    console.print(table)


@sweep_command.command("run")
@click.argument("spec", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Sweep folder (Parquet dataset); finished runs in it are skipped.",
)
@click.option(
    "-j",
    "--jobs",
    "n_procs",
    type=click.IntRange(min=1),
    default=None,
    help="Parallel worker processes (default: the machine's cores; 1: in this process). "
    "With --ray: the CPUs of a local Ray.",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    help="Run on Ray (pip install 'aryl[ray]'): alone, a local Ray; with an address "
    "(auto, ray://HOST:10001), that cluster.",
)
@click.option("--dry-run", is_flag=True, help="Validate the spec and list the runs; run nothing.")
def run_command(
    spec: Path, out_dir: Path, n_procs: int | None, ray_address: str | None, dry_run: bool
) -> None:
    """Run every unfinished run of SPEC (a TOML sweep spec) into OUT.

    Ctrl-C stops within about 2 s, ends every worker and keeps every finished
    run; the same command resumes.
    """
    from aryl.sweep import SweepInterrupted, WorkerLost, load_spec, run_sweep
    from aryl.sweep.plan import plan_sweep
    from aryl.sweep.store import finished_keys

    console = Console()
    if not dry_run:
        check_out(out_dir, "--out", folder=True)
    try:
        parsed = load_spec(spec)
        if dry_run:
            sizing = out_dir / "sizing"
            plan = plan_sweep(parsed, cache_dir=sizing if sizing.is_dir() else None)
            done = finished_keys(out_dir)
            table = Table(title=f"{parsed.name}: {len(plan.runs)} runs")
            table.add_column("key")
            table.add_column("run", overflow="fold")
            table.add_column("finished")
            for r in plan.runs:
                table.add_row(r.key, r.label, "yes" if r.key in done else "")
            console.print(table)
            return
        with first_interrupt_only():
            outcome = run_with_progress(console, run_sweep, spec=parsed, out_dir=out_dir,
                                        n_procs=n_procs, ray=ray_address)
    except SweepInterrupted as exc:
        report_interrupt(console, exc.outcome, out_dir)
        exit_interrupted(exc.outcome)
    except KeyboardInterrupt:  # while reading traces or sizing clusters: no run started
        console.print("[bold]Interrupted[/bold] before any run started.")
        sys.exit(EXIT_INTERRUPTED)
    except WorkerLost as exc:
        raise click.ClickException(
            f"{exc}; the finished runs are kept in {out_dir}/: run the same command to resume"
        ) from exc
    except ArylError as exc:
        raise InputError(str(exc)) from exc
    console.print(
        f"{outcome.n_done} runs done, {outcome.n_skipped} already finished "
        f"({outcome.backend}, {outcome.elapsed_s:.1f} s); dataset in {out_dir}/. "
        f"Next: aryl sweep report {out_dir}"
    )
    if outcome.failures:
        _failures(console, outcome.failures)
        sys.exit(1)


def _check_report_out(out_dir: Path) -> None:
    """Refuse a report folder that cannot be written or replaced, before reading the sweep."""
    from aryl._io import check_output_folder
    from aryl.errors import InvalidInputError

    check_out(out_dir, "--out", folder=True)
    try:
        check_output_folder(out_dir)
    except InvalidInputError as exc:
        raise InputError(f"--{exc}") from None  # "out: ..." -> "--out: ..."


@sweep_command.command("report")
@click.argument("sweep_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--baseline", default=None,
              help="Policy that ratios are taken against, paired by seed (default: the "
              "spec's [report].baseline).")
@click.option("--measure", "measures", multiple=True,
              help="A measure to show (repeatable; default: the spec's [report].measures "
              "or a standard set). summary.csv has every measure.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Report folder (default SWEEP_DIR/report), replaced as a whole.")
def report_command(
    sweep_dir: Path, baseline: str | None, measures: tuple[str, ...], out_dir: Path | None
) -> None:
    """Mean and 95% interval over seeds of every measure, and ratios to a baseline.

    Prints a table per shown measure and writes summary.csv, summary.md and a
    figure with error bars per shown measure.
    """
    from aryl.sweep.report import measure_table, write_report

    console = Console(width=80 if not sys.stdout.isatty() else None)
    _check_report_out(out_dir if out_dir is not None else sweep_dir / "report")
    try:
        rep = write_report(sweep_dir, out_dir=out_dir, baseline=baseline,
                           measures=list(measures) or None)
    except ArylError as exc:
        raise InputError(str(exc)) from exc
    for m in rep.shown:
        df = measure_table(rep.summary, m, rep.baseline)
        table = Table(title=m)
        for i, col in enumerate(df.columns):
            table.add_column(str(col), overflow="fold", justify="left" if i == 0 else "right")
        for row in df.itertuples(index=False):
            table.add_row(*(str(v) for v in row))
        console.print(table)
    if rep.baseline is not None:
        console.print(f"{rep.baseline} / this: {rep.baseline}'s value over the scenario's, per "
                      "seed, averaged (the convention of every aryl table); above 1 the "
                      f"scenario's value is lower than {rep.baseline}'s.", style="dim",
                      highlight=False)
    n, total = len(rep.data.runs), rep.data.n_planned
    if n < total:
        console.print(f"[yellow]{total - n} of {total} runs are not finished yet.[/yellow]")
    console.print(f"Wrote {', '.join(rep.files)} in {rep.out_dir}{os.sep}")
