"""``aryl experiment``: regenerate the paper-style evaluation (docs/results.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from aryl.errors import ArylError

__all__ = ["experiment_command"]


def _rich_table(title: str, df: object, *, transpose: bool = False) -> Table:
    """A rich table of ``df`` with the number formats of results.md.

    ``transpose`` puts the first column's values across the top (one column per
    trace or policy), so wide tables stay readable in an 80-column terminal.
    """
    import pandas as pd

    from aryl.experiment import _fmt

    assert isinstance(df, pd.DataFrame)
    table = Table(title=title, show_lines=False)
    if transpose:
        first = str(df.columns[0])
        table.add_column(first)
        for v in df[first]:
            table.add_column(str(v), justify="right", overflow="fold")
        for col in df.columns[1:]:
            table.add_row(str(col), *(_fmt(v) for v in df[col]))
        return table
    for col in df.columns:
        table.add_column(str(col), overflow="fold")
    for _, row in df.iterrows():
        table.add_row(*(_fmt(row[c]) for c in df.columns))
    return table


@click.group("experiment")
def experiment_command() -> None:
    """Reproduce the paper's evaluation on public traces."""


@experiment_command.command("paper")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results/paper"),
    show_default=True,
    help="Folder for results.md, the CSV tables, the PNG figures and manifest.json.",
)
@click.option(
    "--philly",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Path of the Philly job table (philly.csv, not bundled); adds its busiest 15 days.",
)
@click.option("--quick", is_flag=True, help="Small plan on itp-c10 (a smoke run, a few seconds).")
@click.option(
    "-j",
    "--jobs",
    "n_procs",
    type=click.IntRange(min=1),
    default=min(2, os.cpu_count() or 1),
    show_default=True,
    help="Replays run in parallel processes (results do not depend on it).",
)
@click.option(
    "--reclaim-instances",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="Small reclaim instances for the greedy-vs-exact comparison.",
)
def paper(
    out_dir: Path, philly: str | None, quick: bool, n_procs: int, reclaim_instances: int
) -> None:
    """Headline table, ablations, sensitivity sweeps and reclaim quality.

    Every table is printed here and written, with the figures, to OUT; the
    numbers in OUT/results.md are the ones printed.
    """
    from aryl.experiment import run_paper

    # Tables are wide: use the terminal's width, and 160 columns when writing to a file.
    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[last]}"),
            console=console,
            transient=False,
        ) as bar:
            task = bar.add_task("replays", total=None, last="")

            def progress(done: int, total: int, label: str) -> None:
                bar.update(task, completed=done, total=total, last=label)

            tables = run_paper(
                out_dir,
                quick=quick,
                philly=philly,
                n_procs=n_procs,
                reclaim_instances=reclaim_instances,
                progress=progress,
            )
    except ArylError as exc:
        raise click.ClickException(str(exc)) from exc
    for name, title, transpose in (
        ("headline", "Headline: fifo vs aryl (times in s; ratios in the paper's form)", True),
        ("ablations", "Ablations and peers (main trace; ratios against fifo)", True),
        ("sensitivity", "Sensitivity (aryl vs fifo on the same training cluster)", False),
        ("reclaim", "Reclaim quality: cost greedy vs exact optimum", False),
    ):
        console.print(_rich_table(title, tables[name], transpose=transpose))
    console.print(f"Wrote {out_dir / 'results.md'} (tables, figures, manifest) in {out_dir}/")
