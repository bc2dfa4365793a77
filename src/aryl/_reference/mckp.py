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

import itertools

import numpy as np
from numpy.typing import NDArray

#: Default memory limit (bytes) of the dynamic programme's tables; ``aryl.elastic``
#: uses the same value (it imports it from here: imports point one way).
MAX_TABLE_BYTES: int = 100_000_000

__all__ = ["MAX_TABLE_BYTES", "solve_quantized", "solve_unit_steps"]

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


def _hull_steps(q_row: NDArray[np.int64]) -> list[float]:
    """Step efficiencies of one job along the upper hull of its options.

    The points are the origin and ``(k + 1, q[k])`` (weight in steps of ``g``) of
    the options with ``q[k] > 0`` that are more valuable than every lighter option;
    a point on or below the chord of its neighbours is dropped.  Each hull segment
    of ``ds`` steps and value gain ``dq`` gives ``ds`` steps of efficiency
    ``dq / ds`` (a float: one rounding, as the kernel's).  Their number is ``k + 1``
    for the hull's last point, option ``k``.
    """
    hull = [(0, 0)]
    best = 0
    for k, qk in enumerate(int(x) for x in q_row):
        if qk <= best:
            continue  # absent, or dominated by a lighter option
        best = qk
        while len(hull) >= 2:
            (aw, aq), (bw, bq) = hull[-2], hull[-1]
            if (qk - bq) * (bw - aw) >= (bq - aq) * (k + 1 - bw):
                hull.pop()  # the last point is on or below the chord
            else:
                break
        hull.append((k + 1, qk))
    steps: list[float] = []
    for (aw, aq), (bw, bq) in itertools.pairwise(hull):
        steps += [(bq - aq) / (bw - aw)] * (bw - aw)
    return steps


def solve_unit_steps(
    q: NDArray[np.int64],
    weights: NDArray[np.int64],
    capacity: int,
    *,
    tops: NDArray[np.int64] | None = None,
    steps_g: NDArray[np.int64] | None = None,
) -> NDArray[np.int64] | None:
    """The step shortcut (twin of ``mckp::solve_values_unit_steps``), over quantised values.

    Applies when option ``k`` of every job with a usable option (``q > 0``, weight
    ``<= capacity``) weighs ``(k + 1) * g`` for one ``g``, and the capacity cuts the
    jobs' hull steps cleanly: with ``m = capacity // g``, either all steps fit, or
    the ``m``-th largest step efficiency is strictly above the ``(m + 1)``-th.  Then
    each job takes its steps at or above that threshold (its option is their number
    minus one), which is the unique optimum and so :func:`solve_quantized`'s answer
    (the proof is in ``mckp.hpp``).  Returns None when it does not apply.

    ``tops`` (optional): only columns ``< tops[i]`` of row ``i`` are read.
    ``steps_g`` (optional): the caller's promise that row ``i`` weighs
    ``(k + 1) * steps_g[i]`` (the weights are then not read; a row with columns
    to read and ``steps_g[i] < 1`` breaks it: None).  Without it each job's ``g``
    is ``w // (k + 1)`` of its first option with ``q > 0``, and every option with
    ``q > 0`` must weigh ``(k + 1) * g`` (else None).
    """
    n_jobs, n_options = q.shape
    choice = np.full(n_jobs, -1, dtype=np.int64)
    if n_jobs == 0 or n_options == 0 or capacity < 1:
        return choice
    if n_options > 2**22 or n_jobs * n_options >= 2**32:
        return None
    top = [n_options if tops is None else min(int(tops[i]), n_options) for i in range(n_jobs)]
    if steps_g is not None:
        g_of = [int(x) for x in steps_g]
    else:
        g_of = []
        for i in range(n_jobs):
            gi = 0
            for k in range(top[i]):
                if q[i, k] <= 0:
                    continue
                w = int(weights[i, k])
                if w % (k + 1) != 0 or (gi != 0 and w // (k + 1) != gi):
                    return None  # not (k + 1) * g
                gi = w // (k + 1)
            g_of.append(gi)

    g = 0  # the common g of the jobs with usable options
    steps_of: list[list[float]] = []
    for i in range(n_jobs):
        if top[i] <= 0 or g_of[i] < 1:
            if top[i] > 0 and steps_g is not None:
                return None  # a broken promise
            steps_of.append([])
            continue
        lim = min(top[i], capacity // g_of[i])  # the options of weight <= capacity
        steps = _hull_steps(q[i, :lim])
        if steps and g_of[i] != g:
            if g != 0:
                return None  # a second g
            g = g_of[i]
        steps_of.append(steps)
    if g == 0:
        return choice  # nothing usable
    m = capacity // g
    ranked = sorted((e for steps in steps_of for e in steps), reverse=True)
    if len(ranked) <= m:  # everything fits
        thr = 0.0
    else:
        thr, below = ranked[m - 1], ranked[m]
        if not thr > below:
            return None  # a tie at the cut, or a hull segment split by it
    for i, steps in enumerate(steps_of):
        choice[i] = sum(1 for e in steps if e >= thr) - 1
    return choice
