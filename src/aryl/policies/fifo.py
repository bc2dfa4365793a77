"""``fifo``: the baseline of [Aryl] (docs/model.md).

Strict FIFO: jobs start in arrival order (then trace order) and the head of
the queue blocks the rest (no backfill).  No loaning, no elastic scaling
(every job runs at its traced size), gang placement on the training servers
(:func:`~aryl.policies.base.gang_place`).  So JCT = queuing delay + traced
duration exactly.  Queue: a heap of job indices (index order = arrival order),
O(log n) per arrival and start.
"""

from __future__ import annotations

import heapq
from typing import Any

from aryl.policies.base import Decision, Policy, Reason, SimView, gang_place, register

__all__ = ["FifoPolicy"]


@register("fifo")
class FifoPolicy(Policy):
    """Strict FIFO with gang placement; the paper's baseline."""

    name = "fifo"

    def __init__(self, view: SimView, options: dict[str, Any]) -> None:
        super().__init__(view, options)
        self.q: list[int] = []
        self.capacity = len(view.training_servers) * view.gpus_per_server

    def enqueue(self, j: int) -> None:
        heapq.heappush(self.q, j)

    def n_queued(self) -> int:
        return len(self.q)

    def schedule(self, changed: bool) -> Decision:
        d = Decision()
        q = self.q
        if not q:
            return d
        v = self.view
        free = v.free
        avail = self.capacity - v.busy
        scratch: list[int] | None = None
        servers = v.training_servers
        S = v.gpus_per_server
        while q:
            j = q[0]
            g = v.gpw[j]
            w = v.base_workers[j]
            if w * g > avail:
                break
            place = gang_place(scratch if scratch is not None else free, servers, w, g, S)
            if place is None:
                break
            if scratch is None:
                scratch = list(free)
            for s, k in place.items():
                scratch[s] -= k * g
            avail -= w * g
            heapq.heappop(q)
            d.starts.append((j, place, Reason.FIFO_HEAD))
        return d
