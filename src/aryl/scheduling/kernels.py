"""The scheduling pass's only calls into the kernels (``aryl.elastic``, ``aryl.reclaiming``).

* :func:`extras_table`, :func:`solve_extras` (and :func:`mckp_extras`, both in
  one call) — phase 2 of [Aryl]: the JCT-reduction table (``aryl.elastic``)
  and the exact MCKP (``aryl.elastic.solve_mckp``), or the marginal-gain greedy
  of the ``elastic-greedy`` peer (:func:`_greedy`, the only solver implemented
  here).
* :func:`plan_reclaim` — the loaned servers' placements as an
  ``aryl.reclaiming.ReclaimRequest`` (struct of arrays) and the reclaim kernel.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from aryl.scheduling.state import ClusterState

__all__ = [
    "extras_table",
    "extras_table_from_throughput",
    "jobs_in_start_order",
    "mckp_extras",
    "plan_reclaim",
    "reclaim_request",
    "solve_extras",
    "throughput_rows",
]


def extras_table(
    rem_work: np.ndarray,
    cur_workers: np.ndarray,
    base: np.ndarray,
    max_workers: np.ndarray,
    gpw: np.ndarray,
    alpha: np.ndarray,
    pause_s: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """MCKP table of extra workers (``aryl.elastic.jct_reduction_table`` semantics).

    Parameters
    ----------
    rem_work : float64 (n,)
        Remaining work, single-worker seconds.
    cur_workers, base, max_workers, gpw : int64 (n,)
        ``cur_workers`` = workers today (``base`` for a job starting now).
    alpha : float64 (n,)
    pause_s : float64 (n,)
        Rescale pause charged when the size differs from today's (0 for a job
        starting now).

    Returns
    -------
    values : float64 (n, max extra)
        ``values[i, k - 1]`` = JCT reduction (s) of ``k`` extra workers, net of
        the pause; NaN beyond the job's maximum.
    weights : int64 (n, max extra)
        ``k * gpw[i]`` GPUs.
    """
    return _table(rem_work, cur_workers, base, max_workers, gpw, alpha, pause_s)


def solve_extras(
    values: np.ndarray,
    weights: np.ndarray,
    capacity: int,
    *,
    backend: str,
    solver: str = "mckp",
    unconstrained_only: bool = False,
    max_extra: np.ndarray | None = None,
) -> np.ndarray | None:
    """Extra workers per job from an :func:`extras_table` (phase 2 of [Aryl]).

    Parameters
    ----------
    values, weights : from :func:`extras_table` (not modified)
    capacity : int
        GPUs to distribute.
    solver : {"mckp", "greedy"}
        ``mckp``: ``aryl.elastic.solve_mckp`` (exact); ``greedy``: marginal gain
        per GPU, one worker at a time (Optimus/AFS style peer).
    unconstrained_only : bool
        Return each job's own best option (largest positive value; ties: fewer
        extra workers) if their weights fit ``capacity`` together — then it is
        the MCKP optimum — and ``None`` otherwise, without calling the solver.
    max_extra : int64 (n,), optional
        At most this many extra workers per job (options above it are removed,
        e.g. workers that no server can hold).

    Returns
    -------
    ndarray of int64 (n,) or None
        Extra workers ``0 <= k <= max_extra`` per job.
    """
    n = values.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if max_extra is not None and values.shape[1]:
        cut = np.arange(1, values.shape[1] + 1)[None, :] > max_extra[:, None]
        if cut.any():
            values = np.where(cut, np.nan, values)
    if unconstrained_only:
        if values.shape[1] == 0:
            return np.zeros(n, dtype=np.int64)
        vals = np.where(np.isnan(values), -np.inf, values)
        best = np.argmax(vals, axis=1)
        rows = np.arange(n)
        ok = vals[rows, best] > 0
        if int(weights[rows, best][ok].sum()) > capacity:
            return None
        return np.where(ok, best + 1, 0).astype(np.int64)
    if solver == "greedy":
        return _greedy(values, weights, capacity)
    from aryl.elastic import solve_mckp

    res = solve_mckp(
        values, weights, int(capacity), backend=backend, validate=False  # type: ignore[arg-type]
    )
    # option index c (c + 1 extra workers) or -1 (none): c + 1 extra workers either way
    extra: np.ndarray = np.asarray(res.choice, dtype=np.int64) + 1
    return extra


def mckp_extras(
    rem_work: np.ndarray,
    cur_workers: np.ndarray,
    base: np.ndarray,
    max_workers: np.ndarray,
    gpw: np.ndarray,
    alpha: np.ndarray,
    pause_s: np.ndarray,
    capacity: int,
    *,
    backend: str,
    solver: str = "mckp",
    unconstrained_only: bool = False,
    max_extra: np.ndarray | None = None,
) -> np.ndarray | None:
    """Extra workers (above base) per job by the MCKP of [Aryl] §3 phase 2.

    :func:`extras_table` then :func:`solve_extras` (same parameters).  The
    choice counts GPUs only; the ``aryl`` policy makes it placeable (per-job
    slot caps, then repair: docs/simulator.md, "Placement of extra workers").

    Returns
    -------
    ndarray of int64 (n,) or None
        Extra workers ``k >= 0`` per job.
    """
    if rem_work.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    values, weights = _table(rem_work, cur_workers, base, max_workers, gpw, alpha, pause_s)
    return solve_extras(
        values, weights, capacity, backend=backend, solver=solver,
        unconstrained_only=unconstrained_only, max_extra=max_extra,
    )


def throughput_rows(
    st: ClusterState, cand: list[int], base: np.ndarray, mx: np.ndarray, gpu_type: str
) -> np.ndarray:
    """``tput[i, k]`` = throughput of job ``cand[i]`` on ``base[i] + k`` workers of
    ``gpu_type`` (``k = 0 .. max extra``; NaN past the job's maximum). O(n x K)."""
    extra = mx - base
    n_cols = int(extra.max()) + 1 if extra.size else 1
    out = np.full((len(cand), n_cols), np.nan)
    sp = st.speeds
    for i, j in enumerate(cand):
        b = int(base[i])
        n = int(extra[i]) + 1
        if sp is None:
            a = st.alpha[j]
            out[i, :n] = [w / (1.0 + a * (w - 1)) for w in range(b, b + n)]
        else:
            out[i, :n] = sp.throughput_row(st.family[j], st.alpha[j], gpu_type, b, n,
                                           st.gpus_per_worker[j])
    return out


def extras_table_from_throughput(
    rem: np.ndarray,
    cur: np.ndarray,
    base: np.ndarray,
    mx: np.ndarray,
    g: np.ndarray,
    tput: np.ndarray,
    pause: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`extras_table` with the throughputs given (one GPU type's speeds).

    ``rem`` is each job's remaining work in the throughput's units x seconds;
    ``tput[i, k]`` its throughput on ``base[i] + k`` workers.  The value of ``k``
    extra workers is the JCT reduction ``rem / tput[i, 0] - rem / tput[i, k]``
    minus the rescale pause when the size differs from today's (none for a job
    starting now, ``pause[i] == 0``).
    """
    from aryl.elastic import _table_from_throughput

    p = float(pause.max()) if pause.size else 0.0
    filled = np.where(np.isnan(tput), 1.0, tput)  # NaN columns are cut below
    values, weights = _table_from_throughput(rem, cur, base, mx - base, g, filled, p)
    return _no_pause_for_starts(values, cur, base, pause, p), np.asarray(weights, dtype=np.int64)


def _no_pause_for_starts(
    values: np.ndarray, cur: np.ndarray, base: np.ndarray, pause: np.ndarray, p: float
) -> np.ndarray:
    """The table's values with the pause ``p`` taken off the jobs starting now.

    The table charges one scalar pause; jobs starting now (``pause == 0``) have
    ``current == base``, so every option ``k >= 1`` carries it and option 0 does
    not: their pause-free values are the values + ``p``.
    """
    values = np.asarray(values, dtype=np.float64)
    zero = pause == 0
    if p > 0 and zero.any():
        assert np.all(cur[zero] == base[zero])
        values = values.copy()
        values[zero] += p
    return values


def _table(
    rem: np.ndarray,
    cur: np.ndarray,
    base: np.ndarray,
    mx: np.ndarray,
    g: np.ndarray,
    alpha: np.ndarray,
    pause: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    # The kernel takes one scalar pause; jobs starting now are charged none.
    p = float(pause.max()) if pause.size else 0.0
    values, weights = _table_unchecked(rem, cur, base, mx, g, alpha, p)
    return _no_pause_for_starts(values, cur, base, pause, p), np.asarray(weights, dtype=np.int64)


def _table_unchecked(
    rem: np.ndarray,
    cur: np.ndarray,
    base: np.ndarray,
    mx: np.ndarray,
    g: np.ndarray,
    alpha: np.ndarray,
    pause: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``aryl.elastic.jct_reduction_table`` without its input validation.

    The simulator's job columns are validated when the trace is loaded and its
    arrays are already int64/float64, so the ~20 checking reductions per call
    (a third of the phase-2 kernel time) are skipped; the arithmetic is the
    kernel's own (``throughput`` + ``_table_from_throughput``), so the values
    are bit-identical (tested).  Falls back to the public function if the
    kernel module no longer has the private builder.
    """
    from aryl import elastic as el

    build = getattr(el, "_table_from_throughput", None)
    if build is None:  # pragma: no cover - kernel refactored
        return el.jct_reduction_table(rem, cur, base, mx, g, alpha, pause)
    extra = mx - base
    n_cols = int(extra.max()) if extra.size else 0
    w = base[:, None] + np.arange(n_cols + 1, dtype=np.int64)[None, :]
    tput = el.throughput(w, alpha[:, None])
    values, weights = build(rem, cur, base, extra, g, tput, float(pause))
    return values, weights


def _greedy(values: np.ndarray, weights: np.ndarray, capacity: int) -> np.ndarray:
    n, m = values.shape
    ext = np.zeros(n, dtype=np.int64)
    vals = np.nan_to_num(values, nan=-np.inf)
    heap: list[tuple[float, int]] = []
    g = np.where(m > 0, weights[:, 0] if m else 1, 1)
    for i in range(n):
        if m and vals[i, 0] > 0:
            heap.append((-vals[i, 0] / g[i], i))
    heapq.heapify(heap)
    cap = capacity
    while heap:
        _, i = heapq.heappop(heap)
        if g[i] > cap:
            continue
        cap -= int(g[i])
        ext[i] += 1
        k = int(ext[i])
        if k < m and np.isfinite(vals[i, k]):
            gain = vals[i, k] - vals[i, k - 1]
            if gain > 0:
                heapq.heappush(heap, (-gain / g[i], i))
    return ext


def jobs_in_start_order(st: ClusterState, servers: list[int]) -> dict[int, list[int]]:
    """The jobs on each of ``servers``, in the order they started (the running order).

    A canonical order, reproducible from a state document (the order in which
    the state last placed workers is not).  O(running + placements on servers).
    """
    rank = {j: i for i, j in enumerate(st.running)}
    jobs_on = st.jobs_on
    return {s: sorted(jobs_on[s], key=rank.__getitem__) for s in servers}


def reclaim_request(st: ClusterState, n: int, elastic_policy: bool) -> Any:
    """The ``aryl.reclaiming.ReclaimRequest`` for returning ``n`` loaned servers.

    Struct of arrays over the loaned servers and the jobs placed on them (job ids
    are job indexes).  A job may shed workers down to its base (``min_workers``)
    only when the policy runs it elastically (``elastic_policy`` and the job is
    elastic); otherwise its base is its whole size.
    """
    from aryl.reclaiming import ReclaimRequest

    loaned = st.loaned_servers()
    on = jobs_in_start_order(st, loaned)
    jobs: dict[int, None] = {}
    for s in loaned:
        for j in on[s]:
            jobs[j] = None
    job_list = list(jobs)
    index = {j: i for i, j in enumerate(job_list)}
    p_job: list[int] = []
    p_srv: list[int] = []
    p_w: list[int] = []
    jobs_on = st.jobs_on
    for s in loaned:
        for j in on[s]:
            p_job.append(index[j])
            p_srv.append(s)
            p_w.append(jobs_on[s][j])
    el = [elastic_policy and st.elastic[j] for j in job_list]
    mn = st.min_workers
    wk = st.workers
    i64 = np.int64
    return ReclaimRequest(
        server_id=np.asarray(loaned, dtype=i64),
        server_gpus=np.asarray([st.server_gpus[s] for s in loaned], dtype=i64),
        placement_job=np.asarray(p_job, dtype=i64),
        placement_server=np.asarray(p_srv, dtype=i64),
        placement_workers=np.asarray(p_w, dtype=i64),
        job_id=np.asarray(job_list, dtype=i64),
        job_workers=np.asarray([wk[j] for j in job_list], dtype=i64),
        job_gpus_per_worker=np.asarray([st.gpus_per_worker[j] for j in job_list], dtype=i64),
        job_min_workers=np.asarray(
            [mn[j] if e else wk[j] for j, e in zip(job_list, el, strict=True)], dtype=i64
        ),
        job_elastic=np.asarray(el, dtype=bool),
        job_preemptible=np.ones(len(job_list), dtype=bool),
        n_servers=int(n),
    )


def plan_reclaim(st: ClusterState, n: int, elastic_policy: bool) -> tuple[list[int], set[int]]:
    """Choose ``n`` loaned servers to return: ``(servers, preempted job indexes)``.

    The request of :func:`reclaim_request` through ``aryl.reclaiming.reclaim``
    with the state's ``reclaim_policy``, ``seed`` and ``backend``.
    """
    from aryl.reclaiming import reclaim

    req = reclaim_request(st, n, elastic_policy)
    cfg = st.config
    plan = reclaim(req, policy=cfg.reclaim_policy, seed=cfg.seed, backend=cfg.backend)
    servers = [int(s) for s in np.asarray(plan.servers).tolist()]
    preempted = {int(j) for j in np.asarray(plan.preempted_jobs).tolist()}
    return servers, preempted
