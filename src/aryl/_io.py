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
import errno
import io
import logging
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aryl.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "atomic_directory",
    "atomic_write_bytes",
    "atomic_write_dataframe",
    "atomic_write_text",
    "check_output_folder",
    "check_writable",
    "replace_directory",
]

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


def _fresh_path(directory: Path, prefix: str, suffix: str) -> Path:
    """A name in ``directory`` that does not exist yet (``prefix`` + 8 random hex
    digits + ``suffix``), as ``tempfile`` names its files.

    The caller creates it (``O_EXCL`` / ``mkdir``) *inside* the ``try`` whose
    handler removes it: with ``tempfile.mkstemp`` a Ctrl-C landing after the file
    is made but before ``mkstemp`` returns left a file nobody knew the name of.
    """
    for _ in range(100):
        p = directory / f"{prefix}{secrets.token_hex(4)}{suffix}"
        if not os.path.lexists(p):
            return p
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(directory))


def _create_file(path: Path) -> int:
    """``open(path, O_CREAT | O_EXCL)`` for writing, mode 0600 (as ``mkstemp``)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, 0o600)


@contextlib.contextmanager
def _atomic_file(path: str | os.PathLike[str]) -> Iterator[io.BufferedWriter]:
    """A binary handle on a temporary file beside ``path``; on a clean exit it is
    flushed, ``fsync``-ed and moved over ``path`` (:func:`atomic_write_bytes`), on
    an exception removed."""
    dest = Path(path)
    directory = dest.parent if str(dest.parent) else Path(".")
    if not directory.is_dir():
        raise InvalidInputError(f"path: directory {str(directory)!r} does not exist")
    tmp_name, mine = _fresh_path(directory, f".{dest.name}.", ".tmp"), True
    try:
        try:
            fd = _create_file(tmp_name)
        except FileExistsError:  # made meanwhile by another process: not ours to remove
            mine = False
            raise
        # made 0600 (as mkstemp); give it the mode a plain open() would
        os.fchmod(fd, _default_mode())
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, dest)
    except BaseException:
        if mine:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
        raise


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
    with _atomic_file(dest) as handle:
        handle.write(data)
    logger.debug("wrote %s (%d bytes)", dest, len(data))
    return dest


#: Rows per Parquet row group written by :func:`atomic_write_dataframe` (pyarrow's
#: own default for ``write_table``, so a streamed file has the row groups one
#: ``write_table`` call would give).
PARQUET_ROW_GROUP_ROWS = 1024 * 1024


#: Rows per block of CSV text written by :func:`atomic_write_dataframe`: the text
#: of one block (tens of MB) is in memory at a time, not the whole file's.
CSV_BLOCK_ROWS = 256 * 1024


class _WriteOnly(io.RawIOBase):
    """A sink's ``write`` and nothing else: the text layer's flushes stop here (a
    flush of a gzip stream would end a deflate block and change its bytes)."""

    def __init__(self, sink: Any) -> None:
        super().__init__()
        self._write = sink.write

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self._write(b)
        return len(b)


def _write_csv_chunks(df: pd.DataFrame, sink: Any) -> None:
    """``df.to_csv(index=False)`` (``\\n`` line ends, UTF-8) written to the binary
    ``sink`` block by block: the header, then :data:`CSV_BLOCK_ROWS` rows at a
    time, each block formatted by pandas straight into a UTF-8 text layer over
    the sink (pandas formats a few thousand rows at a time: neither a block's
    whole text nor its encoded copy is ever in memory).  The bytes are those of
    one ``to_csv`` call (each value is formatted on its own, so the blocks join to
    the same text)."""
    # Text categoricals (the event log's job ids: one category a job) go as their
    # values, taken block by block: pandas would convert all the categories to
    # Python strings again for each few thousand rows it formats (a copy of every
    # id, and its time, per piece); the text is the same.
    import pandas as pd

    text_cats = {c: t.categories.dtype for c, t in df.dtypes.items()
                 if isinstance(t, pd.CategoricalDtype)
                 and (t.categories.dtype == object
                      or isinstance(t.categories.dtype, pd.StringDtype))}
    text = io.TextIOWrapper(_WriteOnly(sink), encoding="utf-8", newline="")  # type: ignore[type-var]
    try:
        if len(df) == 0:
            df.to_csv(text, index=False, lineterminator="\n")
        for start in range(0, len(df), CSV_BLOCK_ROWS):
            part = df.iloc[start:start + CSV_BLOCK_ROWS]
            if text_cats:
                part = part.astype(text_cats)
            part.to_csv(text, index=False, header=start == 0, lineterminator="\n")
        text.flush()
    finally:
        text.detach()  # the sink stays open: its owner closes it


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
    stored; ``metadata`` goes into the Parquet schema's key-value metadata),
    streamed to the file in row groups of :data:`PARQUET_ROW_GROUP_ROWS` rows (the
    write needs the memory of one row group, not of the whole frame);
    ``.csv`` writes CSV without the index; ``.csv.gz`` writes gzip-compressed
    CSV (deterministic: no timestamp and no file name in the gzip header); both
    streamed, :data:`CSV_BLOCK_ROWS` rows of text at a time (the bytes of one
    ``to_csv`` call, without the whole text and its encoded copy in memory).

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

        # streamed: one row group of PARQUET_ROW_GROUP_ROWS rows at a time goes
        # through Arrow to the file, so the memory the write needs is that of a
        # row group, not of the whole frame converted (and again as bytes)
        schema = pa.Schema.from_pandas(df, preserve_index=False)
        if metadata:
            merged = dict(schema.metadata or {})
            merged.update({k.encode(): v.encode() for k, v in metadata.items()})
            schema = schema.with_metadata(merged)
        with _atomic_file(dest) as handle, pq.ParquetWriter(handle, schema) as writer:
            if len(df) == 0:
                writer.write_table(pa.Table.from_pandas(df, schema=schema,
                                                        preserve_index=False))
            for start in range(0, len(df), PARQUET_ROW_GROUP_ROWS):
                part = df.iloc[start:start + PARQUET_ROW_GROUP_ROWS]
                writer.write_table(pa.Table.from_pandas(part, schema=schema,
                                                        preserve_index=False),
                                   row_group_size=PARQUET_ROW_GROUP_ROWS)
        logger.debug("wrote %s (%d rows, streamed)", dest, len(df))
        return dest
    if name.endswith(".csv.gz"):
        import gzip

        # filename "": the header names no file (not the temporary one), as the
        # one-shot gzip of the whole text did
        with _atomic_file(dest) as handle, gzip.GzipFile(filename="", fileobj=handle,
                                                         mode="wb", mtime=0) as gz:
            _write_csv_chunks(df, gz)
        logger.debug("wrote %s (%d rows, streamed)", dest, len(df))
        return dest
    if name.endswith(".csv"):
        with _atomic_file(dest) as handle:
            _write_csv_chunks(df, handle)
        logger.debug("wrote %s (%d rows, streamed)", dest, len(df))
        return dest
    raise InvalidInputError(
        f"path: cannot tell the output format of {str(dest)!r} "
        "(use a .csv, .csv.gz, .parquet or .pq suffix)"
    )


# --------------------------------------------------------------------------- folders


def _dir_mode() -> int:
    """0o777 minus the process umask (what ``mkdir`` would give)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o777 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o777 & ~mask


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends (main thread, POSIX); a no-op elsewhere.

    A signal sent meanwhile is delivered when the block ends, so a Ctrl-C
    cannot land between the two renames of a folder swap.
    """
    import signal
    import threading

    if not hasattr(signal, "pthread_sigmask") or (
        threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False  # the file system cannot exchange: fall back to two renames
    raise OSError(err, os.strerror(err), str(b))


def replace_directory(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Make the folder ``src`` become ``dest``, replacing a previous ``dest`` as a whole.

    Both must be on the same file system (``src`` is normally a sibling made by
    :func:`atomic_directory`).  On Linux the swap is one atomic
    ``renameat2(RENAME_EXCHANGE)``; elsewhere (or on a file system without it)
    ``dest`` is first renamed aside, so a crash between the two renames leaves
    no ``dest`` and the previous content in a hidden ``.NAME.old-PID`` sibling.
    SIGINT and SIGTERM are held during the swap.  The previous content is then
    deleted.

    Returns
    -------
    pathlib.Path
        ``dest``.
    """
    import shutil

    s, d = Path(src), Path(dest)
    with _signals_blocked():
        if not d.exists():
            os.rename(s, d)
            return d
        if _exchange(s, d):
            old = s
        else:
            old = d.with_name(f".{d.name}.old-{os.getpid()}")
            os.rename(d, old)
            os.rename(s, d)
        shutil.rmtree(old, ignore_errors=True)
    logger.debug("replaced folder %s", d)
    return d


#: ``command`` values of manifests written by aryl before they all began with "aryl ".
_LEGACY_COMMANDS = frozenset({"replay", "compare"})


def _read_manifest(folder: Path, marker: str) -> dict[str, object] | None:
    import json

    try:
        manifest = json.loads((folder / marker).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict):
        return None
    command = str(manifest.get("command", ""))
    if not (command.startswith("aryl ") or command in _LEGACY_COMMANDS):
        return None
    return manifest


def _is_aryl_output(folder: Path, marker: str) -> bool:
    try:
        if not any(folder.iterdir()):
            return True
    except OSError:
        return False
    return _read_manifest(folder, marker) is not None


def _strerror(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_writable(dest: str | os.PathLike[str], *, folder: bool) -> Path:
    """Raise unless ``dest`` can be written, before any work is done.

    Walks up from ``dest`` to the nearest existing folder, which must be a
    folder (not a file in the way) in which a file can be created: a probe
    file is created there and removed at once, so a read-only file system or
    a missing permission is found even where :func:`os.access` would say yes
    (root, network file systems).  An existing ``dest`` must be a folder when
    ``folder`` is true (and is probed too: some commands write into it);
    otherwise it must not be a folder and its folder must exist (files are
    written into an existing folder, as :func:`atomic_write_bytes` requires).

    Parameters
    ----------
    dest : str or os.PathLike
        The output file or folder.
    folder : bool
        True when ``dest`` is a folder.

    Returns
    -------
    pathlib.Path
        ``dest``.

    Raises
    ------
    InvalidInputError
        Naming ``dest`` and why it cannot be written.
    """
    d = Path(dest)
    shown = repr(str(d))
    if folder and d.exists() and not d.is_dir():
        raise InvalidInputError(f"{shown} exists and is not a folder")
    if not folder and d.is_dir():
        raise InvalidInputError(f"{shown} is a folder, not a file")
    probes = [d] if folder and d.is_dir() else []
    parent = ancestor = d.parent if str(d.parent) else Path(".")
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InvalidInputError(f"{shown} cannot be created: {str(ancestor)!r} is a file")
    if not folder and ancestor != parent:  # files are written into an existing folder
        raise InvalidInputError(f"{shown} cannot be created: folder {str(parent)!r} "
                                "does not exist")
    probes.append(ancestor)
    for where in probes:
        name, mine = _fresh_path(where, ".aryl-write-probe-", ""), True
        try:
            try:
                os.close(_create_file(name))
            except OSError as exc:
                mine = not isinstance(exc, FileExistsError)
                raise InvalidInputError(
                    f"{shown} cannot be written: cannot create a file in {str(where)!r} "
                    f"({_strerror(exc)})"
                ) from None
        finally:
            if mine:
                with contextlib.suppress(OSError):
                    os.unlink(name)
    return d


def check_output_folder(dest: str | os.PathLike[str], *, marker: str = "manifest.json") -> None:
    """Raise unless ``dest`` may be replaced as a whole by :func:`atomic_directory`.

    Allowed: a missing path, an empty folder, or a folder holding ``marker``
    (JSON with a ``"command"`` starting with ``"aryl "``).

    Raises
    ------
    InvalidInputError
        ``dest`` is a file, a non-empty folder that aryl did not write, or a
        location where nothing can be written (:func:`check_writable`).
    """
    d = Path(dest)
    if d.exists() and not d.is_dir():
        raise InvalidInputError(f"out: {str(d)!r} exists and is not a folder")
    try:
        check_writable(d, folder=True)
    except InvalidInputError as exc:
        raise InvalidInputError(f"out: {exc}") from None
    if d.is_dir() and not _is_aryl_output(d, marker):
        raise InvalidInputError(
            f"out: {str(d)!r} is a non-empty folder that aryl did not write (no {marker} "
            "from an aryl command); it would be replaced as a whole: choose a new folder"
        )


def _carry_unlisted(old: Path, new: Path, marker: str) -> None:
    """Link (or copy) into ``new`` the files of ``old`` that its manifest does not list.

    Those are files a user put into an aryl output folder; a rerun must not
    delete them.  Files ``new`` already has win.
    """
    import shutil

    manifest = _read_manifest(old, marker)
    files = None if manifest is None else manifest.get("files")
    if not isinstance(files, list):
        return
    listed = {str(f) for f in files} | {marker}
    for path in sorted(old.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        rel = path.relative_to(old)
        if str(rel) in listed or any(str(p) in listed for p in rel.parents if str(p) != "."):
            continue
        target = new / rel
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)


@contextlib.contextmanager
def atomic_directory(
    dest: str | os.PathLike[str], *, marker: str = "manifest.json", keep_unlisted: bool = False
) -> Iterator[Path]:
    """Write a whole output folder at once: yield a fresh sibling folder to fill.

    When the block ends normally, the sibling replaces ``dest`` as a whole
    (:func:`replace_directory`); when it raises (an error, Ctrl-C), the sibling
    is deleted and ``dest`` is left as it was.  Readers see the previous
    complete folder, or the new complete one, never a mix.

    Parameters
    ----------
    dest : str or os.PathLike
        The output folder.  Its parent is created if missing.
    marker : str
        A non-empty existing ``dest`` is replaced only if it holds this JSON
        file with a ``"command"`` starting with ``"aryl "`` (an aryl output
        folder), so a mistyped ``--out`` never deletes unrelated files.
    keep_unlisted : bool
        Carry over into the new folder the files of the previous ``dest``
        that its ``marker`` does not list under ``"files"`` (files a user
        added), hard-linked when possible.

    Yields
    ------
    pathlib.Path
        The temporary folder (``.NAME.XXXX.tmp`` beside ``dest``; mode as
        ``mkdir`` would give).

    Raises
    ------
    InvalidInputError
        ``dest`` is a file, or a non-empty folder that aryl did not write.
    """
    import shutil

    d = Path(dest)
    check_output_folder(d, marker=marker)
    parent = d.parent if str(d.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    tmp, mine = _fresh_path(parent, f".{d.name}.", ".tmp"), True
    try:
        try:
            tmp.mkdir(mode=0o700)  # as mkdtemp, inside the try: an interrupt cannot leak it
        except FileExistsError:  # made meanwhile by another process
            mine = False
            raise
        os.chmod(tmp, _dir_mode())
        yield tmp
        if keep_unlisted and d.is_dir():
            _carry_unlisted(d, tmp, marker)
    except BaseException:
        if mine:
            with _signals_blocked():
                shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_directory(tmp, d)
