"""``aryl experiment``: regenerate the paper-style evaluation (docs/results.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from aryl.errors import ArylError

__all__ = ["experiment_command"]


def _rich_table(title: str, df: object, *, transpose: bool = False) -> Table:
    """A rich table of ``df`` with the number formats of results.md.

    ``transpose`` puts the first column's values across the top (one column per
    trace or policy), so wide tables stay readable in an 80-column terminal.
    A ``NAME ±`` column is shown inside ``NAME``'s cells (``mean ± half-width``).
    """
    import pandas as pd

    from aryl.experiment import table_cells

    assert isinstance(df, pd.DataFrame)
    cols, rows = table_cells(df)
    table = Table(title=title, show_lines=False)
    if transpose:
        table.add_column(cols[0])
        for cells in rows:
            table.add_column(cells[0], justify="right", overflow="fold")
        for j, col in enumerate(cols[1:], start=1):
            table.add_row(col, *(cells[j] for cells in rows))
        return table
    for col in cols:
        table.add_column(col, overflow="fold")
    for cells in rows:
        table.add_row(*cells)
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
    default=None,
    help="Replays run in parallel processes (default: the machine's cores; results do "
    "not depend on it).",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    help="Run the replays on Ray (pip install 'aryl[ray]'): alone, a local Ray; with an "
    "address (auto, ray://HOST:10001), that cluster.",
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the sweep's Parquet dataset (every run, per-job tables) in this folder and "
    "reuse its finished runs. Default: a hidden .OUT.sweep beside OUT, deleted when done.",
)
@click.option(
    "--spec",
    "spec",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Another sweep spec with the sections of the bundled paper.toml.",
)
@click.option(
    "--reclaim-instances",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="Small reclaim instances for the greedy-vs-exact comparison.",
)
def paper(
    out_dir: Path,
    philly: str | None,
    quick: bool,
    n_procs: int | None,
    ray_address: str | None,
    data_dir: Path | None,
    spec: Path | None,
    reclaim_instances: int,
) -> None:
    """Headline table, ablations, sensitivity sweeps and reclaim quality.

    Every table is printed here and written, with the figures, to OUT; the
    numbers in OUT/results.md are the ones printed.  The replays are the sweep
    spec aryl/data/sweeps/paper.toml (5 seeds; means with 95% intervals).
    OUT is replaced as a whole at the end: Ctrl-C (which stops within about 2 s
    and ends every worker) or an error leaves the previous results untouched;
    finished replays are kept, so the same command resumes.
    """
    from aryl.cli.sweep import (
        EXIT_INTERRUPTED,
        exit_interrupted,
        first_interrupt_only,
        report_interrupt,
        run_with_progress,
    )
    from aryl.experiment import run_paper
    from aryl.sweep import SweepInterrupted

    # Tables are wide: use the terminal's width, and 160 columns when writing to a file.
    console = Console(width=None if sys.stdout.isatty() else 160)
    data_shown = data_dir or out_dir.parent / f".{out_dir.name}.sweep"
    try:
        with first_interrupt_only():
            tables = run_with_progress(
                console,
                run_paper,
                out_dir=out_dir,
                quick=quick,
                philly=philly,
                spec=spec,
                n_procs=n_procs,
                ray=ray_address,
                data_dir=data_dir,
                reclaim_instances=reclaim_instances,
            )
    except SweepInterrupted as exc:
        report_interrupt(console, exc.outcome, data_shown)
        console.print(f"{out_dir}/ is unchanged.")
        exit_interrupted(exc.outcome)
    except KeyboardInterrupt:
        console.print(f"[bold]Interrupted.[/bold] {out_dir}/ is unchanged; the finished "
                      f"replays are kept in {data_shown}/: run the same command to resume.")
        sys.exit(EXIT_INTERRUPTED)
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
