"""Exceptions raised by :mod:`aryl`.

Every error that bad input can cause is an :class:`InvalidInputError`, which is
also a :class:`ValueError`, so callers that already catch ``ValueError`` keep
working.  Errors about a trace file name the file, line and column.
"""

from __future__ import annotations

__all__ = ["ArylError", "InvalidInputError", "PolicyError", "TraceFormatError"]


class ArylError(Exception):
    """Base class of every exception raised on purpose by :mod:`aryl`."""


class InvalidInputError(ArylError, ValueError):
    """An argument or a request is malformed (shape, dtype, range, NaN, size limit)."""


class PolicyError(ArylError):
    """A user policy (:class:`aryl.Policy`) decided something a pass cannot do.

    The message names the policy, the pass time, the job (its id and index) and
    the rule broken (docs/policies.md, "Rules"); the replay stops and writes no
    output.
    """


class TraceFormatError(InvalidInputError):
    """A trace file cannot be read into the canonical form.

    Parameters
    ----------
    message : str
        What is wrong.
    path : str or None
        The file.
    line : int or None
        1-based line number in the file (the header is line 1).
    column : str or None
        The column name.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.column = column
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column {column!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
