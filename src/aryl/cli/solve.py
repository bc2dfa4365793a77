"""``aryl solve``: solve one elastic-allocation (MCKP) instance from a CSV or a demo."""

from __future__ import annotations

import csv
import math
import re
import time
from pathlib import Path

import click
import numpy as np
from numpy.typing import NDArray

from aryl.cli._errors import InputError
from aryl.errors import InvalidInputError, TraceFormatError

__all__ = ["solve_command"]

_COLUMNS = ("job", "option", "gpus", "value_s")
_INT = re.compile(r"\+?[0-9]+|-[0-9]+")  # ASCII digits only (int() also takes "1_0")
_MAX_GPUS = 1 << 61


def read_instance(
    path: str,
) -> tuple[list[str], list[list[str]], NDArray[np.float64], NDArray[np.int64]]:
    """Read ``job,option,gpus,value_s`` rows into MCKP arrays.

    The header names the columns (any order; other columns are ignored); every
    row has as many fields as the header; blank lines are skipped.  Jobs are
    numbered in order of first appearance, and each job's options in its own row
    order; absent cells of the rectangular arrays are NaN (value) / 1 (GPUs).

    Raises
    ------
    TraceFormatError
        Unreadable or empty file, missing or duplicate columns, a row with the
        wrong number of fields, an empty job or option, ``gpus`` not an integer in
        ``[1, 2**61]``, ``value_s`` not a finite number, a duplicate (job, option);
        the message names the file, the (1-based, physical) line and the column.
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = [(reader.line_num, rec) for reader in [csv.reader(fh)] for rec in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceFormatError(f"cannot read CSV: {exc}", path=path) from exc
    # line of each record's first physical line (records may span lines when quoted)
    starts: list[int] = []
    prev_end = 0
    for end, _ in rows:
        starts.append(prev_end + 1)
        prev_end = end
    records = [(line, rec) for line, (_, rec) in zip(starts, rows, strict=True) if rec]
    if not records:
        raise TraceFormatError(f"empty file; need a header {','.join(_COLUMNS)}", path=path,
                               line=1)
    header_line, header = records[0]
    names = [h.strip() for h in header]
    dup = sorted({h for h in names if names.count(h) > 1 and h in _COLUMNS})
    if dup:
        raise TraceFormatError(f"duplicate column(s) {dup}", path=path, line=header_line)
    missing = [c for c in _COLUMNS if c not in names]
    if missing:
        raise TraceFormatError(f"missing column(s) {missing}; need {list(_COLUMNS)}",
                               path=path, line=header_line)
    col = {c: names.index(c) for c in _COLUMNS}
    jobs: dict[str, int] = {}
    options: list[list[str]] = []
    cells: list[tuple[int, int, int, float]] = []
    for line, rec in records[1:]:
        if len(rec) != len(names):
            raise TraceFormatError(f"expected {len(names)} fields, got {len(rec)}", path=path,
                                   line=line)
        job, option, gpus_s, value_txt = (rec[col[c]].strip() for c in _COLUMNS)
        if not job:
            raise TraceFormatError("empty job", path=path, line=line, column="job")
        if not option:
            raise TraceFormatError("empty option", path=path, line=line, column="option")
        if not _INT.fullmatch(gpus_s):
            raise TraceFormatError(f"gpus {gpus_s!r} is not an integer", path=path, line=line,
                                   column="gpus")
        gpus = int(gpus_s)
        if not 1 <= gpus <= _MAX_GPUS:
            raise TraceFormatError(f"gpus must be in [1, 2**61], got {gpus}", path=path,
                                   line=line, column="gpus")
        try:
            value = float(value_txt)
        except ValueError:
            raise TraceFormatError(f"value_s {value_txt!r} is not a number", path=path,
                                   line=line, column="value_s") from None
        if not math.isfinite(value):
            raise TraceFormatError(
                f"value_s must be finite, got {value_txt!r} (leave an absent option out)",
                path=path, line=line, column="value_s")
        i = jobs.setdefault(job, len(jobs))
        if i == len(options):
            options.append([])
        if option in options[i]:
            raise TraceFormatError(f"duplicate option {option!r} of job {job!r}", path=path,
                                   line=line, column="option")
        options[i].append(option)
        cells.append((i, len(options[i]) - 1, gpus, value))
    n_opt = max((len(o) for o in options), default=0)
    values = np.full((len(jobs), n_opt), np.nan)
    weights = np.ones((len(jobs), n_opt), dtype=np.int64)
    for i, k, gpus, value in cells:
        values[i, k] = value
        weights[i, k] = gpus
    return list(jobs), options, values, weights


def demo_instance(
    n_jobs: int, n_options: int, seed: int
) -> tuple[list[str], list[list[str]], NDArray[np.float64], NDArray[np.int64]]:
    """A seeded instance: Amdahl-like JCT reductions, 1/2/4/8 GPUs per worker."""
    from aryl.elastic import jct_reduction_table

    rng = np.random.default_rng(seed)
    g = rng.choice(np.array([1, 2, 4, 8]), size=n_jobs)
    values, weights = jct_reduction_table(
        remaining_work=rng.uniform(1e3, 1e5, size=n_jobs),
        current_workers=np.ones(n_jobs, dtype=np.int64),
        min_workers=np.ones(n_jobs, dtype=np.int64),
        max_workers=np.full(n_jobs, n_options + 1, dtype=np.int64),
        gpus_per_worker=g,
        alpha=rng.uniform(0.02, 0.4, size=n_jobs),
        rescale_pause_s=30.0,
    )
    names = [f"job{i:04d}" for i in range(n_jobs)]
    opts = [[f"+{k}" for k in range(1, n_options + 1)] for _ in range(n_jobs)]
    return names, opts, values, weights


@click.command(name="solve")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--capacity", type=click.IntRange(min=0), default=None,
              help="GPUs available (required with FILE; demo default: 25% of the maximum).")
@click.option("--demo", is_flag=True, help="Solve a seeded synthetic instance instead of FILE.")
@click.option("--jobs", "n_jobs", type=click.IntRange(min=0), default=20, show_default=True,
              help="Demo: number of jobs.")
@click.option("--options", "n_options", type=click.IntRange(min=1), default=8,
              show_default=True, help="Demo: extra-worker options per job.")
@click.option("--seed", type=int, default=0, show_default=True, help="Demo: random seed.")
@click.option("--backend", type=click.Choice(["native", "reference"]), default="native",
              show_default=True, help="Compiled kernel or the pure-Python reference.")
@click.option("--show", type=click.IntRange(min=0), default=50, show_default=True,
              help="Print at most this many jobs that get an option.")
def solve_command(file: Path | None, capacity: int | None, demo: bool, n_jobs: int,
                  n_options: int, seed: int, backend: str, show: int) -> None:
    """Solve the elastic-allocation MCKP of FILE (CSV rows job,option,gpus,value_s).

    Each job gets at most one option; the chosen GPUs fit --capacity and the total
    value (seconds of JCT reduction) is maximal.  Prints the chosen options, the
    value and the GPUs used.

    FILE is UTF-8 CSV whose header names the columns job, option, gpus (an integer
    >= 1) and value_s (a finite number; values <= 0 are never chosen); other
    columns are ignored.  Errors name the file, line and column.
    """
    from aryl.elastic import solve_mckp

    if demo == (file is not None):
        raise click.UsageError("give exactly one of FILE and --demo")
    if file is not None:
        if capacity is None:
            raise click.UsageError("--capacity is required with FILE")
        try:
            names, opts, values, weights = read_instance(str(file))
        except InvalidInputError as exc:
            raise InputError(str(exc)) from exc
    else:
        try:
            names, opts, values, weights = demo_instance(n_jobs, n_options, seed)
        except InvalidInputError as exc:
            raise InputError(str(exc)) from exc
        if capacity is None:
            capacity = int(weights[:, -1].sum() // 4) if weights.size else 0
        click.echo(click.wrap_text(
            f"demo: {len(names)} elastic jobs (seed {seed}), each running at its base of 1 "
            f"worker of 1, 2, 4 or 8 GPUs; option +k = k extra workers (gpus = k x the "
            f"job's GPUs per worker); value_s = seconds of JCT saved by them "
            f"(T(w) = w / (1 + alpha (w - 1)), 30 s rescale pause deducted); capacity "
            f"{capacity} GPUs free. At most one option per job.", width=79) + "\n")
    assert capacity is not None
    start = time.perf_counter()
    try:
        result = solve_mckp(values, weights, capacity, backend=backend)  # type: ignore[arg-type]
    except InvalidInputError as exc:
        raise InputError(str(exc)) from exc
    elapsed_ms = (time.perf_counter() - start) * 1e3
    chosen = np.flatnonzero(result.choice >= 0)
    click.echo(f"{'job':<16} {'option':<10} {'gpus':>6} {'value_s':>14}")
    for i in chosen[:show]:
        k = int(result.choice[i])
        click.echo(f"{names[i]:<16} {opts[i][k]:<10} {int(weights[i, k]):>6} "
                   f"{float(values[i, k]):>14.6g}")
    if chosen.size > show:
        click.echo(f"... {chosen.size - show} more")
    click.echo(
        f"value {result.value:.10g} s, used {result.used_gpus}/{capacity} GPUs, "
        f"{chosen.size}/{len(names)} jobs get an option ({backend}, {elapsed_ms:.2f} ms)"
    )
