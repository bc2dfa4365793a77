"""The discrete-event engine of the Aryl simulator.

The simulator is one client of :func:`aryl.schedule`: it keeps the cluster in a
:class:`~aryl.scheduling.ClusterState`, turns the trace and the inference
demand into events, calls the scheduling pass and applies its plan
(:meth:`~aryl.scheduling.SchedulePlan.apply`, with the engine's accounting as
the observer).  Every decision — starts, resizes, preemptions, which idle
inference servers to borrow, which loans to return, which servers a reclaim
gives back — is the pass's.

Events
------
A heap of lean tuples ``(time_s, priority, seq, kind, payload)``; arrivals are
not pushed on the heap but read from the sorted job table with a pointer (same
order).  Events at the same time are processed in this fixed order:

1. job finishes (priority 0),
2. inference demand changes (1) — a rise above the servers not on loan asks
   for the servers it adds back, due at once with a grace period of 0 s, else
   ``reclaim_grace_s`` later (each rise its own deadline,
   :meth:`~aryl.scheduling.ClusterState.set_demand`),
3. wake-ups (2): the time the last pass reported as ``next_wakeup_s``, when a
   timed rule (a reclaim deadline, the end of the loan cool-down, a policy's
   own) could change a decision with nothing else happening; one live wake-up,
   the one of the last pass (older ones are dropped when popped),
4. job arrivals (3), in arrival order then input row order,
5. periodic ticks (4),

then **one** scheduling pass (reclaim if due, offers, the policy, loans
settled).  Ties inside a priority go by ``seq`` (push order).

Finish events are invalidated lazily: each job remembers the ``seq`` of its live
finish event, and a rescale or preemption pushes a new one, so stale entries are
dropped when popped instead of being searched for.

The clock never goes backwards: an event earlier than the clock by more than a
relative 1e-9 raises :class:`RuntimeError` (a bug); smaller float drift is
clamped to the clock.  The run ends when every feasible job has finished, or at
``SimConfig.horizon_s`` (jobs still queued or running are ``unfinished``, jobs
submitted later ``not_arrived``; a horizon before the clock start is an error).

A stall watchdog raises ``RuntimeError`` with a diagnostic when more than
``2 n + 1000`` events and iterations happen at one time, or when 1,000 passes in
a row find nothing running, no arrival left and jobs waiting.  No inference
server is lent within ``SimConfig.loan_cooldown_s`` after a reclaim (hysteresis
against loan/reclaim thrash; the pass's rule, :func:`aryl.schedule`).

Job lifecycle (:mod:`aryl.scheduling.state`): queued -> running (rescaled any
number of times) -> finished; a preemption requeues the job, its remaining
work set back to the last checkpoint; the next start pays ``restart_cost_s``
before progress resumes.  A rescale (or a move of workers) saves a checkpoint
and pauses progress for ``rescale_pause_s``.

A job whose base workers can never fit the training cluster (``S // g``
workers of ``g`` GPUs per server of ``S`` GPUs) is reported as infeasible at
arrival (one summary warning per run with the count, the ids at debug level);
it is never queued, so it triggers no reclaim, scale-in or preemption.

Determinism: no wall-clock, no hashing of strings, no unordered iteration
(dicts keep insertion order); the same inputs and seed give identical results.
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from aryl.cluster import ClusterSpec
from aryl.scheduling import ClusterState, Reason, SchedulerConfig, make_policy
from aryl.scheduling.api import schedule_python
from aryl.scheduling.speed import SpeedModel
from aryl.scheduling.state import IDLE, INFEASIBLE, SERVING
from aryl.sim.config import SimConfig, check_timeseries_size
from aryl.sim.jobs import JobTable

log = logging.getLogger(__name__)

__all__ = ["Engine", "InferenceSchedule"]

FINISH, DEMAND, WAKE, ARRIVAL, TICK = 0, 1, 2, 3, 4

_EPS = 1e-9
# passes in a row with nothing running, no arrival left and jobs waiting
_IDLE_PASS_LIMIT = 1000
class InferenceSchedule:
    """A step series of inference servers needed, relative to the clock start.

    Parameters
    ----------
    offsets_s : ndarray of float64, shape (k,)
        Ascending change times relative to the start, first ``0``.
    servers_needed : ndarray of int64, shape (k,)
    period_s : float
        The series repeats with this period (``inf``: the last value holds).
    """

    def __init__(self, offsets_s: np.ndarray, servers_needed: np.ndarray, period_s: float) -> None:
        self.offsets_s = [float(x) for x in offsets_s]
        self.servers_needed = [int(x) for x in servers_needed]
        self.period_s = float(period_s)

    def at(self, k: int) -> tuple[float, int]:
        """Offset and value of the ``k``-th step (``k`` counts across periods)."""
        n = len(self.offsets_s)
        if math.isinf(self.period_s):
            if k >= n:
                return math.inf, self.servers_needed[-1]
            return self.offsets_s[k], self.servers_needed[k]
        c, i = divmod(k, n)
        return c * self.period_s + self.offsets_s[i], self.servers_needed[i]


def scheduler_config(config: SimConfig) -> SchedulerConfig:
    """The scheduling pass's knobs taken from a simulator configuration."""
    return SchedulerConfig(
        rescale_pause_s=float(config.rescale_pause_s),
        checkpoint_interval_s=float(config.checkpoint_interval_s),
        restart_cost_s=float(config.restart_cost_s),
        loan_reserve_servers=int(config.loan_reserve_servers),
        loan_cooldown_s=float(config.loan_cooldown_s),
        starvation_bound_s=float(config.starvation_bound_s),
        reclaim_policy=config.reclaim_policy,
        seed=int(config.seed),
        backend=config.backend,
        mix_gpu_types=bool(config.mix_gpu_types),
    )


class ServerLayout:
    """The servers of a replay, as both engines build them (a state without jobs).

    Attributes
    ----------
    spec : ClusterSpec
        The pools (``cluster``, or ``config``'s counts of V100 servers).
    state : ClusterState
        Training servers ``t0..``, inference servers ``i0..`` (serving when a demand
        series drives them, else idle and loanable), no jobs.
    train_S, inf_S : int or None
        The GPUs per server of each role when uniform, else None.
    gpus_per_server : int
        The largest training server's GPUs (``config.gpus_per_server`` without any).
    training_text : str
        The training servers for messages (per pool when their sizes differ).
    slots : dict[str, list[tuple[int, int]]]
        Per training GPU type, ``(n_servers, gpus_per_server)`` of each pool
        (the feasibility of a job's whole workers).
    """

    def __init__(self, config: SimConfig, cluster: ClusterSpec | None,
                 speeds: SpeedModel | None, serving: bool) -> None:
        spec = cluster if cluster is not None else ClusterSpec.from_counts(
            config.n_training_servers, config.n_inference_servers, config.gpus_per_server, "V100"
        )
        self.spec = spec
        st = ClusterState(config=scheduler_config(config), speeds=speeds)
        inf_status = SERVING if serving else IDLE
        counters = {"training": 0, "inference": 0}
        for pool in spec.server_pools():
            role = pool.role
            i = counters[role]
            counters[role] += 1
            st.add_server(f"{'t' if role == 'training' else 'i'}{i}", role=role,
                          gpus=pool.gpus_per_server, pool=pool.name, gpu_type=pool.gpu_type,
                          status=None if role == "training" else inf_status)
        self.state = st
        # a uniform server size per role keeps the homogeneous accounting's arithmetic
        sizes_t = {p.gpus_per_server for p in spec.training_pools}
        sizes_i = {p.gpus_per_server for p in spec.inference_pools}
        self.train_S: int | None = sizes_t.pop() if len(sizes_t) == 1 else None
        self.inf_S: int | None = sizes_i.pop() if len(sizes_i) == 1 else None
        self.gpus_per_server: int = max(
            (p.gpus_per_server for p in spec.training_pools), default=config.gpus_per_server
        )
        #: the training servers for messages: "46 servers x 8 GPUs", or per pool
        #: "1 server x 4 GPUs + 1 server x 8 GPUs" when sizes differ
        self.training_text: str = " + ".join(
            f"{p.n_servers} server{'s' if p.n_servers != 1 else ''} x {p.gpus_per_server} GPUs"
            for p in spec.training_pools if p.n_servers
        ) if self.train_S is None else f"{spec.n_training_servers} servers x {self.train_S} GPUs"
        self.slots: dict[str, list[tuple[int, int]]] = {}
        for p in spec.training_pools:
            self.slots.setdefault(p.gpu_type, []).append((p.n_servers, p.gpus_per_server))


class Engine:
    """One replay: the cluster state, the event loop and the accounting of plans."""

    def __init__(
        self,
        table: JobTable,
        policy: str,
        config: SimConfig,
        inference: InferenceSchedule | None,
        progress: Callable[[int, int, float], None] | None = None,
        policy_options: dict[str, Any] | None = None,
        cluster: ClusterSpec | None = None,
        speeds: SpeedModel | None = None,
        families: list[str | None] | None = None,
    ) -> None:
        self.table = table
        self.config = config
        self.policy_name = policy
        self.policy = make_policy(policy, dict(policy_options or {}))
        n = table.n_jobs
        self.n_inf = (cluster.n_inference_servers if cluster is not None
                      else config.n_inference_servers)
        self.inference = inference if (inference is not None and self.n_inf > 0) else None
        # without a demand series nothing is ever needed: every inference server is
        # idle (loanable), as documented for ``simulate(inference=False)``
        layout = ServerLayout(config, cluster, speeds, serving=self.inference is not None)
        spec = self.cluster = layout.spec
        self.n_train = spec.n_training_servers
        st = layout.state
        self.train_S, self.inf_S = layout.train_S, layout.inf_S
        self.gpus_per_server = layout.gpus_per_server
        self.training_text = layout.training_text
        self._slots = layout.slots
        ids = table.job_id.tolist()
        sub = table.submit_time_s.tolist()
        gpw = table.gpus_per_worker.tolist()
        traced = table.traced_workers.tolist()
        dur = table.duration_s.tolist()
        mn = table.min_workers.tolist()
        mx = table.max_workers.tolist()
        el = table.elastic.tolist()
        al = table.alpha.tolist()
        st.add_jobs(ids, arrival_s=sub, gpus_per_worker=gpw, ref_workers=traced,
                    remaining_s=dur, min_workers=mn, max_workers=mx, elastic=el, alpha=al,
                    family=families)
        self.state = st
        self.submit: list[float] = sub
        pol = self.policy
        # the size each job runs with at least under this policy (infeasibility, checks)
        self.base_workers: list[int] = [pol.base_workers(st, j) for j in range(n)]
        self.max_workers: list[int] = [
            st.max_workers[j] if (pol.elastic and st.elastic[j]) else st.ref_workers[j]
            for j in range(n)
        ]
        # per-job results
        self.fin_seq = [-1] * n
        self.first_start = [math.nan] * n
        self.finish_t = [math.nan] * n
        self.n_preempt = [0] * n
        self.n_scale_in = [0] * n
        self.n_scale_out = [0] * n
        self.n_move = [0] * n
        # clock and accounting
        t0 = config.start_time_s
        if t0 is None:
            t0 = float(table.submit_time_s[0]) if n else 0.0
        from aryl.errors import InvalidInputError

        if n and t0 > float(table.submit_time_s[0]):
            raise InvalidInputError("start_time_s: must not be after the first arrival")
        if config.horizon_s is not None and config.horizon_s < t0:
            raise InvalidInputError(
                f"horizon_s: {config.horizon_s:g} s is before the clock start {t0:g} s "
                "(start_time_s, by default the first arrival): nothing would be simulated"
            )
        self.t0 = float(t0)
        self.now = self.t0
        st.now_s = self.t0
        # the time series has (end - t0) / step + 1 rows; end >= the last arrival
        # (or the horizon, which ends the run), so refuse a step that is sure to
        # give too many rows before replaying
        last = float(table.submit_time_s[-1]) if n else self.t0
        if config.horizon_s is not None:
            last = min(last, config.horizon_s)
        check_timeseries_size(last - self.t0, config.timeseries_step_s)
        self.busy_int = 0.0
        self.busy_loaned_int = 0.0
        n_pools = len(st.pool_names)
        self.busy_pool_int = [0.0] * n_pools  # GPU-seconds allocated per pool
        self.loan_pool_int = [0.0] * n_pools  # GPU-seconds of each pool's servers on loan
        self.loan_gpu_int = 0.0  # GPU-seconds of every server on loan
        # per job: GPU-seconds per pool (allocated lazily; goodput and JCT by pool)
        self.job_pool_gpu_s: list[dict[int, float] | None] = [None] * n
        self.cap_int = 0.0
        self.loan_int = 0.0
        self.serving_int = 0.0
        self.n_loans = 0
        self.n_loan_returns = 0
        self.n_reclaims = 0
        self.n_reclaim_preempt = 0
        self.reclaim_deadline_misses = 0
        self.wake_seq = -1  # seq of the live wake-up event (-1: none)
        self.wake_t = math.inf  # its time
        self.sched_time_s = 0.0
        self.n_decisions = 0
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.events: list[tuple[float, int, str, int]] | None = [] if config.record_events else None
        self.ts: list[tuple[float, int, int, int, int, int]] = []
        self.progress = progress
        self.n_open = n  # jobs not finished and not infeasible
        self.n_arrived = 0  # jobs whose arrival was processed (a prefix of the table)
        self.n_infeasible = 0
        self.last_plan: Any = None
        self.checker: Any = None
        self.reclaim_log: list[Any] | None = None
        if config.check:
            from aryl.sim.check import Checker

            self.checker = Checker(self)

    # --------------------------------------------------------------- events
    def _push(self, t: float, kind: int, payload: int) -> int:
        s = self.seq
        self.seq = s + 1
        heapq.heappush(self.heap, (t, kind, s, kind, payload))
        return s

    def _log(self, j: int, what: str, w: int) -> None:
        if self.events is not None:
            self.events.append((self.now, j, what, w))

    def _schedule_finish(self, j: int) -> None:
        st = self.state
        t = st.progress_at_s[j] + st.remaining_s[j] / st.speed[j]
        self.fin_seq[j] = self._push(t, FINISH, j)

    # ------------------------------------------------ plan observer (accounting)
    def before_job_change(self, j: int) -> None:
        self._flush_pools(j, self.now)

    def _flush_pools(self, j: int, now: float) -> None:
        """Add job ``j``'s GPU-seconds since its last accounting to its pools."""
        st = self.state
        place = st.placement[j]
        dt = now - st.attained_at_s[j]
        if not place or dt <= 0:
            return
        d = self.job_pool_gpu_s[j]
        if d is None:
            d = self.job_pool_gpu_s[j] = {}
        g = st.gpus_per_worker[j] * dt
        spi = st.server_pool_idx
        for s, k in place.items():
            p = spi[s]
            d[p] = d.get(p, 0.0) + k * g

    def job_started(self, j: int, reason: Reason) -> None:
        now = self.now
        if math.isnan(self.first_start[j]):
            self.first_start[j] = now
        self._schedule_finish(j)
        self._log(j, "start", self.state.workers[j])

    def job_resized(self, j: int, old_workers: int, reason: Reason) -> None:
        w = self.state.workers[j]
        if w > old_workers:
            self.n_scale_out[j] += 1
            what = "scale_out"
        elif w < old_workers:
            self.n_scale_in[j] += 1
            what = "scale_in"
        else:
            self.n_move[j] += 1
            what = "move"
        self._schedule_finish(j)
        self._log(j, what, w)

    def job_preempted(self, j: int, reason: Reason) -> None:
        self.fin_seq[j] = -1
        self.n_preempt[j] += 1
        if reason == Reason.RECLAIM_PREEMPT:
            self.n_reclaim_preempt += 1
        self._log(j, "preempt", 0)

    def server_lent(self, s: int, reason: Reason) -> None:
        self.n_loans += 1
        if self.events is not None:
            self.events.append((self.now, -1, "loan", s))

    def server_returned(self, s: int, reason: Reason) -> None:
        if reason == Reason.RECLAIMED:
            self.n_reclaims += 1
            what = "reclaim"
        else:
            self.n_loan_returns += 1
            what = "loan_return"
        if self.events is not None:
            self.events.append((self.now, -1, what, s))

    # ----------------------------------------------------------- lifecycle
    def _finish(self, j: int) -> None:
        now = self.now
        st = self.state
        self._flush_pools(j, now)
        st.advance(j, now)
        if st.remaining_s[j] > 1e-6 * max(1.0, self.table.duration_s[j]):
            raise RuntimeError(f"job {j} finished with {st.remaining_s[j]} s of work left")
        st.finish(j, now)
        self.finish_t[j] = now
        self.fin_seq[j] = -1
        self.n_open -= 1
        self._log(j, "finish", 0)

    def fits_ever(self, base: int, g: int) -> bool:
        """Whether ``base`` workers of ``g`` GPUs fit the empty training servers: a server
        of ``S`` GPUs holds ``S // g`` workers (one 5-GPU worker per 8-GPU server); on
        one GPU type unless types may mix."""
        slots = self._slots
        if len(slots) == 1 or self.config.mix_gpu_types:
            return base <= sum(n * (S // g) for v in slots.values() for n, S in v)
        return any(base <= sum(n * (S // g) for n, S in v) for v in slots.values())

    def _arrive(self, j: int) -> None:
        base = self.base_workers[j]
        st = self.state
        g = st.gpus_per_worker[j]
        if not self.fits_ever(base, g):
            st.status[j] = INFEASIBLE
            st.queued_since_s[j] = self.now
            self.n_infeasible += 1
            self.n_open -= 1
            log.debug(
                "job %s (%d workers x %d GPUs) can never fit the training cluster "
                "(%s, whole workers per server); reported as infeasible",
                self.table.job_id[j],
                base,
                g,
                self.training_text,
            )
            self._log(j, "infeasible", 0)
            return
        st.enqueue(j, self.now)
        self._log(j, "arrive", 0)

    # ------------------------------------------------------- demand / reclaim
    def _demand(self, k: int) -> None:
        assert self.inference is not None
        st = self.state
        _, value = self.inference.at(k)
        needed = min(max(0, value), self.n_inf)
        off, _ = self.inference.at(k + 1)
        if math.isfinite(off):
            self._push(self.t0 + off, DEMAND, k + 1)
        st.servers_needed = needed
        st.set_demand(needed, self.now + self.config.reclaim_grace_s)

    # ------------------------------------------------------------ the pass
    def _handle(self, kind: int, seq: int, p: int) -> bool:
        """Apply one finish, demand-change or wake-up event.

        Returns whether a pass is due (a stale finish or wake-up event does nothing).
        """
        if kind == FINISH:
            if self.fin_seq[p] != seq:
                return False
            self._finish(p)
        elif kind == DEMAND:
            self._demand(p)
        else:
            if self.wake_seq != seq:
                return False
            self.wake_seq = -1
            self.wake_t = math.inf
        return True

    def _pass(self) -> None:
        st = self.state
        st.now_s = self.now
        if self.reclaim_log is not None:
            from aryl.scheduling.kernels import reclaim_request

            n = st.reclaim_due()
            if n > 0:
                self.reclaim_log.append(reclaim_request(st, n, self.policy.elastic))
        t = time.perf_counter()
        plan = schedule_python(st, self.policy)
        self.sched_time_s += time.perf_counter() - t
        self.n_decisions += 1
        self.last_plan = plan
        if plan.reclaim_shortfall:
            self.reclaim_deadline_misses += 1
        plan.apply(st, inplace=True, observer=self, validate=False)
        w = plan.next_wakeup_s
        if w != self.wake_t:
            if not w > self.now:
                raise RuntimeError(f"pass at {self.now} s asked to be woken at {w} s")
            self.wake_t = w
            self.wake_seq = self._push(w, WAKE, 0) if w < math.inf else -1
        if self.checker is not None:
            self.checker.after_pass()

    def _stalled(self, what: str, last_kind: int | None = None) -> None:
        """Raise ``RuntimeError`` with a diagnostic of a replay that makes no progress."""
        kinds = {FINISH: "finish", DEMAND: "demand", WAKE: "wake", TICK: "tick"}
        due: dict[str, int] = {}
        for t, kind, _, _, _ in self.heap:
            if t <= self.now:
                name = kinds.get(kind, str(kind))
                due[name] = due.get(name, 0) + 1
        d = self.last_plan
        last = (
            "none"
            if d is None
            else f"{len(d.starts)} starts, {len(d.resizes)} resizes, "
                 f"{len(d.preemptions)} preemptions"
        )
        ev = "" if last_kind is None or last_kind < 0 else (
            f"last event: {kinds.get(last_kind, last_kind)}; "
        )
        st = self.state
        raise RuntimeError(
            f"simulation stalled at t = {self.now:.6g} s: {what}; policy {self.policy_name}, "
            f"queue length {len(st.queued)}, {len(st.running)} running, "
            f"{self.n_open} jobs open, {st.n_loaned} servers on loan; "
            f"events due now: {due or 'none'}; {ev}last decision: {last}; "
            f"{self.n_decisions} passes so far"
        )

    def _advance_clock(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            st = self.state
            nl = st.n_loaned
            self.busy_int += st.busy * dt
            self.busy_loaned_int += st.busy_loaned * dt
            lg = st.loaned_gpus
            self.cap_int += (st.training_gpus + lg) * dt
            self.loan_int += nl * dt
            self.loan_gpu_int += lg * dt
            bpi = self.busy_pool_int
            for p, b in enumerate(st.busy_by_pool):
                if b:
                    bpi[p] += b * dt
            if lg:
                lpi = self.loan_pool_int
                for p, x in enumerate(st.loaned_gpus_by_pool):
                    if x:
                        lpi[p] += x * dt
            # servers actually serving: the demand, but at most the servers not on
            # loan (during a reclaim grace period the inference side is short)
            free_inf = self.n_inf - nl
            need = st.servers_needed
            self.serving_int += (need if need < free_inf else free_inf) * dt
            self.now = t

    def _record(self) -> None:
        st = self.state
        row = (
            self.now,
            len(st.queued),
            st.busy,
            st.n_loaned,
            len(st.running),
            st.servers_needed,
        )
        ts = self.ts
        if ts:
            last = ts[-1]
            if last[1:] == row[1:]:
                return
            if last[0] == row[0]:
                ts[-1] = row
                return
        ts.append(row)

    # ------------------------------------------------------- result views
    def event_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The event log as columns: time (float64), job index (int64, -1 for server
        events), event code (int8, :data:`aryl.sim.metrics.EVENT_NAMES`), workers or
        server index (int64)."""
        from aryl.sim.metrics import EVENT_NAMES

        code = {name: i for i, name in enumerate(EVENT_NAMES)}
        ev = self.events or []
        return (
            np.array([e[0] for e in ev], dtype=np.float64),
            np.array([e[1] for e in ev], dtype=np.int64),
            np.array([code[e[2]] for e in ev], dtype=np.int8),
            np.array([e[3] for e in ev], dtype=np.int64),
        )

    def pool_split(self, done_work: np.ndarray) -> tuple[list[float], np.ndarray]:
        """Useful work per pool and each job's main pool index (-1: none).

        A job's useful work ``done_work[j]`` is split over its pools in proportion to
        its GPU-seconds there; its main pool is the one with the most GPU-seconds
        (ties: the lower pool index).  O(jobs x pools).
        """
        useful_pool = [0.0] * len(self.state.pool_names)
        main_idx = np.full(self.table.n_jobs, -1, dtype=np.int64)
        for j, d in enumerate(self.job_pool_gpu_s):
            if not d:
                continue
            tot = sum(d.values())
            best = max(sorted(d), key=lambda p: d[p])
            main_idx[j] = best
            if tot > 0:
                for p, x in d.items():
                    useful_pool[p] += done_work[j] * (x / tot)
        return useful_pool, main_idx

    def run(self) -> None:
        """Run the event loop to the end (or the horizon)."""
        n = self.table.n_jobs
        sub = self.submit
        heap = self.heap
        pop = heapq.heappop
        horizon = self.config.horizon_s
        if self.inference is not None:
            self.heap.append((self.t0, DEMAND, -1, DEMAND, 0))  # seq -1: first of all
        tick = self.config.tick_s if self.policy.uses_tick else 0.0
        if tick and n:
            self._push(self.t0 + tick, TICK, 0)
        ptr = 0
        n_iter = 0
        self._record()
        # stall watchdog: events and iterations without the clock advancing (at
        # one time there are at most n finishes, a demand change, reclaim
        # deadlines and a tick), and passes with nothing running, no arrival left
        # and jobs waiting (a deadlock)
        same_t_limit = 2 * n + 1000
        n_same_t = 0
        n_idle = 0
        last_t = math.nan
        kind = -1  # kind of the last event popped (for the diagnostic)
        st = self.state
        while self.n_open > 0:
            t = heap[0][0] if heap else math.inf
            if ptr < n and sub[ptr] <= t:
                t = sub[ptr]
            if t == math.inf:
                raise RuntimeError("simulation stalled: jobs open but no event left")
            if horizon is not None and t > horizon:
                self._advance_clock(horizon)
                break
            now = self.now
            if t < now:
                if now - t > _EPS * max(1.0, abs(now)):
                    raise RuntimeError(f"event at {t} is before the clock {now}")
                t = now
            self._advance_clock(t)
            if t == last_t:
                n_same_t += 1  # another iteration at this time
            else:
                last_t = t
                n_same_t = 0
            changed = False
            ticked = False
            # finishes, demand changes, wake-ups
            while heap and heap[0][0] <= t and heap[0][1] < ARRIVAL:
                _, kind, seq, _, p = pop(heap)
                if self._handle(kind, seq, p):
                    changed = True
                    n_same_t += 1
            while ptr < n and sub[ptr] <= t:
                self._arrive(ptr)
                ptr += 1
                changed = True
            self.n_arrived = ptr
            while heap and heap[0][0] <= t:
                _, kind, seq, _, p = pop(heap)
                n_same_t += 1
                if n_same_t > same_t_limit:
                    break  # an event handler keeps pushing events at this time
                if kind == TICK:
                    ticked = True
                    if self.n_open > 0:
                        self._push(t + tick, TICK, 0)
                else:  # e.g. a finish pushed at t by this very pass (zero work)
                    changed |= self._handle(kind, seq, p)
            if n_same_t > same_t_limit:
                self._stalled(
                    f"{n_same_t} events and iterations at the same time without the clock "
                    "advancing", kind,
                )
            if changed or ticked:
                self._pass()
                self._record()
                if not st.running and ptr >= n and self.n_open > 0:
                    n_idle += 1
                    if n_idle > _IDLE_PASS_LIMIT:
                        self._stalled(
                            f"{n_idle} passes in a row with nothing running, no arrival "
                            "left and jobs waiting (no job can ever start)"
                        )
                else:
                    n_idle = 0
            n_iter += 1
            if self.progress is not None and n_iter % 2048 == 0:
                self.progress(n - self.n_open, n, self.now)
        if self.progress is not None:
            self.progress(n - self.n_open, n, self.now)
        if self.n_infeasible:
            # one summary line; the ids are logged at debug level at arrival
            first = [
                str(self.table.job_id[j]) for j in range(n) if st.status[j] == INFEASIBLE
            ][:5]
            log.warning(
                "%d job(s) can never fit the training cluster (%s); "
                "reported as infeasible (status 'infeasible' in the jobs table), e.g. %s",
                self.n_infeasible,
                self.training_text,
                ", ".join(first),
            )
        if self.checker is not None:
            self.checker.at_end()
        # close the per-job GPU-second accounting of jobs still running
        for j in st.running:
            self._flush_pools(j, self.now)
            st.advance(j, self.now)
            st.close_attained(j, self.now)
