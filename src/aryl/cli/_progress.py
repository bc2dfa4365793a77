"""The one progress bar of the CLI: elapsed time and an ETA on every bar."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column

__all__ = ["make_progress"]


def make_progress(
    console: Console,
    *middle: ProgressColumn | str,
    trailing: str | None = None,
    transient: bool = True,
) -> Progress:
    """A rich progress bar: description, bar, ``middle`` columns, elapsed time, ETA.

    Parameters
    ----------
    console : rich Console
    *middle : columns or format strings
        Shown after the bar (counts).
    trailing : str, optional
        A format string shown last (the current item), cut with an ellipsis
        when the line is too long, so the times always show.
    transient : bool
        Remove the bar when it finishes.

    Returns
    -------
    rich.progress.Progress
        Its last columns are ``elapsed H:MM:SS`` and ``eta H:MM:SS`` (rich's
        estimate from the recent rate; ``-:--:--`` until it has one).
    """
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        *middle,
        TextColumn("elapsed"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        *([TextColumn(trailing, table_column=Column(
            no_wrap=True, overflow="ellipsis", max_width=max(12, console.width // 3)))]
          if trailing else []),
        console=console,
        transient=transient,
    )
