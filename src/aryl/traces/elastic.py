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
* Elastic job, ``elastic_worker_gpus = "one"`` (default): ``gpus_per_worker = 1``,
  ``min_workers = max(1, round_half_up(G / 2))`` (``(G + 1) // 2``: 1 -> 1, 3 -> 2),
  ``max_workers = 2 G``.
* Elastic job, ``elastic_worker_gpus = "split"``: the traced ``G`` GPUs split
  into ``W >= 2`` whole workers of ``g`` GPUs, ``g`` the largest of 8, 4, 2 that
  is ``<= gpus_per_server``, divides ``G`` and leaves at least two workers
  (``G // g >= 2``), else ``g = 1``: 1 -> 1 x 1, 2 -> 2 x 1, 4 -> 2 x 2,
  8 -> 2 x 4, 16 -> 2 x 8, 32 -> 4 x 8, 6 -> 3 x 2, 12 -> 3 x 4, 3 -> 3 x 1.
  Then ``min_workers = max(1, (W + 1) // 2)`` and ``max_workers = 2 W``, the
  one-GPU rule applied to workers: the range in GPUs, ``[g ceil(W / 2), 2 G]``,
  is the one-GPU rule's ``[ceil(G / 2), 2 G]`` whenever ``W`` is even, and each
  extra worker weighs ``g`` GPUs in the MCKP.  At least two workers, so that
  the job can shrink below its traced size as under the one-GPU rule.

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

__all__ = ["ELASTIC_WORKER_GPUS", "elastic_gpus_per_worker", "rigid_gpus_per_worker",
           "synthesize_elastic"]

logger = logging.getLogger(__name__)

#: Rules for the GPUs per worker of an elastic job (:func:`elastic_gpus_per_worker`).
ELASTIC_WORKER_GPUS = ("one", "split")

#: Worker sizes of the ``split`` rule, largest first.
_SPLIT_SIZES = (8, 4, 2)


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


def elastic_gpus_per_worker(
    gpus: np.ndarray, rule: str = "one", gpus_per_server: int = 8
) -> np.ndarray:
    """GPUs per worker of elastic jobs of ``gpus`` traced GPUs.

    Parameters
    ----------
    gpus : numpy.ndarray of int64, shape (n,)
        Traced GPU counts (>= 1).
    rule : {"one", "split"}, default "one"
        ``one``: every worker has one GPU.  ``split``: the largest ``g`` of
        8, 4, 2 with ``g <= gpus_per_server``, ``gpus % g == 0`` and
        ``gpus // g >= 2`` (at least two whole workers), else 1.
    gpus_per_server : int, default 8
        Bound on a worker's GPUs (a worker never spans servers).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        ``g`` per job; ``gpus // g`` workers make up the traced size exactly.

    Raises
    ------
    InvalidInputError
        An unknown rule.

    Notes
    -----
    O(n), vectorised.  Examples (``split``, 8-GPU servers): 1, 2, 3 -> 1;
    4 -> 2; 6 -> 2; 8 -> 4; 12 -> 4; 16, 24, 32, 64 -> 8.
    """
    if rule not in ELASTIC_WORKER_GPUS:
        raise InvalidInputError(
            f"elastic_worker_gpus: expected one of {list(ELASTIC_WORKER_GPUS)}, got {rule!r}")
    g = np.asarray(gpus, dtype=np.int64)
    out = np.ones_like(g)
    if rule == "one":
        return out
    for d in reversed(_SPLIT_SIZES):  # 2, 4, 8: a larger size that fits wins
        if d <= int(gpus_per_server):
            out = np.where((g % d == 0) & (g // d >= 2), d, out)
    return out


def synthesize_elastic(
    trace: Trace,
    *,
    elastic_fraction: float = 0.5,
    seed: int = 0,
    alpha_low: float = 0.02,
    alpha_high: float = 0.2,
    gpus_per_server: int = 8,
    elastic_worker_gpus: str = "one",
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
        Bound on a job's GPUs per worker.
    elastic_worker_gpus : {"one", "split"}, default "one"
        GPUs per worker of an elastic job (:func:`elastic_gpus_per_worker`):
        ``one`` GPU, or the traced GPUs ``split`` into at least two whole
        workers of 8, 4 or 2 GPUs (the module docstring gives the rule).

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
    if elastic_worker_gpus not in ELASTIC_WORKER_GPUS:
        raise InvalidInputError(
            f"elastic_worker_gpus must be one of {list(ELASTIC_WORKER_GPUS)}, "
            f"got {elastic_worker_gpus!r}")
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
        "elastic_worker_gpus": elastic_worker_gpus,
        "elastic_rule": (
            "gpus_per_worker = 1; min_workers = max(1, (gpus + 1) // 2); max_workers = 2 * gpus"
            if elastic_worker_gpus == "one" else
            "gpus_per_worker = g = largest of 8, 4, 2 (<= gpus_per_server) dividing gpus "
            "with gpus // g >= 2, else 1; W = gpus // g; min_workers = max(1, (W + 1) // 2); "
            "max_workers = 2 * W"),
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
    egpw = elastic_gpus_per_worker(gpus, elastic_worker_gpus, gpus_per_server)
    eworkers = gpus // egpw
    min_w = np.where(elastic, np.maximum(1, (eworkers + 1) // 2), workers).astype(np.int64)
    max_w = np.where(elastic, 2 * eworkers, workers).astype(np.int64)
    jobs["gpus_per_worker"] = np.where(elastic, egpw, gpw).astype(np.int64)
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
