"""``fifo``: the baseline of [Aryl].

Strict FIFO: jobs start in arrival order (then job index) and the head of the
queue blocks the rest (no backfill).  No loaning, no elastic scaling (every job
runs at its reference size), gang placement on the training servers
(:func:`~aryl.scheduling.placement.gang_place`).  So JCT = queuing delay +
traced duration exactly.  O(started jobs x servers) per pass after the queue
index (kept by the state, O(q) per arrival).
"""

from __future__ import annotations

from aryl.scheduling.placement import gang_place_typed
from aryl.scheduling.plan import Reason, SchedulePlan
from aryl.scheduling.policy import PassContext, Policy
from aryl.scheduling.state import ClusterState

__all__ = ["FifoPolicy", "arrival_key"]


def arrival_key(st: ClusterState, j: int) -> float:
    """Queue key of arrival order (ties: lower job index, by the index's tuple order)."""
    return st.arrival_s[j]


class FifoPolicy(Policy):
    """Strict FIFO with gang placement; the paper's baseline."""

    name = "fifo"

    def decide(self, st: ClusterState, ctx: PassContext, plan: SchedulePlan) -> None:
        if not st.queued:
            return
        queue = st.sorted_queue("arrival", arrival_key)
        free = ctx.free
        # free GPUs of the training servers (busy counts workers on loaned servers too,
        # which a state from another policy or a client may have)
        avail = st.training_gpus - (st.busy - st.busy_loaned)
        scratch: list[int] | None = None
        ref = st.ref_workers
        gpw = st.gpus_per_worker
        for _, j in queue:
            g = gpw[j]
            w = ref[j]
            if w * g > avail:
                break
            place = gang_place_typed(st, scratch if scratch is not None else free, j, w)
            if place is None:
                break
            if scratch is None:
                scratch = list(free)
            for s, k in place.items():
                scratch[s] -= k * g
            avail -= w * g
            plan.starts.append((j, place, Reason.FIFO_HEAD))
