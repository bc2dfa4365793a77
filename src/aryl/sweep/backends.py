"""Where the runs of a sweep execute: in-process, a local process pool, or Ray.

All three take the same runs and call the same worker function; results do not
depend on the backend.  The worker returns bytes and the driver writes them
(:mod:`aryl.sweep.store`), so a worker that dies never leaves a half-written run.

Interruptions (Ctrl-C, i.e. ``KeyboardInterrupt`` in the driver):

* **process pool** (:class:`concurrent.futures.ProcessPoolExecutor`, ``spawn``
  start method): workers never see SIGINT (they are spawned while the driver
  blocks it, inherit the blocked mask and then ignore it; a terminal's Ctrl-C
  reaches the whole process group, also a worker still importing; the driver alone
  decides) and, on Linux, get SIGTERM if the
  driver dies.  On Ctrl-C the driver cancels the pending futures
  (``shutdown(cancel_futures=True)``), sends SIGTERM to every worker, waits up
  to 1 s, sends SIGKILL to any left, then re-raises.  SIGINT is ignored during
  that cleanup, so a second Ctrl-C cannot interrupt it half-way; the cleanup
  itself is bounded (about 1.5 s at most), so nothing hangs.
* **Ray**: pending tasks are cancelled with ``ray.cancel(force=True)``; a local
  Ray started here is shut down (which ends its workers).  A task whose worker
  process dies is retried by Ray (``max_retries``); application errors are not.
* **in-process** (``-j 1``): the replay stops at the next Python instruction.

A worker process of the pool that dies (killed, out of memory) breaks the
pool: :class:`WorkerLost` is raised after the finished runs are written.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from aryl.errors import ArylError
from aryl.sweep.execute import RunOutput
from aryl.sweep.plan import Run

__all__ = ["WorkerLost", "import_ray", "run_pool", "run_ray", "run_serial"]

log = logging.getLogger(__name__)

RunFn = Callable[[Run, Any], RunOutput]
OnResult = Callable[[Run, RunOutput], None]
OnError = Callable[[Run, BaseException], None]

#: Seconds the pool's workers get to exit on SIGTERM before SIGKILL.
TERMINATE_GRACE_S = 1.0


class WorkerLost(ArylError):
    """A process-pool worker died (killed or crashed) while running runs."""


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT inside the block (main thread only; a no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Block SIGINT inside the block; one that arrives meanwhile is delivered (so
    ``KeyboardInterrupt`` raised) when it ends.  Processes and threads started inside
    inherit the blocked mask.  A no-op off the main thread or without
    ``signal.pthread_sigmask``."""
    if (threading.current_thread() is not threading.main_thread()
            or not hasattr(signal, "pthread_sigmask")):
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def run_serial(
    runs: Sequence[Run], traces: dict[str, Any], fn: RunFn, on_result: OnResult,
    on_error: OnError,
) -> None:
    """Run every run in this process, in order."""
    for run in runs:
        try:
            out = fn(run, traces[run.trace_id])
        except Exception as exc:  # reported like a worker's error; the others go on
            on_error(run, exc)
        else:
            on_result(run, out)


# --------------------------------------------------------------------------- pool

_TRACES: dict[str, Any] = {}


def _die_with_parent() -> None:
    """Linux: ask the kernel to SIGTERM this process when its parent exits."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - best effort
        return


def _worker_init(traces: dict[str, Any], parent_pid: int) -> None:
    import os

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    if os.getppid() != parent_pid:  # the parent died before prctl: do not linger
        os._exit(1)
    _TRACES.clear()
    _TRACES.update(traces)


def _pool_task(fn: RunFn, run: Run) -> RunOutput:
    return fn(run, _TRACES[run.trace_id])


def _stop_pool(executor: ProcessPoolExecutor, before: set[Any]) -> None:
    """Cancel pending work and end every worker process (bounded time)."""
    with sigint_ignored():
        procs = [p for p in multiprocessing.active_children() if p not in before]
        executor.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            with contextlib.suppress(OSError, ValueError):
                p.terminate()
        deadline = time.monotonic() + TERMINATE_GRACE_S
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                with contextlib.suppress(OSError, ValueError):
                    p.kill()
                p.join(0.5)
        log.debug("pool stopped: %d worker processes ended", len(procs))


def run_pool(
    runs: Sequence[Run],
    traces: dict[str, Any],
    n_procs: int,
    fn: RunFn,
    on_result: OnResult,
    on_error: OnError,
) -> None:
    """Run on a local :class:`~concurrent.futures.ProcessPoolExecutor` (see module doc).

    Raises
    ------
    WorkerLost
        A worker process died; the runs finished before are written.
    KeyboardInterrupt
        After every worker process has ended.
    """
    import os

    if not runs:
        return
    needed = {r.trace_id: traces[r.trace_id] for r in runs}
    before = set(multiprocessing.active_children())
    executor = ProcessPoolExecutor(
        max_workers=max(1, min(n_procs, len(runs))),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_init,
        initargs=(needed, os.getpid()),
    )
    try:
        # the workers are spawned here (at submit): with SIGINT blocked they inherit
        # the mask through exec, so a Ctrl-C to the process group while they are still
        # importing (before _worker_init) cannot print their tracebacks; the driver's
        # own SIGINT stays pending and is raised when the block ends
        with sigint_deferred():
            futures = {executor.submit(_pool_task, fn, run): run for run in runs}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                run = futures[fut]
                exc = fut.exception()
                if exc is None:
                    on_result(run, fut.result())
                elif isinstance(exc, BrokenProcessPool):
                    raise WorkerLost(
                        "a worker process died (killed, or out of memory) while running "
                        f"{run.label} or another run"
                    )
                else:
                    on_error(run, exc)
    except BaseException:
        _stop_pool(executor, before)
        raise
    executor.shutdown(wait=True)


# --------------------------------------------------------------------------- Ray


def import_ray() -> Any:
    """The ``ray`` module.

    Raises
    ------
    ArylError
        Ray is not installed (the message names the extra to install).
    """
    try:
        import ray
    except ImportError:
        raise ArylError(
            "--ray needs Ray, an optional dependency: pip install 'aryl[ray]'"
        ) from None
    return ray


def _ray_task(fn: RunFn, run: Run, trace: Any) -> RunOutput:
    return fn(run, trace)


def run_ray(
    runs: Sequence[Run],
    traces: dict[str, Any],
    *,
    address: str | None,
    n_procs: int,
    fn: RunFn,
    on_result: OnResult,
    on_error: OnError,
    max_retries: int = 3,
) -> None:
    """Run as Ray tasks (one CPU each); see the module doc.

    Parameters
    ----------
    address : str or None
        ``None`` or ``"local"``: start a local Ray with ``n_procs`` CPUs (shut
        down at the end); otherwise passed to ``ray.init(address=...)``
        (``"auto"``, ``"ray://host:10001"``).  If Ray is already initialised in
        this process, it is used as it is.
    max_retries : int
        Retries of a task whose worker process died.

    Raises
    ------
    ArylError
        Ray is not installed.
    KeyboardInterrupt
        After the pending tasks are cancelled.
    """
    ray = import_ray()
    if not runs:
        return
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "logging_level": logging.WARNING}
        if address in (None, "local"):
            kwargs["num_cpus"] = n_procs
        else:
            kwargs["address"] = address
        ray.init(**kwargs)
        started = True
    try:
        task = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(
            _ray_task
        )
        trace_refs = {tid: ray.put(traces[tid]) for tid in dict.fromkeys(r.trace_id
                                                                         for r in runs)}
        pending = {task.remote(fn, run, trace_refs[run.trace_id]): run for run in runs}
        try:
            while pending:
                refs = list(pending)
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0.2)
                for ref in ready:
                    run = pending.pop(ref)
                    try:
                        out = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        cause = getattr(exc, "cause", None)
                        on_error(run, cause if isinstance(cause, BaseException) else exc)
                    except ray.exceptions.RayError as exc:  # worker died past retries, ...
                        on_error(run, exc)
                    else:
                        on_result(run, out)
        except BaseException:
            if not started:  # a cluster we do not own: cancel our tasks on it
                with sigint_ignored():
                    for ref in pending:
                        with contextlib.suppress(Exception):
                            ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            with sigint_ignored():
                ray.shutdown()
