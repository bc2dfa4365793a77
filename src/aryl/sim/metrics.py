"""Measures of a replay (docs/model.md): per-job table, summary, time series.

* JCT = finish - arrival; queuing delay = first start - arrival; ``wait_s`` is
  the total time spent queued, including after preemptions.
* Cluster usage = GPU-seconds allocated to training / GPU-seconds available to
  training (training servers for the whole run plus loaned servers while on
  loan), integrated from the clock start (first arrival by default) to the end
  of the run, so idle gaps count in the denominator.
* ``training_usage_no_loans`` = GPU-seconds allocated on training servers /
  GPU-seconds of the training servers; ``loan_usage`` = GPU-seconds allocated
  on loaned servers / GPU-seconds of the servers while on loan (None if nothing
  was lent).  Both, like every share here, lie in [0, 1].
* Inference utilisation = time-average of serving servers / inference servers
  (serving = the demand, at most the servers not on loan: during a reclaim
  grace period the missing servers do not serve); ``with_loans`` counts loaned
  servers as used.
* Percentiles use numpy's default (linear) interpolation over finished jobs.
* ``share_jobs_waited``: share of finished jobs with a queuing delay > 0 (most
  jobs usually start at arrival, so p50/p95 of the delay can be 0 while the
  mean is not); ``share_jobs_waited_total``: the same for ``wait_s``.
* Every job is in exactly one state (``status``): ``finished``, ``unfinished``
  (arrived, queued or running at the horizon), ``not_arrived`` (submitted after
  the end of the run: no start, wait, JCT or GPU-seconds, all NaN or 0) or
  ``infeasible`` (rejected at arrival: never queued, wait 0).  A job still
  queued at the end counts its current wait in ``wait_s`` (earlier waits +
  end - queued_since).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from aryl.sim.jobs import STR_DTYPE, release_free_memory

__all__ = ["EVENT_NAMES", "SimResult", "build_result"]

#: Labels of the event log's codes (both engines; sim_engine.hpp LogCode).
EVENT_NAMES = ("arrive", "infeasible", "start", "scale_out", "scale_in", "move", "preempt",
               "finish", "loan", "loan_return", "reclaim")


@dataclass
class SimResult:
    """Output of :func:`aryl.sim.simulate`.

    Attributes
    ----------
    jobs : DataFrame
        One row per job in simulation order (arrival, then input row):
        ``job_id, submit_time_s, duration_s`` (traced, at the traced size),
        ``gpus, gpus_per_worker, min_workers, max_workers, elastic, alpha``
        (throughput parameter), ``status`` (finished / unfinished / not_arrived
        / infeasible; module docstring),
        ``first_start_s, finish_s, queuing_delay_s, wait_s, jct_s,
        n_preemptions, n_scale_in, n_scale_out, n_moves, gpu_s``.
    summary : dict
        JSON-serialisable: measures, config, policy, seed, trace meta.
    timeseries : DataFrame
        ``time_s, queue_length, busy_gpus`` (training jobs, on training and
        loaned servers), ``loaned_servers, running_jobs,
        inference_servers_needed`` (inference demand) at a fixed step (the
        value holding at each step time).
    events : DataFrame
        Event log ``time_s, job_id, event, workers`` (empty if not recorded);
        loan/loan_return/reclaim rows have ``job_id`` "" and the server id in ``workers``.
        dtypes: float64, ``category`` (``job_id``: categories the jobs' ids
        in simulation order, as ``jobs``, then ``""``; codes the narrowest
        integer that holds them, int32 from 32,767 jobs on), ``category``
        (``event``: categories :data:`EVENT_NAMES` in code order, int8 codes:
        one byte a row), int64.  Both categoricals compare with text and write
        as text to CSV, as dictionary columns to Parquet; note that
        ``value_counts`` and a groupby with ``observed=False`` list every
        category, zero counts included.
    timing : dict
        Wall-clock measures, which differ from run to run (kept out of
        ``summary`` so that the same replay writes the same summary):
        ``scheduler_time_s`` (s spent in policy decisions),
        ``scheduler_ms_per_decision`` and ``n_decisions``.
    """

    jobs: pd.DataFrame
    summary: dict[str, Any]
    timeseries: pd.DataFrame
    events: pd.DataFrame = field(default_factory=pd.DataFrame)
    timing: dict[str, Any] = field(default_factory=dict)

    @property
    def unfinished(self) -> pd.DataFrame:
        """Jobs not finished at the horizon (and not infeasible)."""
        return self.jobs[self.jobs["status"] == "unfinished"]

    @property
    def not_arrived(self) -> pd.DataFrame:
        """Jobs submitted after the end of the run (the horizon)."""
        return self.jobs[self.jobs["status"] == "not_arrived"]

    @property
    def infeasible(self) -> pd.DataFrame:
        """Jobs that can never fit the training cluster."""
        return self.jobs[self.jobs["status"] == "infeasible"]


def _stats(x: np.ndarray) -> dict[str, float | None]:
    """Mean, percentiles and max of ``x``, a scratch array the caller hands over
    (the percentiles partition it in place: no copy of it)."""
    if x.size == 0:
        return {"mean": None, "p50": None, "p95": None, "p99": None, "max": None}
    mean, top = float(x.mean()), float(x.max())  # (before the partition reorders x)
    p = np.percentile(x, [50, 95, 99], overwrite_input=True)
    return {
        "mean": mean,
        "p50": float(p[0]),
        "p95": float(p[1]),
        "p99": float(p[2]),
        "max": top,
    }


def _share_positive(x: np.ndarray) -> float | None:
    """Share of the entries that are > 0 (None when empty)."""
    return float(np.count_nonzero(x > 0) / x.size) if x.size else None


def _cluster_record(eng: Any) -> dict[str, Any]:
    """The cluster spec and speed model of the run (for the summary)."""
    st = eng.state
    d: dict[str, Any] = dict(eng.cluster.to_dict())
    d["n_training_servers"] = eng.n_train
    d["n_inference_servers"] = eng.n_inf
    d["training_gpus"] = st.training_gpus
    d["inference_gpus"] = sum(st.server_gpus[s] for s in st.inference_servers())
    d["speed_model"] = None if st.speeds is None else st.speeds.to_dict()
    d["mix_gpu_types"] = st.config.mix_gpu_types
    return d


def _pool_split(eng: Any, state: np.ndarray) -> tuple[list[float], np.ndarray, float]:
    """Useful work per pool, the main pool index of each job (-1: none) and the
    total useful work (module docstring of :func:`_pool_measures`).

    Useful work of a job: its net progress in reference-GPU seconds, ``(traced
    duration - remaining) x traced GPUs`` (work rolled back by a preemption does
    not count), 0 for a job not arrived.  An engine that hands its columns over
    lets its remaining work go after this."""
    from aryl.scheduling.state import PENDING

    st = eng.state
    t = eng.table
    # in place, one array (the same arithmetic as (D - remaining) * float(gpus), then
    # max(., 0) and 0 for the jobs not arrived): no temporary of n_jobs floats
    done_work = np.subtract(t.duration_s, np.asarray(st.remaining_s, dtype=np.float64),
                            dtype=np.float64)
    np.multiply(done_work, t.gpus, out=done_work)
    np.maximum(done_work, 0.0, out=done_work)
    done_work[state == PENDING] = 0.0  # not arrived
    if getattr(eng, "hands_over", False):
        eng.release_job_state("remaining_s")
    useful_pool, main_idx = eng.pool_split(done_work)
    return useful_pool, main_idx, float(done_work.sum())


def _pool_measures(
    eng: Any,
    span: float,
    status_code: np.ndarray,
    jct: np.ndarray,
    split: tuple[list[float], np.ndarray, float],
) -> dict[str, Any]:
    """Usage, goodput and JCT per pool (``split``: :func:`_pool_split`).

    Goodput = useful work / GPU-seconds available (training servers all the
    time, loaned servers while on loan); per pool, a job's useful work is split
    in proportion to its GPU-seconds there.  A job's main pool is the one where
    it got the most GPU-seconds (ties: the first pool); its JCT counts there.
    O(jobs x pools).
    """
    st = eng.state
    n_p = len(st.pool_names)
    useful_pool, main_idx, useful = split
    # training pools are available all the time; inference pools while on loan
    avail_pool = [0.0] * n_p
    n_train = len(st.training_servers)
    for s in range(st.n_servers):
        if s < n_train:
            avail_pool[st.server_pool_idx[s]] += st.server_gpus[s] * span
    for p in range(n_p):
        avail_pool[p] += eng.loan_pool_int[p]
    avail = sum(avail_pool)
    roles: dict[int, str] = {}
    types: dict[int, str] = {}
    counts: dict[int, int] = {}
    for s in range(st.n_servers):
        p = st.server_pool_idx[s]
        roles[p] = "training" if s < n_train else "inference"
        types[p] = st.server_gpu_type[s]
        counts[p] = counts.get(p, 0) + 1
    done = status_code == 0  # finished
    out = []
    for p, name in enumerate(st.pool_names):
        in_p = main_idx == p
        n_main = int(np.count_nonzero(in_p))
        np.logical_and(in_p, done, out=in_p)
        a = avail_pool[p]
        out.append({
            "pool": name,
            "role": roles.get(p, ""),
            "gpu_type": types.get(p, ""),
            "n_servers": counts.get(p, 0),
            "gpu_s_available": a,
            "gpu_s_allocated": eng.busy_pool_int[p],
            "usage": eng.busy_pool_int[p] / a if a > 0 else None,
            "useful_gpu_s": useful_pool[p],
            "goodput": useful_pool[p] / a if a > 0 else None,
            "n_jobs_main": n_main,
            "jct_s": _stats(jct[in_p]),
        })
        del in_p
    return {
        "pools": out,
        "useful_gpu_s": useful,
        "goodput": useful / avail if avail > 0 else None,
    }


def _str_labels(names: Any, codes: np.ndarray) -> Any:
    """``names[codes]`` (a code of -1: the last name) as a ``str`` column: one
    Arrow take of the distinct names by the codes as they are (their own integer
    width, no index array of n_jobs intp).  O(len(names) + len(codes))."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pa.array([str(x) for x in names], type=pa.large_string())
    c = np.asarray(codes)
    if c.size and int(c.min()) < 0:
        c = np.where(c < 0, len(values) + c, c).astype(c.dtype, copy=False)
    return STR_DTYPE.__from_arrow__(  # type: ignore[attr-defined]
        pa.chunked_array([pc.take(values, pa.array(c))]))


def _labels(names: Any, codes: np.ndarray) -> Any:
    """``names[codes]`` (a code of -1: the last name) as a categorical column whose
    categories are ``names`` in that order (``str`` dtype): one byte a row for up
    to 127 names (the codes' own integer width), not a string per row.  O(len(codes))."""
    cats = pd.Index(list(names), dtype=STR_DTYPE)
    c = np.asarray(codes)
    if c.size and int(c.min()) < 0:
        c = np.where(c < 0, len(cats) + c, c)
    small = np.int8 if len(cats) <= 127 else np.int32
    return pd.Categorical.from_codes(c.astype(small, copy=False),
                                     dtype=pd.CategoricalDtype(cats, ordered=False))


def _id_labels(ids: Any, codes: np.ndarray, *, overwrite: bool = False) -> Any:
    """``ids[codes]`` as a categorical column, ``""`` where a code is -1: its
    categories are the job ids in table order and a trailing ``""`` (``str``
    dtype, the ids' own Arrow buffers plus one entry), its codes the narrowest
    integer that holds them (pandas' rule: int32 from 32,767 jobs on): at most
    4 bytes a row below 2**31 - 1 jobs, no string per row.  The job ids
    are unique and never blank (:func:`aryl.sim.jobs.build_job_table`
    validates them), so the categories are taken as they are, without
    pandas' uniqueness hash.  O(len(ids) + len(codes)).  ``overwrite=True``: the
    caller hands ``codes`` over, and when they already have the codes' width their
    -1 become ``len(ids)`` in place (no second array of codes).
    """
    import pyarrow as pa

    arr = pa.array(ids)  # the Arrow data itself (an Array or a ChunkedArray)
    parts = list(arr.chunks) if isinstance(arr, pa.ChunkedArray) else [arr]
    values = pa.chunked_array([*parts, pa.array([""], type=arr.type)], type=arr.type)
    cats = pd.Index(STR_DTYPE.__from_arrow__(values), dtype=STR_DTYPE)  # type: ignore[attr-defined]
    width = np.int32 if len(ids) < 2**31 - 1 else np.int64
    c = np.asarray(codes)
    if overwrite and c.dtype == width and c.flags.writeable:
        c[c < 0] = len(ids)
    else:
        c = np.where(c < 0, len(ids), c).astype(width, copy=False)
    fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)
    dtype = fast(cats, False) if fast is not None else pd.CategoricalDtype(cats, ordered=False)
    return pd.Categorical.from_codes(c, dtype=dtype)


def _take(obj: Any, name: str, dtype: Any, own: bool) -> np.ndarray:
    """``obj.name`` as an array of ``dtype``; with ``own`` (an engine that hands its
    result columns over) ``obj`` lets it go, so that a narrower source (the
    native engine's int32 counts and sizes) is freed as soon as it is widened:
    one column at a time, never all of them twice."""
    v = getattr(obj, name)
    if own:
        setattr(obj, name, None)
    return np.asarray(v, dtype=dtype)


def build_result(eng: Any, meta: dict[str, Any]) -> SimResult:
    """Assemble a :class:`SimResult` from a finished engine run. O(n_jobs + n_events).

    Memory: an engine that hands its columns over (``eng.hands_over``, the
    native one) is emptied as the result grows: the per-job state that no result
    holds goes first (the pool split, the remaining work, the waits), then each
    narrow column is widened and freed in turn, the time series and the event
    log last, so the peak stays near the size of the result itself."""
    from aryl.scheduling.state import DONE, INFEASIBLE, PENDING, QUEUED

    own = bool(getattr(eng, "hands_over", False))
    t = eng.table
    # a large replay gives the pages it freed back before each stage that grows the
    # result (the allocators would keep them, and the new columns come on top)
    large = t.n_jobs >= 200_000
    st = eng.state
    state = np.asarray(st.status, dtype=np.int8)
    # 0 finished, 1 infeasible, 2 not arrived, 3 unfinished (queued or running)
    status_code = np.full(state.shape, 3, dtype=np.int8)
    status_code[state == DONE] = 0
    status_code[state == INFEASIBLE] = 1
    status_code[state == PENDING] = 2
    status_names = ["finished", "infeasible", "not_arrived", "unfinished"]
    # first the split by pool: the engine's pool accounting and the remaining
    # work go before any result column is built
    split = _pool_split(eng, state)
    # job ids as the table holds them (one Arrow string column, no Python object per job)
    ids = pd.array(t.job_id, dtype=STR_DTYPE)
    first = np.asarray(eng.first_start, dtype=np.float64)
    fin = np.asarray(eng.finish_t, dtype=np.float64)
    sub = t.submit_time_s
    # jobs still queued at the horizon (never started, or re-queued after a
    # preemption) count their current wait (earlier waits + (end - queued since),
    # the same arithmetic element by element); jobs not arrived have none (NaN).
    # The engine's own array when it hands it over, else the result's own copy.
    wait = _take(st, "waited_s", np.float64, own)
    if not own:
        wait = wait.copy()
    queued_now = np.flatnonzero(state == QUEUED)
    wait[queued_now] += eng.now - np.asarray(st.queued_since_s, dtype=np.float64)[queued_now]
    del queued_now
    if own:
        eng.release_job_state("queued_since_s")
    wait[state == PENDING] = np.nan
    if large:
        release_free_memory()  # the pool accounting, remaining work, queued-since times
    qd = first - sub
    jct = fin - sub
    pool_names = [*st.pool_names, ""]  # a main pool of -1 (no GPU-seconds): ""
    jobs = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time_s": sub,
            "duration_s": t.duration_s,
            "gpus": _take(t, "gpus", np.int64, own),
            "gpus_per_worker": _take(t, "gpus_per_worker", np.int64, own),
            "min_workers": _take(t, "min_workers", np.int64, own),
            "max_workers": _take(t, "max_workers", np.int64, own),
            "elastic": t.elastic,
            "alpha": t.alpha,
            "status": _str_labels(status_names, status_code),
            "first_start_s": first,
            "finish_s": fin,
            "queuing_delay_s": qd,
            "wait_s": wait,
            "jct_s": jct,
            "n_preemptions": _take(eng, "n_preempt", np.int64, own),
            "n_scale_in": _take(eng, "n_scale_in", np.int64, own),
            "n_scale_out": _take(eng, "n_scale_out", np.int64, own),
            "n_moves": _take(eng, "n_move", np.int64, own),
            "gpu_s": np.asarray(st.attained_gpu_s, dtype=np.float64),
            "main_pool": _str_labels(pool_names, split[1]),
        },
        copy=False,  # the columns are this result's own arrays
    )
    done = state == DONE
    span = eng.now - eng.t0
    cfg = eng.config
    n_inf = eng.n_inf
    n_train = eng.n_train
    if large:
        release_free_memory()  # (the int32 columns just widened)
    pools = _pool_measures(eng, span, status_code, jct, split)
    del split
    # the engine's per-job state read above (not in the result) goes now, before the
    # time series and the event frame are built (the native engine's arrays; the
    # Python engine keeps its lists)
    if own:
        eng.release_job_state()
    if large:
        release_free_memory()  # the scratch copies of the stats, the state
    train_avail = (
        span * n_train * eng.train_S if eng.train_S is not None else span * st.training_gpus
    )
    loan_avail = (
        eng.loan_int * eng.inf_S if eng.inf_S is not None else eng.loan_gpu_int
    )
    summary: dict[str, Any] = {
        "policy": eng.policy_name,
        "seed": cfg.seed,
        "n_jobs": int(t.n_jobs),
        "n_finished": int(done.sum()),
        "n_unfinished": int((status_code == 3).sum()),
        "n_infeasible": int((status_code == 1).sum()),
        "n_not_arrived": int((status_code == 2).sum()),
        "start_s": eng.t0,
        "end_s": eng.now,
        "makespan_s": span,
        "queuing_delay_s": _stats(qd[done]),
        "jct_s": _stats(jct[done]),
        "wait_s": _stats(wait[done]),
        "share_jobs_waited": _share_positive(qd[done]),
        "share_jobs_waited_total": _share_positive(wait[done]),
        "cluster_usage": (eng.busy_int / eng.cap_int) if eng.cap_int > 0 else None,
        "training_usage_no_loans": (
            (eng.busy_int - eng.busy_loaned_int) / train_avail
            if span > 0 and n_train > 0
            else None
        ),
        "loan_usage": (
            eng.busy_loaned_int / loan_avail
            if eng.loan_int > 0
            else None
        ),
        "goodput": pools["goodput"],
        "useful_gpu_s": pools["useful_gpu_s"],
        "gpu_s_allocated": eng.busy_int,
        "gpu_s_allocated_on_loans": eng.busy_loaned_int,
        "gpu_s_available": eng.cap_int,
        "inference_utilisation": (eng.serving_int / (span * n_inf)) if span > 0 and n_inf else None,
        "inference_utilisation_with_loans": (
            (eng.serving_int + eng.loan_int) / (span * n_inf) if span > 0 and n_inf else None
        ),
        "mean_loaned_servers": (eng.loan_int / span) if span > 0 else 0.0,
        "n_preemptions": int(jobs["n_preemptions"].to_numpy().sum()),
        "n_reclaim_preemptions": eng.n_reclaim_preempt,
        "n_scale_in": int(jobs["n_scale_in"].to_numpy().sum()),
        "n_scale_out": int(jobs["n_scale_out"].to_numpy().sum()),
        "n_moves": int(jobs["n_moves"].to_numpy().sum()),
        "n_loans": eng.n_loans,
        "n_reclaims": eng.n_reclaims,
        "n_loan_returns": eng.n_loan_returns,
        "n_decisions": eng.n_decisions,
        "config": cfg.to_dict(),
        "cluster": _cluster_record(eng),
        "pools": pools["pools"],
        "trace": meta,
    }
    # time series at a fixed step: the value holding at each step time
    if own:
        cols = eng.timeseries_columns()  # time, then the five counts (int64)
    else:
        rows = np.asarray(eng.ts, dtype=np.float64).reshape(-1, 6)
        cols = [rows[:, k] for k in range(6)]
        del rows
    step = cfg.timeseries_step_s
    from aryl.sim.config import check_timeseries_size

    check_timeseries_size(span, step)
    if span > 0 and math.isfinite(span):
        grid = eng.t0 + step * np.arange(math.floor(span / step) + 1, dtype=np.float64)
    else:
        grid = np.array([eng.t0])
    idx = np.searchsorted(cols[0], grid, side="right") - 1
    idx = np.clip(idx, 0, cols[0].shape[0] - 1)
    cols[0] = None
    ts_data: dict[str, Any] = {"time_s": grid}
    for k, name in enumerate(("queue_length", "busy_gpus", "loaned_servers", "running_jobs",
                              "inference_servers_needed"), start=1):
        # the value holding at each step time; each raw column goes once taken
        ts_data[name] = cols[k][idx].astype(np.int64, copy=False)
        cols[k] = None
    ts = pd.DataFrame(ts_data, copy=False)  # the columns are this result's own arrays
    del cols, idx, ts_data
    if eng.events is not None and eng.events:
        if large:
            release_free_memory()  # (the time series' raw columns)
        # last: the native engine widens the workers (int32 until now) here
        ev_t, ev_j, ev_code, ev_w = eng.event_columns()
        ev_ids = _id_labels(ids, ev_j, overwrite=True)  # -1: a server event, job id ""
        del ev_j
        ev_names = _labels(EVENT_NAMES, ev_code)
        del ev_code
        ev_w = ev_w.astype(np.int64, copy=False)
        events = pd.DataFrame(
            {"time_s": ev_t, "job_id": ev_ids, "event": ev_names, "workers": ev_w},
            copy=False,
        )
        del ev_t, ev_ids, ev_names, ev_w
    else:
        events = pd.DataFrame(
            {
                "time_s": np.array([], dtype=np.float64),
                "job_id": _id_labels(pd.array([], dtype=STR_DTYPE), np.array([], dtype=np.int32)),
                "event": _labels(EVENT_NAMES, np.array([], dtype=np.int8)),
                "workers": np.array([], dtype=np.int64),
            }
        )
    # wall-clock measures: not in the summary, which must be the same on every rerun
    timing: dict[str, Any] = {
        "scheduler_time_s": eng.sched_time_s,
        "scheduler_ms_per_decision": (
            1e3 * eng.sched_time_s / eng.n_decisions if eng.n_decisions else 0.0
        ),
        "n_decisions": eng.n_decisions,
    }
    if large:
        release_free_memory()  # what the caller does next (writing the frames) starts lower
    return SimResult(jobs=jobs, summary=summary, timeseries=ts, events=events, timing=timing)
