"""Running a sweep: plan, skip finished runs, execute the rest, write each as it ends."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aryl._io import atomic_write_text
from aryl.errors import InvalidInputError
from aryl.sweep import backends, store
from aryl.sweep.execute import RunOutput, execute_run
from aryl.sweep.plan import Plan, Run, load_traces, plan_sweep
from aryl.sweep.spec import SweepSpec, load_spec

__all__ = ["SweepInterrupted", "SweepOutcome", "run_sweep"]

log = logging.getLogger(__name__)

#: ``progress(done, total, label)``: runs executed so far out of those to execute.
Progress = Callable[[int, int, str], None]


@dataclasses.dataclass
class SweepOutcome:
    """What :func:`run_sweep` did.

    Attributes
    ----------
    plan : Plan
    root : Path
        The sweep folder.
    backend : str
        ``serial``, ``pool`` or ``ray``.
    n_skipped : int
        Runs already finished in the folder (not run again).
    n_done : int
        Runs executed and written now.
    failures : list of (str, str)
        ``(label, error)`` of runs that raised (not written: a rerun retries them).
    elapsed_s : float
        Wall time of the execution phase (after planning).
    replay_s, run_s : float
        Sums over the runs executed now of :func:`aryl.sim.simulate`'s wall time
        and of the worker's whole time per run.
    """

    plan: Plan
    root: Path
    backend: str
    n_skipped: int = 0
    n_done: int = 0
    failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    elapsed_s: float = 0.0
    replay_s: float = 0.0
    run_s: float = 0.0

    @property
    def n_planned(self) -> int:
        """Distinct runs of the plan."""
        return len(self.plan.runs)


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep; ``outcome`` tells how many runs were finished and kept."""

    def __init__(self, outcome: SweepOutcome) -> None:
        super().__init__()
        self.outcome = outcome


def _backend(n_procs: int, ray: str | None, n_todo: int) -> str:
    if ray is not None:
        return "ray"
    return "serial" if n_procs == 1 or n_todo <= 1 else "pool"


def run_sweep(
    spec: SweepSpec | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    n_procs: int | None = None,
    ray: str | None = None,
    progress: Progress | None = None,
    status: Callable[[str], None] | None = None,
    run_fn: Callable[[Run, Any], RunOutput] = execute_run,
    max_retries: int = 3,
) -> SweepOutcome:
    """Run every unfinished run of a sweep and write it to ``out_dir``.

    Parameters
    ----------
    spec : SweepSpec or path
        A validated spec or a TOML file (:func:`aryl.sweep.load_spec`).
    out_dir : path
        The sweep folder (created; layout in :mod:`aryl.sweep.store`).  Runs
        already finished in it are skipped, so an interrupted sweep resumes.
    n_procs : int, optional
        Parallel worker processes (default: the machine's cores); 1 runs in
        this process.  With ``ray``: the CPUs of a local Ray.
    ray : str, optional
        Run on Ray: ``"local"`` starts a local Ray, anything else is an address
        for ``ray.init`` (``"auto"``, ``"ray://head:10001"``).
    progress : callable ``(done, total, label)``, optional
        Called after each executed run (``total`` excludes skipped runs).
    status : callable ``(message)``, optional
        Told about the planning steps (reading traces, sizing clusters).
    run_fn : callable ``(run, trace) -> RunOutput``
        The worker function (tests inject faults through it).  It must be
        importable by the workers (a module-level function).
    max_retries : int
        Ray: retries of a run whose worker process died.

    Returns
    -------
    SweepOutcome

    Raises
    ------
    InvalidInputError
        A bad spec, trace or argument (nothing is written), or another sweep
        writing to the same folder.
    SweepInterrupted
        Ctrl-C: pending work is cancelled, every worker ended, and every run
        finished before is kept.
    WorkerLost
        A process-pool worker died; finished runs are kept.

    Notes
    -----
    ``sweep.json`` (the spec and the plan) is written before any run, so a
    report can be made from a partial sweep.
    """
    if n_procs is None:
        n_procs = os.cpu_count() or 1
    if isinstance(n_procs, bool) or not isinstance(n_procs, int) or n_procs < 1:
        raise InvalidInputError(f"n_procs: must be an integer >= 1, got {n_procs!r}")
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    say = status or (lambda _m: None)
    root = Path(out_dir)
    if root.exists() and not root.is_dir():
        raise InvalidInputError(f"out: {root} exists and is not a folder")
    say("reading traces")
    traces = load_traces(spec)  # bad traces fail before anything is created
    made = root  # the outermost folder this call creates (None: root existed)
    while not made.parent.exists() and made.parent != made:
        made = made.parent
    made_here: Path | None = None if root.exists() else made
    root.mkdir(parents=True, exist_ok=True)
    with store.lock_sweep(root):
        store.remove_temporaries(root)
        try:
            plan = plan_sweep(spec, cache_dir=root / "sizing", traces=traces, status=say)
        except BaseException:
            if made_here is not None:  # a plan that fails leaves no folder it made
                shutil.rmtree(made_here, ignore_errors=True)
            raise
        atomic_write_text(root / "sweep.json", json.dumps(plan.to_json(), indent=1) + "\n")
        done = store.finished_keys(root)
        todo = [r for r in plan.runs if r.key not in done]
        backend = _backend(n_procs, ray, len(todo))
        outcome = SweepOutcome(plan, root, backend, n_skipped=len(plan.runs) - len(todo))
        log.info("%s: %d runs, %d already finished, %d to run (%s)", root, len(plan.runs),
                 outcome.n_skipped, len(todo), backend)
        counter = {"n": 0}

        def on_result(run: Run, out: RunOutput) -> None:
            store.write_output(root, out)
            outcome.n_done += 1
            outcome.replay_s += out.replay_s
            outcome.run_s += out.run_s
            counter["n"] += 1
            if progress:
                progress(counter["n"], len(todo), run.label)

        def on_error(run: Run, exc: BaseException) -> None:
            msg = f"{type(exc).__name__}: {exc}"
            log.error("run %s (%s) failed: %s", run.key, run.label, msg)
            outcome.failures.append((run.label, msg))
            counter["n"] += 1
            if progress:
                progress(counter["n"], len(todo), f"{run.label} FAILED")

        if progress:
            progress(0, len(todo), "")
        t0 = time.perf_counter()
        try:
            if backend == "ray":
                backends.run_ray(todo, plan.traces, address=ray, n_procs=n_procs,
                                 fn=run_fn, on_result=on_result, on_error=on_error,
                                 max_retries=max_retries)
            elif backend == "pool":
                backends.run_pool(todo, plan.traces, n_procs, run_fn, on_result, on_error)
            else:
                backends.run_serial(todo, plan.traces, run_fn, on_result, on_error)
        except KeyboardInterrupt:
            outcome.elapsed_s = time.perf_counter() - t0
            # a write cut short can leave its temporary file (the interrupt can land
            # inside mkstemp, before the writer's own cleanup is armed): the lock is
            # still held, so every .tmp here is ours
            store.remove_temporaries(root)
            raise SweepInterrupted(outcome) from None
        outcome.elapsed_s = time.perf_counter() - t0
    return outcome
