"""``tiresias``: discretised two-dimensional least-attained-service (2D-LAS).

Tiresias (Gu et al., NSDI'19) schedules without knowing durations: a job's
priority level is the number of thresholds its attained service (GPU-seconds,
the "2D" of GPUs x time) has crossed; lower levels go first, FIFO (job index)
within a level.  Thresholds default to 1 and 10 GPU-hours (option
``las_thresholds_gpu_s``).

Each pass: queued jobs in (level, index) order start when gang placement on the
training servers finds room (backfill: a job that does not fit is skipped).
Then, if the first job that did not fit outranks running jobs, the
lowest-priority running jobs (highest level, latest index first) are preempted
when that frees enough room to place it; one such preemption round per pass.
Runs on the periodic tick too (levels grow while jobs run), and reports as its
wake-up (:meth:`TiresiasPolicy.next_wakeup_s`) the first time a running job's
level rises above a waiting job's, so that the preemption comes then.  No loaning, no
elastic scaling.  A queued job's level is that of its attained service when it
was queued (it does not change while it waits).
"""

from __future__ import annotations

import bisect
import math
from typing import Any, ClassVar

from aryl.errors import InvalidInputError
from aryl.scheduling.placement import gang_place_typed
from aryl.scheduling.plan import Reason, SchedulePlan
from aryl.scheduling.policy import PassContext, Policy
from aryl.scheduling.state import ClusterState, Placement, is_finite_number

__all__ = ["TiresiasPolicy"]


class TiresiasPolicy(Policy):
    """Discretised 2D-LAS with preemption, no duration knowledge."""

    name = "tiresias"
    uses_tick = True
    options_known: ClassVar[tuple[str, ...]] = ("return_idle_loans", "las_thresholds_gpu_s")

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        th = self.options.get("las_thresholds_gpu_s", (3600.0, 36000.0))
        items = list(th) if isinstance(th, (list, tuple)) else [None]
        if not all(x == math.inf or is_finite_number(x) for x in items):
            raise InvalidInputError(
                "policy 'tiresias': option las_thresholds_gpu_s must be a list of numbers "
                "(not NaN)"
            )
        self.thresholds = sorted(float(x) for x in th)
        key = ",".join(repr(x) for x in self.thresholds)
        self.queue_name = f"las:{key}"

    def level(self, gpu_s: float) -> int:
        return bisect.bisect_right(self.thresholds, gpu_s)

    def _key(self, st: ClusterState, j: int) -> int:
        return self.level(st.attained_gpu_s[j])

    def decide(self, st: ClusterState, ctx: PassContext, plan: SchedulePlan) -> None:
        if not st.queued:
            return
        lst = st.sorted_queue(self.queue_name, self._key)
        servers = st.training_servers
        free = list(ctx.free)
        avail = sum(free[s] for s in servers)
        gpw = st.gpus_per_worker
        blocked: tuple[int, int] | None = None
        for lv, j in lst:
            g = gpw[j]
            w = self.base_workers(st, j)
            place = gang_place_typed(st, free, j, w) if w * g <= avail else None
            if place is None:
                if blocked is None:
                    blocked = (lv, j)
                if avail == 0:
                    break
                continue
            _take(free, place, g)
            avail -= w * g
            plan.starts.append(
                (j, place, Reason.LAS_PRIORITY if blocked is None else Reason.BACKFILL)
            )
        if blocked is not None:
            self._preempt_for(st, plan, free, blocked)

    def next_wakeup_s(self, st: ClusterState, plan: SchedulePlan) -> float:
        """When a running job's attained service first reaches a level boundary that
        puts it above the lowest level of a job waiting after ``plan`` (the
        preemption rule may act then; ``inf`` if nothing waits or no boundary is
        left).  Jobs running after the plan accrue ``workers x gpus_per_worker``
        GPU-seconds per second; O(running + queued + thresholds)."""
        now = st.now_s
        started = {j: place for j, place, _ in plan.starts}
        preempted = {j for j, _ in plan.preemptions}
        lv_min = len(self.thresholds)
        for j in st.queued:
            if j not in started:
                lv_min = min(lv_min, self.level(st.attained_gpu_s[j]))
        for j in preempted:
            lv_min = min(lv_min, self.level(st.attained_at(j, now)))
        t = math.inf
        if lv_min >= len(self.thresholds):
            return t
        gpw = st.gpus_per_worker
        for r in st.running:
            if r not in preempted and r not in started:
                t = min(t, self._crossing(st.attained_gpu_s[r], st.attained_at_s[r],
                                          st.workers[r] * gpw[r], now, lv_min))
        for j, place in started.items():
            t = min(t, self._crossing(st.attained_gpu_s[j], now, sum(place.values()) * gpw[j],
                                      now, lv_min))
        return t

    def _crossing(self, a0: float, t0: float, rate: int, now: float, lv_min: int) -> float:
        """First time ``t`` at which ``a0 + rate (t - t0)`` reaches a level above
        ``lv_min`` (``inf``: never)."""
        th = self.thresholds
        k = max(self.level(a0 + rate * (now - t0)), lv_min)
        if k >= len(th) or rate <= 0:
            return math.inf
        target = th[k]
        t = t0 + (target - a0) / rate
        while a0 + rate * (t - t0) < target:
            t = math.nextafter(t, math.inf)
        return t

    def _preempt_for(
        self, st: ClusterState, plan: SchedulePlan, free: list[int], head: tuple[int, int]
    ) -> None:
        lv, j = head
        g = st.gpus_per_worker[j]
        w = self.base_workers(st, j)
        need = w * g
        started = {x for x, _, _ in plan.starts}
        victims: list[tuple[int, int]] = []
        now = st.now_s
        for r in st.running:
            if r in started:
                continue
            rl = self.level(st.attained_at(r, now))
            if rl > lv:
                victims.append((-rl, -r))
        if not victims:
            return
        victims.sort()
        servers = st.training_servers
        scratch = list(free)
        avail = sum(scratch[s] for s in servers)
        chosen: list[int] = []
        for _, neg in victims:
            r = -neg
            place = st.placement[r]
            assert place is not None
            gr = st.gpus_per_worker[r]
            for s, k in place.items():
                scratch[s] += k * gr
            avail += st.workers[r] * gr
            chosen.append(r)
            if avail >= need:
                p = gang_place_typed(st, scratch, j, w)
                if p is not None:
                    for r2 in chosen:
                        plan.preemptions.append((r2, Reason.LAS_PREEMPT))
                    plan.starts.append((j, p, Reason.LAS_PRIORITY))
                    return


def _take(free: list[int], place: Placement, g: int) -> None:
    for s, k in place.items():
        free[s] -= k * g
