"""The job table: one struct of arrays for every job of a replay.

Static columns (arrival, size, scaling limits, throughput curve) are built once
from the canonical trace DataFrame (docs/architecture.md, ``Trace.jobs``) as
numpy arrays.  The mutable per-job state that the engine touches on every event
(remaining work, workers, placement ...) lives in plain Python lists, one list
per field: scalar access to a list is several times cheaper than to an ndarray
element, and the engine never copies them; they become ndarrays when the
per-job result table is built.

Job model ([Aryl] §2, docs/model.md):

* ``T(w) = w / (1 + alpha * (w - 1))``; the work of a job traced at ``G`` GPUs
  for ``D`` seconds with ``g`` GPUs per worker is ``D * T(G / g)`` single-worker
  seconds.  Internally the engine keeps remaining work in *traced seconds*
  (``D`` at the start) and a speed ``T(w) / T(G / g)`` relative to the traced
  size, so a job that runs at its traced size has speed exactly ``1.0`` and its
  run time is exactly ``D`` (fifo: JCT = queuing delay + traced duration).
* Jobs without scaling columns are rigid, with ``g`` = the largest divisor of
  ``gpus`` that is at most ``gpus_per_server`` and ``b = m = gpus / g``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError

__all__ = ["STR_DTYPE", "JobTable", "build_job_table", "largest_divisor_at_most",
           "release_free_memory", "throughput"]

#: pandas' default string dtype (``str``: Arrow-backed, NaN for missing), the dtype
#: of every text column of the job table and of the result frames.
STR_DTYPE = pd.StringDtype("pyarrow", na_value=np.nan)

def largest_divisor_at_most(n: int, limit: int) -> int:
    """Largest divisor of ``n`` that is ``<= limit`` (``n >= 1``, ``limit >= 1``)."""
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def throughput(workers: np.ndarray | float, alpha: np.ndarray | float) -> np.ndarray | float:
    """Sub-linear throughput ``T(w) = w / (1 + alpha (w - 1))``, so ``T(1) = 1``.

    The local copy used by the engine (the kernel module ``aryl.elastic`` has the
    canonical one; both follow docs/architecture.md).
    """
    return workers / (1.0 + alpha * (np.asarray(workers) - 1.0))


@dataclass(frozen=True)
class JobTable:
    """Static per-job columns, all of length ``n_jobs``, in simulation order.

    Simulation order is arrival time, then input row order (a stable sort), so
    same-time arrivals keep the order of the input, never the order of names.

    Attributes
    ----------
    job_id : pandas.arrays.ArrowStringArray
        The ids, as the canonical ``str`` column holds them (Arrow-backed: about
        ``len(id) + 4`` bytes per job, no Python object per job).
    submit_time_s, duration_s, alpha : ndarray of float64
    gpus, gpus_per_worker, min_workers, max_workers, traced_workers : ndarray of int64
    elastic : ndarray of bool
    input_row : ndarray of int64, or None
        Row of the job in the input DataFrame; None when simulation order is the
        input order (row j is job j: a trace already in arrival order, as every
        loaded trace is), so that a large replay holds no array of n rows for it
        through its loop.  :meth:`input_rows` gives the array either way.
    """

    job_id: pd.api.extensions.ExtensionArray
    submit_time_s: np.ndarray
    duration_s: np.ndarray
    gpus: np.ndarray
    gpus_per_worker: np.ndarray
    min_workers: np.ndarray
    max_workers: np.ndarray
    traced_workers: np.ndarray
    elastic: np.ndarray
    alpha: np.ndarray
    input_row: np.ndarray | None

    @property
    def n_jobs(self) -> int:
        return int(self.job_id.shape[0])

    def input_rows(self) -> np.ndarray:
        """Row of each job in the input DataFrame (int64; ``arange`` when
        :attr:`input_row` is None)."""
        if self.input_row is None:
            return np.arange(self.n_jobs, dtype=np.int64)
        return self.input_row


def build_job_table(jobs: pd.DataFrame, *, gpus_per_server: int, default_alpha: float,
                    validated: bool = False) -> JobTable:
    """Validate a canonical job DataFrame and build the :class:`JobTable`.

    Every input of the simulator (a DataFrame, a ``Trace`` read from a CSV,
    a Parquet file or a preset) passes here, through the same job rules as the
    trace readers: :func:`aryl.traces.validate.check_jobs`.  Nothing is cast
    silently: 2.7 GPUs, ``elastic="maybe"``, a blank ``elastic`` or a rigid
    job with ``min_workers != max_workers`` is an error, never a 2-GPU job or
    an elastic one.

    Parameters
    ----------
    jobs : DataFrame
        Columns ``job_id``, ``submit_time_s``, ``duration_s``, ``gpus``;
        optionally all five of ``gpus_per_worker``, ``min_workers``,
        ``max_workers``, ``elastic``, ``alpha`` (they come as a set); other
        columns are ignored.
    gpus_per_server : int
        Used to derive ``gpus_per_worker`` of rigid jobs.
    default_alpha : float
        ``alpha`` of jobs without scaling columns (all rigid, so it does not
        change their speed).
    validated : bool, default False
        ``jobs`` is the frame :func:`aryl.traces.load_trace` has just built
        (``on_invalid="raise"`` or ``"drop"``: every row passed the same
        :func:`~aryl.traces.validate.check_jobs` rules), so the rules are not
        run a second time: its columns are taken as they are.  Only for a frame
        nobody else could have changed (:func:`aryl.sim.simulate` given a path
        or a preset name); a large trace's second validation would hold the
        frame, the checked copies of its columns and the duplicate check's hash
        table at once (about 170 bytes a job on top of the frame).

    Returns
    -------
    JobTable
        Sorted by ``(submit_time_s, input row)``; O(n log n), O(n) for a trace
        already in that order (then ``input_row`` is None).

    Raises
    ------
    InvalidInputError
        A missing column or an incomplete set of scaling columns
        (``TraceFormatError``); a bad row (``InvalidRowsError``, naming the
        DataFrame index label and the column, and counting the bad rows by
        kind): not a finite number, not a whole number, a blank cell, a
        duration <= 0, fewer than 1 GPU, inconsistent scaling columns, a
        duplicate job id.
    """
    from aryl.traces.schema import SCALING_COLUMNS
    from aryl.traces.validate import validate_jobs

    cols: dict[str, Any]
    if validated:
        names = ["job_id", "submit_time_s", "duration_s", "gpus"]
        if all(c in jobs.columns for c in SCALING_COLUMNS):
            names += list(SCALING_COLUMNS)
        cols = {c: jobs[c].array if c == "job_id" else jobs[c].to_numpy() for c in names}
    else:
        cols, _, _ = validate_jobs(
            jobs, on_invalid="raise",
            drop_hint="aryl.traces.load_trace(jobs, on_invalid='drop') before simulating",
        )
    n = len(jobs)
    submit = np.asarray(cols["submit_time_s"], dtype=np.float64)
    duration = np.asarray(cols["duration_s"], dtype=np.float64)
    # counts: float64 from the rules (cast now), or the frame's own int64 (as is)
    gpus = np.asarray(cols["gpus"], dtype=np.int64)
    ids = pd.array(cols["job_id"], dtype=STR_DTYPE)
    del cols["job_id"]  # the Python strings go now
    if "gpus_per_worker" in cols:
        gpw = np.asarray(cols["gpus_per_worker"], dtype=np.int64)
        min_w = np.asarray(cols["min_workers"], dtype=np.int64)
        max_w = np.asarray(cols["max_workers"], dtype=np.int64)
        elastic = np.asarray(cols["elastic"], dtype=bool)
        alpha = np.asarray(cols["alpha"], dtype=np.float64)
        traced = gpus // gpw
    else:
        gpw = np.array([largest_divisor_at_most(int(x), gpus_per_server) for x in gpus],
                       dtype=np.int64)
        traced = gpus // gpw
        min_w = traced.copy()
        max_w = traced.copy()
        elastic = np.zeros(n, dtype=bool)
        alpha = np.full(n, default_alpha, dtype=np.float64)
    if not (np.isfinite(default_alpha) and 0.0 <= default_alpha <= 1.0):
        raise InvalidInputError(f"default_alpha: must be in [0, 1], got {default_alpha!r}")

    # submit time, then row; the times are finite (checked), so the order is the rows'
    # own iff the times never decrease (a loaded trace: no sort, no second copy)
    if n < 2 or bool(np.all(submit[1:] >= submit[:-1])):
        return JobTable(job_id=ids, submit_time_s=submit, duration_s=duration, gpus=gpus,
                        gpus_per_worker=gpw, min_workers=min_w, max_workers=max_w,
                        traced_workers=traced, elastic=elastic, alpha=alpha, input_row=None)
    order = np.lexsort((np.arange(n), submit)).astype(np.int64)
    return JobTable(
        job_id=ids.take(order),
        submit_time_s=submit[order],
        duration_s=duration[order],
        gpus=gpus[order],
        gpus_per_worker=gpw[order],
        min_workers=min_w[order],
        max_workers=max_w[order],
        traced_workers=traced[order],
        elastic=elastic[order],
        alpha=alpha[order],
        input_row=order,
    )


def release_free_memory() -> None:
    """Give memory freed so far back to the system: pyarrow's pool
    (``release_unused``) and, with glibc, the C heap (``malloc_trim``).

    A large replay frees its input frame and the validation's temporaries before
    the engine allocates its state; without this, the allocators keep those pages
    (RSS stays up) and the state comes on top.  Costs a few milliseconds; a no-op
    where the calls do not exist.
    """
    import contextlib
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL(None).malloc_trim(0)
