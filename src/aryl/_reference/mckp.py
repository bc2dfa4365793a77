"""Textbook dynamic programme for the multiple-choice knapsack (reference twin).

Pure Python + numpy, written for reading; the oracle of the differential tests
against :mod:`aryl._core._mckp`.  Same signature, result and tie rule as
:func:`aryl.elastic.solve_mckp` (see that module's docstring for the epsilon
policy: values are first quantised to integers, then optimised exactly).

The programme runs over the jobs in *reverse* order, so that the reconstruction
walks them forwards and can apply the tie rule job by job:

``f[i, c]`` = best total quantised value of jobs ``i..n-1`` using *exactly*
``c`` GPUs (``NEG`` if impossible), with ``f[n, 0] = 0``.

The answer is the largest ``f[0, c]``, smallest ``c`` among equals (tie rule 1
and 2).  Reconstruction from job 0: among the options of job ``i`` that realise
``f[i, c]``, take the best by rank "more GPUs, then lower option index, then no
option" (tie rule 3), subtract its weight, continue with job ``i + 1``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: Default memory limit (bytes) of the dynamic programme's tables; ``aryl.elastic``
#: uses the same value (it imports it from here: imports point one way).
MAX_TABLE_BYTES: int = 100_000_000

__all__ = ["MAX_TABLE_BYTES", "solve_quantized"]

NEG = np.int64(-(2**62))  # "impossible"; far below any reachable sum (< 2**62 / 2)


def solve_quantized(
    q: NDArray[np.int64],
    weights: NDArray[np.int64],
    capacity: int,
    *,
    max_table_bytes: int = MAX_TABLE_BYTES,
) -> NDArray[np.int64]:
    """Exact MCKP over integer values ``q`` (``<= 0`` = never chosen).

    Parameters
    ----------
    q : ndarray of int64, shape (n_jobs, n_options)
        Quantised values.
    weights : ndarray of int64, same shape
        GPUs per option (>= 1 where ``q > 0``).
    capacity : int
        GPUs available (>= 0).
    max_table_bytes : int
        Limit for the ``(n_jobs + 1) x (capacity + 1)`` int64 table.

    Returns
    -------
    ndarray of int64, shape (n_jobs,)
        Chosen option per job, -1 for none (tie rule of :func:`aryl.elastic.solve_mckp`).

    Raises
    ------
    InvalidInputError
        If the table would exceed ``max_table_bytes``.
    """
    from aryl.errors import InvalidInputError

    n_jobs, n_options = q.shape
    usable = (q > 0) & (weights <= capacity)
    # No solution can use more GPUs than every job taking its heaviest usable option.
    heaviest = np.where(usable, weights, 0).max(axis=1, initial=0)
    cap = int(min(capacity, int(heaviest.sum())))
    table_bytes = (n_jobs + 1) * (cap + 1) * 8
    if table_bytes > max_table_bytes:
        raise InvalidInputError(
            f"reference MCKP table of {table_bytes} bytes exceeds "
            f"max_table_bytes={max_table_bytes} (n_jobs {n_jobs}, capacity {cap})"
        )

    f = np.full((n_jobs + 1, cap + 1), NEG, dtype=np.int64)
    f[n_jobs, 0] = 0
    for i in reversed(range(n_jobs)):
        nxt = f[i + 1]
        f[i] = nxt  # job i takes no option
        for k in range(n_options):
            if not usable[i, k]:
                continue
            w, v = int(weights[i, k]), q[i, k]
            shifted = np.where(nxt[: cap + 1 - w] > NEG, nxt[: cap + 1 - w] + v, NEG)
            np.maximum(f[i, w:], shifted, out=f[i, w:])

    best = f[0].max()
    c = int(np.argmax(f[0] == best))  # first (smallest) c with the best value
    choice = np.full(n_jobs, -1, dtype=np.int64)
    for i in range(n_jobs):
        # options of job i by rank: more GPUs first, then lower option index
        ranked = sorted(
            (k for k in range(n_options) if usable[i, k]),
            key=lambda k: (-int(weights[i, k]), k),
        )
        for k in ranked:
            w = int(weights[i, k])
            if w <= c and f[i + 1, c - w] > NEG and f[i + 1, c - w] + q[i, k] == f[i, c]:
                choice[i] = k
                c -= w
                break
        # otherwise no option: f[i + 1, c] == f[i, c]
    return choice
