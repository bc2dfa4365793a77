"""``aryl experiment``: regenerate the paper-style evaluation (docs/results.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import MofNCompleteColumn

from aryl.cli._errors import EXIT_INTERRUPTED, InputError, check_out
from aryl.cli._progress import make_progress
from aryl.cli._tables import Col, print_tables
from aryl.cli.config import config_options, resolve
from aryl.errors import ArylError

__all__ = ["experiment_command"]

#: SimConfig fields the evaluation sets per trace (docs/results.md, "Set-up").
FIXED_FIELDS = {
    name: "is sized per trace by the evaluation (docs/results.md); it cannot be set here"
    for name in ("n_training_servers", "n_inference_servers", "gpus_per_server")
}


def print_frame(console: Console, title: str, df: Any, *, transpose: bool = False,
                keys: int = 1) -> None:
    """Print ``df`` with the number formats of results.md, in groups that fit the width.

    ``transpose`` puts the first column's values across the top (one column per
    trace or policy, one row per measure); otherwise the first ``keys`` columns
    are repeated in every group.
    """
    import pandas as pd

    from aryl.experiment import table_cells

    assert isinstance(df, pd.DataFrame)
    names, cells = table_cells(df)  # a NAME ± column shows inside NAME's cells
    if transpose:
        cols = [Col("measure", "left"), *(Col(r[0]) for r in cells)]
        rows = [[name, *(r[j] for r in cells)] for j, name in enumerate(names) if j > 0]
        print_tables(console, cols, rows, title=title)
        return
    cols = [Col(c, "left" if j < keys else "right") for j, c in enumerate(names)]
    print_tables(console, cols, cells, keys=keys, title=title)


def _check_outputs(out_dir: Path, data_dir: Path | None) -> None:
    """Refuse an --out or --data that cannot be written (or replaced), before any replay."""
    from aryl._io import check_output_folder
    from aryl.errors import InvalidInputError

    check_out(data_dir, "--data", folder=True)
    check_out(out_dir, "--out", folder=True)
    try:
        check_output_folder(out_dir)
    except InvalidInputError as exc:
        raise InputError(f"--{exc}") from None  # "out: ..." -> "--out: ..."


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
    help="Path of the Microsoft Philly job table (philly.csv, not bundled); adds its "
         "busiest 15 days.",
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
@config_options
def paper(
    out_dir: Path, philly: str | None, quick: bool, n_procs: int | None,
    ray_address: str | None, data_dir: Path | None, spec: Path | None,
    reclaim_instances: int, config_file: str | None, sets: tuple[str, ...], show_config: bool,
) -> None:
    """Headline, baselines, ablations, sensitivity sweeps, designed experiments, reclaim quality.

    Every table is printed here and written, with the figures, to OUT; the
    numbers in OUT/results.md are the ones printed.  The replays are the sweep
    spec aryl/data/sweeps/paper.toml (5 seeds; means with 95% intervals).
    --set / --config take the simulator fields (except the cluster shape, sized
    per trace) and policy options (`aryl config`), applied to every run; a sweep
    overrides the field it varies.  OUT is replaced as a whole at the end:
    Ctrl-C (which stops within about 2 s and ends every worker) or an error
    leaves the previous results untouched; finished replays are kept, so the
    same command resumes.
    """
    from aryl.cli.sweep import exit_interrupted, first_interrupt_only, report_interrupt
    from aryl.experiment import run_paper
    from aryl.sweep import SweepInterrupted

    rc = resolve(sections=("sim", "policy"), config_file=config_file, sets=sets,
                 fixed=FIXED_FIELDS)
    if show_config:
        click.echo(rc.to_toml("aryl experiment paper"), nl=False)
        return
    _check_outputs(out_dir, data_dir)
    changed = {sec: {k: v for k, v in vals.items() if rc.source(sec, k) != "default"}
               for sec, vals in rc.values.items()}
    console = Console()
    data_shown = data_dir or out_dir.parent / f".{out_dir.name}.sweep"
    try:
        with first_interrupt_only(), make_progress(
            console, MofNCompleteColumn(), trailing="{task.fields[last]}", transient=False
        ) as bar:
            task = bar.add_task("replays", total=None, last="")

            def progress(done: int, total: int, label: str) -> None:
                bar.update(task, completed=done, total=total, last=label)

            def status(message: str) -> None:
                bar.update(task, last=message)

            tables = run_paper(
                out_dir,
                quick=quick,
                philly=philly,
                spec=spec,
                n_procs=n_procs,
                ray=ray_address,
                data_dir=data_dir,
                reclaim_instances=reclaim_instances,
                progress=progress,
                status=status,
                config=changed["sim"],
                policy_options=changed["policy"],
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
        raise InputError(str(exc)) from exc
    for name, title, transpose, keys in (
        ("headline", "Headline: fifo vs aryl (times in s; ratios in the paper's form)", True, 1),
        ("baselines", "Baselines: strict fifo and fifo-backfill against aryl", True, 1),
        ("ablations", "Ablations and peers (main trace; ratios against fifo)", True, 1),
        ("sensitivity", "Sensitivity (aryl vs fifo on the same training cluster)", False, 2),
        ("knapsack", "Multi-GPU elastic workers: exact MCKP vs greedy", False, 3),
        ("reclaim_choice", "Reclaim choice under pressure (vs the cost greedy)", False, 4),
        ("hetero", "Heterogeneous GPUs (ratios against the same cluster's fifo)", False, 2),
        ("hetero_pools", "Heterogeneous GPUs: per pool", False, 2),
        ("loaned_speed", "The loaned GPU's relative speed (aryl)", False, 2),
        ("reclaim", "Reclaim quality: cost greedy vs exact optimum", False, 0),
    ):
        if name in tables:
            print_frame(console, title, tables[name], transpose=transpose, keys=keys)
    console.print(f"Wrote {out_dir / 'results.md'} (tables, figures, manifest) in {out_dir}/")
