"""The sweep's Parquet dataset on disk.

Layout of a sweep folder ``DIR``::

    DIR/sweep.json                     the spec and the plan (keys, labels, tags)
    DIR/runs/key=<key>.parquet         one row per finished run: parameters, measures
    DIR/jobs/run=<key>/part.parquet    the run's per-job table (hive partition ``run``)
    DIR/timeseries/run=<key>/part.parquet
    DIR/sizing/<hash>.json             cached ``auto`` cluster sizes

A run is **finished** when its ``runs/key=<key>.parquet`` exists.  The driver
writes its per-job table and time series first, then that row, each through a
temporary file renamed into place (:func:`aryl._io.atomic_write_bytes`), so a
run is either entirely there or not at all: a crash or Ctrl-C between two runs,
or in the middle of one, never leaves a visible half-written run.  Temporary
files start with ``.`` (ignored by Parquet dataset readers) and are removed
at the next start.

The folder is the one exception to "an output folder is replaced as a whole":
it keeps finished runs on purpose, so that an interrupted sweep resumes.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from aryl._io import atomic_write_bytes
from aryl.errors import InvalidInputError

__all__ = [
    "finished_keys",
    "lock_sweep",
    "read_jobs",
    "read_runs",
    "read_timeseries",
    "remove_temporaries",
    "write_output",
]

log = logging.getLogger(__name__)

RUNS, JOBS, TIMESERIES = "runs", "jobs", "timeseries"


def run_path(root: Path, key: str) -> Path:
    """``root/runs/key=<key>.parquet``."""
    return root / RUNS / f"key={key}.parquet"


def part_path(root: Path, table: str, key: str) -> Path:
    """``root/<table>/run=<key>/part.parquet``."""
    return root / table / f"run={key}" / "part.parquet"


def finished_keys(root: str | os.PathLike[str]) -> set[str]:
    """Keys of the finished runs in a sweep folder. O(number of runs)."""
    folder = Path(root) / RUNS
    if not folder.is_dir():
        return set()
    return {
        p.name[len("key="):-len(".parquet")]
        for p in folder.iterdir()
        if p.name.startswith("key=") and p.name.endswith(".parquet")
    }


def write_output(root: Path, out: Any) -> None:
    """Write one :class:`~aryl.sweep.execute.RunOutput`; the row last (see module doc)."""
    for table, data in ((JOBS, out.jobs), (TIMESERIES, out.timeseries)):
        path = part_path(root, table, out.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
    (root / RUNS).mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(run_path(root, out.key), out.row)


def remove_temporaries(root: Path) -> int:
    """Delete leftover ``.*.tmp`` files of an interrupted writer; their count."""
    n = 0
    for sub in (RUNS, JOBS, TIMESERIES, "sizing"):
        folder = root / sub
        if not folder.is_dir():
            continue
        for p in folder.rglob(".*.tmp"):
            with contextlib.suppress(OSError):
                p.unlink()
                n += 1
    return n


@contextlib.contextmanager
def lock_sweep(root: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``root/.lock`` (two sweeps never write one folder).

    Raises
    ------
    InvalidInputError
        Another process holds the lock.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no lock
        yield
        return
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise InvalidInputError(
                    f"out: another sweep is writing to {root} (wait for it, or use another folder)"
                ) from None
            raise
        yield
    finally:
        os.close(fd)


def _read_files(paths: list[Path]) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    if not paths:
        return pd.DataFrame()
    schemas = [pq.read_schema(p) for p in paths]
    schema = pa.unify_schemas(schemas, promote_options="permissive")
    table = ds.dataset([str(p) for p in paths], schema=schema, format="parquet").to_table()
    return table.to_pandas()


def read_runs(root: str | os.PathLike[str], keys: Iterable[str] | None = None) -> pd.DataFrame:
    """The rows of finished runs (all, or those of ``keys`` that are finished).

    Returns
    -------
    DataFrame
        One row per run: ``key``, parameters, ``seed``, measures, timings; in
        the order of ``keys`` (or of the keys' names).  Columns a run lacks
        (written by an older version) are null.
    """
    base = Path(root)
    done = finished_keys(base)
    wanted = sorted(done) if keys is None else [k for k in dict.fromkeys(keys) if k in done]
    df = _read_files([run_path(base, k) for k in wanted])
    return df.reset_index(drop=True)


def _read_parts(root: Path, table: str, keys: Iterable[str]) -> pd.DataFrame:
    frames = []
    done = finished_keys(root)
    for k in keys:
        if k not in done:
            raise InvalidInputError(f"run {k}: not finished in {root}")
        df = pd.read_parquet(part_path(root, table, k))
        df.insert(0, "run", k)
        frames.append(df)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def read_jobs(root: str | os.PathLike[str], keys: Iterable[str]) -> pd.DataFrame:
    """Per-job tables of finished runs, with a ``run`` column (the key) first.

    Raises
    ------
    InvalidInputError
        A key that is not a finished run of the folder.
    """
    return _read_parts(Path(root), JOBS, keys)


def read_timeseries(root: str | os.PathLike[str], keys: Iterable[str]) -> pd.DataFrame:
    """Time series of finished runs, with a ``run`` column (the key) first."""
    return _read_parts(Path(root), TIMESERIES, keys)
