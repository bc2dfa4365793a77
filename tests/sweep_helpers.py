"""Helpers of the sweep tests: worker functions that count executions, fail or die on
purpose, and the process tools of the Ctrl-C tests (start `aryl`, SIGINT it, list its
descendants).

Not a test module (pytest collects ``test_*.py`` only).  The process-pool tests
put this folder on ``sys.path`` (spawned workers inherit it); the Ray tests
ship the module by value (``cloudpickle.register_pickle_by_value``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aryl.sweep import execute_run


class Counting:
    """``execute_run`` that leaves one file per execution in ``folder`` (any process)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = str(folder)

    def __call__(self, run: Any, trace: Any) -> Any:
        Path(self.folder, f"{run.key}.{uuid.uuid4().hex}").touch()
        return execute_run(run, trace)


def executions(folder: str | os.PathLike[str]) -> dict[str, int]:
    """Run key -> number of times a :class:`Counting` worker started it."""
    out: dict[str, int] = {}
    for p in Path(folder).iterdir():
        key = p.name.split(".")[0]
        out[key] = out.get(key, 0) + 1
    return out


class DieOnce(Counting):
    """Kills its own worker process (SIGKILL) the first time it starts run ``key``."""

    def __init__(self, folder: str | os.PathLike[str], key: str) -> None:
        super().__init__(folder)
        self.key = key

    def __call__(self, run: Any, trace: Any) -> Any:
        if run.key == self.key:
            marker = Path(self.folder).parent / f"died-{self.key}"
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                os.kill(os.getpid(), signal.SIGKILL)
        return super().__call__(run, trace)


class Raises(Counting):
    """Raises ``RuntimeError`` for run ``key`` (every time)."""

    def __init__(self, folder: str | os.PathLike[str], key: str) -> None:
        super().__init__(folder)
        self.key = key

    def __call__(self, run: Any, trace: Any) -> Any:
        if run.key == self.key:
            raise RuntimeError(f"injected failure in {run.key}")
        return super().__call__(run, trace)


# --------------------------------------------------------------------------- processes


def aryl_command() -> list[str]:
    """The installed `aryl` script next to this interpreter, or the module form."""
    script = Path(sys.executable).with_name("aryl")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from aryl.cli import main; main()"]


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        table[int(entry.name)] = (int(rest[1]), rest[0])
    return table


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (psutil if installed, else /proc)."""
    try:
        import psutil
    except ImportError:
        table = _proc_table()
        out, frontier = [], [pid]
        while frontier:
            parent = frontier.pop()
            kids = [p for p, (pp, _) in table.items() if pp == parent]
            out += kids
            frontier += kids
        return out
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def interrupt(proc: subprocess.Popen[str], *, twice: bool = False) -> tuple[float, list[int]]:
    """SIGINT ``proc`` (twice 0.1 s apart if asked); seconds to exit, and its workers."""
    kids = descendants(proc.pid)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    if twice:
        time.sleep(0.1)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()  # reaped: no "still running" warning in a later test
        raise AssertionError("the process did not exit within 30 s of SIGINT") from None
    return time.monotonic() - t0, kids


def start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    """Start `aryl ARGS`; its output goes to ``cwd/output.txt`` (a file never blocks it)."""
    env = dict(os.environ, COLUMNS="120")
    with open(cwd / "output.txt", "w") as log:  # the child keeps its own copy
        return subprocess.Popen(aryl_command() + args, cwd=cwd, stdout=log,
                                stderr=subprocess.STDOUT, text=True, env=env)


def output_of(cwd: Path) -> str:
    return (cwd / "output.txt").read_text()
