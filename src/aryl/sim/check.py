"""Invariant checker (on in tests, ``SimConfig(check=True)``, ``--check`` in the CLI).

After every scheduling pass: no server over-committed and its free GPUs equal
capacity minus placements; no placement on an inference server that is not on
loan; no loaned server left without a training worker when the policy
returns idle loans; the cluster state's derived indexes (free GPUs, jobs per
server, extras, busy counters, queue indexes) match an independent
recomputation (``ClusterState.check_indexes``); every running job at or above its base
and at or below its maximum, its worker count equal to its placement; the
busy-GPU counters (all, base workers, on loaned servers) equal to the sums of
placements; the jobs partition into not yet arrived, waiting (the policy's
queue), running and closed (finished or infeasible).  After a reclaim: the
loaned servers no longer exceed what the inference side allows (servers
returned by their deadline).

At the end (:meth:`Checker.at_end`, engine state): every job finished exactly
once, or is unfinished (only with a horizon), not arrived (submitted after the
end) or infeasible, in exactly one of these states; no time is negative; the
per-job GPU-seconds add up to the integral of busy GPUs.  On the result
(:func:`check_result`): every share and utilisation of the summary in [0, 1];
no negative time or count in the summary, the jobs table or the time series;
each job's columns consistent with its status; allocated GPU-seconds equal the
sum over jobs and at most the available ones; the counts of the summary equal
the sums over jobs.  Cost O(n_servers + n_running) per pass, O(n_jobs +
time-series rows) at the end.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from aryl.scheduling.state import (
    DONE,
    INFEASIBLE,
    LOANED,
    PENDING,
    QUEUED,
    RUNNING,
    TRAINING,
)

if TYPE_CHECKING:
    from aryl.sim.metrics import SimResult

__all__ = ["Checker", "InvariantError", "check_result"]


class InvariantError(AssertionError):
    """A simulator invariant does not hold (a bug, never bad input)."""


class Checker:
    """Checks an :class:`~aryl.sim.engine.Engine` in place (typed ``Any``: the engine
    imports this module, never the other way round)."""

    def __init__(self, eng: Any) -> None:
        self.eng = eng

    def after_pass(self) -> None:
        e = self.eng
        st = e.state
        used = [0] * st.n_servers
        busy = 0
        for j in st.running:
            if st.status[j] != RUNNING:
                raise InvariantError(f"job {j} in the running set but status {st.status[j]}")
            place = st.placement[j]
            if not place:
                raise InvariantError(f"running job {j} has no placement")
            w = sum(place.values())
            if w != st.workers[j]:
                raise InvariantError(f"job {j}: workers {st.workers[j]} != placement {w}")
            if not e.base_workers[j] <= w <= e.max_workers[j]:
                raise InvariantError(
                    f"job {j}: {w} workers outside [{e.base_workers[j]}, {e.max_workers[j]}]"
                )
            g = st.gpus_per_worker[j]
            for s, k in place.items():
                if k <= 0 or st.jobs_on[s].get(j) != k:
                    raise InvariantError(f"job {j}: placement on server {s} inconsistent")
                used[s] += k * g
            busy += w * g
        for j in st.queued:
            if st.status[j] != QUEUED or st.placement[j] is not None:
                raise InvariantError(f"job {j} in the queue but status {st.status[j]}")
        n_train = len(st.training_servers)
        for s in range(st.n_servers):
            status = st.server_status[s]
            cap = st.server_gpus[s] if status in (TRAINING, LOANED) else 0
            if st.free[s] < 0:
                raise InvariantError(f"server {s} over-committed (free {st.free[s]})")
            if used[s] + st.free[s] != cap:
                raise InvariantError(
                    f"server {s}: used {used[s]} + free {st.free[s]} != capacity {cap}"
                )
            if status not in (TRAINING, LOANED) and used[s]:
                raise InvariantError(f"inference server {s} not on loan but hosts training work")
        pol = e.policy
        if pol.loans and pol.return_idle_loans:
            for s in st.loaned_servers():
                if not st.jobs_on[s]:
                    raise InvariantError(f"loaned server {s} idle after a pass")
        loaned_busy = sum(used[n_train:])
        if loaned_busy != st.busy_loaned:
            raise InvariantError(
                f"busy-on-loans counter {st.busy_loaned} != placements {loaned_busy}"
            )
        # every arrived job is waiting, running or closed (finished / infeasible)
        n_closed = st.n_jobs - e.n_open
        if len(st.queued) + len(st.running) + n_closed != e.n_arrived:
            raise InvariantError(
                f"job states do not partition: {len(st.queued)} queued + {len(st.running)} "
                f"running + {n_closed} closed != {e.n_arrived} arrived"
            )
        if busy != st.busy:
            raise InvariantError(f"busy counter {st.busy} != placements {busy}")
        if st.n_loaned > max(0, e.n_inf - st.servers_needed) and e.config.reclaim_grace_s == 0:
            raise InvariantError(
                f"{st.n_loaned} servers on loan while inference needs "
                f"{st.servers_needed} of {e.n_inf}"
            )
        for j in st.queued:  # queue age: a preemption never resets it
            if st.waited_s[j] < 0 or st.queue_age_s(j) < -1e-6:
                raise InvariantError(f"job {j}: negative queue age")
        try:
            st.check_indexes()
        except AssertionError as exc:
            raise InvariantError(f"cluster state: {exc}") from exc
        if e.reclaim_deadline_misses:
            raise InvariantError("a reclaim returned fewer servers than asked by the deadline")

    def at_end(self) -> None:
        """End-of-run checks on the engine state (before the result is built)."""
        e = self.eng
        st = e.state
        now = e.now
        horizon = e.config.horizon_s
        if now < e.t0:
            raise InvariantError(f"clock {now} before its start {e.t0}")
        if horizon is not None and now > horizon:
            raise InvariantError(f"clock {now} past the horizon {horizon}")
        if e.events is not None:
            finishes: dict[int, int] = {}
            for _, j, what, _w in e.events:
                if what == "finish":
                    finishes[j] = finishes.get(j, 0) + 1
            for j, c in finishes.items():
                if c != 1 or st.status[j] != DONE:
                    raise InvariantError(f"job {j} finished {c} times")
        n_queued = 0
        for j, status in enumerate(st.status):
            sub = e.submit[j]
            if status == DONE:
                if math.isnan(e.finish_t[j]) or not sub <= e.first_start[j] <= e.finish_t[j]:
                    raise InvariantError(f"job {j} done with times {e.first_start[j]}, "
                                         f"{e.finish_t[j]} (arrival {sub})")
            elif status == PENDING:
                if j < e.n_arrived or sub <= now:
                    raise InvariantError(f"job {j} never arrived (arrival {sub}, end {now})")
            elif status in (QUEUED, RUNNING):
                if horizon is None:
                    raise InvariantError(f"job {j} never finished")
                if sub > now or (j in st.running) != (status == RUNNING):
                    raise InvariantError(f"job {j} in state {status} inconsistent at the end")
                n_queued += status == QUEUED
            elif status != INFEASIBLE:
                raise InvariantError(f"job {j} in unknown state {status}")
            if st.waited_s[j] < 0 or st.attained_gpu_s[j] < 0:
                raise InvariantError(f"job {j}: negative wait or GPU-seconds")
        if n_queued != len(st.queued):
            raise InvariantError(
                f"{n_queued} jobs queued but the queue holds {len(st.queued)}"
            )
        total = 0.0
        for j in range(st.n_jobs):
            total += st.attained_at(j, now)
        if not math.isclose(total, e.busy_int, rel_tol=1e-9, abs_tol=1e-6):
            raise InvariantError(f"GPU-seconds of jobs {total} != busy integral {e.busy_int}")


_SHARES = (
    "cluster_usage",
    "training_usage_no_loans",
    "loan_usage",
    "inference_utilisation",
    "inference_utilisation_with_loans",
    "share_jobs_waited",
    "share_jobs_waited_total",
)
_COUNTS = (
    "n_jobs", "n_finished", "n_unfinished", "n_infeasible", "n_not_arrived", "n_preemptions",
    "n_reclaim_preemptions", "n_scale_in", "n_scale_out", "n_moves", "n_loans", "n_reclaims",
    "n_loan_returns", "n_decisions",
)
_STATUSES = ("finished", "unfinished", "not_arrived", "infeasible")


def check_result(res: SimResult) -> None:
    """Check the accounting of a replay's result; raise :class:`InvariantError` if it fails.

    Asserted: every share and utilisation of the summary lies in [0, 1]; no
    time, duration or count is negative (summary, jobs table, time series);
    ``start_s <= end_s``; every job has exactly one of the statuses finished /
    unfinished / not_arrived / infeasible, with columns that agree (finished:
    ``submit <= first start <= finish <= end``, JCT = finish - arrival >= queuing
    delay and total wait; unfinished: arrived by the end, no finish; not
    arrived: arrived after the end, no start, wait, JCT or GPU-seconds;
    infeasible: never started); allocated GPU-seconds equal the sum over jobs
    and at most the available GPU-seconds, and no job got more than its maximum
    size for the time since its arrival; the summary's counts equal the jobs
    table's, and, when the event log was kept, each job's preemption, scale-in,
    scale-out and move counts equal its events of that kind.
    O(n_jobs + n_events + time-series rows).

    Raises
    ------
    InvariantError
        The first violated rule, with the job or measure it concerns.
    """
    s = res.summary
    jobs = res.jobs
    tol = 1e-9
    for key in _SHARES:
        v = s.get(key)
        if v is not None and not (-tol <= v <= 1.0 + tol):
            raise InvariantError(f"summary {key} = {v} outside [0, 1]")
    for key in _COUNTS:
        if not s[key] >= 0:
            raise InvariantError(f"summary {key} = {s[key]} negative")
    start, end = s["start_s"], s["end_s"]
    if not (end >= start and s["makespan_s"] >= 0):
        raise InvariantError(f"run ends at {end} before it starts at {start}")
    for key in ("queuing_delay_s", "jct_s", "wait_s"):
        for stat, v in s[key].items():
            if v is not None and not v >= 0:
                raise InvariantError(f"summary {key}.{stat} = {v} negative")
    for key in ("gpu_s_allocated", "gpu_s_allocated_on_loans", "gpu_s_available",
                "mean_loaned_servers", "useful_gpu_s"):
        if not s[key] >= 0:
            raise InvariantError(f"summary {key} = {s[key]} negative")
    if s.get("goodput") is not None and s["goodput"] < 0:
        raise InvariantError(f"summary goodput = {s['goodput']} negative")
    pools = s.get("pools") or []
    if pools:
        tot = sum(p["gpu_s_allocated"] for p in pools)
        if not math.isclose(tot, s["gpu_s_allocated"], rel_tol=1e-9, abs_tol=1e-6):
            raise InvariantError(f"GPU-seconds per pool {tot} != allocated {s['gpu_s_allocated']}")
        for p in pools:
            u = p["usage"]
            if u is not None and not (-tol <= u <= 1.0 + tol):
                raise InvariantError(f"pool {p['pool']} usage = {u} outside [0, 1]")
    alloc, avail = s["gpu_s_allocated"], s["gpu_s_available"]
    if alloc > avail * (1 + tol) + 1e-6:
        raise InvariantError(f"allocated {alloc} GPU-s > available {avail}")
    if s["gpu_s_allocated_on_loans"] > alloc * (1 + tol) + 1e-6:
        raise InvariantError("GPU-seconds on loaned servers exceed the total")
    status = jobs["status"]
    bad = ~status.isin(_STATUSES)
    if bad.any():
        raise InvariantError(f"unknown status {status[bad].iloc[0]!r}")
    counts = status.value_counts()
    n = {st: int(counts.get(st, 0)) for st in _STATUSES}
    if sum(n.values()) != s["n_jobs"] or len(jobs) != s["n_jobs"]:
        raise InvariantError("jobs do not add up to n_jobs")
    for st in _STATUSES:
        if n[st] != s[f"n_{st}"]:
            raise InvariantError(f"summary n_{st} = {s[f'n_{st}']} but {n[st]} jobs")
    sub = jobs["submit_time_s"]
    first = jobs["first_start_s"]
    fin = jobs["finish_s"]
    qd, wait, jct, gpu_s = jobs["queuing_delay_s"], jobs["wait_s"], jobs["jct_s"], jobs["gpu_s"]
    eps = 1e-6 * max(1.0, abs(end))

    def fail(mask: pd.Series, what: str) -> None:
        if mask.any():
            row = jobs[mask].iloc[0]
            raise InvariantError(f"job {row['job_id']} ({row['status']}): {what}")

    done = status == "finished"
    fail(done & ~((sub <= first + eps) & (first <= fin + eps) & (fin <= end + eps)),
         "not submit <= first start <= finish <= end")
    fail(done & ~((qd >= -eps) & (jct + eps >= qd) & (wait >= -eps) & (jct + eps >= wait)),
         "negative queuing delay or wait, or one above the JCT")
    unf = status == "unfinished"
    fail(unf & ~((sub <= end + eps) & fin.isna() & (wait >= -eps) & (wait <= end - sub + eps)),
         "unfinished but not arrived by the end, finished, or a wait out of [0, end - arrival]")
    fail(unf & first.notna() & (first < sub - eps), "started before its arrival")
    na = status == "not_arrived"
    fail(na & ~((sub > end) & first.isna() & fin.isna() & wait.isna() & jct.isna()
                & (gpu_s == 0) & (jobs["n_preemptions"] == 0)),
         "not arrived but with a start, wait, JCT or GPU-seconds, or arrived by the end")
    inf = status == "infeasible"
    fail(inf & ~(first.isna() & (gpu_s == 0)), "infeasible but started")
    fail(gpu_s < 0, "negative GPU-seconds")
    # at most its largest size (elastic maximum or traced size) since its arrival
    gpw = jobs["gpus_per_worker"]
    largest = np.maximum(jobs["max_workers"], jobs["gpus"] // gpw) * gpw
    cap = largest * (end - sub).clip(lower=0.0)
    fail(gpu_s > cap * (1 + tol) + 1e-6, "more GPU-seconds than its maximum size allows")
    total = float(gpu_s.sum())
    if not math.isclose(total, alloc, rel_tol=1e-9, abs_tol=1e-6):
        raise InvariantError(f"GPU-seconds of jobs {total} != allocated {alloc}")
    for key, col in (("n_preemptions", "n_preemptions"), ("n_scale_in", "n_scale_in"),
                     ("n_scale_out", "n_scale_out"), ("n_moves", "n_moves")):
        if int(jobs[col].sum()) != s[key] or (jobs[col] < 0).any():
            raise InvariantError(f"summary {key} != the sum over jobs")
    if s["n_reclaim_preemptions"] > s["n_preemptions"]:
        raise InvariantError("more reclaim preemptions than preemptions")
    ev = res.events
    if len(ev):  # the event log was kept: each job's counters are its events
        counted = pd.crosstab(ev["job_id"], ev["event"])
        ids = jobs["job_id"].astype(str)
        for name, col in (("preempt", "n_preemptions"), ("scale_in", "n_scale_in"),
                          ("scale_out", "n_scale_out"), ("move", "n_moves")):
            per_job = (counted[name] if name in counted.columns
                       else pd.Series(dtype=np.int64)).reindex(ids, fill_value=0)
            off = per_job.to_numpy() != jobs[col].to_numpy()
            if off.any():
                i = int(np.flatnonzero(off)[0])
                raise InvariantError(
                    f"job {ids.iloc[i]}: {col} = {int(jobs[col].iloc[i])} but "
                    f"{int(per_job.iloc[i])} {name} events in the log"
                )
    cl = s["cluster"]
    n_inf = cl["n_inference_servers"]
    if not s["mean_loaned_servers"] <= n_inf + tol:
        raise InvariantError("mean loaned servers above the inference cluster")
    ts = res.timeseries
    if len(ts):
        t = ts["time_s"]
        if not (t.is_monotonic_increasing and t.iloc[0] >= start - eps
                and t.iloc[-1] <= end + eps):
            raise InvariantError("time series not ascending within [start, end]")
        for col in ("queue_length", "busy_gpus", "loaned_servers", "running_jobs",
                    "inference_servers_needed"):
            if (ts[col] < 0).any():
                raise InvariantError(f"time series {col} negative")
        if (ts["loaned_servers"] > n_inf).any() or (ts["inference_servers_needed"] > n_inf).any():
            raise InvariantError("time series: more loaned or needed servers than exist")
        inf_pools = [p for p in cl["pools"] if p["role"] == "inference"]
        inf_size = max((p["gpus_per_server"] for p in inf_pools), default=0)
        usable = cl["training_gpus"] + ts["loaned_servers"] * inf_size
        if (ts["busy_gpus"] > usable).any():
            raise InvariantError("time series: busy GPUs above training + loaned GPUs")
        if (ts["running_jobs"] + ts["queue_length"] > s["n_jobs"]).any():
            raise InvariantError("time series: more running and queued jobs than jobs")
