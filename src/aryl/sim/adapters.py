"""The simulator's only contact points with the kernels and the trace layer.

Each external call lives in one function here, so that an interface change in
``aryl.elastic``, ``aryl.reclaiming`` or ``aryl.traces`` is a local edit:

* :func:`mckp_extras` — phase 2 of [Aryl]: ``aryl.elastic.jct_reduction_table``
  and ``aryl.elastic.solve_mckp``.
* :func:`plan_reclaim` — builds an ``aryl.reclaiming.ReclaimRequest`` (struct
  of arrays over the loaned servers' placements) and calls
  ``aryl.reclaiming.reclaim``.
* :func:`load_jobs`, :func:`synthesize`, :func:`default_inference` — the trace
  layer (``aryl.traces``, ``aryl.traces.inference``).

While a module is not importable the adapter falls back to a small local
implementation (exact DP for the MCKP, the greedy cost rule for reclaims, a
pandas CSV reader, a seeded synthesis, a diurnal demand curve) and logs it once.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError

if TYPE_CHECKING:
    from aryl.sim.engine import Engine, InferenceSchedule

log = logging.getLogger(__name__)

__all__ = [
    "default_inference",
    "inference_schedule",
    "load_inference_spec",
    "load_jobs",
    "mckp_extras",
    "plan_reclaim",
    "synthesize",
]

_warned: set[str] = set()


def _fallback(name: str, exc: Exception) -> None:
    if name not in _warned:
        _warned.add(name)
        log.info("%s not available (%s): using the simulator's local fallback", name, exc)


# ----------------------------------------------------------------- phase 2


def _local_table(
    rem: np.ndarray,
    cur: np.ndarray,
    base: np.ndarray,
    mx: np.ndarray,
    g: np.ndarray,
    alpha: np.ndarray,
    pause: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    n = rem.shape[0]
    width = int((mx - base).max()) if n else 0
    k = np.arange(1, width + 1, dtype=np.int64)[None, :]
    w = base[:, None] + k
    a = alpha[:, None]

    def T(x: np.ndarray) -> np.ndarray:
        return x / (1.0 + a * (x - 1.0))

    j0 = rem / (base / (1.0 + alpha * (base - 1.0))) + pause * (base != cur)
    jk = rem[:, None] / T(w.astype(np.float64)) + pause[:, None] * (w != cur[:, None])
    values = j0[:, None] - jk
    values[k > (mx - base)[:, None]] = np.nan
    weights = k * g[:, None]
    return values, weights.astype(np.int64)


def _local_mckp(values: np.ndarray, weights: np.ndarray, capacity: int) -> np.ndarray:
    n, m = values.shape
    choice = np.full(n, -1, dtype=np.int64)
    if n == 0 or capacity <= 0:
        return choice
    neg = -np.inf
    dp = np.zeros(capacity + 1)
    arg = np.full((n, capacity + 1), -1, dtype=np.int64)
    for i in range(n):
        new = dp.copy()
        for o in range(m):
            v = values[i, o]
            if not (v > 0):
                continue
            wt = int(weights[i, o])
            if wt > capacity:
                continue
            cand = np.full(capacity + 1, neg)
            cand[wt:] = dp[: capacity + 1 - wt] + v
            better = cand > new + 1e-12
            new[better] = cand[better]
            arg[i, better] = o
        dp = new
    c = capacity
    for i in range(n - 1, -1, -1):
        o = int(arg[i, c])
        choice[i] = o
        if o >= 0:
            c -= int(weights[i, o])
    return choice


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
) -> np.ndarray | None:
    """Extra workers (above base) per job by the MCKP of [Aryl] §3 phase 2.

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
    capacity : int
        GPUs to distribute.
    solver : {"mckp", "greedy"}
        ``greedy``: marginal-gain per GPU, one worker at a time (Optimus/AFS
        style peer).
    unconstrained_only : bool
        Return each job's own best option (largest positive value; ties: fewer
        extra workers) if their weights fit ``capacity`` together — then it is
        the MCKP optimum — and ``None`` otherwise, without calling the solver.

    Returns
    -------
    ndarray of int64 (n,) or None
        Extra workers ``k >= 0`` per job.
    """
    n = rem_work.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    values, weights = _table(rem_work, cur_workers, base, max_workers, gpw, alpha, pause_s)
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
    try:
        from aryl.elastic import solve_mckp

        res = solve_mckp(
            values, weights, int(capacity), backend=backend, validate=False  # type: ignore[arg-type]
        )
        choice = np.asarray(res.choice, dtype=np.int64)
    except ImportError as exc:
        _fallback("aryl.elastic", exc)
        choice = _local_mckp(values, weights, int(capacity))
    return np.where(choice >= 0, choice + 1, 0).astype(np.int64)


def _table(
    rem: np.ndarray,
    cur: np.ndarray,
    base: np.ndarray,
    mx: np.ndarray,
    g: np.ndarray,
    alpha: np.ndarray,
    pause: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    try:
        from aryl.elastic import jct_reduction_table
    except ImportError as exc:
        _fallback("aryl.elastic", exc)
        return _local_table(rem, cur, base, mx, g, alpha, pause)
    # The kernel takes one scalar pause; jobs starting now are charged none.
    p = float(pause.max()) if pause.size else 0.0
    zero = pause == 0
    if p == 0 or zero.all() or not zero.any():
        values, weights = jct_reduction_table(rem, cur, base, mx, g, alpha, p)
        return np.asarray(values, dtype=np.float64), np.asarray(weights, dtype=np.int64)
    # Jobs starting now have current == base, so every option k >= 1 carries the
    # pause and option 0 does not: their pause-free values are the values + p.
    assert np.all(cur[zero] == base[zero])
    v1, w1 = jct_reduction_table(rem, cur, base, mx, g, alpha, p)
    values = np.array(v1, dtype=np.float64)
    values[zero] += p
    return values, np.asarray(w1, dtype=np.int64)


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


def _local_reclaim(
    servers: list[int],
    on: dict[int, dict[int, int]],
    workers: dict[int, int],
    base: dict[int, int],
    n: int,
) -> tuple[list[int], set[int]]:
    """Greedy cost rule of [Aryl] §3 step 3 (fallback)."""
    w = dict(workers)
    left = list(servers)
    on = {s: dict(d) for s, d in on.items()}
    taken: list[int] = []
    preempted: set[int] = set()
    for _ in range(min(n, len(left))):
        best: tuple[float, int, int, int] | None = None
        for s in left:
            cost = 0.0
            busy = 0
            for j, k in on[s].items():
                busy += k
                if w[j] - k < base[j]:
                    cost += k / w[j]
            key = (cost, len(on[s]), busy, s)
            if best is None or key < best:
                best = key
        assert best is not None
        s = best[3]
        left.remove(s)
        taken.append(s)
        for j, k in list(on[s].items()):
            if w[j] - k < base[j]:
                preempted.add(j)
                for d in on.values():
                    d.pop(j, None)
                w[j] = 0
            else:
                w[j] -= k
                del on[s][j]
    return taken, preempted


def plan_reclaim(eng: Engine, n: int) -> tuple[list[int], set[int]]:
    """Choose ``n`` loaned servers to return: ``(servers, preempted job indices)``."""
    loaned = eng.loaned_servers()
    jobs: dict[int, None] = {}
    for s in loaned:
        for j in eng.jobs_on[s]:
            jobs[j] = None
    try:
        from aryl.reclaiming import ReclaimRequest, reclaim
    except ImportError as exc:
        _fallback("aryl.reclaiming", exc)
        on = {s: dict(eng.jobs_on[s]) for s in loaned}
        return _local_reclaim(
            loaned,
            on,
            {j: eng.workers[j] for j in jobs},
            {j: eng.base_workers[j] for j in jobs},
            n,
        )
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


def _read_csv_fallback(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    df = pd.read_csv(path)
    cols = set(df.columns)
    if {"submission_time", "duration", "num_gpu"} <= cols:  # ElasticFlow ITP
        out = pd.DataFrame(
            {
                "job_id": df["job_id"].astype(str),
                "submit_time_s": df["submission_time"].astype(np.float64),
                "duration_s": df["duration"].astype(np.float64),
                "gpus": df["num_gpu"].astype(np.int64),
            }
        )
    elif {"timestamp", "duration", "num_gpus"} <= cols:  # Philly (Pollux)
        ts = pd.to_datetime(df["timestamp"])
        t = (ts - ts.min()).dt.total_seconds()
        out = pd.DataFrame(
            {
                "job_id": [f"philly-{i}" for i in range(len(df))],
                "submit_time_s": t.astype(np.float64),
                "duration_s": df["duration"].astype(np.float64),
                "gpus": df["num_gpus"].astype(np.int64),
            }
        )
    elif {"job_id", "submit_time_s", "duration_s", "gpus"} <= cols:
        out = df
    else:
        raise InvalidInputError(f"trace: {path}: unknown columns {sorted(cols)}")
    out = out.sort_values("submit_time_s", kind="stable").reset_index(drop=True)
    return out, {"source": str(path)}


def load_jobs(source: Any) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Canonical job DataFrame and trace meta from a path, preset name, ``Trace`` or DataFrame."""
    if isinstance(source, pd.DataFrame):
        return source, {"source": "DataFrame"}
    if hasattr(source, "jobs") and isinstance(source.jobs, pd.DataFrame):
        return source.jobs, dict(getattr(source, "meta", {}) or {})
    try:
        from aryl.traces import load_trace
    except ImportError as exc:
        _fallback("aryl.traces", exc)
        path = Path(str(source))
        if not path.exists():
            presets = {
                "itp-c07": Path("/work/shared/traces/elasticflow-itp/cluster07.csv"),
            }
            if str(source) not in presets:
                raise InvalidInputError(f"trace: no such file or preset {source!r}") from None
            path = presets[str(source)]
        return _read_csv_fallback(path)
    trace = load_trace(source)
    return trace.jobs, dict(getattr(trace, "meta", {}) or {})


def synthesize(
    jobs: pd.DataFrame, meta: dict[str, Any], *, elastic_fraction: float, seed: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Fill the scaling columns (ARYL.md §2) with ``aryl.traces.synthesize_elastic``."""
    try:
        from aryl.traces import Trace, synthesize_elastic
    except ImportError as exc:
        _fallback("aryl.traces", exc)
        return _synth_fallback(jobs, meta, elastic_fraction, seed)
    tr = synthesize_elastic(
        Trace(jobs=jobs, meta=meta), elastic_fraction=elastic_fraction, seed=seed
    )
    return tr.jobs, dict(getattr(tr, "meta", {}) or {})


def _synth_fallback(
    jobs: pd.DataFrame, meta: dict[str, Any], elastic_fraction: float, seed: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    from aryl.sim.jobs import largest_divisor_at_most

    rng = np.random.default_rng(seed)
    n = len(jobs)
    out = jobs.copy()
    gpus = out["gpus"].to_numpy(dtype=np.int64)
    gpw = np.array([largest_divisor_at_most(int(x), 8) for x in gpus], dtype=np.int64)
    traced = gpus // gpw
    elastic = rng.random(n) < elastic_fraction
    base = np.maximum(1, np.rint(traced / 2)).astype(np.int64)
    out["gpus_per_worker"] = gpw
    out["elastic"] = elastic
    out["min_workers"] = np.where(elastic, base, traced)
    out["max_workers"] = np.where(elastic, 2 * traced, traced)
    out["alpha"] = rng.uniform(0.0, 0.2, n)
    m = dict(meta)
    m["synthesis"] = {"elastic_fraction": elastic_fraction, "seed": seed, "fallback": True}
    return out, m


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
    try:
        from aryl.traces.inference import load_inference
    except ImportError as exc:
        _fallback("aryl.traces.inference", exc)
        # A diurnal curve (hourly steps): 25% of the servers at night, 75% at the peak.
        h = np.arange(24, dtype=np.float64)
        frac = 0.5 - 0.25 * np.cos(2 * np.pi * (h - 3.0) / 24.0)
        return InferenceSchedule(
            h * 3600.0, np.ceil(frac * n_inference_servers).astype(np.int64), day
        )
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
    spec: str, n_inference_servers: int, t0: float, span_s: float, seed: int
) -> InferenceSchedule | None:
    """Inference demand from a CLI spec: ``bundled`` (tiled daily), ``none``,
    ``diurnal`` or a CSV path (``aryl.traces.inference.load_inference``)."""
    if spec == "none" or n_inference_servers <= 0:
        return None
    if spec == "bundled":
        return default_inference(n_inference_servers, seed)
    from aryl.traces.inference import load_inference

    demand = load_inference(
        spec, n_servers=n_inference_servers, span_s=max(span_s, 86400.0), start_s=t0, seed=seed
    )
    return inference_schedule(demand, n_inference_servers, t0)
