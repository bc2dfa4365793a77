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

from aryl.sim.jobs import STR_DTYPE

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
    if x.size == 0:
        return {"mean": None, "p50": None, "p95": None, "p99": None, "max": None}
    p = np.percentile(x, [50, 95, 99])
    return {
        "mean": float(x.mean()),
        "p50": float(p[0]),
        "p95": float(p[1]),
        "p99": float(p[2]),
        "max": float(x.max()),
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


def _pool_measures(
    eng: Any,
    span: float,
    status_code: np.ndarray,
    jct: np.ndarray,
) -> dict[str, Any]:
    """Usage, goodput and JCT per pool; the main pool of each job.

    Useful work of a job: its net progress in reference-GPU seconds, ``(traced
    duration - remaining) x traced GPUs`` (work rolled back by a preemption does
    not count).  Goodput = useful work / GPU-seconds available (training servers
    all the time, loaned servers while on loan); per pool, a job's useful work
    is split in proportion to its GPU-seconds there.  A job's main pool is the
    one where it got the most GPU-seconds (ties: the first pool); its JCT counts
    there.  O(jobs x pools).
    """
    st = eng.state
    t = eng.table
    n_p = len(st.pool_names)
    # in place, one array (a large replay's peak memory sits here): the values of
    # max((duration - remaining) x gpus, 0), 0 for a job not arrived
    done_work = t.duration_s - np.asarray(st.remaining_s, dtype=np.float64)
    done_work *= t.gpus  # int64 cast to float64, as gpus.astype(float64) would be
    np.maximum(done_work, 0.0, out=done_work)
    done_work[status_code == 2] = 0.0  # not arrived
    useful_pool, main_idx = eng.pool_split(done_work)
    main = _str_labels([*st.pool_names, ""], main_idx)  # -1 (no GPU-seconds): ""
    useful = float(done_work.sum())
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
        sel = done & (main_idx == p)
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
            "n_jobs_main": int((main_idx == p).sum()),
            "jct_s": _stats(jct[sel]),
        })
    return {
        "pools": out,
        "useful_gpu_s": useful,
        "goodput": useful / avail if avail > 0 else None,
        "_main_pool": main,
    }


def _str_labels(names: Any, codes: np.ndarray) -> Any:
    """``names[codes]`` (a code of -1: the last name) as a ``str`` column (one
    conversion of the distinct names, then a take: O(len(names) + len(codes)))."""
    return pd.Series(np.asarray(names, dtype=object)).array.take(
        np.asarray(codes, dtype=np.intp))


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


def _id_labels(ids: Any, codes: np.ndarray, *, own: bool = False) -> Any:
    """``ids[codes]`` as a categorical column, ``""`` where a code is -1: its
    categories are the job ids in table order and a trailing ``""`` (``str``
    dtype, the ids' own Arrow buffers plus one entry), its codes the narrowest
    integer that holds them (pandas' rule: int32 from 32,767 jobs on): at most
    4 bytes a row below 2**31 - 1 jobs, no string per row.  The job ids
    are unique and never blank (:func:`aryl.sim.jobs.build_job_table`
    validates them), so the categories are taken as they are, without
    pandas' uniqueness hash.  ``own``: ``codes`` is the caller's to give away
    (the event log's job column): an int32 one becomes the codes in place, no
    second codes array.  O(len(ids) + len(codes)).
    """
    import pyarrow as pa

    arr = pa.array(ids)  # the Arrow data itself (an Array or a ChunkedArray)
    parts = list(arr.chunks) if isinstance(arr, pa.ChunkedArray) else [arr]
    values = pa.chunked_array([*parts, pa.array([""], type=arr.type)], type=arr.type)
    cats = pd.Index(STR_DTYPE.__from_arrow__(values), dtype=STR_DTYPE)  # type: ignore[attr-defined]
    width = np.int32 if len(ids) < 2**31 - 1 else np.int64
    c = np.asarray(codes)
    if own and c.dtype == width and c.flags.writeable:
        # the caller's own array (the event log's job column, handed over once):
        # -1 becomes the "" category in place, no second codes array
        c[c < 0] = len(ids)
    else:
        c = np.where(c < 0, len(ids), c).astype(width, copy=False)
    fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)
    dtype = fast(cats, False) if fast is not None else pd.CategoricalDtype(cats, ordered=False)
    return pd.Categorical.from_codes(c, dtype=dtype)


def build_result(eng: Any, meta: dict[str, Any]) -> SimResult:
    """Assemble a :class:`SimResult` from a finished engine run. O(n_jobs + n_events)."""
    from aryl.scheduling.state import DONE, INFEASIBLE, PENDING, QUEUED

    t = eng.table
    st = eng.state
    state = np.asarray(st.status, dtype=np.int8)
    # 0 finished, 1 infeasible, 2 not arrived, 3 unfinished (the states are exclusive)
    status_code = np.full(state.shape, 3, dtype=np.int8)
    status_code[state == DONE] = 0
    status_code[state == INFEASIBLE] = 1
    status_code[state == PENDING] = 2
    status_names = ["finished", "infeasible", "not_arrived", "unfinished"]
    # job ids as the table holds them (one Arrow string column, no Python object per job)
    ids = pd.array(t.job_id, dtype=STR_DTYPE)
    first = np.asarray(eng.first_start, dtype=np.float64)
    fin = np.asarray(eng.finish_t, dtype=np.float64)
    sub = t.submit_time_s
    wait = np.array(st.waited_s, dtype=np.float64)  # a copy: the result's own column
    # jobs still queued at the horizon (never started, or re-queued after a
    # preemption): count their current wait; jobs not arrived have none (NaN)
    queued_now = np.flatnonzero(state == QUEUED)
    wait[queued_now] += eng.now - np.asarray(st.queued_since_s, dtype=np.float64)[queued_now]
    del queued_now
    wait[state == PENDING] = np.nan
    qd = first - sub
    jct = fin - sub
    jobs = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time_s": sub,
            "duration_s": t.duration_s,
            "gpus": t.gpus,
            "gpus_per_worker": t.gpus_per_worker,
            "min_workers": t.min_workers,
            "max_workers": t.max_workers,
            "elastic": t.elastic,
            "alpha": t.alpha,
            "status": _str_labels(status_names, status_code),
            "first_start_s": first,
            "finish_s": fin,
            "queuing_delay_s": qd,
            "wait_s": wait,
            "jct_s": jct,
            "n_preemptions": np.asarray(eng.n_preempt, dtype=np.int64),
            "n_scale_in": np.asarray(eng.n_scale_in, dtype=np.int64),
            "n_scale_out": np.asarray(eng.n_scale_out, dtype=np.int64),
            "n_moves": np.asarray(eng.n_move, dtype=np.int64),
            "gpu_s": np.asarray(st.attained_gpu_s, dtype=np.float64),
        },
        copy=False,  # the columns are this result's own arrays
    )
    done = state == DONE
    span = eng.now - eng.t0
    cfg = eng.config
    n_inf = eng.n_inf
    n_train = eng.n_train
    pools = _pool_measures(eng, span, status_code, jct)
    jobs["main_pool"] = pools.pop("_main_pool")
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
        "n_preemptions": int(np.sum(eng.n_preempt, dtype=np.int64)),
        "n_reclaim_preemptions": eng.n_reclaim_preempt,
        "n_scale_in": int(np.sum(eng.n_scale_in, dtype=np.int64)),
        "n_scale_out": int(np.sum(eng.n_scale_out, dtype=np.int64)),
        "n_moves": int(np.sum(eng.n_move, dtype=np.int64)),
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
    rows = np.asarray(eng.ts, dtype=np.float64).reshape(-1, 6)
    step = cfg.timeseries_step_s
    from aryl.sim.config import check_timeseries_size

    check_timeseries_size(span, step)
    if span > 0 and math.isfinite(span):
        grid = eng.t0 + step * np.arange(math.floor(span / step) + 1, dtype=np.float64)
    else:
        grid = np.array([eng.t0])
    idx = np.searchsorted(rows[:, 0], grid, side="right") - 1
    idx = np.clip(idx, 0, rows.shape[0] - 1)
    ts = pd.DataFrame(
        {
            "time_s": grid,
            "queue_length": rows[idx, 1].astype(np.int64),
            "busy_gpus": rows[idx, 2].astype(np.int64),
            "loaned_servers": rows[idx, 3].astype(np.int64),
            "running_jobs": rows[idx, 4].astype(np.int64),
            "inference_servers_needed": rows[idx, 5].astype(np.int64),
        }
    )
    if eng.events is not None and eng.events:
        ev_t, ev_j, ev_code, ev_w = eng.event_columns()
        ev_ids = _id_labels(ids, ev_j, own=True)  # -1: a server event, job id ""
        del ev_j
        ev_names = _labels(EVENT_NAMES, ev_code)
        del ev_code
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
    return SimResult(jobs=jobs, summary=summary, timeseries=ts, events=events, timing=timing)
