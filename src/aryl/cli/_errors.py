"""What every command does with bad input, output locations and Ctrl-C.

* :class:`InputError`: an input error (a file, an option, a field); click
  prints ``Error: MESSAGE`` and the command exits with status 2, as click's
  own usage errors do.  Failures that are not the input's fault (a worker
  lost, runs that failed) keep status 1.
* :func:`check_out`: refuse an output location that cannot be written
  (a file in the way, a read-only folder, no permission) before any work,
  naming the option.
* :func:`interruptible`: Ctrl-C leaves with a message and status 130 (128 +
  SIGINT, as shells report it); a second Ctrl-C during the clean-up is
  ignored, so it cannot leave a traceback or half-removed temporary folders.
* :func:`read_text`: a text input file decoded as UTF-8, every failure an
  :class:`InputError` naming the option and the file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from aryl.errors import InvalidInputError

__all__ = ["EXIT_INPUT", "EXIT_INTERRUPTED", "InputError", "check_out", "decode_text",
           "first_interrupt_only", "interruptible", "read_text"]

#: Exit status of an input error (click's usage errors use it too).
EXIT_INPUT = 2
#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


class InputError(click.ClickException):
    """A bad input (file, option, field): ``Error: MESSAGE``, exit status 2."""

    exit_code = EXIT_INPUT


def check_out(path: str | os.PathLike[str] | None, option: str, *, folder: bool) -> None:
    """Raise :class:`InputError` unless ``path`` can be written (``None``: nothing to check).

    Called by every writing command before it reads or runs anything, so an
    unwritable ``--out`` is refused at once, not after the replays.
    """
    if path is None:
        return
    from aryl._io import check_writable

    try:
        check_writable(path, folder=folder)
    except InvalidInputError as exc:
        raise InputError(f"{option}: {exc}") from None


def read_text(path: str | os.PathLike[str], option: str) -> str:
    """The UTF-8 text of an input file; a missing, unreadable or non-UTF-8 file is an InputError."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{option}: {p}: file does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{option}: {p}: is a folder, not a file") from None
    except OSError as exc:
        raise InputError(f"{option}: {p}: cannot read ({exc.strerror or exc})") from None
    return decode_text(raw, f"{option}: {p}")


def decode_text(raw: bytes, where: str) -> str:
    """``raw`` decoded as UTF-8 (a leading BOM dropped); otherwise an InputError at ``where``."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at line "
                         f"{line})") from None


@contextlib.contextmanager
def first_interrupt_only() -> Iterator[None]:
    """The first Ctrl-C raises ``KeyboardInterrupt``; later ones are ignored.

    After the first Ctrl-C the command only cleans up (cancels work, ends its
    workers: bounded, about 1.5 s at most, removes its temporary folder) and
    exits; a second Ctrl-C must not cut that short and leave workers or
    temporary files behind or print a traceback.  Outside the main thread
    (click's test runner in a thread) this is a no-op.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hit = {"n": 0}

    def handler(signum: int, frame: Any) -> None:
        hit["n"] += 1
        if hit["n"] == 1:
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        if hit["n"] == 0:
            signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def interruptible(message: str) -> Iterator[None]:
    """Run the block; on Ctrl-C print ``Interrupted. MESSAGE`` to stderr and exit 130."""
    try:
        with first_interrupt_only():
            yield
    except KeyboardInterrupt:
        click.echo(f"Interrupted. {message}", err=True)
        sys.exit(EXIT_INTERRUPTED)
