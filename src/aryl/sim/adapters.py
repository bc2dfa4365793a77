"""The simulator's only contact points with the kernels and the trace layer.

Each external call lives in one function here, so that an interface change in
``aryl.elastic``, ``aryl.reclaiming`` or ``aryl.traces`` is a local edit:

* :func:`extras_table`, :func:`solve_extras` (and :func:`mckp_extras`, both in
  one call) — phase 2 of [Aryl]: ``aryl.elastic.jct_reduction_table`` and
  ``aryl.elastic.solve_mckp``.
* :func:`plan_reclaim` — builds an ``aryl.reclaiming.ReclaimRequest`` (struct
  of arrays over the loaned servers' placements) and calls
  ``aryl.reclaiming.reclaim``.
* :func:`load_jobs`, :func:`synthesize`, :func:`default_inference` — the trace
  layer (``aryl.traces``, ``aryl.traces.inference``).

The marginal-gain greedy of the ``elastic-greedy`` peer (:func:`_greedy`) is
the only solver implemented here.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError

if TYPE_CHECKING:
    from aryl.sim.engine import Engine, InferenceSchedule

log = logging.getLogger(__name__)

__all__ = [
    "default_inference",
    "extras_table",
    "inference_schedule",
    "load_inference_spec",
    "load_jobs",
    "mckp_extras",
    "plan_reclaim",
    "solve_extras",
    "synthesize",
]

# ----------------------------------------------------------------- phase 2


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
    values = np.asarray(values, dtype=np.float64)
    zero = pause == 0
    if p > 0 and zero.any():
        # Jobs starting now have current == base, so every option k >= 1 carries the
        # pause and option 0 does not: their pause-free values are the values + p.
        assert np.all(cur[zero] == base[zero])
        values = values.copy()
        values[zero] += p
    return values, np.asarray(weights, dtype=np.int64)


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
    import heapq

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


# ----------------------------------------------------------------- reclaim


def plan_reclaim(eng: Engine, n: int) -> tuple[list[int], set[int]]:
    """Choose ``n`` loaned servers to return: ``(servers, preempted job indices)``."""
    loaned = eng.loaned_servers()
    jobs: dict[int, None] = {}
    for s in loaned:
        for j in eng.jobs_on[s]:
            jobs[j] = None
    from aryl.reclaiming import ReclaimRequest, reclaim

    job_list = list(jobs)
    index = {j: i for i, j in enumerate(job_list)}
    p_job: list[int] = []
    p_srv: list[int] = []
    p_w: list[int] = []
    for s in loaned:
        for j, k in eng.jobs_on[s].items():
            p_job.append(index[j])
            p_srv.append(s)
            p_w.append(k)
    i64 = np.int64
    req = ReclaimRequest(
        server_id=np.asarray(loaned, dtype=i64),
        server_gpus=np.full(len(loaned), eng.gpus_per_server, dtype=i64),
        placement_job=np.asarray(p_job, dtype=i64),
        placement_server=np.asarray(p_srv, dtype=i64),
        placement_workers=np.asarray(p_w, dtype=i64),
        job_id=np.asarray(job_list, dtype=i64),
        job_workers=np.asarray([eng.workers[j] for j in job_list], dtype=i64),
        job_gpus_per_worker=np.asarray([eng.gpw[j] for j in job_list], dtype=i64),
        job_min_workers=np.asarray([eng.base_workers[j] for j in job_list], dtype=i64),
        job_elastic=np.asarray([eng.elastic[j] for j in job_list], dtype=bool),
        job_preemptible=np.ones(len(job_list), dtype=bool),
        n_servers=int(n),
    )
    if eng.reclaim_log is not None:
        eng.reclaim_log.append(req)
    plan = reclaim(
        req, policy=eng.config.reclaim_policy, seed=eng.config.seed, backend=eng.config.backend
    )
    servers = [int(s) for s in np.asarray(plan.servers).tolist()]
    preempted = {int(j) for j in np.asarray(plan.preempted_jobs).tolist()}
    return servers, preempted


# ----------------------------------------------------------------- traces


def load_jobs(source: Any) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Canonical job DataFrame and trace meta from a path, preset name, ``Trace`` or DataFrame."""
    if isinstance(source, pd.DataFrame):
        return source, {"source": "DataFrame"}
    if hasattr(source, "jobs") and isinstance(source.jobs, pd.DataFrame):
        return source.jobs, dict(getattr(source, "meta", {}) or {})
    from aryl.traces import load_trace

    trace = load_trace(source)
    return trace.jobs, dict(getattr(trace, "meta", {}) or {})


def synthesize(
    jobs: pd.DataFrame, meta: dict[str, Any], *, elastic_fraction: float, seed: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Fill the scaling columns (docs/model.md) with ``aryl.traces.synthesize_elastic``."""
    from aryl.traces import Trace, synthesize_elastic

    tr = synthesize_elastic(
        Trace(jobs=jobs, meta=meta), elastic_fraction=elastic_fraction, seed=seed
    )
    return tr.jobs, dict(getattr(tr, "meta", {}) or {})


def inference_schedule(demand: Any, n_inference_servers: int, t0: float) -> InferenceSchedule:
    """Turn an ``InferenceDemand`` (``times_s``, ``servers_needed``) into the engine's series.

    ``times_s`` are absolute, in the trace's time base; the value of the last
    step at or before the clock start ``t0`` holds from ``t0`` (0 servers if no
    step is that early), the last value holds forever.  Values are clipped to
    ``[0, n_inference_servers]``.
    """
    from aryl.sim.engine import InferenceSchedule

    t = np.asarray(demand.times_s, dtype=np.float64)
    v = np.asarray(demand.servers_needed, dtype=np.int64)
    if t.ndim != 1 or t.shape != v.shape or t.size == 0:
        raise InvalidInputError("inference: times_s and servers_needed must be equal-length 1-D")
    if np.any(np.diff(t) <= 0):
        raise InvalidInputError("inference: times_s must be strictly increasing")
    off = t - t0
    k = int(np.searchsorted(off, 0.0, side="right"))  # steps at or before t0: [0, k)
    first = int(v[k - 1]) if k > 0 else 0
    offs = np.concatenate([[0.0], off[k:]])
    vals = np.concatenate([[first], v[k:]])
    vals = np.clip(vals, 0, n_inference_servers)
    return InferenceSchedule(offs, vals, math.inf)


def default_inference(
    n_inference_servers: int, seed: int = 0, *, peak_utilisation: float = 0.9
) -> InferenceSchedule | None:
    """The bundled inference profile scaled to ``n_inference_servers``, tiled daily.

    One day of ``aryl.traces.inference.load_inference("bundled", ...)`` (48
    half-hour steps, slot 0 at the clock start, ``peak_utilisation`` of the
    servers needed at the daily peak) repeated with a 24 h period.
    """
    from aryl.sim.engine import InferenceSchedule

    if n_inference_servers <= 0:
        return None
    day = 86400.0
    from aryl.traces.inference import load_inference

    demand = load_inference(
        "bundled",
        n_servers=n_inference_servers,
        span_s=day,
        seed=seed,
        peak_utilisation=peak_utilisation,
    )
    t = np.asarray(demand.times_s, dtype=np.float64)
    v = np.clip(np.asarray(demand.servers_needed, dtype=np.int64), 0, n_inference_servers)
    return InferenceSchedule(t - t[0], v, day)


def load_inference_spec(
    spec: str, n_inference_servers: int, t0: float, span_s: float, seed: int,
    *, peak_utilisation: float = 0.9,
) -> InferenceSchedule | None:
    """Inference demand from a CLI spec: ``bundled`` (tiled daily), ``none``,
    ``diurnal`` or a CSV path (``aryl.traces.inference.load_inference``);
    ``peak_utilisation`` scales ``bundled`` and ``diurnal``."""
    if spec == "none" or n_inference_servers <= 0:
        return None
    if spec == "bundled":
        return default_inference(n_inference_servers, seed, peak_utilisation=peak_utilisation)
    from aryl.traces.inference import load_inference

    demand = load_inference(
        spec, n_servers=n_inference_servers, span_s=max(span_s, 86400.0), start_s=t0, seed=seed,
        peak_utilisation=peak_utilisation,
    )
    return inference_schedule(demand, n_inference_servers, t0)
