"""Row-level validation of trace files and job tables.

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
long_duration       duration above ``MAX_DURATION_S`` (1e9 s, about 32 years)
zero_gpus           0 (or negative) GPUs
exceeds_server      a job larger than one server when multi-server jobs are off,
                    or a pod larger than every node it may run on
exceeds_cluster     more GPUs than ``max_gpus`` (what the cluster can ever hold)
bad_gpu_share       Alibaba pods: ``gpu_milli`` (share of each GPU) outside (0, 1000] for
                    a GPU pod, or below 1000 for a multi-GPU pod
bad_scaling         inconsistent scaling columns (``min_workers`` < 1,
                    ``max_workers`` < ``min_workers``, ``gpus_per_worker`` < 1,
                    ``gpus`` not a multiple of ``gpus_per_worker``, a rigid job
                    with ``min_workers`` != ``max_workers``, ``alpha`` outside
                    [0, 1])
duplicate_job_id    a job id seen on an earlier row (the first one is kept)
cpu_only            a CPU-only job in a format that lists them (Helios ``gpu_num=0``,
                    Alibaba pods ``num_gpu=0``, PAI ``plan_gpu=0``): not an error,
                    always dropped and counted
not_served          a request the trace records as never served (Alibaba GenAI
                    ``predict_status`` PENDING, :mod:`aryl.traces.requests`): not an
                    error, always dropped and counted
==================  ==================================================================

In ``raise`` mode the error reported is the one on the earliest line of the
file (and, on that line, the first rule above that it breaks); an
:class:`InvalidRowsError` also counts every bad row by kind and column, and
names the way to drop them.

One path for every input: :func:`check_jobs` holds the rules of a canonical
job table and is used by the canonical reader (CSV, Parquet), by
:func:`aryl.traces.load_trace` of a DataFrame (:func:`validate_jobs`, errors
name the index label) and by the simulator's job table
(:func:`aryl.sim.jobs.build_job_table`), which every replay input -- a
DataFrame, a ``Trace`` from a file or a preset -- passes through.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from aryl._limits import MAX_DURATION_S
from aryl.errors import InvalidInputError, TraceFormatError

__all__ = [
    "KINDS",
    "MAX_COUNT",
    "InvalidRowsError",
    "RowChecker",
    "check_jobs",
    "check_on_invalid",
    "check_seed",
    "check_tz",
    "validate_jobs",
]

logger = logging.getLogger(__name__)

KINDS: tuple[str, ...] = (
    "missing_value",
    "not_a_number",
    "bad_timestamp",
    "not_an_integer",
    "negative_duration",
    "zero_duration",
    "long_duration",
    "zero_gpus",
    "exceeds_server",
    "exceeds_cluster",
    "bad_gpu_share",
    "bad_scaling",
    "duplicate_job_id",
    "cpu_only",
    "not_served",
    "negative_count",
    "not_increasing",
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


class InvalidRowsError(TraceFormatError):
    """Rows of a trace break the rules (raised by :meth:`RowChecker.finish`).

    The message names the earliest bad row (file line, Parquet row or
    DataFrame index label), its column and the rule, then how many rows break
    a rule, by kind, and how to drop them.

    Attributes
    ----------
    path : str or None
        The file (None for a DataFrame).
    line : int or None
        1-based file line of the earliest bad row (CSV; header = line 1).
    row : int or None
        1-based row of the earliest bad row (Parquet).
    index : object or None
        DataFrame index label of the earliest bad row.
    column : str or None
        Its column.
    kind : str
        The rule it breaks (one of :data:`KINDS`).
    counts : dict of str to int
        Rows that break a rule, by kind (each row counted once, under its first
        rule; rows that are always dropped, such as ``cpu_only``, are left out).
    columns : dict of str to dict of str to int
        For each kind, the rows per column.
    n_rows : int
        Rows checked.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | None,
        line: int | None = None,
        row: int | None = None,
        index: Any = None,
        column: str | None,
        kind: str,
        counts: dict[str, int],
        columns: dict[str, dict[str, int]],
        n_rows: int,
        drop_hint: str | None = "on_invalid='drop'",
    ) -> None:
        self.reason = reason
        self.row = row
        self.index = index
        self.kind = kind
        self.counts = counts
        self.columns = columns
        self.n_rows = n_rows
        self.drop_hint = drop_hint
        super().__init__("", path=path, line=line, column=column)
        self.args = (self.describe(),)

    def where(self) -> str:
        """The earliest bad row: ``file, line 63, column 'x'`` (or row / index)."""
        parts = []
        if self.path is not None:
            parts.append(str(self.path))
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.row is not None:
            parts.append(f"row {self.row}")
        if self.path is None and self.line is None and self.row is None:
            parts.append(f"DataFrame index {self.index!r}")
        if self.column is not None:
            parts.append(f"column {self.column!r}")
        return ", ".join(parts)

    def describe(self, drop_hint: str | None = None) -> str:
        """The message, naming ``drop_hint`` as the way to drop bad rows.

        Parameters
        ----------
        drop_hint : str, optional
            How the caller drops rows (the CLI passes ``--drop-invalid``);
            default: the hint given when the error was raised
            (``on_invalid='drop'`` for :func:`aryl.traces.load_trace`).
        """
        text = f"{self.where()}: {self.reason} [{self.kind}]"
        total = sum(self.counts.values())
        kinds = "; ".join(
            f"{kind} {n:,} ({', '.join(f'{c} {k:,}' for c, k in self.columns[kind].items())})"
            for kind, n in self.counts.items()
        )
        text += f"\n{total:,} of {self.n_rows:,} rows cannot be used, by kind: {kinds}"
        hint = self.drop_hint if drop_hint is None else drop_hint
        if hint:
            text += f"\n{hint} drops {'it' if total == 1 else 'them'} (counted by kind)"
        return text

    def __str__(self) -> str:
        return self.describe()

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return _restore_invalid_rows, (dict(self.__dict__),)


class RowChecker:
    """Collects per-row rule violations of one trace file or DataFrame.

    Parameters
    ----------
    path : str or None
        The file (named in errors); None for a DataFrame.
    lines : numpy.ndarray of int64, shape (n_rows,), or range
        Increasing position of each row.  For CSV the 1-based file line (header
        = line 1); for Parquet the row number + 1, and ``line_label="row"``;
        for a DataFrame any increasing numbers, ``line_label="index"`` and
        ``labels``.  A ``range`` is kept as it is (no array of n positions).
    on_invalid : {"raise", "drop"}
        Raise on the earliest bad row, or drop bad rows and count them.
    line_label : {"line", "row", "index"}
        How positions are named in error messages.
    labels : array-like, optional
        The DataFrame index label of each row (``line_label="index"``).
    drop_hint : str or None, default "on_invalid='drop'"
        How the caller drops bad rows, named in the error (None: it cannot).
    """

    def __init__(
        self,
        path: str | None,
        lines: np.ndarray | range,
        on_invalid: str = "raise",
        *,
        line_label: str = "line",
        labels: Any = None,
        drop_hint: str | None = "on_invalid='drop'",
    ) -> None:
        if line_label not in ("line", "row", "index"):  # pragma: no cover - programming error
            raise ValueError(f"unknown line_label {line_label!r}")
        self.path = path
        self.lines: np.ndarray | range = (
            lines if isinstance(lines, range) else np.asarray(lines, dtype=np.int64))
        self.on_invalid = check_on_invalid(on_invalid)
        self.line_label = line_label
        # read only to name a bad row (no per-row Python objects for a good table)
        self.labels = labels
        self.drop_hint = drop_hint
        n = len(self.lines)
        self.bad: BoolArray = np.zeros(n, dtype=bool)
        self.counts: dict[str, int] = {}
        self.columns: dict[str, dict[str, int]] = {}
        self._always_dropped: set[str] = set()
        # first failure on the earliest line: (line, row index, column, message, kind)
        self._first: tuple[int, int, str | None, str, str] | None = None

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
            The raw cells (an array or a Series), to quote the offending one
            in the error; only that cell is read (as ``to_numpy(dtype=object)``
            gives it), so a column costs nothing here.
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
        per_column = self.columns.setdefault(kind, {})
        name = column or "-"
        per_column[name] = per_column.get(name, 0) + n_new
        if always_drop:
            self._always_dropped.add(kind)
        if self.on_invalid == "raise" and not always_drop:
            if isinstance(self.lines, range):  # increasing: the first new row
                idx = int(np.argmax(new))
            else:
                idx = int(np.flatnonzero(new)[np.argmin(self.lines[new])])
            line = int(self.lines[idx])
            if self._first is None or line < self._first[0]:
                text = message
                if values is not None:
                    text = f"{message} (got {_cell(values, idx)!r})"
                self._first = (line, idx, column, text, kind)

    def header_error(self, message: str, column: str | None = None) -> TraceFormatError:
        """An error about the columns as a whole (line 1 of a file)."""
        if self.line_label == "index":
            where = "DataFrame" + (f", column {column!r}" if column else "")
            err = TraceFormatError(f"{where}: {message}")
            err.column = column
            return err
        return TraceFormatError(message, path=self.path, line=1, column=column)

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
        InvalidRowsError
            In ``raise`` mode, for the earliest bad row; the message also
            counts every bad row by kind.
        """
        if self._first is not None:
            line, idx, column, message, kind = self._first
            counts = {k: self.counts[k] for k in KINDS
                      if k in self.counts and k not in self._always_dropped}
            columns = {k: dict(sorted(self.columns[k].items())) for k in counts}
            common: dict[str, Any] = dict(kind=kind, counts=counts, columns=columns,
                                          n_rows=self.n_rows, drop_hint=self.drop_hint,
                                          column=column)
            if self.line_label == "line":
                raise InvalidRowsError(message, path=self.path, line=line, **common)
            if self.line_label == "row":
                raise InvalidRowsError(message, path=self.path, row=line - 1, **common)
            label = next(iter(self.labels[idx:idx + 1])) if self.labels is not None else idx
            if isinstance(label, np.generic):
                label = label.item()
            raise InvalidRowsError(message, path=None, index=label, **common)
        dropped = {k: self.counts[k] for k in KINDS if k in self.counts}
        if dropped:
            logger.info("%s: dropped %s", self.path or "DataFrame", dropped)
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
            out = np.array(values, dtype=np.float64)  # a copy of its own
        else:
            # one copy of the column, ours (copy=True copies only a view of it)
            out = raw.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
            blank = raw.isna().to_numpy(dtype=bool)
        if required:
            self.flag(blank, "missing_value", column, "blank cell", values=None)
        self.flag(~blank & ~np.isfinite(out), "not_a_number", column,
                  "not a finite number", values=raw)
        if blank.any():
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
                  values=raw)
        self.flag(huge, "not_an_integer", column, f"count larger than {MAX_COUNT:,}",
                  values=raw)
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
                  values=raw)
        return np.asarray(seconds, dtype=np.float64)

    def text(self, raw: pd.Series, column: str, *, required: bool = True,
             as_object: bool = True) -> Any:
        """Strip a text column; flag blanks if required (a blank reads ``""``).

        Returns an object array of str, or with ``as_object=False`` the
        Arrow-backed ``str`` array (no Python object per row: a million-row
        column is its bytes plus offsets, not a million ``str`` objects).
        """
        text = raw.astype("str").str.strip()
        blank = (text == "").to_numpy(dtype=bool) | raw.isna().to_numpy(dtype=bool)
        if required:
            self.flag(blank, "missing_value", column, "blank cell")
        if not as_object:
            arr = text.array
            if blank.any():
                arr = arr.copy()
                arr[blank] = ""
            return arr
        out = text.to_numpy(dtype=object)
        out[blank] = ""
        return out

    # ------------------------------------------------------------------ rules

    def duration_rules(self, duration: FloatArray, column: str, *, what: str = "duration") -> None:
        """Flag ``negative_duration``, ``zero_duration`` and ``long_duration``."""
        with np.errstate(invalid="ignore"):
            self.flag(duration < 0, "negative_duration", column, f"{what} is negative")
            self.flag(duration == 0, "zero_duration", column, f"{what} is zero")
            self.flag(duration > MAX_DURATION_S, "long_duration", column,
                      f"{what} is above {MAX_DURATION_S:g} s", values=duration)

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

    def duplicate_rules(self, job_id: Any, column: str) -> None:
        """Flag ``duplicate_job_id`` (every occurrence after the first valid one).

        ``job_id``: an object array of str or an Arrow-backed ``str`` array (no
        Python object per row).  Rows already flagged take no id.  From
        ``_HASH_FROM_ROWS`` (2**18) rows, O(n log n): the ids are hashed to 64 bits
        and the hashes sorted; only rows whose hash is not unique have their ids
        compared (exactly), so a table of unique ids costs about 9 bytes a row on
        top of it, not a hash table of its strings.  Below, the ids' hash table
        (``pd.factorize``, O(n)), which is faster there.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        if len(job_id) < _HASH_FROM_ROWS:
            self._duplicate_rules_factorized(job_id, column)
            return
        valid = None if not self.bad.any() else np.flatnonzero(~self.bad)
        arr = pa.array(job_id, type=pa.large_string()) if isinstance(job_id, np.ndarray) \
            else pa.array(job_id)
        chunked = arr if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr])
        del arr
        rows = _repeated_hash_rows(chunked, valid)
        dup = np.zeros(len(job_id), dtype=bool)
        if rows is not None and len(rows):
            # exact: the ids of the rows that share a hash, in row order; codes number
            # the distinct ids in order of first appearance, so a row repeats an
            # earlier id iff its code is at most the largest code before it
            taken = chunked.take(pa.array(rows)).combine_chunks()
            codes = np.asarray(
                pc.dictionary_encode(taken).indices.to_numpy(zero_copy_only=False),
                dtype=np.int64)
            seen = np.maximum.accumulate(np.concatenate([[-1], codes[:-1]]))
            dup[rows[codes <= seen]] = True
        self.flag(dup, "duplicate_job_id", column, "job id already used by an earlier row",
                  values=job_id)

    def _duplicate_rules_factorized(self, job_id: Any, column: str) -> None:
        """duplicate_rules for a table below ``_HASH_FROM_ROWS`` rows: the ids'
        hash table (``pd.factorize``, about 90 bytes a row, ten times faster than
        hashing the ids in numpy at this size).  The same flags."""
        valid = np.flatnonzero(~self.bad)
        ids = job_id[valid] if len(valid) < len(job_id) else job_id
        # codes number the distinct ids in order of first appearance, so a row
        # repeats an earlier id iff its code is at most the largest code before it
        codes, _ = pd.factorize(ids, sort=False)
        codes = np.asarray(codes, dtype=np.int64)
        seen = np.maximum.accumulate(np.concatenate([[-1], codes[:-1]])) if len(codes) else codes
        dup = np.zeros(len(job_id), dtype=bool)
        dup[valid] = codes <= seen
        self.flag(dup, "duplicate_job_id", column, "job id already used by an earlier row",
                  values=job_id)

    def boolean(self, raw: pd.Series, column: str) -> BoolArray:
        """Parse a true/false column (flags ``missing_value`` and ``not_a_number``).

        Accepted: booleans; the numbers 0 and 1; the text ``true``/``false``,
        ``1``/``0``, ``yes``/``no`` (any case, spaces stripped), the same for
        a CSV cell, a Parquet column and a DataFrame column.  Anything else
        (``"maybe"``, 2, 0.5) is an error; a blank, ``None`` or NaN is a
        ``missing_value``, never read as False.  O(n).
        """
        if pd.api.types.is_bool_dtype(raw):
            blank = raw.isna().to_numpy(dtype=bool)
            self.flag(blank, "missing_value", column, "blank cell")
            return np.asarray(raw.fillna(False).to_numpy(dtype=bool), dtype=bool)
        if pd.api.types.is_numeric_dtype(raw):
            values = self.number(raw, column)
            self.flag(np.isfinite(values) & (values != 0) & (values != 1), "not_a_number", column,
                      "not a boolean (true/false/1/0)", values=raw)
            return np.asarray(values == 1, dtype=bool)
        cells = raw
        text = raw.astype("str").str.strip().str.lower()
        blank = (text == "").to_numpy(dtype=bool) | raw.isna().to_numpy(dtype=bool)
        self.flag(blank, "missing_value", column, "blank cell")
        number = pd.to_numeric(text.where(~blank, "nan"), errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan)
        true = text.isin(["true", "yes"]).to_numpy(dtype=bool) | (number == 1)
        false = text.isin(["false", "no"]).to_numpy(dtype=bool) | (number == 0)
        self.flag(~blank & ~true & ~false, "not_a_number", column,
                  "not a boolean (true/false/1/0)", values=cells)
        return np.asarray(true, dtype=bool)


Columns = dict[str, np.ndarray]


def check_jobs(
    raw: pd.DataFrame,
    ck: RowChecker,
    *,
    gpus_per_server: int = 8,
    allow_multi_server: bool = True,
    max_gpus: int | None = None,
) -> Columns:
    """The canonical job rules, for every input: CSV, Parquet, DataFrame, ``Trace``.

    The one validation path of job tables: the canonical reader
    (:mod:`aryl.traces.readers`), :func:`aryl.traces.load_trace` of a
    DataFrame and the simulator's job table (:func:`aryl.sim.jobs.build_job_table`)
    all call it, so a job accepted by one is accepted by all.

    Parameters
    ----------
    raw : pandas.DataFrame
        Canonical column names (see :mod:`aryl.traces.schema`), cells as text
        (CSV) or typed (Parquet, DataFrame); other columns are ignored.
    ck : RowChecker
        Collects the violations (and raises or drops in :meth:`RowChecker.finish`).
    gpus_per_server, allow_multi_server, max_gpus
        As :func:`aryl.traces.load_trace` (``exceeds_server``, ``exceeds_cluster``).

    Returns
    -------
    dict of str to array
        Every canonical column present, in row order (not filtered): counts as
        float64 ndarrays (cast after filtering), ``elastic`` bool, text
        (``job_id``, ``tenant``, ``gpu_type``, ``model``) as Arrow-backed
        ``str`` arrays (``pandas.arrays.ArrowStringArray``, blanks ``""``).

    Raises
    ------
    TraceFormatError
        A required column is missing, or the five scaling columns are not all
        there (they come as a set).

    Notes
    -----
    Rules, each a kind of :data:`KINDS` (a row counts under its first broken
    rule): ``job_id`` not blank and unique; ``submit_time_s`` and
    ``duration_s`` finite numbers, duration > 0; ``gpus`` a whole number >= 1;
    with scaling columns: ``gpus_per_worker``, ``min_workers``,
    ``max_workers`` whole numbers, ``elastic`` a boolean (see
    :meth:`RowChecker.boolean`), ``alpha`` a finite number, and
    ``bad_scaling`` when ``gpus_per_worker`` < 1, ``min_workers`` < 1,
    ``max_workers`` < ``min_workers``, ``gpus`` not a multiple of
    ``gpus_per_worker``, a rigid job (``elastic`` false) with ``min_workers``
    != ``max_workers``, or ``alpha`` outside [0, 1] (``T(w) = w / (1 + alpha
    (w - 1))`` must not fall as workers are added).  O(n) plus the
    duplicate check's hashing.
    """
    from aryl.traces.schema import REQUIRED_COLUMNS, SCALING_COLUMNS

    missing = [c for c in REQUIRED_COLUMNS if c not in raw.columns]
    if missing:
        raise ck.header_error(f"missing column(s) {missing}; a job table needs "
                              f"{', '.join(REQUIRED_COLUMNS)}", missing[0])
    present = [c for c in SCALING_COLUMNS if c in raw.columns]
    if present and len(present) != len(SCALING_COLUMNS):
        lacking = [c for c in SCALING_COLUMNS if c not in raw.columns]
        raise ck.header_error(
            f"scaling columns come as a set: {present} given but {lacking} missing "
            f"(give all of {', '.join(SCALING_COLUMNS)}, or none for rigid jobs)", lacking[0]
        )
    out: Columns = {}
    out["job_id"] = ck.text(raw["job_id"], "job_id", as_object=False)
    out["submit_time_s"] = ck.number(raw["submit_time_s"], "submit_time_s")
    out["duration_s"] = ck.number(raw["duration_s"], "duration_s")
    ck.duration_rules(out["duration_s"], "duration_s")
    out["gpus"] = ck.integer(raw["gpus"], "gpus")
    ck.gpu_rules(out["gpus"], "gpus", gpus_per_server=gpus_per_server,
                 allow_multi_server=allow_multi_server, max_gpus=max_gpus)
    if present:
        for col in ("gpus_per_worker", "min_workers", "max_workers"):
            out[col] = ck.integer(raw[col], col)
        elastic = raw["elastic"]  # (read once: a Parquet column comes from the file)
        out["elastic"] = ck.boolean(elastic, "elastic")
        out["alpha"] = ck.number(raw["alpha"], "alpha")
        gpw, lo, hi = out["gpus_per_worker"], out["min_workers"], out["max_workers"]
        with np.errstate(invalid="ignore", divide="ignore"):
            ck.flag(gpw < 1, "bad_scaling", "gpus_per_worker", "gpus_per_worker < 1",
                    values=gpw)
            ck.flag(lo < 1, "bad_scaling", "min_workers", "min_workers < 1", values=lo)
            ck.flag(hi < lo, "bad_scaling", "max_workers", "max_workers < min_workers",
                    values=hi)
            ck.flag(out["gpus"] % gpw != 0, "bad_scaling", "gpus_per_worker",
                    "gpus is not a multiple of gpus_per_worker", values=gpw)
            ck.flag(~out["elastic"] & (hi != lo), "bad_scaling", "elastic",
                    "a rigid job (elastic false) needs min_workers == max_workers",
                    values=elastic)
            ck.flag((out["alpha"] < 0) | (out["alpha"] > 1), "bad_scaling", "alpha",
                    "alpha must be in [0, 1]", values=out["alpha"])
        del elastic
    for col in ("tenant", "gpu_type", "model"):
        if col in raw.columns:
            out[col] = ck.text(raw[col], col, required=False, as_object=False)
    if "priority" in raw.columns:
        out["priority"] = ck.integer(raw["priority"], "priority")
    ck.duplicate_rules(out["job_id"], "job_id")
    return out


def validate_jobs(
    jobs: pd.DataFrame,
    *,
    on_invalid: str = "raise",
    gpus_per_server: int = 8,
    allow_multi_server: bool = True,
    max_gpus: int | None = None,
    drop_hint: str | None = "on_invalid='drop'",
) -> tuple[Columns, BoolArray, dict[str, int]]:
    """Check a canonical job DataFrame with :func:`check_jobs`.

    Errors name the DataFrame index label of the earliest bad row and its
    column.

    Parameters
    ----------
    jobs : pandas.DataFrame
        Canonical columns (others are ignored).
    on_invalid : {"raise", "drop"}, default "raise"
    gpus_per_server, allow_multi_server, max_gpus
        As :func:`check_jobs`.
    drop_hint : str or None
        How the caller can drop bad rows, named in the error.

    Returns
    -------
    columns : dict of str to numpy.ndarray
        As :func:`check_jobs`, every row (not filtered).
    keep : numpy.ndarray of bool, shape (n_rows,)
        Rows that passed every rule.
    dropped : dict of str to int
        Rows dropped, by kind (``on_invalid="drop"``).

    Raises
    ------
    InvalidInputError
        Not a DataFrame.
    TraceFormatError
        A missing column (or an incomplete set of scaling columns).
    InvalidRowsError
        A bad row in ``raise`` mode (naming the index label and the column,
        counting every bad row by kind).
    """
    if not isinstance(jobs, pd.DataFrame):
        raise InvalidInputError(f"jobs: expected a pandas DataFrame, got {type(jobs).__name__}")
    if jobs.columns.duplicated().any():
        dup = [str(c) for c in jobs.columns[jobs.columns.duplicated()]]
        raise InvalidInputError(f"jobs: duplicate column name(s) {dup}")
    raw = jobs.reset_index(drop=True)
    n = len(raw)
    ck = RowChecker(None, range(n), on_invalid, line_label="index",
                    labels=jobs.index, drop_hint=drop_hint)
    columns = check_jobs(raw, ck, gpus_per_server=gpus_per_server,
                         allow_multi_server=allow_multi_server, max_gpus=max_gpus)
    keep, dropped = ck.finish()
    return columns, keep, dropped



#: Rows hashed at a time by :func:`string_hashes` (its temporaries: about 40
#: bytes per character of a block).
_HASH_BLOCK = 1 << 16
#: Tables of at least this many rows check duplicate ids by 64-bit hashes sorted
#: in place (about 9 bytes a row); smaller ones by the ids' hash table (faster,
#: about 90 bytes a row: 24 MB below this size).
_HASH_FROM_ROWS = 1 << 18
_HASH_BASE = np.uint64(0x100000001B3)  # odd: powers of it never vanish mod 2**64
_LEN_MIX = np.uint64(0x9E3779B97F4A7C15)


def _mix64(h: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, in place on a uint64 array (and returned)."""
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


def string_hashes(strings: Any) -> np.ndarray:
    """A 64-bit hash of each string of an Arrow string array (uint64, one per row).

    Equal strings hash equal; two different strings share a hash with a
    probability of about 2**-64 (callers compare the strings of equal hashes).
    Computed from the Arrow buffers in blocks of :data:`_HASH_BLOCK` rows, so
    the temporaries stay a few MB however long the array; a null hashes as the
    bytes its slot spans (callers leave nulls out).  O(total length).
    """
    import pyarrow as pa

    chunked = strings if isinstance(strings, pa.ChunkedArray) else pa.chunked_array([strings])
    out = np.empty(len(chunked), dtype=np.uint64)
    powers = np.ones(1, dtype=np.uint64)
    at = 0
    for chunk in chunked.chunks:
        m = len(chunk)
        if m == 0:
            continue
        if not (pa.types.is_large_string(chunk.type) or pa.types.is_string(chunk.type)):
            chunk = chunk.cast(pa.large_string())
        bufs = chunk.buffers()
        wide = pa.types.is_large_string(chunk.type)
        offsets = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32)
        offsets = offsets[chunk.offset:chunk.offset + m + 1]
        data = (np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None
                else np.zeros(0, dtype=np.uint8))
        for b0 in range(0, m, _HASH_BLOCK):
            o = offsets[b0:b0 + _HASH_BLOCK + 1].astype(np.int64)
            lens = np.diff(o)
            h = lens.astype(np.uint64) * _LEN_MIX
            first, last = int(o[0]), int(o[-1])
            if last > first:
                longest = int(lens.max())
                if len(powers) < longest:  # base**k mod 2**64 (numpy wraps)
                    powers = np.cumprod(np.concatenate(
                        [[np.uint64(1)], np.full(longest - 1, _HASH_BASE, dtype=np.uint64)]))
                starts = o[:-1] - first
                pos = np.arange(last - first, dtype=np.int64) - np.repeat(starts, lens)
                term = data[first:last].astype(np.uint64)
                term += np.uint64(1)
                term *= powers[pos]
                del pos
                nonempty = np.flatnonzero(lens)
                h[nonempty] += np.add.reduceat(term, starts[nonempty])
            out[at + b0:at + b0 + len(lens)] = _mix64(h)
        at += m
    return out


def _repeated_hash_rows(strings: Any, rows: np.ndarray | None) -> np.ndarray | None:
    """The rows (of ``rows``, every row if None) whose string hash is shared with
    another of them, ascending; None when every hash is distinct.

    The common case (unique ids) holds one uint64 per row and its sort, in place.
    """
    h = string_hashes(strings)
    if rows is not None:
        h = h[rows]
    h.sort()
    if not bool((h[1:] == h[:-1]).any()):
        return None
    h = string_hashes(strings)  # again, in row order (rare: some ids repeat)
    if rows is not None:
        h = h[rows]
    order = np.argsort(h, kind="stable")
    h = h[order]
    same = h[1:] == h[:-1]
    shared = np.zeros(len(h), dtype=bool)
    shared[1:] |= same
    shared[:-1] |= same
    picked = np.sort(order[shared])
    return picked if rows is None else rows[picked]


def _cell(values: Any, idx: int) -> Any:
    """Cell ``idx`` of a column as ``to_numpy(dtype=object)`` would give it, without
    that whole-column object copy (numpy scalars as Python ones)."""
    if isinstance(values, pd.Series | pd.Index):
        values = values.array
    if isinstance(values, pd.api.extensions.ExtensionArray):
        return values[idx:idx + 1].to_numpy(dtype=object)[0]
    return np.asarray(values)[idx:idx + 1].astype(object)[0]


def _restore_invalid_rows(state: dict[str, Any]) -> InvalidRowsError:
    """Unpickle an :class:`InvalidRowsError` (raised in a worker process)."""
    err = InvalidRowsError.__new__(InvalidRowsError)
    err.__dict__.update(state)
    err.args = (err.describe(),)
    return err
