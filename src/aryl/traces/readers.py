"""Readers for public GPU-cluster trace formats.

Each reader turns one file in a public schema into canonical columns (see
:mod:`aryl.traces.schema`), checking every row with a
:class:`~aryl.traces.validate.RowChecker`.  The format is detected from the
header (the set of column names) unless given explicitly.

=============  =====================================================  ==========================
format         header (columns used)                                   mapping
=============  =====================================================  ==========================
canonical      ``job_id,submit_time_s,duration_s,gpus`` [+ optional]   as is
itp            ``job_id,submission_time,duration,num_gpu``             relative seconds
philly         ``timestamp,duration,num_gpus[,gpu_time,cluster]``      ``timestamp`` is naive
                                                                       local time in ``tz``
                                                                       (default
                                                                       ``America/Los_Angeles``);
                                                                       job id ``philly-<line>``;
                                                                       ``cluster`` -> tenant;
                                                                       ``gpu_time`` ignored
helios         ``job_id,user,vc,gpu_num,cpu_num,node_num,state,``      ``vc`` -> tenant;
               ``submit_time,start_time,end_time,duration,queue``      duration = end - start;
                                                                       times are seconds, or
                                                                       date-times in ``tz``
                                                                       (default
                                                                       ``Asia/Shanghai``);
                                                                       ``gpu_num=0`` ->
                                                                       ``cpu_only``
pai2020        task table ``job_name,task_name,inst_num,status,``      one job per task, id
               ``start_time,end_time,plan_cpu,plan_mem,plan_gpu,``     ``job_name/task_name``;
               ``gpu_type`` (header optional with ``format=``)         submit = start_time;
                                                                       duration = end - start;
                                                                       GPUs = inst_num *
                                                                       plan_gpu / 100, rounded
                                                                       **up** (never to 0);
                                                                       ``plan_gpu=0`` ->
                                                                       ``cpu_only``
alibaba2023    pod list ``name,cpu_milli,memory_mib,num_gpu,``         submit = creation_time;
               ``gpu_milli,gpu_spec,qos,pod_phase,creation_time,``     duration = deletion_time
               ``deletion_time,scheduled_time``                        - scheduled_time;
                                                                       a shared GPU
                                                                       (``gpu_milli`` < 1000)
                                                                       counts as 1 GPU;
                                                                       ``gpu_spec`` -> gpu_type;
                                                                       ``num_gpu=0`` ->
                                                                       ``cpu_only``
=============  =====================================================  ==========================

Fractional GPU policy (PAI, pods): a fractional total is rounded up to the next
whole GPU, so 0.5 GPU -> 1 and 1.5 -> 2; the number of rows rounded is kept in
``Trace.meta["n_fractional_gpus_rounded_up"]``.  It is never truncated to 0.

Line numbers in errors are file lines (header = 1); a record spanning several
lines (a quoted newline) is named by its first line.  Wholly blank lines are
skipped.  Files must be UTF-8 (a BOM is allowed); CRLF line ends, quoted fields
and trailing blank fields are accepted; a record with more non-blank fields
than the header is an error (never shifted).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gzip
import io
import json
import logging
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aryl._limits import MAX_DURATION_S
from aryl.errors import InvalidInputError, TraceFormatError
from aryl.traces.schema import DTYPES
from aryl.traces.validate import RowChecker, check_jobs

__all__ = [
    "DEFAULT_TZ",
    "FORMATS",
    "ReaderOptions",
    "detect_format",
    "format_requirements",
    "read_raw",
]

logger = logging.getLogger(__name__)

DEFAULT_TZ: dict[str, str] = {"philly": "America/Los_Angeles", "helios": "Asia/Shanghai"}

PAI_TASK_COLUMNS = (
    "job_name", "task_name", "inst_num", "status", "start_time", "end_time",
    "plan_cpu", "plan_mem", "plan_gpu", "gpu_type",
)
PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")


@dataclasses.dataclass(frozen=True)
class ReaderOptions:
    """Options shared by the readers (see :func:`aryl.traces.load_trace`)."""

    tz: str | None = None
    gpus_per_server: int = 8
    allow_multi_server: bool = True
    max_gpus: int | None = None
    node_list: str | None = None
    pai_job_table: str | None = None


Columns = dict[str, np.ndarray]
Parser = Callable[[pd.DataFrame, RowChecker, ReaderOptions, dict[str, Any]], Columns]


@dataclasses.dataclass(frozen=True)
class FormatSpec:
    """A trace format: the header columns that identify it and its parser."""

    name: str
    required: tuple[str, ...]
    description: str
    parse: Parser
    headerless: tuple[str, ...] | None = None


# ---------------------------------------------------------------- raw reading

_POOL_LOCK = threading.Lock()
_pool_state: dict[str, Any] = {"depth": 0, "saved": None}


@contextlib.contextmanager
def c_heap_arrow_pool() -> Iterator[None]:
    """Arrow's allocations in the block from the C heap (``pa.system_memory_pool``).

    Reading and checking a trace allocates and frees its columns one after the
    other.  Arrow's default pool (mimalloc) keeps freed pages resident for reuse
    (``release_unused`` does not purge them all), so a large trace would leave
    tens of MB of free pages in the process for the rest of its life; the C heap
    gives a large freed buffer back at once (and ``malloc_trim`` the rest).
    Arrays allocated here stay valid after the block (each buffer frees to its
    own pool).  The default pool is the process's: it is set for the block and
    restored after it (nested and concurrent blocks share one switch).
    """
    import pyarrow as pa

    with _POOL_LOCK:
        if _pool_state["depth"] == 0:
            _pool_state["saved"] = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _pool_state["depth"] += 1
    try:
        yield
    finally:
        with _POOL_LOCK:
            _pool_state["depth"] -= 1
            if _pool_state["depth"] == 0:
                pa.set_memory_pool(_pool_state["saved"])
                _pool_state["saved"] = None



def _is_parquet(path: Path) -> bool:
    return path.name.lower().endswith((".parquet", ".pq"))


def _read_parquet(path: Path, *, schema_only: bool = False) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if schema_only:
            return pq.read_schema(path)
        # as pd.read_parquet (the same dtypes), with each Arrow column freed as it
        # is converted (self_destruct): a large trace is not held twice
        return pq.read_table(path).to_pandas(split_blocks=True, self_destruct=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise TraceFormatError(f"cannot read the file as Parquet ({exc})", path=str(path)) from exc


class ParquetColumns:
    """The columns of a Parquet file, each read from the file when it is asked for.

    What :func:`read_raw` gives for a Parquet file (the same names, stripped of
    spaces, and the same dtypes: each column goes through ``Table.to_pandas``
    as the whole table would), without holding the whole table: ``raw[name]``
    reads that one column into a Series (``RangeIndex``), and nothing is cached,
    so a column lives only as long as its caller holds it.  A reader that checks
    one column at a time (:func:`aryl.traces.validate.check_jobs`) holds one raw
    column at a time, not the whole file next to its checked copies.  Index
    columns stored by pandas are left out, as ``read_raw`` drops them.

    Raises
    ------
    TraceFormatError
        The file is not Parquet (when opened) or a column cannot be read (when
        asked for), or two columns have the same name once stripped.
    """

    def __init__(self, path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = path
        try:
            self._file = pq.ParquetFile(path)
            schema = self._file.schema_arrow
            pandas_md = schema.pandas_metadata or {}
            n_rows = int(self._file.metadata.num_rows)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise TraceFormatError(f"cannot read the file as Parquet ({exc})",
                                   path=str(path)) from exc
        index = {c for c in pandas_md.get("index_columns", []) if isinstance(c, str)}
        self._stored: dict[str, str] = {}
        for stored in schema.names:
            if stored in index:
                continue
            name = str(stored).strip()
            if name in self._stored:
                self.close()
                raise TraceFormatError("duplicate column name in the file", path=str(path),
                                       line=1, column=name)
            self._stored[name] = stored
        self.columns = pd.Index(list(self._stored), dtype=object)
        self._n_rows = n_rows

    def __len__(self) -> int:
        return self._n_rows

    def __getitem__(self, name: str) -> pd.Series:
        import pyarrow as pa

        stored = self._stored[name]
        try:
            table = self._file.read(columns=[stored], use_pandas_metadata=False)
            # a name may also select nested fields ("a" -> "a.b"): this column only
            table = table.select([table.schema.get_field_index(stored)])
            frame = table.to_pandas(split_blocks=True, self_destruct=True)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise TraceFormatError(f"cannot read the file as Parquet ({exc})",
                                   path=str(self.path)) from exc
        del table
        series = frame.iloc[:, 0]
        del frame
        series = series.reset_index(drop=True)
        series.name = name
        return series

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def _read_text(path: Path) -> str:
    """The whole CSV file as text (gzip-decompressed when it ends in ``.gz``).

    Raises :class:`TraceFormatError` naming the line of the first byte that is
    not UTF-8 (e.g. a Windows-1252 export).
    """
    try:
        data = path.read_bytes()
        if path.name.lower().endswith(".gz"):
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise InvalidInputError(f"source: cannot read {str(path)!r} ({exc})") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TraceFormatError(
            f"byte 0x{data[exc.start]:02x} is not UTF-8 text (re-save the file as UTF-8)",
            path=str(path), line=line,
        ) from exc


def _read_header(path: Path) -> list[str]:
    if _is_parquet(path):
        return [str(c) for c in _read_parquet(path, schema_only=True).names]
    opener: Any = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            first = handle.readline(1 << 20)
    except (OSError, EOFError, zlib.error) as exc:
        raise InvalidInputError(f"source: cannot read {str(path)!r} ({exc})") from exc
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(
            f"byte 0x{first[exc.start]:02x} is not UTF-8 text (re-save the file as UTF-8)",
            path=str(path), line=1,
        ) from exc
    return [c.strip() for c in next(csv.reader([text]), [])]


def _csv_records(
    path: Path, names: tuple[str, ...] | None, comment: str | None = None
) -> tuple[list[str], list[list[str]], list[int]]:
    """Parse a CSV file strictly with :mod:`csv`.

    Returns the header, the records (each padded to the header's width) and
    the 1-based file line where each record starts (correct across quoted
    newlines).  Wholly blank lines are skipped.  A record with more fields
    than the header is an error unless the extra fields are blank (trailing
    commas); pandas would instead take the first field as an index and shift
    every column.
    """
    reader = csv.reader(io.StringIO(_read_text(path), newline=""), strict=True)
    records: list[list[str]] = []
    lines: list[int] = []
    header: list[str] | None = list(names) if names else None
    end = 0
    try:
        for row in reader:
            start, end = end + 1, reader.line_num
            if comment and row and row[0].lstrip().startswith(comment):
                continue
            if not "".join(row).strip():
                if header is None and row:
                    header = [c.strip() for c in row]
                continue
            if header is None:
                header = [c.strip() for c in row]
                continue
            width = len(header)
            if len(row) > width:
                if "".join(row[width:]).strip():
                    raise TraceFormatError(
                        f"{len(row)} fields but the header has {width} "
                        f"({', '.join(header)})", path=str(path), line=start,
                    )
                row = row[:width]
            elif len(row) < width:
                row = row + [""] * (width - len(row))
            records.append(row)
            lines.append(start)
    except csv.Error as exc:
        raise TraceFormatError(f"cannot parse CSV ({exc})", path=str(path),
                               line=reader.line_num) from exc
    if header is None or not any(header):
        raise TraceFormatError("empty file: no header line", path=str(path), line=1)
    seen: set[str] = set()
    for name in header:
        if name and name in seen:
            raise TraceFormatError("duplicate column name in the header", path=str(path),
                                   line=1, column=name)
        seen.add(name)
    return header, records, lines


def read_raw(
    path: Path, *, names: tuple[str, ...] | None = None, comment: str | None = None
) -> tuple[pd.DataFrame, np.ndarray, str]:
    """Read a CSV (optionally gzip) or Parquet file without interpreting cells.

    CSV cells are read as text (no NA conversion, so a blank stays blank);
    wholly blank lines are removed; trailing blank fields are ignored.
    ``names`` reads a header-less CSV; ``comment`` (e.g. ``"#"``) skips whole
    lines starting with it.

    Returns
    -------
    raw : pandas.DataFrame
        Column names stripped of spaces.
    lines : numpy.ndarray of int64
        1-based file line (CSV) where each record starts, or row number + 1
        (Parquet).
    line_label : {"line", "row"}

    Raises
    ------
    TraceFormatError
        Not UTF-8 (naming the line), malformed quoting, a record with extra
        non-blank fields, a duplicate or missing header, an unreadable Parquet
        file.
    InvalidInputError
        The file cannot be read (or is not valid gzip).

    Notes
    -----
    O(file size); the whole file is held in memory.
    """
    if _is_parquet(path):
        raw = _read_parquet(path)
        raw.columns = [str(c).strip() for c in raw.columns]
        return raw.reset_index(drop=True), np.arange(2, len(raw) + 2, dtype=np.int64), "row"
    header, records, lines = _csv_records(path, names, comment)
    columns = list(zip(*records, strict=True)) if records else [() for _ in header]
    raw = pd.DataFrame({i: pd.Series(col, dtype=object) for i, col in enumerate(columns)})
    raw.columns = header
    return raw.reset_index(drop=True), np.asarray(lines, dtype=np.int64), "line"


def detect_format(columns: list[str], *, path: str = "") -> str:
    """Name the format whose required columns are all in ``columns``.

    Raises
    ------
    TraceFormatError
        Naming line 1 and the first missing column of the closest format, if
        no format matches.
    """
    present = set(columns)
    if set(PAI_JOB_COLUMNS) <= present and "plan_gpu" not in present:
        raise TraceFormatError(
            "this is the PAI 2020 job table, which has no GPU request; read the task "
            "table (pai_task_table.csv) and pass the job table as pai_job_table=",
            path=path, line=1,
        )
    for spec in FORMATS.values():
        if set(spec.required) <= present:
            return spec.name
    best = max(FORMATS.values(), key=lambda s: len(set(s.required) & present) / len(s.required))
    missing = [c for c in best.required if c not in present]
    if 2 * len(set(best.required) & present) < len(best.required):
        raise TraceFormatError(
            f"unknown trace format: the header has columns {', '.join(columns)}; "
            f"each format needs these columns:\n{format_requirements()}",
            path=path, line=1,
        )
    raise TraceFormatError(
        f"header looks like the {best.name!r} format ({best.description}) but lacks "
        f"column(s) {missing}; it needs {', '.join(best.required)}",
        path=path, line=1, column=missing[0],
    )


def format_requirements() -> str:
    """One line per format: its name, the header columns it needs, what it is."""
    width = max(len(name) for name in FORMATS)
    return "\n".join(f"  {spec.name:<{width}}  {', '.join(spec.required)}  ({spec.description})"
                     for spec in FORMATS.values())


def require_columns(raw: pd.DataFrame, spec: FormatSpec, path: str) -> None:
    """Raise :class:`TraceFormatError` (line 1) if a required column is absent."""
    missing = [c for c in spec.required if c not in raw.columns]
    if missing:
        raise TraceFormatError(
            f"{spec.name} header lacks column(s) {missing}; the {spec.name} format needs "
            f"{', '.join(spec.required)}", path=path, line=1, column=missing[0]
        )


# ---------------------------------------------------------------- parsers


def _gpu_rules(ck: RowChecker, gpus: np.ndarray, column: str, opts: ReaderOptions) -> None:
    ck.gpu_rules(
        gpus, column, gpus_per_server=opts.gpus_per_server,
        allow_multi_server=opts.allow_multi_server, max_gpus=opts.max_gpus,
    )


def _parse_canonical(
    raw: pd.DataFrame, ck: RowChecker, opts: ReaderOptions, meta: dict[str, Any]
) -> Columns:
    return check_jobs(raw, ck, gpus_per_server=opts.gpus_per_server,
                      allow_multi_server=opts.allow_multi_server, max_gpus=opts.max_gpus)


def _parse_itp(
    raw: pd.DataFrame, ck: RowChecker, opts: ReaderOptions, meta: dict[str, Any]
) -> Columns:
    out: Columns = {}
    out["job_id"] = ck.text(raw["job_id"], "job_id")
    out["submit_time_s"] = ck.number(raw["submission_time"], "submission_time")
    out["duration_s"] = ck.number(raw["duration"], "duration")
    ck.duration_rules(out["duration_s"], "duration")
    out["gpus"] = ck.integer(raw["num_gpu"], "num_gpu")
    _gpu_rules(ck, out["gpus"], "num_gpu", opts)
    ck.duplicate_rules(out["job_id"], "job_id")
    return out


def _parse_philly(
    raw: pd.DataFrame, ck: RowChecker, opts: ReaderOptions, meta: dict[str, Any]
) -> Columns:
    tz = opts.tz or DEFAULT_TZ["philly"]
    meta["tz"] = tz
    out: Columns = {}
    out["submit_time_s"] = ck.timestamp(raw["timestamp"], "timestamp", tz=tz)
    out["duration_s"] = ck.number(raw["duration"], "duration")
    ck.duration_rules(out["duration_s"], "duration")
    out["gpus"] = ck.integer(raw["num_gpus"], "num_gpus")
    _gpu_rules(ck, out["gpus"], "num_gpus", opts)
    if "cluster" in raw.columns:
        out["tenant"] = ck.text(raw["cluster"], "cluster", required=False)
    out["job_id"] = np.char.add("philly-", np.asarray(ck.lines).astype(str)).astype(object)
    return out


def _times(
    ck: RowChecker, raw: pd.DataFrame, column: str, tz: str, meta: dict[str, Any]
) -> np.ndarray:
    """A time column holding either seconds or date-times (decided per column)."""
    series = raw[column]
    if pd.api.types.is_numeric_dtype(series):
        return ck.number(series, column)
    text = series.astype("str").str.strip()
    filled = text[text != ""]
    numeric = pd.to_numeric(filled, errors="coerce")
    if len(filled) == 0 or numeric.notna().all():
        return ck.number(series, column)
    meta["tz"] = tz
    return ck.timestamp(series, column, tz=tz)


def _start_end_duration(
    ck: RowChecker, start: np.ndarray, end: np.ndarray, end_column: str
) -> np.ndarray:
    duration = end - start
    with np.errstate(invalid="ignore"):
        ck.flag(duration < 0, "negative_duration", end_column, "end before start",
                values=duration)
        ck.flag(duration == 0, "zero_duration", end_column, "end equal to start")
        ck.flag(duration > MAX_DURATION_S, "long_duration", end_column,
                f"end more than {MAX_DURATION_S:g} s after start", values=duration)
    return duration


def _parse_helios(
    raw: pd.DataFrame, ck: RowChecker, opts: ReaderOptions, meta: dict[str, Any]
) -> Columns:
    tz = opts.tz or DEFAULT_TZ["helios"]
    out: Columns = {}
    gpus = ck.integer(raw["gpu_num"], "gpu_num")
    ck.flag(gpus == 0, "cpu_only", "gpu_num", "CPU-only job", always_drop=True)
    out["job_id"] = ck.text(raw["job_id"], "job_id")
    out["submit_time_s"] = _times(ck, raw, "submit_time", tz, meta)
    start = _times(ck, raw, "start_time", tz, meta)
    end = _times(ck, raw, "end_time", tz, meta)
    out["duration_s"] = _start_end_duration(ck, start, end, "end_time")
    out["gpus"] = gpus
    _gpu_rules(ck, gpus, "gpu_num", opts)
    out["tenant"] = ck.text(raw["vc"], "vc", required=False)
    ck.duplicate_rules(out["job_id"], "job_id")
    return out


def _parse_pai2020(
    raw: pd.DataFrame, ck: RowChecker, opts: ReaderOptions, meta: dict[str, Any]
) -> Columns:
    out: Columns = {}
    job_name = ck.text(raw["job_name"], "job_name")
    task_name = ck.text(raw["task_name"], "task_name")
    inst = ck.integer(raw["inst_num"], "inst_num")
    plan = ck.number(raw["plan_gpu"], "plan_gpu")
    ck.flag(plan == 0, "cpu_only", "plan_gpu", "CPU-only task", always_drop=True)
    with np.errstate(invalid="ignore"):
        ck.flag(plan < 0, "zero_gpus", "plan_gpu", "negative GPU request", values=plan)
        ck.flag(inst <= 0, "zero_gpus", "inst_num", "no instances", values=inst)
        total = np.round(inst * plan / 100.0, 9)
        gpus = np.ceil(total)
    ok = np.isfinite(total)
    meta["fractional_gpu_policy"] = "ceil"
    meta["n_fractional_gpus_rounded_up"] = int((ok & (gpus != total) & ~ck.bad).sum())
    start = ck.number(raw["start_time"], "start_time")
    end = ck.number(raw["end_time"], "end_time")
    out["job_id"] = np.char.add(np.char.add(job_name.astype(str), "/"),
                                task_name.astype(str)).astype(object)
    out["submit_time_s"] = start
    out["duration_s"] = _start_end_duration(ck, start, end, "end_time")
    out["gpus"] = gpus
    _gpu_rules(ck, gpus, "plan_gpu", opts)
    if "gpu_type" in raw.columns:
        out["gpu_type"] = ck.text(raw["gpu_type"], "gpu_type", required=False)
    if opts.pai_job_table is not None:
        jobs = _read_pai_job_table(Path(opts.pai_job_table))
        users = pd.Series(job_name).map(jobs).fillna("")
        out["tenant"] = users.to_numpy(dtype=object)
    ck.duplicate_rules(out["job_id"], "job_name")
    return out


def _read_pai_job_table(path: Path) -> pd.Series:
    header = _read_header(path)
    names = None if "job_name" in header else PAI_JOB_COLUMNS
    raw, _, _ = read_raw(path, names=names)
    for col in ("job_name", "user"):
        if col not in raw.columns:
            raise TraceFormatError("PAI job table lacks a column", path=str(path), line=1,
                                   column=col)
    table = raw.drop_duplicates("job_name", keep="first")
    return pd.Series(table["user"].to_numpy(dtype=object),
                     index=table["job_name"].to_numpy(dtype=object))


def _node_capacity(path: Path, specs: np.ndarray) -> np.ndarray:
    """Largest GPU count over the nodes each pod may use (0 if none)."""
    raw, lines, _ = read_raw(path)
    for col in ("gpu", "model"):
        if col not in raw.columns:
            raise TraceFormatError("node list lacks a column", path=str(path), line=1,
                                   column=col)
    nck = RowChecker(str(path), lines, "raise", drop_hint=None)
    gpu = nck.integer(raw["gpu"], "gpu")
    nck.finish()
    model = raw["model"].astype("str").str.strip().to_numpy(dtype=object)
    per_model = pd.Series(gpu).groupby(model).max().to_dict()
    overall = float(np.max(gpu)) if len(gpu) else 0.0
    cache: dict[str, float] = {}
    cap = np.empty(len(specs), dtype=np.float64)
    for i, spec in enumerate(specs):
        value = cache.get(spec)
        if value is None:
            allowed = [m for m in str(spec).split("|") if m]
            value = overall if not allowed else max(
                (float(per_model[m]) for m in allowed if m in per_model), default=0.0
            )
            cache[spec] = value
        cap[i] = value
    return cap


def _parse_alibaba2023(
    raw: pd.DataFrame, ck: RowChecker, opts: ReaderOptions, meta: dict[str, Any]
) -> Columns:
    out: Columns = {}
    gpus = ck.integer(raw["num_gpu"], "num_gpu")
    ck.flag(gpus == 0, "cpu_only", "num_gpu", "CPU-only pod", always_drop=True)
    out["job_id"] = ck.text(raw["name"], "name")
    if "gpu_milli" in raw.columns:
        milli = ck.number(raw["gpu_milli"], "gpu_milli")
        with np.errstate(invalid="ignore"):
            ck.flag((gpus >= 1) & ((milli <= 0) | (milli > 1000)), "bad_gpu_share", "gpu_milli",
                    "a GPU pod's share of each GPU must be in (0, 1000] milli-GPUs",
                    values=milli)
            ck.flag((gpus > 1) & (milli < 1000), "bad_gpu_share", "gpu_milli",
                    "a multi-GPU pod must use whole GPUs (gpu_milli 1000)", values=milli)
            shared = (gpus == 1) & (milli < 1000) & (milli > 0)
        meta["fractional_gpu_policy"] = "ceil"
        meta["n_fractional_gpus_rounded_up"] = int((shared & ~ck.bad).sum())
    out["submit_time_s"] = ck.number(raw["creation_time"], "creation_time")
    start = ck.number(raw["scheduled_time"], "scheduled_time")
    end = ck.number(raw["deletion_time"], "deletion_time")
    out["duration_s"] = _start_end_duration(ck, start, end, "deletion_time")
    out["gpus"] = gpus
    specs = (ck.text(raw["gpu_spec"], "gpu_spec", required=False)
             if "gpu_spec" in raw.columns else np.full(len(gpus), "", dtype=object))
    out["gpu_type"] = specs
    with np.errstate(invalid="ignore"):
        ck.flag(gpus <= 0, "zero_gpus", "num_gpu", "a job needs at least 1 GPU", values=gpus)
        if opts.node_list is not None:
            cap = _node_capacity(Path(opts.node_list), specs)
            ck.flag(gpus > cap, "exceeds_server", "num_gpu",
                    "pod needs more GPUs than any node it may run on has (node list "
                    f"{opts.node_list})", values=gpus)
            meta["node_list"] = str(opts.node_list)
        else:
            ck.flag(gpus > opts.gpus_per_server, "exceeds_server", "num_gpu",
                    f"pod needs more GPUs than one {opts.gpus_per_server}-GPU server",
                    values=gpus)
        if opts.max_gpus is not None:
            ck.flag(gpus > opts.max_gpus, "exceeds_cluster", "num_gpu",
                    f"job needs more GPUs than the cluster can ever hold ({opts.max_gpus})",
                    values=gpus)
    ck.duplicate_rules(out["job_id"], "name")
    return out


FORMATS: dict[str, FormatSpec] = {
    spec.name: spec
    for spec in (
        FormatSpec("canonical", ("job_id", "submit_time_s", "duration_s", "gpus"),
                   "aryl canonical job trace", _parse_canonical),
        FormatSpec("itp", ("job_id", "submission_time", "duration", "num_gpu"),
                   "Microsoft ITP 2021 (ElasticFlow traces)", _parse_itp),
        FormatSpec("philly", ("timestamp", "duration", "num_gpus"),
                   "Microsoft Philly 2017 job table (Pollux extraction)", _parse_philly),
        FormatSpec("helios", ("job_id", "vc", "gpu_num", "submit_time", "start_time",
                              "end_time"),
                   "SenseTime Helios cluster_log.csv", _parse_helios),
        FormatSpec("pai2020", ("job_name", "task_name", "inst_num", "start_time", "end_time",
                               "plan_gpu"),
                   "Alibaba PAI 2020 task table", _parse_pai2020, headerless=PAI_TASK_COLUMNS),
        FormatSpec("alibaba2023", ("name", "num_gpu", "creation_time", "deletion_time",
                                   "scheduled_time"),
                   "Alibaba GPU cluster 2023 pod list", _parse_alibaba2023),
    )
}


def read_file(
    path: Path, *, format: str | None, on_invalid: str, opts: ReaderOptions
) -> tuple[Columns, str, dict[str, int], dict[str, Any]]:
    """Read and validate one trace file.

    Returns
    -------
    columns : dict of str to numpy.ndarray
        Canonical columns of the kept rows, in file order (not yet sorted).
    format : str
    dropped : dict of str to int
    meta : dict
    """
    if path.is_dir():
        raise InvalidInputError(f"source: {str(path)!r} is a directory, not a trace file")
    if not path.is_file():
        raise InvalidInputError(f"source: no such file or preset {str(path)!r}")
    header = _read_header(path)
    if not any(header):
        raise TraceFormatError("empty file: no header line", path=str(path), line=1)
    if format is None:
        fmt = detect_format(header, path=str(path))
    else:
        if format not in FORMATS:
            raise InvalidInputError(
                f"format: unknown trace format {format!r}; known: {sorted(FORMATS)}"
            )
        fmt = format
    spec = FORMATS[fmt]
    names = None
    if spec.headerless and not set(spec.required) & set(header):
        if len(header) != len(spec.headerless):
            raise TraceFormatError(
                f"{fmt}: header-less file must have {len(spec.headerless)} fields "
                f"{list(spec.headerless)}, line 1 has {len(header)}", path=str(path), line=1,
            )
        names = spec.headerless
    raw: Any
    if _is_parquet(path):
        # column by column: the checks hold one raw column at a time
        raw = ParquetColumns(path)
        lines: np.ndarray | range = range(2, len(raw) + 2)
        label = "row"
    else:
        raw, lines, label = read_raw(path, names=names)
    try:
        columns, keep, dropped, ck, meta = _parse_raw(raw, lines, label, spec, path, on_invalid,
                                                     opts)
    finally:
        if isinstance(raw, ParquetColumns):
            raw.close()
    del raw
    every = bool(keep.all())  # nothing dropped: the columns as they are, no copy
    kept: Columns = {}
    for name in list(columns):
        # one column at a time: its float64 counts go as its int64 copy is made
        values = columns.pop(name)
        if not every:
            values = values[keep]
        if DTYPES[name] == "int64":
            values = values.astype(np.int64)
        kept[name] = values
        del values
    meta["n_rows_read"] = int(ck.n_rows)
    if fmt == "canonical":
        stored = read_stored_meta(path)
        if stored:
            meta = {**stored, **meta}
    logger.info("%s: %s format, %d rows kept of %d", path, fmt, int(keep.sum()), ck.n_rows)
    return kept, fmt, dropped, meta


def _parse_raw(
    raw: Any, lines: np.ndarray | range, label: str, spec: FormatSpec, path: Path, on_invalid: str,
    opts: ReaderOptions,
) -> tuple[Columns, np.ndarray, dict[str, int], RowChecker, dict[str, Any]]:
    """Check the raw columns of one file with its format's parser."""
    require_columns(raw, spec, str(path))
    if len(raw) == 0:
        raise TraceFormatError(
            "no jobs: the file has a header but no data rows (an interrupted export?)",
            path=str(path), line=None if label == "row" else 2,
        )
    ck = RowChecker(str(path), lines, on_invalid, line_label=label)
    meta: dict[str, Any] = {}
    columns = spec.parse(raw, ck, opts, meta)
    keep, dropped = ck.finish()
    return columns, keep, dropped, ck, meta


def read_stored_meta(path: Path) -> dict[str, Any]:
    """The meta dict stored by :func:`aryl.traces.write_trace`, or ``{}``."""
    try:
        if path.name.lower().endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            md = pq.read_schema(path).metadata or {}
            blob = md.get(b"aryl.meta")
            return dict(json.loads(blob.decode())) if blob else {}
        sidecar = path.with_name(path.name + ".meta.json")
        if sidecar.is_file():
            meta = dict(json.loads(sidecar.read_text(encoding="utf-8")))
            digest = meta.pop("data_sha256", None)
            if digest is not None:
                import hashlib

                if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                    logger.warning("%s: ignoring %s, written for other data (an earlier "
                                   "write of this file)", path, sidecar.name)
                    return {}
            return meta
    except (OSError, ValueError) as exc:
        logger.warning("%s: ignoring unreadable stored meta (%s)", path, exc)
    return {}
