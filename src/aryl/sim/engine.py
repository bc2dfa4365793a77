"""The discrete-event engine of the Aryl simulator.

Events
------
A heap of lean tuples ``(time_s, priority, seq, kind, payload)``; arrivals are
not pushed on the heap but read from the sorted job table with a pointer (same
order).  Events at the same time are processed in this fixed order:

1. job finishes (priority 0),
2. inference demand changes (1) — a rise above the servers not on loan asks
   for servers back; with a grace period of 0 s they are reclaimed at once,
3. reclaim deadlines (2),
4. job arrivals (3), in arrival order then input row order,
5. periodic ticks (4),

then **one** scheduling pass (offer the loanable idle inference servers if the
policy loans, then ``policy.schedule``, then settle the loans: offered servers
that got a worker become loans, and loaned servers without a training worker
go back to the inference pool when the policy's ``return_idle_loans`` is on).
Ties inside a priority go by ``seq`` (push order).

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
against loan/reclaim thrash).

Job lifecycle: queued -> running (rescaled any number of times) -> finished;
a preemption requeues the job with its original arrival time, its remaining
work set back to the last checkpoint; the next start pays ``restart_cost_s``
before progress resumes.  A rescale (or a move of workers) saves a checkpoint
and pauses progress for ``rescale_pause_s``.  Checkpoints are taken every
``checkpoint_interval_s`` of progress time after each (re)start or rescale.

A job whose base workers can never fit the training cluster (``S // g`` workers
of ``g`` GPUs per server of ``S`` GPUs) is reported as infeasible at arrival (one summary warning
per run with the count, the ids at debug level); it
is never queued, so it triggers no reclaim, scale-in or preemption.

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

from aryl.policies.base import Decision, Placement, Policy, Reason, make_policy, policy_class
from aryl.sim.config import SimConfig
from aryl.sim.jobs import JobTable

log = logging.getLogger(__name__)

__all__ = ["Engine", "InferenceSchedule"]

FINISH, DEMAND, RECLAIM, ARRIVAL, TICK = 0, 1, 2, 3, 4

# job states
PENDING, QUEUED, RUNNING, DONE, INFEASIBLE = 0, 1, 2, 3, 4

# inference server states
SERVING, IDLE, LOANED = 0, 1, 2

_EPS = 1e-9
# passes in a row with nothing running, no arrival left and jobs waiting
_IDLE_PASS_LIMIT = 1000
# largest time series (rows); a finer step is refused (timeseries_step_s)
MAX_TIMESERIES_POINTS = 5_000_000


def check_timeseries_size(span_s: float, step_s: float) -> None:
    """Raise if a time series over ``span_s`` at ``step_s`` would exceed
    ``MAX_TIMESERIES_POINTS`` rows (``InvalidInputError`` naming ``timeseries_step_s``)."""
    if span_s / step_s + 1 > MAX_TIMESERIES_POINTS:
        from aryl.errors import InvalidInputError

        raise InvalidInputError(
            f"timeseries_step_s: {step_s:g} s over a run of {span_s:.6g} s gives more than "
            f"{MAX_TIMESERIES_POINTS:,} time-series rows; use a step of at least "
            f"{span_s / (MAX_TIMESERIES_POINTS - 1):.3g} s"
        )


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


class Engine:
    """One replay: state, event loop and decision application.

    The engine is the :class:`~aryl.policies.base.SimView` the policy reads.
    """

    def __init__(
        self,
        table: JobTable,
        policy: str,
        config: SimConfig,
        inference: InferenceSchedule | None,
        progress: Callable[[int, int, float], None] | None = None,
        policy_options: dict[str, Any] | None = None,
    ) -> None:
        self.table = table
        self.config = config
        self.policy_name = policy
        cls = policy_class(policy)
        n = table.n_jobs
        S = config.gpus_per_server
        self.gpus_per_server = S
        self.n_train = config.n_training_servers
        self.n_inf = config.n_inference_servers
        n_srv = self.n_train + self.n_inf
        self.training_servers = list(range(self.n_train))
        # server state
        self.free = [S] * self.n_train + [0] * self.n_inf
        self.cap = [S] * self.n_train + [0] * self.n_inf
        self.jobs_on: list[dict[int, int]] = [{} for _ in range(n_srv)]
        self.n_loaned = 0
        self.needed = 0
        self.inference = inference if (inference is not None and self.n_inf > 0) else None
        # without a demand series nothing is ever needed: every inference server is
        # idle (loanable), as documented for ``simulate(inference=False)``
        self.inf_state = [SERVING if self.inference is not None else IDLE] * self.n_inf
        # static job columns (Python lists for fast scalar access)
        self.submit: list[float] = table.submit_time_s.tolist()
        self.gpw: list[int] = table.gpus_per_worker.tolist()
        self.traced_workers: list[int] = table.traced_workers.tolist()
        self.alpha: list[float] = table.alpha.tolist()
        use_elastic = cls.elastic
        el = table.elastic & use_elastic
        self.elastic: list[bool] = el.tolist()
        self.base_workers: list[int] = np.where(
            el, table.min_workers, table.traced_workers
        ).tolist()
        self.max_workers: list[int] = np.where(el, table.max_workers, table.traced_workers).tolist()
        a = table.alpha
        tw = table.traced_workers.astype(np.float64)
        self._t_traced: list[float] = (tw / (1.0 + a * (tw - 1.0))).tolist()
        # mutable job state
        self.state = [PENDING] * n
        self.rem: list[float] = table.duration_s.tolist()  # traced seconds
        self.speed = [0.0] * n
        self.last_t = [0.0] * n  # progress accrues from here (in the future while paused)
        self.ckpt_rem = list(self.rem)
        self.next_ckpt = [math.inf] * n
        self.workers = [0] * n
        self.placement: list[Placement | None] = [None] * n
        self.fin_seq = [-1] * n
        self.first_start = [math.nan] * n
        self.finish_t = [math.nan] * n
        self.n_preempt = [0] * n
        self.n_scale_in = [0] * n
        self.n_scale_out = [0] * n
        self.n_move = [0] * n
        self.gpu_s = [0.0] * n
        self.alloc_t = [0.0] * n
        self.wait_s = [0.0] * n
        self.queued_since = [0.0] * n
        self.restarted = [False] * n
        self.running: dict[int, None] = {}
        self.paused_until = self.last_t
        # numpy mirrors of rem / last_t / speed / (state == RUNNING) for the vectorised
        # remaining_work_many (gathers by index instead of converting Python lists);
        # every write to those four lists is followed by a mirror write
        self._rem_a = table.duration_s.astype(np.float64)
        self._lt_a = np.zeros(n, dtype=np.float64)
        self._sp_a = np.zeros(n, dtype=np.float64)
        self._run_a = np.zeros(n, dtype=bool)
        self._tt_a = np.array(self._t_traced, dtype=np.float64)
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
        # the time series has (end - t0) / step + 1 rows; end >= the last arrival
        # (or the horizon, which ends the run), so refuse a step that is sure to
        # give too many rows before replaying
        last = float(table.submit_time_s[-1]) if n else self.t0
        if config.horizon_s is not None:
            last = min(last, config.horizon_s)
        check_timeseries_size(last - self.t0, config.timeseries_step_s)
        self.busy = 0
        self.base_busy = 0  # GPUs of the base workers of running jobs (busy - extras)
        self.busy_loaned = 0  # GPUs of training workers on loaned servers
        self.busy_int = 0.0
        self.busy_loaned_int = 0.0
        self.cap_int = 0.0
        self.loan_int = 0.0
        self.serving_int = 0.0
        self.n_loans = 0
        self.n_loan_returns = 0
        self.tentative: list[int] = []  # servers offered to the current pass, not yet counted
        self.n_reclaims = 0
        self.n_reclaim_preempt = 0
        self.last_reclaim_t = -math.inf  # time of the last reclaim (loan cool-down)
        self.reclaim_deadline_misses = 0
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
        self.pending_reclaim = 0
        self.policy: Policy = make_policy(policy, self, dict(policy_options or {}))
        self.return_loans = bool(self.policy.loans and self.policy.return_idle_loans)
        # placement-change hook, only for policies that override it
        self._on_place: Callable[[int], None] | None = (
            self.policy.on_placement
            if type(self.policy).on_placement is not Policy.on_placement
            else None
        )
        self.checker: Any = None
        self.reclaim_log: list[Any] | None = None
        self._last_decision: Decision | None = None
        if config.check:
            from aryl.sim.check import Checker

            self.checker = Checker(self)

    # ----------------------------------------------------------------- view
    def loaned_servers(self) -> list[int]:
        """Ids of the inference servers on loan (including offered ones), ascending."""
        base = self.n_train
        return [base + i for i, st in enumerate(self.inf_state) if st == LOANED]

    def offered_servers(self) -> list[int]:
        """Loaned servers offered to the current pass only (returned if unused), ascending."""
        return self.tentative

    def _advance(self, j: int, now: float) -> None:
        lt = self.last_t[j]
        if now > lt:
            sp = self.speed[j]
            r = self.rem[j]
            nc = self.next_ckpt[j]
            if now >= nc:
                iv = self.config.checkpoint_interval_s
                c = nc + math.floor((now - nc) / iv) * iv
                self.ckpt_rem[j] = max(0.0, r - (c - lt) * sp)
                self.next_ckpt[j] = c + iv
            r -= (now - lt) * sp
            r = r if r > 0.0 else 0.0
            self.rem[j] = r
            self.last_t[j] = now
            self._rem_a[j] = r
            self._lt_a[j] = now

    def _sync(self, j: int) -> None:
        """Copy job ``j``'s rem / last_t / speed / running flag to the numpy mirrors."""
        self._rem_a[j] = self.rem[j]
        self._lt_a[j] = self.last_t[j]
        self._sp_a[j] = self.speed[j]
        self._run_a[j] = self.state[j] == RUNNING

    def remaining_work(self, j: int) -> float:
        """Remaining work of job ``j`` now, in single-worker seconds."""
        if self.state[j] == RUNNING:
            self._advance(j, self.now)
        return self.rem[j] * self._t_traced[j]

    def remaining_work_many(self, jobs: list[int] | np.ndarray) -> np.ndarray:
        """Remaining work of several jobs now, single-worker seconds (float64, no mutation).

        ``jobs``: job indices, a list or an int64 array.  O(len(jobs)).
        """
        now = self.now
        R, L, SP, TT, ST = self.rem, self.last_t, self.speed, self._t_traced, self.state
        if len(jobs) < 8:
            if isinstance(jobs, np.ndarray):
                jobs = jobs.tolist()
            out = [
                (max(0.0, R[j] - (now - L[j]) * SP[j]) if ST[j] == RUNNING and now > L[j] else R[j])
                * TT[j]
                for j in jobs
            ]
            return np.array(out, dtype=np.float64)
        # same float64 operations, elementwise, on the numpy mirrors
        ci = np.asarray(jobs, dtype=np.int64)
        r = self._rem_a[ci]
        lt = self._lt_a[ci]
        go = self._run_a[ci] & (now > lt)
        left = np.maximum(0.0, r - (now - lt) * self._sp_a[ci])
        out_a: np.ndarray = np.where(go, left, r) * self._tt_a[ci]
        return out_a

    def remaining_time(self, j: int, workers: int) -> float:
        """Seconds job ``j`` still needs at ``workers`` workers (no overheads)."""
        if self.state[j] == RUNNING:
            self._advance(j, self.now)
        a = self.alpha[j]
        return self.rem[j] * self._t_traced[j] * (1.0 + a * (workers - 1)) / workers

    def attained_gpu_s(self, j: int) -> float:
        """GPU-seconds allocated to job ``j`` so far."""
        g = self.gpu_s[j]
        if self.state[j] == RUNNING:
            g += self.workers[j] * self.gpw[j] * (self.now - self.alloc_t[j])
        return g

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
        sp = self.speed[j]
        t = self.last_t[j] + self.rem[j] / sp
        self.fin_seq[j] = self._push(t, FINISH, j)

    # ----------------------------------------------------------- placement
    def _account(self, j: int, now: float) -> None:
        self.gpu_s[j] += self.workers[j] * self.gpw[j] * (now - self.alloc_t[j])
        self.alloc_t[j] = now

    def _add(self, j: int, place: Placement) -> int:
        g = self.gpw[j]
        w = 0
        nt = self.n_train
        for s, k in place.items():
            self.free[s] -= k * g
            on = self.jobs_on[s]
            on[j] = on.get(j, 0) + k
            w += k
            if s >= nt:
                self.busy_loaned += k * g
        self.busy += w * g
        return w

    def _remove(self, j: int) -> None:
        place = self.placement[j]
        if not place:
            return
        g = self.gpw[j]
        nt = self.n_train
        for s, k in place.items():
            self.free[s] += k * g
            del self.jobs_on[s][j]
            if s >= nt:
                self.busy_loaned -= k * g
        self.busy -= self.workers[j] * g
        self.placement[j] = None
        self.workers[j] = 0
        if self._on_place is not None:
            self._on_place(j)

    def _set_speed(self, j: int, w: int) -> None:
        tw = self.traced_workers[j]
        if w == tw:
            self.speed[j] = 1.0
        else:
            a = self.alpha[j]
            self.speed[j] = (w / (1.0 + a * (w - 1))) / self._t_traced[j]

    def _start(self, j: int, place: Placement, reason: Reason) -> None:
        now = self.now
        w = self._add(j, place)
        self.placement[j] = dict(place)
        self.workers[j] = w
        if self._on_place is not None:
            self._on_place(j)
        self.state[j] = RUNNING
        self.running[j] = None
        self.base_busy += self.base_workers[j] * self.gpw[j]
        self.alloc_t[j] = now
        self._set_speed(j, w)
        if math.isnan(self.first_start[j]):
            self.first_start[j] = now
        self.wait_s[j] += now - self.queued_since[j]
        lt = now + (self.config.restart_cost_s if self.restarted[j] else 0.0)
        self.last_t[j] = lt
        self.ckpt_rem[j] = self.rem[j]
        self.next_ckpt[j] = lt + self.config.checkpoint_interval_s
        self._sync(j)
        self._schedule_finish(j)
        self._log(j, "start", w)

    def _resize(self, j: int, place: Placement, reason: Reason) -> None:
        now = self.now
        self._advance(j, now)
        self._account(j, now)
        old_w = self.workers[j]
        self._remove(j)
        self._place_resized(j, old_w, place, now)

    def _place_resized(self, j: int, old_w: int, place: Placement, now: float) -> None:
        """Put a resized job (already removed) on ``place``: counts, pause, checkpoint."""
        w = self._add(j, place)
        self.placement[j] = dict(place)
        self.workers[j] = w
        if self._on_place is not None:
            self._on_place(j)
        if w > old_w:
            self.n_scale_out[j] += 1
            what = "scale_out"
        elif w < old_w:
            self.n_scale_in[j] += 1
            what = "scale_in"
        else:
            self.n_move[j] += 1
            what = "move"
        self._set_speed(j, w)
        # a rescale saves a checkpoint and pauses progress for rescale_pause_s
        lt = max(self.last_t[j], now + self.config.rescale_pause_s)
        self.last_t[j] = lt
        self.ckpt_rem[j] = self.rem[j]
        self.next_ckpt[j] = lt + self.config.checkpoint_interval_s
        self._sync(j)
        self._schedule_finish(j)
        self._log(j, what, w)

    def _preempt(self, j: int, reason: Reason) -> None:
        now = self.now
        self._advance(j, now)
        self._account(j, now)
        self._remove(j)
        del self.running[j]
        self.base_busy -= self.base_workers[j] * self.gpw[j]
        self.rem[j] = self.ckpt_rem[j]
        self.last_t[j] = now
        self.next_ckpt[j] = math.inf
        self.state[j] = QUEUED
        self.fin_seq[j] = -1
        self.n_preempt[j] += 1
        self.restarted[j] = True
        self.queued_since[j] = now
        self._sync(j)
        self._log(j, "preempt", 0)
        self.policy.enqueue(j)

    def _finish(self, j: int) -> None:
        now = self.now
        self._advance(j, now)
        if self.rem[j] > 1e-6 * max(1.0, self.table.duration_s[j]):
            raise RuntimeError(f"job {j} finished with {self.rem[j]} s of work left")
        self.rem[j] = 0.0
        self._account(j, now)
        self._remove(j)
        del self.running[j]
        self.base_busy -= self.base_workers[j] * self.gpw[j]
        self.state[j] = DONE
        self.finish_t[j] = now
        self.fin_seq[j] = -1
        self._sync(j)
        self.n_open -= 1
        self._log(j, "finish", 0)
        self.policy.on_finish(j)

    def _arrive(self, j: int) -> None:
        base = self.base_workers[j]
        g = self.gpw[j]
        S = self.gpus_per_server
        self.queued_since[j] = self.now
        # a server holds S // g workers of g GPUs (one 5-GPU worker per 8-GPU server)
        if g > S or base > self.n_train * (S // g):
            self.state[j] = INFEASIBLE
            self.n_infeasible += 1
            self.n_open -= 1
            log.debug(
                "job %s (%d workers x %d GPUs) can never fit the training cluster "
                "(%d servers x %d GPUs, whole workers per server); reported as infeasible",
                self.table.job_id[j],
                base,
                g,
                self.n_train,
                S,
            )
            self._log(j, "infeasible", 0)
            return
        self.state[j] = QUEUED
        self._log(j, "arrive", 0)
        self.policy.enqueue(j)

    # ------------------------------------------------------- loan / reclaim
    def _not_loaned(self) -> int:
        return self.n_inf - self.n_loaned

    def _set_serving(self) -> None:
        # The lowest-id servers not on loan serve; the others are idle.
        left = self.needed
        for i, st in enumerate(self.inf_state):
            if st == LOANED:
                continue
            if left > 0:
                self.inf_state[i] = SERVING
                left -= 1
            else:
                self.inf_state[i] = IDLE

    def _loan(self) -> bool:
        loanable = self._not_loaned() - self.needed - self.config.loan_reserve_servers
        if loanable <= 0 or self.in_loan_cooldown() or not self.policy.wants_loan():
            return False
        S = self.gpus_per_server
        tentative = self.return_loans
        # Loan the highest-id idle servers.
        for i in range(self.n_inf - 1, -1, -1):
            if loanable == 0:
                break
            if self.inf_state[i] == IDLE:
                s = self.n_train + i
                self.inf_state[i] = LOANED
                self.cap[s] = S
                self.free[s] = S
                self.n_loaned += 1
                loanable -= 1
                if tentative:
                    self.tentative.append(s)  # counted by _settle_loans if used
                else:
                    self.n_loans += 1
                    if self.events is not None:
                        self.events.append((self.now, -1, "loan", s))
        if tentative:
            self.tentative.reverse()  # ascending server id
        return True

    def in_loan_cooldown(self) -> bool:
        """Whether no server may be lent now: a reclaim happened less than
        ``SimConfig.loan_cooldown_s`` ago (hysteresis against loan/reclaim thrash)."""
        return self.now - self.last_reclaim_t < self.config.loan_cooldown_s

    def _unloan(self, s: int) -> None:
        i = s - self.n_train
        self.inf_state[i] = IDLE
        self.cap[s] = 0
        self.free[s] = 0
        self.n_loaned -= 1

    def _settle_loans(self, ev_mark: int) -> None:
        """After a pass: keep the offered servers that got work, give back empty loans.

        Offered (tentative) servers the pass did not use go back silently (they
        were never counted as loaned and no time passed); used ones count as
        loans, logged at the start of the pass.  Loaned servers with no training
        worker go back to the inference pool as idle (``n_loan_returns``).
        """
        jobs_on = self.jobs_on
        tentative = self.tentative
        if tentative:
            used_new = []
            for s in tentative:
                if jobs_on[s]:
                    used_new.append(s)
                    self.n_loans += 1
                else:
                    self._unloan(s)  # back to idle, as before the offer
            if used_new and self.events is not None:
                now = self.now
                self.events[ev_mark:ev_mark] = [(now, -1, "loan", s) for s in used_new]
            fresh = set(tentative)
            self.tentative = []
        else:
            fresh = set()
        returned = False
        base = self.n_train
        for i, st in enumerate(self.inf_state):
            if st == LOANED:
                s = base + i
                if not jobs_on[s] and s not in fresh:
                    self._unloan(s)
                    self.n_loan_returns += 1
                    returned = True
                    if self.events is not None:
                        self.events.append((self.now, -1, "loan_return", s))
        if returned and self.inference is not None:
            self._set_serving()

    def _demand(self, k: int) -> None:
        assert self.inference is not None
        _, value = self.inference.at(k)
        self.needed = min(max(0, value), self.n_inf)
        off, _ = self.inference.at(k + 1)
        if math.isfinite(off):
            self._push(self.t0 + off, DEMAND, k + 1)
        deficit = self.needed - self._not_loaned()
        if deficit > 0:
            if self.config.reclaim_grace_s > 0:
                self._push(self.now + self.config.reclaim_grace_s, RECLAIM, 0)
            else:
                self._reclaim(deficit)
        self._set_serving()

    def _reclaim_deadline(self) -> None:
        deficit = self.needed - self._not_loaned()
        if deficit > 0:
            self._reclaim(deficit)
            self._set_serving()

    def _reclaim(self, n: int) -> None:
        from aryl.sim.adapters import plan_reclaim

        n = min(n, self.n_loaned)
        if n <= 0:
            return
        servers, preempted = plan_reclaim(self, n)
        if len(servers) < n:
            self.reclaim_deadline_misses += 1
        returned = set(servers)
        affected: dict[int, None] = {}
        for s in servers:
            for j in self.jobs_on[s]:
                affected[j] = None
        for j in affected:
            place = self.placement[j]
            assert place is not None
            left = {s: k for s, k in place.items() if s not in returned}
            w = sum(left.values())
            if j in preempted or w < self.base_workers[j]:
                self._preempt(j, Reason.RECLAIM_PREEMPT)
                self.n_reclaim_preempt += 1
            else:
                self._resize(j, left, Reason.RECLAIM_SCALE_IN)
        if servers:
            self.last_reclaim_t = self.now
        for s in servers:
            assert not self.jobs_on[s], "reclaimed server still hosts jobs"
            self._unloan(s)
            self.n_reclaims += 1
            if self.events is not None:
                self.events.append((self.now, -1, "reclaim", s))

    # ------------------------------------------------------------ the pass
    def _apply(self, d: Decision) -> None:
        for j, reason in d.preempts:
            self._preempt(j, reason)
        if d.resizes:
            # removals first so the additions never over-commit a server
            now = self.now
            olds: list[tuple[int, int, Placement, Reason]] = []
            for j, place, reason in d.resizes:
                self._advance(j, now)
                self._account(j, now)
                olds.append((j, self.workers[j], place, reason))
                self._remove(j)
            for j, old_w, place, _reason in olds:
                self._place_resized(j, old_w, place, now)
        for j, place, reason in d.starts:
            self._start(j, place, reason)

    def _handle(self, kind: int, seq: int, p: int) -> bool:
        """Apply one finish, demand-change or reclaim-deadline event.

        Returns whether the state changed (a stale finish event does nothing).
        """
        if kind == FINISH:
            if self.fin_seq[p] != seq:
                return False
            self._finish(p)
        elif kind == DEMAND:
            self._demand(p)
        else:
            self._reclaim_deadline()
        return True

    def _pass(self, changed: bool) -> None:
        ev_mark = len(self.events) if self.events is not None else 0
        if self.policy.loans and self._loan():
            changed = True
        t = time.perf_counter()
        d = self.policy.schedule(changed)
        self.sched_time_s += time.perf_counter() - t
        self.n_decisions += 1
        self._last_decision = d
        if d:
            self._apply(d)
        if self.return_loans and self.n_loaned:
            self._settle_loans(ev_mark)
        if self.checker is not None:
            self.checker.after_pass()

    def _stalled(self, what: str, last_kind: int | None = None) -> None:
        """Raise ``RuntimeError`` with a diagnostic of a replay that makes no progress."""
        kinds = {FINISH: "finish", DEMAND: "demand", RECLAIM: "reclaim", TICK: "tick"}
        due: dict[str, int] = {}
        for t, kind, _, _, _ in self.heap:
            if t <= self.now:
                name = kinds.get(kind, str(kind))
                due[name] = due.get(name, 0) + 1
        d = self._last_decision
        last = (
            "none"
            if d is None
            else f"{len(d.starts)} starts, {len(d.resizes)} resizes, {len(d.preempts)} preemptions"
        )
        ev = "" if last_kind is None or last_kind < 0 else (
            f"last event: {kinds.get(last_kind, last_kind)}; "
        )
        raise RuntimeError(
            f"simulation stalled at t = {self.now:.6g} s: {what}; policy {self.policy_name}, "
            f"queue length {self.policy.n_queued()}, {len(self.running)} running, "
            f"{self.n_open} jobs open, {self.n_loaned} servers on loan; "
            f"events due now: {due or 'none'}; {ev}last decision: {last}; "
            f"{self.n_decisions} passes so far"
        )

    def _advance_clock(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            self.busy_int += self.busy * dt
            self.busy_loaned_int += self.busy_loaned * dt
            self.cap_int += (self.n_train + self.n_loaned) * self.gpus_per_server * dt
            self.loan_int += self.n_loaned * dt
            # servers actually serving: the demand, but at most the servers not on
            # loan (during a reclaim grace period the inference side is short)
            nl = self.n_inf - self.n_loaned
            self.serving_int += (self.needed if self.needed < nl else nl) * dt
            self.now = t

    def _record(self) -> None:
        row = (
            self.now,
            self.policy.n_queued(),
            self.busy,
            self.n_loaned,
            len(self.running),
            self.needed,
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

    def run(self) -> None:
        """Run the event loop to the end (or the horizon)."""
        n = self.table.n_jobs
        self.n_open = n
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
            # finishes, demand changes, reclaim deadlines
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
                self._pass(changed)
                self._record()
                if not self.running and ptr >= n and self.n_open > 0:
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
                str(self.table.job_id[j]) for j in range(n) if self.state[j] == INFEASIBLE
            ][:5]
            log.warning(
                "%d job(s) can never fit the training cluster (%d servers x %d GPUs); "
                "reported as infeasible (status 'infeasible' in the jobs table), e.g. %s",
                self.n_infeasible,
                self.n_train,
                self.gpus_per_server,
                ", ".join(first),
            )
        if self.checker is not None:
            self.checker.at_end()
        # close the per-job GPU-second accounting of jobs still running
        for j in self.running:
            self._advance(j, self.now)
            self._account(j, self.now)
