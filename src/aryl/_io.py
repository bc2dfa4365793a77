"""Atomic file output.

Every file that :mod:`aryl` writes goes through these helpers: the content is
written to a temporary file in the destination's directory, flushed and
``fsync``-ed, then moved over the destination with :func:`os.replace`, which is
atomic on POSIX and Windows.  A reader therefore sees either the old file or
the complete new one, never a torn write, and an interrupted run leaves no
half-written output behind.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from aryl.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["atomic_write_bytes", "atomic_write_dataframe", "atomic_write_text"]

logger = logging.getLogger(__name__)


def _default_mode() -> int:
    """0o666 minus the process umask (what ``open(path, "w")`` would give)."""
    try:  # Linux: read it without changing it (os.umask is process-wide)
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file.  Its directory must exist.
    data : bytes
        The complete new content.

    Returns
    -------
    pathlib.Path
        The destination path.  The file gets the permissions ``open()``
        would give (0o666 minus the umask), not mkstemp's 0o600.

    Raises
    ------
    InvalidInputError
        If the destination directory does not exist.
    OSError
        If the file system refuses the write (the temporary file is removed).
    """
    dest = Path(path)
    directory = dest.parent if str(dest.parent) else Path(".")
    if not directory.is_dir():
        raise InvalidInputError(f"path: directory {str(directory)!r} does not exist")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=directory)
    try:
        # mkstemp makes the file 0600; give it the mode a plain open() would
        os.fchmod(fd, _default_mode())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    logger.debug("wrote %s (%d bytes)", dest, len(data))
    return dest


def atomic_write_text(
    path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8"
) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write_bytes`).

    Parameters
    ----------
    path : str or os.PathLike
        Destination file.
    text : str
        The complete new content.
    encoding : str, default "utf-8"
        Text encoding.

    Returns
    -------
    pathlib.Path
        The destination path.
    """
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_write_dataframe(
    df: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write a DataFrame atomically, choosing the format from the suffix.

    ``.parquet`` (or ``.pq``) writes Parquet through pyarrow (the index is not
    stored; ``metadata`` goes into the Parquet schema's key-value metadata);
    ``.csv`` writes CSV without the index; ``.csv.gz`` writes gzip-compressed
    CSV (deterministic: no timestamp in the gzip header).

    Parameters
    ----------
    df : pandas.DataFrame
        The table to write.
    path : str or os.PathLike
        Destination; the suffix selects the format.
    metadata : mapping of str to str, optional
        Extra key-value metadata (Parquet only; ignored for CSV).

    Returns
    -------
    pathlib.Path
        The destination path.

    Raises
    ------
    InvalidInputError
        If the suffix is not one of ``.csv``, ``.csv.gz``, ``.parquet``, ``.pq``.
    """
    dest = Path(path)
    name = dest.name.lower()
    if name.endswith((".parquet", ".pq")):
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(df, preserve_index=False)
        if metadata:
            merged = dict(table.schema.metadata or {})
            merged.update({k.encode(): v.encode() for k, v in metadata.items()})
            table = table.replace_schema_metadata(merged)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        return atomic_write_bytes(dest, sink.getvalue().to_pybytes())
    if name.endswith(".csv.gz"):
        import gzip

        text = df.to_csv(index=False, lineterminator="\n")
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
            gz.write(text.encode("utf-8"))
        return atomic_write_bytes(dest, buf.getvalue())
    if name.endswith(".csv"):
        return atomic_write_text(dest, df.to_csv(index=False, lineterminator="\n"))
    raise InvalidInputError(
        f"path: cannot tell the output format of {str(dest)!r} "
        "(use a .csv, .csv.gz, .parquet or .pq suffix)"
    )
