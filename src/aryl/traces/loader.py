"""``load_trace`` and ``write_trace``: one entry point for every trace source."""

from __future__ import annotations

import difflib
import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aryl._io import atomic_write_dataframe, atomic_write_text
from aryl.errors import InvalidInputError
from aryl.traces.presets import DEFAULT_PRESET, PRESETS, preset_files
from aryl.traces.readers import ReaderOptions, c_heap_arrow_pool, read_file
from aryl.traces.schema import Trace, canonical_frame
from aryl.traces.validate import check_on_invalid, check_tz, validate_jobs
from aryl.traces.window import parse_window, window_mask

__all__ = ["load_trace", "unknown_source_message", "write_trace"]

logger = logging.getLogger(__name__)


def _merge_counts(into: dict[str, int], more: dict[str, int]) -> None:
    for kind, count in more.items():
        into[kind] = into.get(kind, 0) + count


def unknown_source_message(name: str) -> str:
    """Why ``name`` is neither a trace file nor a preset, and what was probably meant.

    A name that looks like a path (a folder separator or a trace suffix) is
    reported as a missing file; otherwise the closest preset names
    (:func:`difflib.get_close_matches`) are suggested.
    """
    suggestions = difflib.get_close_matches(name, sorted(PRESETS), n=1, cutoff=0.6)
    hint = f"; did you mean {suggestions[0]!r}?" if suggestions else ""
    looks_like_path = (os.sep in name or "/" in name
                       or name.lower().endswith(_TRACE_SUFFIXES))
    if looks_like_path:
        parent = Path(name).parent
        where = ("" if str(parent) in ("", ".") or parent.is_dir()
                 else f" (folder {str(parent)!r} does not exist either)")
        return f"source: file {name!r} does not exist{where}{hint}"
    if suggestions:
        return f"source: {name!r} is neither a file nor a preset{hint}"
    return (f"source: {name!r} is neither a file nor a preset (presets: "
            f"{', '.join(sorted(PRESETS))}; or give the path of a trace file)")


_TRACE_SUFFIXES = (".csv", ".csv.gz", ".gz", ".parquet", ".pq", ".txt")


def load_trace(
    source: str | os.PathLike[str] | pd.DataFrame = DEFAULT_PRESET,
    *,
    format: str | None = None,
    window: str | tuple[float, float] | None = None,
    on_invalid: str = "raise",
    tz: str | None = None,
    gpus_per_server: int = 8,
    max_gpus: int | None = None,
    allow_multi_server: bool = True,
    node_list: str | os.PathLike[str] | None = None,
    pai_job_table: str | os.PathLike[str] | None = None,
) -> Trace:
    """Read a job trace into the canonical, validated form ``[Aryl]``.

    Parameters
    ----------
    source : str, os.PathLike or pandas.DataFrame, default "itp-c07"
        A preset name (see :data:`aryl.traces.PRESETS`), a path to a CSV,
        gzip CSV or Parquet file in one of the formats of
        :mod:`aryl.traces.readers`, or a DataFrame with the canonical
        columns.  Every source goes through the same job rules
        (:func:`aryl.traces.validate.check_jobs` for canonical tables; the
        other formats apply the same checks to the columns they map); errors
        name the file, line (or Parquet row, or DataFrame index label) and
        column.
    format : str, optional
        Force a format (``canonical``, ``itp``, ``philly``, ``helios``,
        ``pai2020``, ``alibaba2023``) instead of detecting it from the header.
    window : str or (float, float), optional
        ``"busiest-15d"`` or ``"START,END"`` or ``(start_s, end_s)``; jobs
        whose submit time is in ``[start, end)`` are kept (see
        :mod:`aryl.traces.window`).
    on_invalid : {"raise", "drop"}, default "raise"
        Raise :class:`~aryl.errors.TraceFormatError` on the first bad row, or
        drop bad rows and count them by kind in ``Trace.dropped``.
    tz : str, optional
        IANA time zone of naive timestamps.  Default per format:
        Philly ``America/Los_Angeles``, Helios ``Asia/Shanghai``.
    gpus_per_server : int, default 8
        GPUs per training server (for ``allow_multi_server=False``).
    max_gpus : int, optional
        GPUs the cluster can ever hold; larger jobs are invalid.
    allow_multi_server : bool, default True
        If False, a job needing more than ``gpus_per_server`` GPUs is invalid.
    node_list : path, optional
        Alibaba 2023 node list (``sn,...,gpu,model``): a pod needing more GPUs
        than every node it may run on is invalid.
    pai_job_table : path, optional
        PAI 2020 job table, to take ``tenant`` from its ``user`` column.

    Returns
    -------
    Trace
        Rows sorted by ``submit_time_s``, ties in input order; ``meta`` holds
        the format's time zone, the window and row counts.

    Raises
    ------
    TraceFormatError
        A bad header, or a file with a header but no data rows.
    InvalidRowsError
        A bad row in ``raise`` mode (a :class:`TraceFormatError` naming file,
        line and column, that also counts every bad row by kind).
    InvalidInputError
        A bad argument (unknown ``tz``, malformed ``window``), a missing file
        (the message says so) or an unknown preset (the message suggests the
        closest names).

    Notes
    -----
    O(n log n) in the number of rows.  The full Philly table (82,247 rows)
    loads in well under a second.
    """
    check_on_invalid(on_invalid)
    check_tz(tz)
    for arg, value in (("gpus_per_server", gpus_per_server), ("max_gpus", max_gpus)):
        if value is not None and (isinstance(value, bool)
                                  or not isinstance(value, int | np.integer)):
            raise InvalidInputError(f"{arg} must be an integer, got {value!r}")
    if not isinstance(allow_multi_server, bool | np.bool_):
        raise InvalidInputError(
            f"allow_multi_server must be True or False, got {allow_multi_server!r}"
        )
    if isinstance(source, pd.DataFrame):
        pass
    elif not isinstance(source, str | os.PathLike) or not os.fspath(source):
        raise InvalidInputError(
            f"source: expected a path, a preset name ({', '.join(sorted(PRESETS))}) or a "
            f"DataFrame, got {source!r}"
        )
    if int(gpus_per_server) < 1:
        raise InvalidInputError(f"gpus_per_server must be >= 1, got {gpus_per_server}")
    if max_gpus is not None and int(max_gpus) < 1:
        raise InvalidInputError(f"max_gpus must be >= 1, got {max_gpus}")
    opts = ReaderOptions(
        tz=tz,
        gpus_per_server=int(gpus_per_server),
        allow_multi_server=bool(allow_multi_server),
        max_gpus=None if max_gpus is None else int(max_gpus),
        node_list=None if node_list is None else str(node_list),
        pai_job_table=None if pai_job_table is None else str(pai_job_table),
    )
    # the columns are read and checked one after the other: from the C heap, which
    # gives the freed ones back (c_heap_arrow_pool)
    with c_heap_arrow_pool():
        return _load(source, format=format, window=window, on_invalid=on_invalid, tz=tz,
                     opts=opts, node_list=node_list, pai_job_table=pai_job_table)


def _load(
    source: str | os.PathLike[str] | pd.DataFrame, *, format: str | None,
    window: str | tuple[float, float] | None, on_invalid: str, tz: str | None,
    opts: ReaderOptions, node_list: str | os.PathLike[str] | None,
    pai_job_table: str | os.PathLike[str] | None,
) -> Trace:
    """:func:`load_trace` once its arguments are checked."""
    dropped: dict[str, int] = {}
    meta: dict[str, Any] = {}
    if isinstance(source, pd.DataFrame):
        name = "DataFrame"
        if format not in (None, "canonical"):
            raise InvalidInputError(
                f"format: a DataFrame must have the canonical columns, not the {format!r} format"
            )
        checked, keep, more = validate_jobs(
            source, on_invalid=on_invalid, gpus_per_server=opts.gpus_per_server,
            allow_multi_server=opts.allow_multi_server, max_gpus=opts.max_gpus,
        )
        columns = {k: v[keep] for k, v in checked.items()}
        fmt = "canonical"
        meta["n_rows_read"] = len(source)
        _merge_counts(dropped, more)
    elif (name := os.fspath(source)) in PRESETS:
        preset = PRESETS[name]
        if format is not None and format != preset.format:
            raise InvalidInputError(
                f"format: preset {name!r} is in the {preset.format!r} format, not {format!r}"
            )
        parts: list[dict[str, np.ndarray]] = []
        for path, tenant in zip(preset_files(preset), preset.tenants, strict=True):
            cols, fmt, more, _ = read_file(path, format=preset.format, on_invalid=on_invalid,
                                           opts=opts)
            cols["tenant"] = np.full(len(cols["job_id"]), tenant, dtype=object)
            parts.append(cols)
            _merge_counts(dropped, more)
        columns = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        meta.update({"preset": name, "n_jobs_documented": preset.n_jobs})
    else:
        path = Path(name)
        if not path.exists():
            raise InvalidInputError(unknown_source_message(name))
        columns, fmt, more, meta = read_file(path, format=format, on_invalid=on_invalid,
                                             opts=opts)
        _merge_counts(dropped, more)
    for option, given, wanted in (("node_list", node_list, "alibaba2023"),
                                  ("pai_job_table", pai_job_table, "pai2020")):
        if given is not None and fmt != wanted:
            raise InvalidInputError(
                f"{option}: only used with the {wanted!r} format; {name!r} is {fmt!r}"
            )
    if tz is not None and "tz" not in meta:
        logger.warning("tz=%r ignored: %s has no date-time column (format %s)", tz, name, fmt)
    jobs = canonical_frame(columns, copy=False)  # the columns are this call's own
    del columns
    if window is not None:
        submit = jobs["submit_time_s"].to_numpy()
        start, end, wmeta = parse_window(window, submit, tz=meta.get("tz"))
        mask = window_mask(submit, start, end)
        wmeta["n_before"] = int((submit < start).sum())
        wmeta["n_after"] = int((submit >= end).sum())
        wmeta["n_jobs"] = int(mask.sum())
        jobs = jobs.loc[mask].reset_index(drop=True)
        meta["window"] = wmeta
    logger.info("loaded %s: %d jobs (%s), dropped %s", name, len(jobs), fmt, dropped)
    return Trace(jobs=jobs, source=name, format=fmt, dropped=dropped, meta=meta)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def write_trace(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write a trace in canonical form, atomically.

    The suffix selects the format: ``.csv``, ``.csv.gz``, ``.parquet``/``.pq``.
    ``trace.meta`` is recorded with the output, plus ``origin`` (``source``,
    ``format``, ``dropped`` of the first trace in the chain: converting a
    converted file keeps the raw source) and ``history`` (one such entry per
    write): in the Parquet schema metadata under ``aryl.meta``, or
    for CSV in a sidecar ``<path>.meta.json``, written after the data with the
    data file's SHA-256, so that a sidecar left from an earlier write (an
    interrupt between the two files) is ignored.  :func:`load_trace` reads it
    back into ``Trace.meta``.

    Parameters
    ----------
    trace : Trace
    path : str or os.PathLike

    Returns
    -------
    pathlib.Path
        The written file.
    """
    hop = {"source": trace.source, "format": trace.format, "dropped": trace.dropped}
    history = list(trace.meta.get("history", []))
    if not history and "origin" in trace.meta:  # written before history was kept
        history.append(trace.meta["origin"])
    history.append(hop)
    # "origin" stays the first source (the raw trace), "history" lists every write
    stored = _jsonable({**trace.meta, "origin": history[0], "history": history})
    blob = json.dumps(stored, sort_keys=True, indent=1)
    dest = Path(path)
    jobs: pd.DataFrame = trace.jobs
    if dest.name.lower().endswith((".parquet", ".pq")):
        return atomic_write_dataframe(jobs, dest, metadata={"aryl.meta": blob})
    out = atomic_write_dataframe(jobs, dest)
    # the sidecar names the bytes it describes: if the data file is replaced and the
    # sidecar is not (Ctrl-C between the two writes), the reader ignores the old sidecar
    import hashlib

    stored["data_sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
    blob = json.dumps(stored, sort_keys=True, indent=1)
    atomic_write_text(dest.with_name(dest.name + ".meta.json"), blob + "\n")
    return out
