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

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError

__all__ = ["JobTable", "build_job_table", "largest_divisor_at_most", "throughput"]

_REQUIRED = ("job_id", "submit_time_s", "duration_s", "gpus")


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
    job_id : ndarray of object (str)
    submit_time_s, duration_s, alpha : ndarray of float64
    gpus, gpus_per_worker, min_workers, max_workers, traced_workers : ndarray of int64
    elastic : ndarray of bool
    input_row : ndarray of int64
        Row of the job in the input DataFrame.
    """

    job_id: np.ndarray
    submit_time_s: np.ndarray
    duration_s: np.ndarray
    gpus: np.ndarray
    gpus_per_worker: np.ndarray
    min_workers: np.ndarray
    max_workers: np.ndarray
    traced_workers: np.ndarray
    elastic: np.ndarray
    alpha: np.ndarray
    input_row: np.ndarray

    @property
    def n_jobs(self) -> int:
        return int(self.job_id.shape[0])


def build_job_table(jobs: pd.DataFrame, *, gpus_per_server: int, default_alpha: float) -> JobTable:
    """Validate a canonical job DataFrame and build the :class:`JobTable`.

    Parameters
    ----------
    jobs : DataFrame
        Columns ``job_id``, ``submit_time_s``, ``duration_s``, ``gpus``; optional
        ``gpus_per_worker``, ``min_workers``, ``max_workers``, ``elastic``, ``alpha``.
    gpus_per_server : int
        Used to derive ``gpus_per_worker`` of rigid jobs.
    default_alpha : float
        ``alpha`` of jobs without an ``alpha`` column.

    Returns
    -------
    JobTable
        Sorted by ``(submit_time_s, input row)``; O(n log n).

    Raises
    ------
    InvalidInputError
        Missing column, NaN or negative times, non-positive GPU counts,
        inconsistent scaling columns, duplicate job ids.
    """
    missing = [c for c in _REQUIRED if c not in jobs.columns]
    if missing:
        raise InvalidInputError(f"trace: missing column(s) {missing}")
    n = len(jobs)
    submit = jobs["submit_time_s"].to_numpy(dtype=np.float64, copy=True)
    duration = jobs["duration_s"].to_numpy(dtype=np.float64, copy=True)
    gpus = jobs["gpus"].to_numpy(dtype=np.int64, copy=True)
    if n and (not np.all(np.isfinite(submit)) or not np.all(np.isfinite(duration))):
        raise InvalidInputError("trace: submit_time_s and duration_s must be finite")
    if n and (duration.min() < 0):
        raise InvalidInputError("trace: duration_s must be >= 0")
    if n and gpus.min() < 1:
        raise InvalidInputError("trace: gpus must be >= 1")
    ids = jobs["job_id"].astype(str).to_numpy(dtype=object)
    if n and len(set(ids.tolist())) != n:
        raise InvalidInputError("trace: job_id values must be unique")

    if "gpus_per_worker" in jobs.columns:
        gpw = jobs["gpus_per_worker"].to_numpy(dtype=np.int64, copy=True)
    else:
        gpw = np.array([largest_divisor_at_most(int(x), gpus_per_server) for x in gpus], np.int64)
    if n and (gpw.min() < 1 or np.any(gpus % gpw != 0)):
        raise InvalidInputError("trace: gpus must be a positive multiple of gpus_per_worker")
    traced = gpus // gpw
    min_w = (
        jobs["min_workers"].to_numpy(dtype=np.int64, copy=True)
        if "min_workers" in jobs.columns
        else traced.copy()
    )
    max_w = (
        jobs["max_workers"].to_numpy(dtype=np.int64, copy=True)
        if "max_workers" in jobs.columns
        else traced.copy()
    )
    if "elastic" in jobs.columns:
        elastic = jobs["elastic"].to_numpy(dtype=bool, copy=True)
    else:
        elastic = max_w > min_w
    if n and (min_w.min() < 1 or np.any(max_w < min_w)):
        raise InvalidInputError("trace: need 1 <= min_workers <= max_workers")
    rigid = ~elastic
    if np.any(rigid & (max_w != min_w)):
        raise InvalidInputError("trace: rigid jobs need min_workers == max_workers")
    alpha = (
        jobs["alpha"].to_numpy(dtype=np.float64, copy=True)
        if "alpha" in jobs.columns
        else np.full(n, default_alpha, dtype=np.float64)
    )
    if n and (not np.all(np.isfinite(alpha)) or alpha.min() < 0 or alpha.max() > 1):
        raise InvalidInputError("trace: alpha must be in [0, 1]")

    order = np.lexsort((np.arange(n), submit))  # submit time, then input row
    return JobTable(
        job_id=ids[order],
        submit_time_s=submit[order],
        duration_s=duration[order],
        gpus=gpus[order],
        gpus_per_worker=gpw[order],
        min_workers=min_w[order],
        max_workers=max_w[order],
        traced_workers=traced[order],
        elastic=elastic[order],
        alpha=alpha[order],
        input_row=order.astype(np.int64),
    )
