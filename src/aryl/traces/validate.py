"""Row-level validation of trace files.

Every reader parses its columns through a :class:`RowChecker`.  A row that
breaks a rule is either an error (``on_invalid="raise"``, the default: a
:class:`~aryl.errors.TraceFormatError` naming the file, the 1-based line -- the
header is line 1 -- and the column) or is dropped and counted by kind
(``on_invalid="drop"``).  Blank cells are never defaulted to 0.

Kinds of invalid rows (the keys of :attr:`Trace.dropped`), in the order they are
checked -- a row is counted once, under the first rule it breaks:

==================  ==================================================================
kind                rule
==================  ==================================================================
missing_value       a required cell is blank (or null in Parquet)
not_a_number        a numeric cell is not a number, or is NaN or infinite
bad_timestamp       a date-time cell does not parse
not_an_integer      a GPU or worker count has a fractional part or exceeds 2**53
negative_duration   duration < 0, or end before start
zero_duration       duration == 0, or end equal to start
zero_gpus           0 (or negative) GPUs
exceeds_server      a job larger than one server when multi-server jobs are off,
                    or a pod larger than every node it may run on
exceeds_cluster     more GPUs than ``max_gpus`` (what the cluster can ever hold)
bad_gpu_share       Alibaba pods: ``gpu_milli`` (share of each GPU) outside (0, 1000] for
                    a GPU pod, or below 1000 for a multi-GPU pod
bad_scaling         inconsistent scaling columns (``min_workers`` < 1,
                    ``max_workers`` < ``min_workers``, ``gpus_per_worker`` < 1,
                    ``gpus`` not a multiple of ``gpus_per_worker``, ``alpha`` < 0)
duplicate_job_id    a job id seen on an earlier line (the first one is kept)
cpu_only            a CPU-only job in a format that lists them (Helios ``gpu_num=0``,
                    Alibaba pods ``num_gpu=0``, PAI ``plan_gpu=0``): not an error,
                    always dropped and counted
==================  ==================================================================

In ``raise`` mode the error reported is the one on the earliest line of the
file (and, on that line, the first rule above that it breaks).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError, TraceFormatError

__all__ = ["KINDS", "MAX_COUNT", "RowChecker", "check_on_invalid", "check_seed", "check_tz"]

logger = logging.getLogger(__name__)

KINDS: tuple[str, ...] = (
    "missing_value",
    "not_a_number",
    "bad_timestamp",
    "not_an_integer",
    "negative_duration",
    "zero_duration",
    "zero_gpus",
    "exceeds_server",
    "exceeds_cluster",
    "bad_gpu_share",
    "bad_scaling",
    "duplicate_job_id",
    "cpu_only",
)

MAX_COUNT: int = 2**53
"""Largest GPU / worker count accepted (float64 holds every integer up to it)."""

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
BoolArray = np.ndarray[Any, np.dtype[np.bool_]]


def check_on_invalid(on_invalid: str) -> str:
    """Validate the ``on_invalid`` option (``"raise"`` or ``"drop"``)."""
    if on_invalid not in ("raise", "drop"):
        raise InvalidInputError(f"on_invalid must be 'raise' or 'drop', got {on_invalid!r}")
    return on_invalid


def check_seed(seed: Any, name: str = "seed") -> int:
    """Validate a seed for :func:`numpy.random.default_rng` (an int >= 0, not a bool).

    Raises
    ------
    InvalidInputError
        Naming ``name``, for a negative, fractional, boolean or non-integer seed.
    """
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InvalidInputError(f"{name} must be an integer >= 0, got {seed!r}")
    return int(seed)


def check_tz(tz: str | None) -> str | None:
    """Validate an IANA time zone name (``None`` passes: the format's default).

    Raises
    ------
    InvalidInputError
        If ``tz`` is not a non-empty string naming a zone of the tz database.
    """
    if tz is None:
        return None
    import zoneinfo

    if not isinstance(tz, str) or not tz.strip():
        raise InvalidInputError(f"tz: expected an IANA time zone name, got {tz!r}")
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidInputError(
            f"tz: unknown time zone {tz!r} (use an IANA name such as 'America/Los_Angeles')"
        ) from exc
    return tz


_EPOCH = pd.Timestamp(0, tz="UTC")


def _parse_iso(text: pd.Series, *, utc: bool) -> pd.Series:
    """ISO 8601 text to datetimes (NaT where it does not parse), never raising."""
    try:
        return pd.Series(pd.to_datetime(text, format="ISO8601", errors="coerce", utc=utc))
    except (ValueError, TypeError, OverflowError):
        out: list[Any] = []
        for item in text:
            try:
                stamp = pd.Timestamp(item)
                if utc:
                    stamp = (stamp.tz_localize("UTC") if stamp.tzinfo is None
                             else stamp.tz_convert("UTC"))
                out.append(stamp)
            except (ValueError, TypeError, OverflowError):
                out.append(pd.NaT)
        return pd.Series(out, index=text.index, dtype="datetime64[us, UTC]" if utc else None)


def _utc_seconds(stamped: pd.Series) -> FloatArray:
    return np.asarray(((stamped - _EPOCH) / pd.Timedelta(seconds=1)).to_numpy(
        dtype=np.float64, na_value=np.nan), dtype=np.float64)


def _local_seconds(naive: pd.Series, tz: str) -> FloatArray:
    """Naive datetimes as local times in ``tz`` -> epoch seconds (DST rules above)."""
    naive = pd.Series(naive)
    if naive.dt.tz is not None:  # already aware (a tz-aware Parquet column)
        return _utc_seconds(naive)
    try:
        local = naive.dt.tz_localize(
            tz, ambiguous=np.ones(len(naive), dtype=bool), nonexistent="shift_forward"
        )
    except Exception as exc:  # unknown zone name
        raise InvalidInputError(f"tz: unknown time zone {tz!r} ({exc})") from exc
    return _utc_seconds(local)


def _is_stringlike(raw: pd.Series) -> bool:
    return not (pd.api.types.is_numeric_dtype(raw) or pd.api.types.is_bool_dtype(raw))


class RowChecker:
    """Collects per-row rule violations of one trace file.

    Parameters
    ----------
    path : str
        The file (named in errors).
    lines : numpy.ndarray of int64, shape (n_rows,)
        The 1-based file line of each row (header = line 1).  For Parquet the
        row number + 1, and ``line_label="row"``.
    on_invalid : {"raise", "drop"}
        Raise on the earliest bad row, or drop bad rows and count them.
    line_label : {"line", "row"}
        How positions are named in error messages.
    """

    def __init__(
        self,
        path: str,
        lines: np.ndarray,
        on_invalid: str = "raise",
        *,
        line_label: str = "line",
    ) -> None:
        self.path = path
        self.lines = np.asarray(lines, dtype=np.int64)
        self.on_invalid = check_on_invalid(on_invalid)
        self.line_label = line_label
        n = len(self.lines)
        self.bad: BoolArray = np.zeros(n, dtype=bool)
        self.counts: dict[str, int] = {}
        # first failure on the earliest line: (line, column, message)
        self._first: tuple[int, str | None, str] | None = None

    @property
    def n_rows(self) -> int:
        """Number of rows checked."""
        return len(self.lines)

    def flag(
        self,
        mask: np.ndarray,
        kind: str,
        column: str | None,
        message: str,
        *,
        values: Any = None,
        always_drop: bool = False,
    ) -> None:
        """Mark rows that break one rule.

        Parameters
        ----------
        mask : numpy.ndarray of bool, shape (n_rows,)
            True for rows that break the rule.  Rows already marked by an
            earlier rule are not counted again.
        kind : str
            One of :data:`KINDS`.
        column : str or None
            The column named in the error.
        message : str
            What is wrong (the offending value is appended when ``values`` is
            given).
        values : array-like, optional
            The raw cells, to quote the offending one in the error.
        always_drop : bool, default False
            Drop and count even in ``raise`` mode (``cpu_only``).
        """
        if kind not in KINDS:  # pragma: no cover - programming error
            raise ValueError(f"unknown kind {kind!r}")
        new = np.asarray(mask, dtype=bool) & ~self.bad
        n_new = int(new.sum())
        if n_new == 0:
            return
        self.bad |= new
        self.counts[kind] = self.counts.get(kind, 0) + n_new
        if self.on_invalid == "raise" and not always_drop:
            idx = int(np.flatnonzero(new)[np.argmin(self.lines[new])])
            line = int(self.lines[idx])
            if self._first is None or line < self._first[0]:
                text = message
                if values is not None:
                    text = f"{message} (got {np.asarray(values, dtype=object)[idx]!r})"
                self._first = (line, column, f"{text} [{kind}]")

    def finish(self) -> tuple[BoolArray, dict[str, int]]:
        """End the checks.

        Returns
        -------
        keep : numpy.ndarray of bool, shape (n_rows,)
            Rows that passed every rule.
        dropped : dict of str to int
            Count per kind of the rows dropped (in :data:`KINDS` order).

        Raises
        ------
        TraceFormatError
            In ``raise`` mode, for the earliest bad row.
        """
        if self._first is not None:
            line, column, message = self._first
            if self.line_label == "line":
                raise TraceFormatError(message, path=self.path, line=line, column=column)
            raise TraceFormatError(
                f"row {line - 1}: {message}", path=self.path, line=None, column=column
            )
        dropped = {k: self.counts[k] for k in KINDS if k in self.counts}
        if dropped:
            logger.info("%s: dropped %s", self.path, dropped)
        return ~self.bad, dropped

    # ------------------------------------------------------------------ parsers

    def number(self, raw: pd.Series, column: str, *, required: bool = True) -> FloatArray:
        """Parse a numeric column to float64 (blank -> NaN, flagged if required).

        Flags ``missing_value`` (blank, when ``required``) and ``not_a_number``
        (text that is not a finite number).  O(n).
        """
        if pd.api.types.is_bool_dtype(raw):
            # a true/false column is not a count or a time (True would read as 1)
            blank = raw.isna().to_numpy(dtype=bool)
            out = np.full(len(raw), np.nan)
        elif _is_stringlike(raw):
            text = raw.astype("str").str.strip()
            blank = (text == "").to_numpy(dtype=bool) | raw.isna().to_numpy(dtype=bool)
            values = pd.to_numeric(text.where(~blank, "nan"), errors="coerce")
            out = np.asarray(values, dtype=np.float64)
        else:
            out = raw.to_numpy(dtype=np.float64, na_value=np.nan)
            blank = raw.isna().to_numpy(dtype=bool)
        if required:
            self.flag(blank, "missing_value", column, "blank cell", values=None)
        self.flag(~blank & ~np.isfinite(out), "not_a_number", column,
                  "not a finite number", values=raw.to_numpy(dtype=object))
        out = out.copy()
        out[blank] = np.nan
        return out

    def integer(self, raw: pd.Series, column: str, *, required: bool = True) -> FloatArray:
        """Parse a count column: as :meth:`number`, and flag ``not_an_integer``.

        A value with a fractional part, or larger in magnitude than
        :data:`MAX_COUNT` (2**53, where float64 stops holding every integer;
        larger values would also wrap when cast to int64), is
        ``not_an_integer``.  Returns float64 (NaN where blank); cast after the
        rows are filtered.
        """
        out = self.number(raw, column, required=required)
        with np.errstate(invalid="ignore"):
            frac = np.isfinite(out) & (out != np.round(out))
            huge = np.isfinite(out) & (np.abs(out) > MAX_COUNT)
        self.flag(frac, "not_an_integer", column, "not a whole number",
                  values=raw.to_numpy(dtype=object))
        self.flag(huge, "not_an_integer", column, f"count larger than {MAX_COUNT:,}",
                  values=raw.to_numpy(dtype=object))
        return out

    def timestamp(self, raw: pd.Series, column: str, *, tz: str) -> FloatArray:
        """Parse date-time text to seconds since the Unix epoch (UTC), float64.

        Naive times are local times in ``tz`` (IANA name); ISO 8601 times with
        an offset or ``Z`` are taken as given.  At the repeated
        hour when daylight saving time ends the earlier instant (DST) is taken;
        times in the skipped hour when it starts are shifted forward.  Flags
        ``missing_value`` and ``bad_timestamp``.  O(n); the fast path is the
        format ``YYYY-MM-DD HH:MM:SS``.
        """
        text = raw.astype("str").str.strip()
        blank = (text == "").to_numpy(dtype=bool) | raw.isna().to_numpy(dtype=bool)
        self.flag(blank, "missing_value", column, "blank cell")
        parsed = pd.to_datetime(text, format="%Y-%m-%d %H:%M:%S", errors="coerce")
        seconds = _local_seconds(parsed, tz).copy()
        retry = np.isnan(seconds) & ~blank
        if retry.any():
            sub = text[retry]
            aware = sub.str.contains(r"(?:Z|[+-]\d\d:?\d\d)$", regex=True).to_numpy(dtype=bool)
            idx = np.flatnonzero(retry)
            if (~aware).any():
                naive = _parse_iso(sub[~aware], utc=False)
                seconds[idx[~aware]] = _local_seconds(naive, tz)
            if aware.any():
                stamped = _parse_iso(sub[aware], utc=True)
                seconds[idx[aware]] = _utc_seconds(stamped)
        bad = np.isnan(seconds) & ~blank
        self.flag(bad, "bad_timestamp", column,
                  "not a date-time YYYY-MM-DD HH:MM:SS (or ISO 8601)",
                  values=raw.to_numpy(dtype=object))
        return np.asarray(seconds, dtype=np.float64)

    def text(self, raw: pd.Series, column: str, *, required: bool = True) -> np.ndarray:
        """Strip a text column (object array of str); flag blanks if required."""
        text = raw.astype("str").str.strip()
        blank = (text == "").to_numpy(dtype=bool) | raw.isna().to_numpy(dtype=bool)
        if required:
            self.flag(blank, "missing_value", column, "blank cell")
        out = text.to_numpy(dtype=object)
        out[blank] = ""
        return out

    # ------------------------------------------------------------------ rules

    def duration_rules(self, duration: FloatArray, column: str, *, what: str = "duration") -> None:
        """Flag ``negative_duration`` and ``zero_duration``."""
        with np.errstate(invalid="ignore"):
            self.flag(duration < 0, "negative_duration", column, f"{what} is negative")
            self.flag(duration == 0, "zero_duration", column, f"{what} is zero")

    def gpu_rules(
        self,
        gpus: FloatArray,
        column: str,
        *,
        gpus_per_server: int,
        allow_multi_server: bool,
        max_gpus: int | None,
    ) -> None:
        """Flag ``zero_gpus``, ``exceeds_server`` and ``exceeds_cluster``."""
        with np.errstate(invalid="ignore"):
            self.flag(gpus <= 0, "zero_gpus", column, "a job needs at least 1 GPU",
                      values=gpus)
            if not allow_multi_server:
                self.flag(gpus > gpus_per_server, "exceeds_server", column,
                          f"job needs more GPUs than one {gpus_per_server}-GPU server "
                          "and multi-server jobs are off", values=gpus)
            if max_gpus is not None:
                self.flag(gpus > max_gpus, "exceeds_cluster", column,
                          f"job needs more GPUs than the cluster can ever hold ({max_gpus})",
                          values=gpus)

    def duplicate_rules(self, job_id: np.ndarray, column: str) -> None:
        """Flag ``duplicate_job_id`` (every occurrence after the first valid one)."""
        ids = pd.Series(job_id, dtype="object")
        dup = ids.where(~self.bad).duplicated(keep="first").to_numpy(dtype=bool) & ~self.bad
        self.flag(dup, "duplicate_job_id", column, "job id already used on an earlier line",
                  values=job_id)
