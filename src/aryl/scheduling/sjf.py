"""``sjf``: shortest-job-first with backfill and a starvation bound.

Queued jobs in order of estimated remaining time at their base size (ties:
lower job index); a job that does not fit is skipped (backfill).  A job whose
*queue age* has reached ``starvation_bound_s`` is *starving*: the starving jobs
are taken first, oldest first, and the first one that does not fit blocks
backfill until it starts, so large jobs do not starve.

Queue age: the time a job has spent queued since its first arrival, every wait
summed (``waited_s + now - queued_since_s``); a preemption does not reset it
and time spent running does not count.  While a job waits its *wait origin*
``queued_since_s - waited_s`` is constant, so the queue sorted by wait origin
is in queue-age order: the first job in that order that is not starving proves
that no later one is (non-starving jobs are skipped, never a starving one).  No loaning,
no elastic scaling, gang placement on training servers.  Also the base phase
(phase 1) of the ``aryl`` pass, which overrides the capacity view and the
placement of :class:`SjfPass`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from aryl.errors import InvalidInputError
from aryl.scheduling.placement import gang_place_typed
from aryl.scheduling.plan import Reason, SchedulePlan
from aryl.scheduling.policy import PassContext, Policy
from aryl.scheduling.state import ClusterState, Placement, is_finite_number

__all__ = ["SjfPass", "SjfPolicy", "sjf_key_elastic", "sjf_key_rigid", "wait_origin_key"]


def wait_origin_key(st: ClusterState, j: int) -> float:
    """``queued_since_s - waited_s``: constant while job ``j`` waits; queue age = now - it."""
    return st.queued_since_s[j] - st.waited_s[j]


def sjf_key_rigid(st: ClusterState, j: int) -> float:
    """Remaining time (s) at the reference size (single-worker work / T(ref))."""
    w = st.ref_workers[j]
    a = st.alpha[j]
    return st.remaining_s[j] * st.ref_throughput[j] * (1.0 + a * (w - 1)) / w


def sjf_key_elastic(st: ClusterState, j: int) -> float:
    """Remaining time (s) at the base size (``min_workers`` for elastic jobs)."""
    w = st.min_workers[j] if st.elastic[j] else st.ref_workers[j]
    a = st.alpha[j]
    return st.remaining_s[j] * st.ref_throughput[j] * (1.0 + a * (w - 1)) / w


class SjfPass:
    """One base phase over a state (scratch data lives here, not in the policy)."""

    def __init__(self, pol: SjfPolicy, st: ClusterState, ctx: PassContext) -> None:
        self.pol = pol
        self.st = st
        self.ctx = ctx
        self.started: set[int] = set()
        b = pol.bound_option
        self.bound = b if b is not None else st.config.starvation_bound_s

    # hooks for the aryl base phase -------------------------------------
    def capacity_view(self) -> tuple[list[int], int]:
        """Scratch free-GPU list and total free GPUs usable by base demands."""
        free = list(self.ctx.free)
        return free, sum(free[s] for s in self.st.training_servers)

    def place(self, free: list[int], j: int) -> Placement | None:
        st = self.st
        return gang_place_typed(st, free, j, self.pol.base_workers(st, j))

    def take(self, free: list[int], place: Placement, j: int) -> None:
        g = self.st.gpus_per_worker[j]
        for s, k in place.items():
            free[s] -= k * g

    # ------------------------------------------------------------------
    def base_phase(self, plan: SchedulePlan) -> tuple[list[int], int]:
        st = self.st
        pol = self.pol
        free, avail = self.capacity_view()
        now = st.now_s
        gpw = st.gpus_per_worker
        started = self.started
        bound = self.bound
        blocked = False
        # 1. starving jobs, oldest first; the first that does not fit blocks.
        for o, j in st.sorted_queue("wait-origin", wait_origin_key):
            if now - o < bound:
                # queue age = now - origin; every job behind this one has a later
                # origin, so no starving job is left: skip them all
                break
            need = pol.base_workers(st, j) * gpw[j]
            place = self.place(free, j) if need <= avail else None
            if place is None:
                blocked = True
                break
            self.take(free, place, j)
            avail -= need
            started.add(j)
            plan.starts.append((j, place, Reason.STARVATION_GUARD))
        if blocked:
            return free, avail
        # 2. SJF order with backfill
        failed: dict[int, int] = {}  # gpus per worker -> smallest worker count that failed
        first = True
        name, key = pol.queue_key
        for _, j in st.sorted_queue(name, key):
            if avail <= 0:
                break
            if j in started:
                continue
            g = gpw[j]
            w = pol.base_workers(st, j)
            f = failed.get(g)
            if w * g > avail or (f is not None and w >= f):
                first = False
                continue
            place = self.place(free, j)
            if place is None:
                failed[g] = w if f is None else min(f, w)
                first = False
                continue
            self.take(free, place, j)
            avail -= w * g
            started.add(j)
            plan.starts.append((j, place, Reason.SJF_ORDER if first else Reason.BACKFILL))
        return free, avail


class SjfPolicy(Policy):
    """Shortest-job-first (SRTF order at each pass, non-preemptive) with backfill."""

    name = "sjf"
    options_known: ClassVar[tuple[str, ...]] = ("return_idle_loans", "starvation_bound_s")
    pass_class: ClassVar[type[SjfPass]] = SjfPass

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        b = self.options.get("starvation_bound_s")
        if b is not None and (not (b == math.inf or is_finite_number(b)) or not b >= 0):
            raise InvalidInputError(
                f"policy {self.name!r}: option starvation_bound_s must be a number >= 0 "
                f"(inf: no bound)"
            )
        self.bound_option = None if b is None else float(b)
        self.queue_key = (
            ("sjf-elastic", sjf_key_elastic) if self.elastic else ("sjf-rigid", sjf_key_rigid)
        )

    def decide(self, st: ClusterState, ctx: PassContext, plan: SchedulePlan) -> None:
        if st.queued:
            self.pass_class(self, st, ctx).base_phase(plan)
