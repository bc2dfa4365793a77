"""One run of a sweep, as a worker executes it (process pool, Ray task or in-process).

The worker returns Parquet bytes (one row of measures, the per-job table, the
time series); only the driver writes files, so a worker that dies leaves
nothing behind.
"""

from __future__ import annotations

import dataclasses
import math
import time
import typing
from typing import Any

import numpy as np
import pandas as pd

from aryl.errors import ArylError
from aryl.sweep.plan import Run, code_digest

__all__ = [
    "TIMING_COLUMNS",
    "RunOutput",
    "execute_run",
    "measures_of",
    "param_columns",
]

#: Wall-clock columns of a row: they differ between two runs of the same key.
TIMING_COLUMNS = ("replay_s", "run_s", "scheduler_time_s", "scheduler_ms_per_decision")

#: Summary entries that are not measures.
_NOT_MEASURES = {"config", "trace", "policy", "seed", "cluster"}


@dataclasses.dataclass(frozen=True)
class RunOutput:
    """What a worker sends back for one run.

    Attributes
    ----------
    key : str
    row : bytes
        Parquet file of one row: ``key``, the parameters, the measures, timings.
    jobs : bytes
        Parquet file of the per-job table (:attr:`aryl.sim.SimResult.jobs`).
    timeseries : bytes
        Parquet file of the time series (:attr:`aryl.sim.SimResult.timeseries`).
    replay_s : float
        Wall time of :func:`aryl.sim.simulate`.
    run_s : float
        Wall time of the whole run in the worker (replay, trace preparation,
        encoding).
    """

    key: str
    row: bytes
    jobs: bytes
    timeseries: bytes
    replay_s: float
    run_s: float


def measures_of(summary: dict[str, Any], config: Any) -> dict[str, Any]:
    """Flat measures of a replay summary.

    Every numeric scalar of :attr:`aryl.sim.SimResult.summary` (a new summary
    entry becomes a measure by itself); a statistics dict ``{"mean": ...}``
    under ``name`` becomes ``mean_name``, ``p95_name`` ...; ``None`` becomes
    NaN.  Each pool of ``summary["pools"]`` gives ``pool_<name>_<field>`` for its
    numeric fields (``pool_v100_usage``, ``pool_t4_goodput``,
    ``pool_t4_gpu_s_available``, ``pool_a100_jobs`` = the jobs whose main pool
    it is ...) and ``pool_<name>_<stat>_jct_s`` for those jobs' JCT; the
    cluster's ``training_gpus`` and ``inference_gpus``.  Two derived measures:
    ``combined_usage`` (training GPU-seconds allocated plus inference
    GPU-seconds serving, over both clusters' GPU-seconds; the GPU counts are
    the cluster's, ``summary["cluster"]``, and a serving server counts with
    the inference servers' mean GPUs) and ``preemptions_per_1000_jobs``.

    Parameters
    ----------
    summary : dict
    config : SimConfig

    Returns
    -------
    dict of str to int or float
    """
    out: dict[str, Any] = {}
    for k, v in summary.items():
        if k in _NOT_MEASURES:
            continue
        if isinstance(v, dict):
            for stat, x in v.items():
                if x is None or (isinstance(x, int | float) and not isinstance(x, bool)):
                    out[f"{stat}_{k}"] = math.nan if x is None else x
        elif v is None:
            out[k] = math.nan
        elif isinstance(v, bool):
            out[k] = int(v)
        elif isinstance(v, int | float | np.integer | np.floating):
            out[k] = v.item() if isinstance(v, np.generic) else v
    for pool in summary.get("pools") or []:  # per pool (the default shape has two)
        name = str(pool["pool"])
        for field, x in pool.items():
            col = "jobs" if field == "n_jobs_main" else field
            if isinstance(x, dict):
                for stat, y in x.items():
                    if y is None or (isinstance(y, int | float) and not isinstance(y, bool)):
                        out[f"pool_{name}_{stat}_{col}"] = math.nan if y is None else y
            elif x is None and field not in ("pool", "role", "gpu_type"):
                out[f"pool_{name}_{col}"] = math.nan
            elif isinstance(x, int | float) and not isinstance(x, bool):
                out[f"pool_{name}_{col}"] = x
    span = float(summary["makespan_s"])
    cl = summary.get("cluster")
    if cl is not None:  # the servers the replay really had (a cluster spec's pools)
        train_gpus, inf_gpus = int(cl["training_gpus"]), int(cl["inference_gpus"])
        out["training_gpus"], out["inference_gpus"] = train_gpus, inf_gpus
    else:
        gps = config.gpus_per_server
        train_gpus = config.n_training_servers * gps
        inf_gpus = config.n_inference_servers * gps
    total_gpu_s = span * (train_gpus + inf_gpus)
    # inference_utilisation is serving server-seconds / (span x inference servers)
    serving_gpu_s = (summary["inference_utilisation"] or 0.0) * span * inf_gpus
    out["combined_usage"] = (
        (float(summary["gpu_s_allocated"]) + serving_gpu_s) / total_gpu_s
        if total_gpu_s > 0
        else math.nan
    )
    out["preemptions_per_1000_jobs"] = 1000.0 * summary["n_preemptions"] / max(
        1, int(summary["n_jobs"])
    )
    return out


@typing.no_type_check
def param_columns() -> dict[str, Any]:
    """Arrow types of the parameter columns of a row (``key`` and configuration included)."""
    import pyarrow as pa

    from aryl.sim.config import SimConfig

    cols = {
        "key": pa.string(),
        "trace": pa.string(),
        "trace_source": pa.string(),
        "trace_window": pa.string(),
        "policy": pa.string(),
        "policy_options": pa.string(),
        "variant": pa.string(),
        "elastic_fraction": pa.float64(),
        "elastic_worker_gpus": pa.string(),
        "peak_utilisation": pa.float64(),
        "inference": pa.string(),
        "training_servers_x": pa.float64(),
        "inference_ratio": pa.float64(),
    }
    hints = typing.get_type_hints(SimConfig)
    simple = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
    for f in dataclasses.fields(SimConfig):
        tp = hints[f.name]
        args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
        cols[f.name] = simple.get(args[0]) if len(args) == 1 else None
    return cols


def _row_table(row: dict[str, Any]) -> Any:
    import pyarrow as pa

    known = param_columns()
    fields, arrays = [], []
    for name, v in row.items():
        tp = known.get(name)
        if tp is None:
            if isinstance(v, bool):
                tp = pa.bool_()
            elif isinstance(v, int):
                tp = pa.int64()
            elif isinstance(v, float) or v is None:
                tp = pa.float64()
            else:
                tp, v = pa.string(), str(v)
        fields.append(pa.field(name, tp))
        arrays.append(pa.array([v], type=tp))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def parquet_bytes(table: Any) -> bytes:
    """A pyarrow Table (or a DataFrame) as the bytes of a zstd Parquet file.

    Dictionary encoding only for the repetitive text columns (``status``,
    labels; not ids nor numbers, where it costs time and saves nothing) and no
    column statistics: half the encoding time of pyarrow's defaults on a
    12,699-job table, and a smaller file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    text = [f.name for f in table.schema
            if (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
            and f.name not in ("job_id", "key")]
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", use_dictionary=text or False,
                   write_statistics=False)
    return bytes(sink.getvalue().to_pybytes())


def execute_run(run: Run, trace: Any) -> RunOutput:
    """Replay one :class:`~aryl.sweep.plan.Run` on its loaded trace.

    Parameters
    ----------
    run : Run
    trace : aryl.traces.Trace
        The run's trace, as loaded by the driver (jobs at the traced size).

    Returns
    -------
    RunOutput

    Raises
    ------
    ArylError
        The worker's code differs from the driver's (a Ray node with another
        version of aryl).
    InvalidInputError
        Bad configuration (normally caught when the spec is read).

    Notes
    -----
    The trace gets its scaling columns from :func:`aryl.traces.synthesize_elastic`
    with the run's elastic fraction, worker rule and seed; the inference demand
    is the bundled profile, scaled to the cluster's inference servers (the
    cluster spec's when ``cluster`` is set), at the run's peak utilisation
    with the run's seed (``inference = "none"``: no demand).  With request-level
    inference (``inference_requests`` and the other ``ServingOptions`` keys) the
    demand is the autoscaler's instead, the replay keeps its event log, and the
    request measures join the row as ``<measure>_serving`` (``slo_attainment_serving``,
    ``latency_p99_s_serving``, ...).  Deterministic.
    """
    from aryl.sim import SimConfig, simulate
    from aryl.sim.adapters import default_inference
    from aryl.traces import synthesize_elastic

    t_start = time.perf_counter()
    if run.code != code_digest():
        raise ArylError(
            f"{run.label}: this worker runs other aryl code than the driver "
            "(install the same aryl version on every node)"
        )
    cfg = SimConfig(**dict(run.config))
    from aryl.sim.setup import resolve_cluster, worker_server_gpus

    jobs = synthesize_elastic(trace, elastic_fraction=run.elastic_fraction, seed=run.seed,
                              elastic_worker_gpus=run.elastic_worker_gpus,
                              gpus_per_server=worker_server_gpus(cfg))

    inference: Any = False
    if run.inference == "bundled":  # scaled to the cluster's (a spec's) inference servers
        inference = default_inference(resolve_cluster(cfg).n_inference_servers, run.seed,
                                      peak_utilisation=run.peak_utilisation)
    serving = None
    if run.serving:  # request-level inference: the autoscaler's demand replaces it
        from aryl.sim.serving import (
            ServingOptions,
            demand_from_requests,
            inference_server_gpus,
            load_serving_requests,
        )

        serving = ServingOptions(**dict(run.serving))
        cfg = dataclasses.replace(cfg, record_events=True)  # the loan timeline
        reqs = load_serving_requests(serving, seed=run.seed)
        gpus = inference_server_gpus(resolve_cluster(cfg))
        first = float(jobs.jobs["submit_time_s"].min()) if len(jobs.jobs) else 0.0
        start = cfg.start_time_s if cfg.start_time_s is not None else first
        inference = demand_from_requests(reqs, serving, n_servers=len(gpus),
                                         gpus_per_server=min(gpus.values(), default=1),
                                         start_s=start)
    t0 = time.perf_counter()
    res = simulate(
        jobs,
        policy=run.policy,
        config=cfg,
        inference=inference,
        policy_options=dict(run.policy_options) or None,
    )
    replay_s = time.perf_counter() - t0
    if serving is not None:
        from aryl.sim.serving import serve_result

        res.summary["serving"] = serve_result(res, reqs, serving, demand=inference).summary
    jobs_bytes = parquet_bytes(res.jobs)
    ts_bytes = parquet_bytes(res.timeseries)
    row: dict[str, Any] = {"key": run.key, **run.params(), "seed": run.seed}
    row.update(measures_of(res.summary, cfg))
    # wall-clock measures live apart from the summary (SimResult.timing); n_decisions is
    # deterministic and stays a measure, the times are TIMING_COLUMNS
    for k, v in getattr(res, "timing", {}).items():
        if isinstance(v, int | float) and not isinstance(v, bool):
            row[k] = v
    row["replay_s"] = replay_s
    run_s = time.perf_counter() - t_start
    row["run_s"] = run_s
    return RunOutput(run.key, parquet_bytes(_row_table(row)), jobs_bytes, ts_bytes,
                     replay_s, run_s)
