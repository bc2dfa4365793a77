"""``fifo-backfill``: FIFO with EASY backfilling (Lifka, 1995; Mu'alem and Feitelson, 2001).

Jobs start in arrival order (then job index) while they fit, with the gang
placement of ``fifo``.  The first job that does not fit (the *head*) gets a
reservation: its *shadow time* is the earliest time enough GPUs will be free
for it, from the expected finish of the running jobs (remaining work at their
current speed; a job that pauses counts its pause), and the *extra GPUs* are
those still free at that time beyond its need.  A later job may start now if
it fits now and either finishes by the shadow time or uses only extra GPUs
(which it then consumes), so it never delays the head.  GPU counts over the
training servers that can hold one of the head's workers (a server of ``S``
GPUs with ``S >= g``; all of them when every server has one size), as in
classic EASY on processor counts: placement fragmentation is not modelled in
the reservation, and GPUs of smaller servers neither count for the head nor
are charged to a backfilled job.  Durations are known (the
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
        pool: list[bool] | None = None
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
                pool = self._pool(st, g)
                shadow, extra = self._reservation(st, plan, avail, free, pool, need)
                continue
            if need > avail:
                continue
            ends = now + self._runtime(st, j)
            fits_before = ends <= shadow
            if not fits_before and need > extra and pool is None:
                continue
            place = gang_place_typed(st, free, j, w)
            if place is None:
                continue
            if not fits_before:
                used = _gpus_on(place, pool, g)
                if used > extra:
                    continue
                extra -= used
            _take(free, place, g)
            avail -= need
            plan.starts.append((j, place, Reason.BACKFILL))

    @staticmethod
    def _runtime(st: ClusterState, j: int) -> float:
        """Seconds job ``j`` runs at its reference size (known durations)."""
        return st.remaining_s[j]

    @staticmethod
    def _pool(st: ClusterState, g: int) -> list[bool] | None:
        """Per server, whether it is a training server that holds a worker of ``g``
        GPUs; ``None`` when that is every training server (the GPU counts of the
        whole training cluster)."""
        train = st.training_servers
        if all(st.server_gpus[s] >= g for s in train):
            return None
        pool = [False] * len(st.server_gpus)
        for s in train:
            pool[s] = st.server_gpus[s] >= g
        return pool

    @staticmethod
    def _reservation(
        st: ClusterState, plan: SchedulePlan, avail: int, free: list[int],
        pool: list[bool] | None, need: int,
    ) -> tuple[float, int]:
        """Shadow time and extra GPUs of the head job needing ``need`` GPUs on the
        servers of ``pool`` (every training server when ``None``: ``avail`` free
        GPUs now, else the pool's in ``free``, the pass's scratch free list after
        the starts so far)."""
        now = st.now_s
        nt = len(st.training_servers)  # training servers have the lowest indexes
        have = avail if pool is None else sum(free[s] for s in st.training_servers if pool[s])
        ends: list[tuple[float, int]] = []
        for r in st.running:
            place = st.placement[r]
            assert place is not None
            # the GPUs it frees on training servers (none on a loaned server counts)
            gpus = _gpus_on(place, pool, st.gpus_per_worker[r], nt)
            if not gpus:
                continue
            sp = st.speed[r]
            left = st.remaining_at(r, now)
            t_end = max(st.progress_at_s[r], now) + (left / sp if sp > 0 else math.inf)
            ends.append((t_end, gpus))
        for j, place, _ in plan.starts:  # started in this pass, at their reference size
            gpus = _gpus_on(place, pool, st.gpus_per_worker[j], nt)
            if gpus:
                ends.append((now + st.remaining_s[j], gpus))
        ends.sort()
        for t_end, gpus in ends:
            have += gpus
            if have >= need:
                return t_end, have - need
        return math.inf, 0


def _gpus_on(place: dict[int, int], pool: list[bool] | None, g: int, nt: int | None = None) -> int:
    """GPUs of ``place`` on the servers of ``pool`` (``None``: every server, or the
    first ``nt`` when given)."""
    if pool is None:
        if nt is None:
            return sum(place.values()) * g
        return sum(k for s, k in place.items() if s < nt) * g
    return sum(k for s, k in place.items() if pool[s]) * g


def _take(free: list[int], place: dict[int, int], g: int) -> None:
    for s, k in place.items():
        free[s] -= k * g
