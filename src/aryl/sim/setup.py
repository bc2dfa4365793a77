"""The cluster and the speed model of a replay, from its :class:`SimConfig`.

* :func:`resolve_cluster` — the pools: ``SimConfig.cluster`` (a preset or a
  TOML file, docs/cluster.md), else one training and one inference pool from
  the server counts (one GPU type, ``V100``, the reference type of the
  measured speeds);
* :func:`speed_model` — ``parametric`` (the ``alpha`` curve; every type at
  speed 1 unless ``loaned_gpu_speed``) or ``measured`` (bundled per-family
  speeds and scaling per GPU type); ``auto`` picks measured when the cluster
  has several GPU types;
* :func:`job_families` — a model family per job for measured speeds (the
  trace's ``model`` column, else seeded by GPU-hours, :func:`aryl.speeds.assign_families`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from aryl.cluster import CLUSTER_PRESETS, ClusterSpec, cluster_preset, load_cluster_spec
from aryl.errors import InvalidInputError
from aryl.scheduling.speed import SpeedModel
from aryl.sim.config import SimConfig

__all__ = ["job_families", "resolve_cluster", "speed_kind", "speed_model", "worker_server_gpus"]


def resolve_cluster(cfg: SimConfig) -> ClusterSpec:
    """The cluster of a replay (pools in server order: training pools, then inference).

    Raises
    ------
    InvalidInputError
        An unknown preset (with the closest name) or a bad TOML file (naming the
        file, pool and field).
    """
    if cfg.cluster is None:
        return ClusterSpec.from_counts(
            cfg.n_training_servers, cfg.n_inference_servers, cfg.gpus_per_server, "V100"
        )
    name = cfg.cluster.strip()
    if name in CLUSTER_PRESETS:
        return cluster_preset(name)
    path = Path(name)
    if path.suffix.lower() == ".toml" or path.exists():
        return load_cluster_spec(path)
    return cluster_preset(name)  # raises, naming the presets and the closest


def worker_server_gpus(cfg: SimConfig, spec: ClusterSpec | None = None) -> int:
    """The server size that fixes a job's GPUs per worker (docs/model.md, "Jobs").

    The largest training server's GPUs of the replay's cluster (``spec``, else
    :func:`resolve_cluster`), ``cfg.gpus_per_server`` when it has no training
    pool: a rigid job's workers are the largest divisor of its GPUs that fits
    it, an elastic job's split workers the largest of 8, 4, 2 that fits it.
    Every caller that synthesises scaling columns for a replay
    (``simulate``, ``aryl replay``/``compare``, ``aryl sweep``) uses it, so a
    cluster spec of 4-GPU servers gets 4-GPU workers, not the 8 of
    ``gpus_per_server``'s default.
    """
    if spec is None:
        spec = resolve_cluster(cfg)
    return max((p.gpus_per_server for p in spec.training_pools), default=cfg.gpus_per_server)


def speed_kind(cfg: SimConfig, spec: ClusterSpec) -> str:
    """``parametric`` or ``measured`` (``auto``: measured on several GPU types)."""
    if cfg.speed_model != "auto":
        return cfg.speed_model
    return "measured" if len(spec.gpu_types) > 1 else "parametric"


def speed_model(cfg: SimConfig, spec: ClusterSpec) -> SpeedModel:
    """The speed model of a replay on ``spec``.

    The reference GPU type (on which a trace's durations are read) is the
    measured table's (V100) for measured speeds, else the first training pool's.
    ``loaned_gpu_speed`` sets the inference pools' types to that relative speed.
    """
    measured = speed_kind(cfg, spec) == "measured"
    table = None
    if measured:
        from aryl.speeds import SpeedTable

        table = SpeedTable.bundled()
        ref = table.reference_gpu_type
    else:
        ref = spec.training_pools[0].gpu_type if spec.training_pools else "V100"
    loaned: dict[str, float] = {}
    if cfg.loaned_gpu_speed is not None:
        loaned = {p.gpu_type: cfg.loaned_gpu_speed for p in spec.inference_pools
                  if p.gpu_type != ref}
        if not loaned:
            raise InvalidInputError(
                "loaned_gpu_speed: the inference servers are of the reference GPU type "
                f"({ref}), so their speed cannot differ; use a cluster spec whose "
                "inference pool has its own GPU type (docs/cluster.md)"
            )
    if measured:
        return SpeedModel(ref, table=table, relative_speed_override=loaned)
    return SpeedModel(ref, factors=loaned)


def job_families(
    jobs: pd.DataFrame, cfg: SimConfig, spec: ClusterSpec
) -> list[str | None] | None:
    """Model family per job (in the frame's row order) for measured speeds; None otherwise."""
    if speed_kind(cfg, spec) != "measured":
        return None
    from aryl.speeds import assign_families

    return [str(x) for x in assign_families(jobs, cfg.seed).tolist()]


def describe(spec: ClusterSpec, model: SpeedModel) -> dict[str, Any]:
    """The cluster and speed model as recorded in a replay's summary."""
    return {**spec.to_dict(), "speed_model": model.to_dict()}


def check_types(spec: ClusterSpec, model: SpeedModel) -> None:
    """Every GPU type of the cluster is known to a measured table (else an error)."""
    if model.table is None:
        return
    known = set(model.table.gpu_types)
    bad = [t for t in spec.gpu_types if t not in known]
    if bad:
        raise InvalidInputError(
            f"cluster: GPU type(s) {bad} have no measured speeds; known: {sorted(known)} "
            "(use speed_model='parametric', or loaned_gpu_speed for an inference type)"
        )


def shortest_end_s(
    table: Any, cfg: SimConfig, spec: ClusterSpec, model: SpeedModel,
    families: list[str | None] | None, elastic_policy: bool,
) -> tuple[float, int]:
    """A lower bound on when a replay ends, and the job that sets it (-1: none).

    Before anything is built: a replay runs at least until its last arrival and
    until every job that can ever fit (the engines' infeasibility rule) has done
    its work at the fastest rate it could ever get, ``duration / rate_max``,
    each capped at ``horizon_s``.  ``rate_max`` bounds a job's progress in
    reference seconds per second on any GPU type of the cluster at any worker
    count up to its maximum (``max_workers`` when the policy scales it, else
    its traced size): parametric ``max(f) * max(1, T(m)) / T(ref)``, measured the
    largest throughput per (family, type) over replica counts up to ``m * g``,
    over the reference type's at the traced size.  Preemptions, pauses and
    waits only make a job later, so the bound holds for every policy.
    O(n_jobs + families x types x replicas).

    Returns
    -------
    end_s : float
        The bound (the clock start when the trace is empty).
    job : int
        The index (in ``table``) of the job whose work sets it, or -1 when the
        last arrival or the clock start does.
    """
    import numpy as np

    n = int(table.n_jobs)
    sub = np.asarray(table.submit_time_s, dtype=np.float64)
    t0 = cfg.start_time_s if cfg.start_time_s is not None else (float(sub[0]) if n else 0.0)
    horizon = math.inf if cfg.horizon_s is None else float(cfg.horizon_s)
    end = min(max(float(t0), float(sub.max()) if n else float(t0)), horizon)
    if n == 0:
        return end, -1
    dur = np.asarray(table.duration_s, dtype=np.float64)
    g = np.asarray(table.gpus_per_worker, dtype=np.int64)
    ref = np.asarray(table.traced_workers, dtype=np.int64)
    el = np.asarray(table.elastic, dtype=bool) & bool(elastic_policy)
    base = np.where(el, np.asarray(table.min_workers, dtype=np.int64), ref)
    top = np.where(el, np.maximum(np.asarray(table.max_workers, dtype=np.int64), ref), ref)
    alpha = np.asarray(table.alpha, dtype=np.float64)
    # feasibility as the engines decide it (engine.py fits_ever): whole workers per
    # server, on one GPU type unless types may mix
    slots: dict[str, list[tuple[int, int]]] = {}
    for p in spec.training_pools:
        slots.setdefault(p.gpu_type, []).append((p.n_servers, p.gpus_per_server))
    feasible = np.zeros(n, dtype=bool)
    for gv in np.unique(g).tolist():
        sel = g == gv
        caps = [sum(k * (size // gv) for k, size in v) for v in slots.values()]
        cap = sum(caps) if (len(slots) == 1 or cfg.mix_gpu_types) else max(caps, default=0)
        feasible[sel] = base[sel] <= cap
    types = list(dict.fromkeys([p.gpu_type for p in spec.pools]))
    rate = np.ones(n, dtype=np.float64)

    def parametric(rows: Any) -> None:  # rate[rows] of the parametric jobs
        f_max = max(model.factor(t) for t in types)
        a, m, r = alpha[rows], top[rows].astype(np.float64), ref[rows].astype(np.float64)
        t_m = m / (1.0 + a * (m - 1.0))
        t_r = r / (1.0 + a * (r - 1.0))
        rate[rows] = f_max * np.maximum(1.0, t_m) / t_r

    if families is None:  # every job parametric: by blocks of rows, few temporaries
        for b0 in range(0, n, _BLOCK):
            parametric(slice(b0, b0 + _BLOCK))
        return _latest_done(sub, dur, rate, feasible, horizon, end)
    fam = np.asarray(families, dtype=object)
    par = np.asarray([f is None for f in fam.tolist()], dtype=bool)
    if par.any():
        parametric(par)
    for f in sorted({x for x in fam.tolist() if x is not None}):
        sel = fam == f
        reps_top = int((top[sel] * g[sel]).max())
        best = np.zeros(reps_top, dtype=np.float64)
        for t in types:
            row = np.asarray(model.throughput_row(f, 0.0, t, 1, reps_top, 1), dtype=np.float64)
            best = np.maximum(best, np.maximum.accumulate(row))
        ref_row = np.asarray(
            model.throughput_row(f, 0.0, model.reference_gpu_type, 1, reps_top, 1),
            dtype=np.float64)
        den = ref_row[ref[sel] * g[sel] - 1]
        num = best[top[sel] * g[sel] - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            rate[sel] = np.where(den > 0, num / den, np.inf)
    return _latest_done(sub, dur, rate, feasible, horizon, end)


_BLOCK = 1 << 20  # rows at a time of shortest_end_s's temporaries


def _latest_done(sub: Any, dur: Any, rate: Any, feasible: Any, horizon: float,
                 end: float) -> tuple[float, int]:
    """The latest ``sub + dur / rate`` of the feasible jobs submitted by the horizon
    (by blocks of rows; the first job of the latest), against ``end``."""
    import numpy as np

    best, k = -np.inf, -1
    for b0 in range(0, len(sub), _BLOCK):
        b = slice(b0, b0 + _BLOCK)
        with np.errstate(divide="ignore"):
            done = np.where(feasible[b] & (sub[b] <= horizon), sub[b] + dur[b] / rate[b],
                            -np.inf)
        i = int(np.argmax(done))
        if np.isnan(done[i]):  # one argmax would pick it, and it is not above end
            return end, -1
        if done[i] > best:  # strictly: the first of equal maxima, as one argmax
            best, k = float(done[i]), b0 + i
    if k >= 0 and best > end:
        return min(best, horizon), k
    return end, -1


def check_run_size(
    table: Any, cfg: SimConfig, spec: ClusterSpec, model: SpeedModel,
    families: list[str | None] | None, elastic_policy: bool,
) -> None:
    """Refuse, before any replay work, a run whose time series is sure to exceed
    ``MAX_TIMESERIES_POINTS`` rows (:func:`shortest_end_s` bounds its length).

    Raises
    ------
    InvalidInputError
        Naming ``timeseries_step_s`` (the step that would do) and ``horizon_s``,
        and the job whose work sets the bound.
    """
    from aryl.sim.config import MAX_TIMESERIES_POINTS

    n = int(table.n_jobs)
    t0 = cfg.start_time_s if cfg.start_time_s is not None else (
        float(table.submit_time_s[0]) if n else 0.0)
    end, k = shortest_end_s(table, cfg, spec, model, families, elastic_policy)
    span = end - float(t0)
    step = cfg.timeseries_step_s
    if span / step + 1 > MAX_TIMESERIES_POINTS:
        why = (f"job {str(table.job_id[k])!r} cannot finish before t = {end:.6g} s"
               if k >= 0 else f"the last arrival is at t = {end:.6g} s")
        raise InvalidInputError(
            f"timeseries_step_s: {step:g} s over a run of {span:.6g} s or more ({why}) "
            f"gives more than {MAX_TIMESERIES_POINTS:,} time-series rows; use a step of at "
            f"least {span / (MAX_TIMESERIES_POINTS - 1):.3g} s, or a horizon_s"
        )
