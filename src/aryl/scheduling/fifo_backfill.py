"""``fifo-backfill``: FIFO with EASY backfilling (Lifka, 1995; Mu'alem and Feitelson, 2001).

Jobs start in arrival order (then job index) while they fit, with the gang
placement of ``fifo``.  The first job that does not fit (the *head*) gets a
reservation: its *shadow time* is the earliest time enough GPUs will be free
for it, from the expected finish of the running jobs (remaining work at their
current speed; a job that pauses counts its pause), and the *extra GPUs* are
those still free at that time beyond its need.  A later job may start now if
it fits now and either finishes by the shadow time or uses only extra GPUs
(which it then consumes), so it never delays the head.  GPU counts per pool of
training servers, as in classic EASY on processor counts: placement
fragmentation is not modelled in the reservation.  Durations are known (the
trace's runtimes serve as exact user estimates).  No loaning, no elastic
scaling.
"""

from __future__ import annotations

import math

from aryl.scheduling.fifo import arrival_key
from aryl.scheduling.placement import gang_place_typed
from aryl.scheduling.plan import Reason, SchedulePlan
from aryl.scheduling.policy import PassContext, Policy
from aryl.scheduling.state import ClusterState

__all__ = ["FifoBackfillPolicy"]


class FifoBackfillPolicy(Policy):
    """Strict FIFO order with EASY backfilling; every job at its reference size."""

    name = "fifo-backfill"

    def decide(self, st: ClusterState, ctx: PassContext, plan: SchedulePlan) -> None:
        if not st.queued:
            return
        queue = st.sorted_queue("arrival", arrival_key)
        free = list(ctx.free)
        avail = st.training_gpus - (st.busy - st.busy_loaned)  # free GPUs of training servers
        ref = st.ref_workers
        gpw = st.gpus_per_worker
        now = st.now_s
        head: int | None = None
        shadow = math.inf
        extra = 0
        for _, j in queue:
            g = gpw[j]
            w = ref[j]
            need = w * g
            if head is None:
                place = gang_place_typed(st, free, j, w) if need <= avail else None
                if place is not None:
                    _take(free, place, g)
                    avail -= need
                    plan.starts.append((j, place, Reason.FIFO_HEAD))
                    continue
                head = j
                shadow, extra = self._reservation(st, plan, avail, need)
                continue
            if need > avail:
                continue
            ends = now + self._runtime(st, j)
            fits_before = ends <= shadow
            if not fits_before and need > extra:
                continue
            place = gang_place_typed(st, free, j, w)
            if place is None:
                continue
            _take(free, place, g)
            avail -= need
            if not fits_before:
                extra -= need
            plan.starts.append((j, place, Reason.BACKFILL))

    @staticmethod
    def _runtime(st: ClusterState, j: int) -> float:
        """Seconds job ``j`` runs at its reference size (known durations)."""
        return st.remaining_s[j]

    @staticmethod
    def _reservation(
        st: ClusterState, plan: SchedulePlan, avail: int, need: int
    ) -> tuple[float, int]:
        """Shadow time and extra GPUs of the head job needing ``need`` GPUs."""
        now = st.now_s
        nt = len(st.training_servers)  # training servers have the lowest indexes
        ends: list[tuple[float, int]] = []
        for r in st.running:
            place = st.placement[r]
            assert place is not None
            # the GPUs it frees on training servers (none on a loaned server counts)
            gpus = sum(k for s, k in place.items() if s < nt) * st.gpus_per_worker[r]
            if not gpus:
                continue
            sp = st.speed[r]
            left = st.remaining_at(r, now)
            t_end = max(st.progress_at_s[r], now) + (left / sp if sp > 0 else math.inf)
            ends.append((t_end, gpus))
        for j, _, _ in plan.starts:  # started in this pass, at their reference size
            ends.append((now + st.remaining_s[j], st.ref_workers[j] * st.gpus_per_worker[j]))
        ends.sort()
        have = avail
        for t_end, gpus in ends:
            have += gpus
            if have >= need:
                return t_end, have - need
        return math.inf, 0


def _take(free: list[int], place: dict[int, int], g: int) -> None:
    for s, k in place.items():
        free[s] -= k * g
