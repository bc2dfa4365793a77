"""Tables that fit the terminal: wide tables split into column groups, nothing cut.

A rich table wider than the console shrinks its columns and then cuts or
folds their text (``4,1…``, ``ary…``).  :func:`fit_tables` instead keeps every
cell on one line at its natural width and splits the non-key columns into
groups, each printed as its own table with the key columns repeated, so that
every group fits the console width.  Names and numbers are never wrapped or
cut; only when a single column with the key columns is wider than the console
(a very narrow terminal) does rich wrap that group at spaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

__all__ = ["Col", "fit_tables", "print_tables"]

Justify = Literal["default", "left", "center", "right", "full"]


@dataclass(frozen=True)
class Col:
    """A column: header text and alignment (numbers right, names left)."""

    header: str
    justify: Justify = "right"


def _table(
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
    idx: Sequence[int],
    no_wrap: bool = True,
) -> Table:
    table = Table()
    for i in idx:
        table.add_column(cols[i].header, justify=cols[i].justify, no_wrap=no_wrap,
                         overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in idx))
    return table


def _width(console: Console, table: Table) -> int:
    # measured without the console's limit (Measurement.get clamps to max_width)
    options = console.options.update(max_width=1_000_000)
    return Measurement.get(console, options, table).maximum


def fit_tables(
    console: Console,
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
    *,
    keys: int = 1,
) -> list[Table]:
    """Split a table into column groups that each fit ``console.width``.

    Parameters
    ----------
    console : rich Console
        Its width is the budget.
    cols : sequence of Col
        The columns; the first ``keys`` ones (row labels) are repeated in every group.
    rows : sequence of sequence of str
        Cells, already formatted, one sequence per row, ``len(cols)`` each.
    keys : int
        Number of leading key columns (0 or more).

    Returns
    -------
    list of Table
        Columns in their original order, greedily packed: a group takes the
        next column while the group's natural width still fits the console.

    Raises
    ------
    ValueError
        A row without one cell per column.

    Notes
    -----
    O(columns) measurements of tables of ``len(rows)`` rows.
    """
    if any(len(r) != len(cols) for r in rows):
        raise ValueError("every row needs one cell per column")
    key_idx = list(range(keys))
    groups: list[list[int]] = []
    current: list[int] = []
    for i in range(keys, len(cols)):
        trial = [*current, i]
        if current and _width(console, _table(cols, rows, key_idx + trial)) > console.width:
            groups.append(current)
            current = [i]
        else:
            current = trial
    if current or not groups:
        groups.append(current)
    tables = []
    for idx in groups:
        table = _table(cols, rows, key_idx + idx)
        if _width(console, table) > console.width:  # too narrow even for one column: wrap
            table = _table(cols, rows, key_idx + idx, no_wrap=False)
        tables.append(table)
    return tables


def print_tables(
    console: Console,
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
    *,
    keys: int = 1,
    title: str | None = None,
    caption: str | None = None,
) -> None:
    """Print the title, :func:`fit_tables` of the arguments, then the caption."""
    if title:
        console.print(title, style="bold", highlight=False)
    for table in fit_tables(console, cols, rows, keys=keys):
        console.print(table)
    if caption:
        console.print(caption, style="dim", highlight=False)
