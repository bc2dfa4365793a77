"""Elastic synthesis for traces that give only size and duration ``[Aryl]`` §2.

Rules (the project's documented choices, docs/model.md):

* Exactly ``round(elastic_fraction * n)`` jobs (half to even) become elastic,
  chosen by a seeded permutation: ``rng = numpy.random.default_rng(seed)``;
  ``order = rng.permutation(n)``; the first ones in ``order`` are elastic.
* Then ``alpha = rng.uniform(alpha_low, alpha_high, n)`` for every job, in
  row order (rigid jobs get one too; it is unused, but present).  Default
  ``U[0.02, 0.2]``, the throughput curve ``T(w) = w / (1 + alpha (w - 1))``.
* Rigid job of ``G`` GPUs: ``gpus_per_worker`` = the largest divisor of ``G``
  that is ``<= gpus_per_server`` (1, 2, 4, 8, 16, 32, 64 -> 1, 2, 4, 8, 8, 8, 8;
  12 -> 6), ``min_workers = max_workers = G / gpus_per_worker``.
* Elastic job: ``gpus_per_worker = 1``, ``min_workers = max(1, round_half_up(G / 2))``
  (``(G + 1) // 2``: 1 -> 1, 3 -> 2), ``max_workers = 2 G``.

A trace that already has the five scaling columns is returned with its columns
unchanged (``meta["elastic_synthesis"]`` says so).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from aryl.errors import InvalidInputError
from aryl.traces.schema import SCALING_COLUMNS, Trace
from aryl.traces.validate import check_seed

__all__ = ["rigid_gpus_per_worker", "synthesize_elastic"]

logger = logging.getLogger(__name__)


def rigid_gpus_per_worker(gpus: np.ndarray, gpus_per_server: int = 8) -> np.ndarray:
    """Largest divisor of each ``gpus`` that is ``<= gpus_per_server``.

    Parameters
    ----------
    gpus : numpy.ndarray of int64, shape (n,)
        GPU counts (>= 1).
    gpus_per_server : int, default 8

    Returns
    -------
    numpy.ndarray of int64, shape (n,)

    Notes
    -----
    O(n * gpus_per_server), vectorised over jobs.
    """
    g = np.asarray(gpus, dtype=np.int64)
    out = np.ones_like(g)
    for d in range(2, int(gpus_per_server) + 1):
        out = np.where(g % d == 0, d, out)
    return out


def synthesize_elastic(
    trace: Trace,
    *,
    elastic_fraction: float = 0.5,
    seed: int = 0,
    alpha_low: float = 0.02,
    alpha_high: float = 0.2,
    gpus_per_server: int = 8,
) -> Trace:
    """Fill the scaling columns of every job (rigid and elastic) ``[Aryl]``.

    Parameters
    ----------
    trace : Trace
        Canonical trace (rows sorted by submit time).
    elastic_fraction : float in [0, 1], default 0.5
        Fraction of jobs made elastic (exact count, half to even).
    seed : int, default 0
        Seed of :func:`numpy.random.default_rng` (>= 0).
    alpha_low, alpha_high : float, default 0.02, 0.2
        ``alpha ~ U[alpha_low, alpha_high]`` per job (``0 <= low <= high <= 1``,
        the range every job table accepts).
    gpus_per_server : int, default 8
        Bound on a rigid job's GPUs per worker.

    Returns
    -------
    Trace
        Same rows and order, with ``gpus_per_worker``, ``min_workers``,
        ``max_workers`` (int64), ``elastic`` (bool), ``alpha`` (float64); the
        parameters and seed are in ``meta["elastic_synthesis"]``.

    Raises
    ------
    InvalidInputError
        If a parameter is out of range.

    Notes
    -----
    O(n * gpus_per_server).  Deterministic for a given seed and row order.
    """
    if isinstance(elastic_fraction, bool) or not 0.0 <= elastic_fraction <= 1.0:
        raise InvalidInputError(f"elastic_fraction must be in [0, 1], got {elastic_fraction}")
    if not 0.0 <= alpha_low <= alpha_high <= 1.0:
        raise InvalidInputError(
            f"alpha_low/alpha_high must satisfy 0 <= low <= high <= 1, got {alpha_low}, "
            f"{alpha_high}"
        )
    if int(gpus_per_server) < 1:
        raise InvalidInputError(f"gpus_per_server must be >= 1, got {gpus_per_server}")
    seed = check_seed(seed)
    params: dict[str, Any] = {
        "elastic_fraction": float(elastic_fraction),
        "seed": int(seed),
        "alpha_distribution": f"uniform[{alpha_low}, {alpha_high}]",
        "alpha_low": float(alpha_low),
        "alpha_high": float(alpha_high),
        "gpus_per_server": int(gpus_per_server),
        "rigid_rule": "gpus_per_worker = largest divisor of gpus <= gpus_per_server; "
        "min_workers = max_workers = gpus / gpus_per_worker",
        "elastic_rule": "gpus_per_worker = 1; min_workers = max(1, (gpus + 1) // 2); "
        "max_workers = 2 * gpus",
    }
    if trace.has_scaling:
        meta = {**trace.meta, "elastic_synthesis": {"kept_existing_columns": True}}
        return trace.replace(meta=meta)
    jobs = trace.jobs.copy()
    n = len(jobs)
    gpus = jobs["gpus"].to_numpy(dtype=np.int64)
    rng = np.random.default_rng(seed)
    n_elastic = round(elastic_fraction * n)
    elastic = np.zeros(n, dtype=bool)
    elastic[rng.permutation(n)[:n_elastic]] = True
    alpha = rng.uniform(alpha_low, alpha_high, n).astype(np.float64)
    gpw = rigid_gpus_per_worker(gpus, gpus_per_server)
    workers = gpus // gpw
    min_w = np.where(elastic, np.maximum(1, (gpus + 1) // 2), workers).astype(np.int64)
    max_w = np.where(elastic, 2 * gpus, workers).astype(np.int64)
    jobs["gpus_per_worker"] = np.where(elastic, 1, gpw).astype(np.int64)
    jobs["min_workers"] = min_w
    jobs["max_workers"] = max_w
    jobs["elastic"] = elastic
    jobs["alpha"] = alpha
    order = [c for c in trace.jobs.columns if c not in SCALING_COLUMNS]
    cols = order[:4] + list(SCALING_COLUMNS) + order[4:]
    jobs = jobs[cols]
    params["n_elastic"] = int(n_elastic)
    logger.info("synthesised %d elastic jobs of %d (seed %d)", n_elastic, n, seed)
    return trace.replace(jobs=jobs, meta={**trace.meta, "elastic_synthesis": params})
