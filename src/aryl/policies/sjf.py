"""``sjf``: shortest-job-first with backfill and a starvation bound.

Queued jobs in order of estimated remaining time at their size (ties: arrival,
then trace order); a job that does not fit is skipped (backfill).  A job that
has waited longer than ``starvation_bound_s`` (SimConfig) is taken first, in
arrival order, and blocks backfill until it starts, so large jobs do not
starve.  No loaning, no elastic scaling, gang placement on training servers.
Also the base phase (phase 1) of the ``aryl`` policy, which overrides
:meth:`SjfPolicy._place` and :meth:`SjfPolicy._groups`.

Queue: a sorted list of ``(estimate, job)`` (bisect insert, delete by index)
plus a heap of job indices for the oldest job; a pass stops scanning as soon as
no free GPU is left.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Any

from aryl.policies.base import Decision, Placement, Policy, Reason, SimView, gang_place, register

__all__ = ["SjfPolicy"]


@register("sjf")
class SjfPolicy(Policy):
    """Shortest-job-first (SRTF order at each pass, non-preemptive) with backfill."""

    name = "sjf"

    def __init__(self, view: SimView, options: dict[str, Any]) -> None:
        super().__init__(view, options)
        self.lst: list[tuple[float, int]] = []
        self.key: dict[int, float] = {}
        self.oldest: list[int] = []
        self.bound = float(options.get("starvation_bound_s", view.config.starvation_bound_s))

    def enqueue(self, j: int) -> None:
        k = self.view.remaining_time(j, self.view.base_workers[j])
        self.key[j] = k
        bisect.insort(self.lst, (k, j))
        heapq.heappush(self.oldest, j)

    def n_queued(self) -> int:
        return len(self.lst)

    def _remove(self, j: int) -> None:
        k = self.key.pop(j)
        i = bisect.bisect_left(self.lst, (k, j))
        del self.lst[i]

    # hooks for the aryl base phase -------------------------------------
    def _capacity_view(self) -> tuple[list[int], int]:
        """Scratch free-GPU list and total free GPUs usable by base demands."""
        v = self.view
        free = list(v.free)
        return free, sum(free[s] for s in v.training_servers)

    def _place(self, free: list[int], j: int) -> Placement | None:
        v = self.view
        return gang_place(free, v.training_servers, v.base_workers[j], v.gpw[j], v.gpus_per_server)

    # ------------------------------------------------------------------
    def _base_phase(self, d: Decision) -> tuple[list[int], int]:
        v = self.view
        free, avail = self._capacity_view()
        now = v.now
        qs = v.queued_since
        key = self.key
        blocked = False
        # 1. starving jobs, oldest first; the first that does not fit blocks.
        while self.oldest:
            j = self.oldest[0]
            if j not in key:
                heapq.heappop(self.oldest)
                continue
            if now - qs[j] < self.bound:
                break
            need = v.base_workers[j] * v.gpw[j]
            place = self._place(free, j) if need <= avail else None
            if place is None:
                blocked = True
                break
            self._take(free, place, j)
            avail -= need
            heapq.heappop(self.oldest)
            self._remove(j)
            d.starts.append((j, place, Reason.STARVATION_GUARD))
        if blocked:
            return free, avail
        # 2. SJF order with backfill
        lst = self.lst
        i = 0
        failed: dict[int, int] = {}  # gpus per worker -> smallest worker count that failed
        first = True
        while i < len(lst) and avail > 0:
            _, j = lst[i]
            g = v.gpw[j]
            w = v.base_workers[j]
            f = failed.get(g)
            if w * g > avail or (f is not None and w >= f):
                i += 1
                first = False
                continue
            place = self._place(free, j)
            if place is None:
                failed[g] = w if f is None else min(f, w)
                i += 1
                first = False
                continue
            self._take(free, place, j)
            avail -= w * g
            del lst[i]
            del key[j]
            d.starts.append((j, place, Reason.SJF_ORDER if first else Reason.BACKFILL))
        return free, avail

    def _take(self, free: list[int], place: Placement, j: int) -> None:
        g = self.view.gpw[j]
        for s, k in place.items():
            free[s] -= k * g

    def schedule(self, changed: bool) -> Decision:
        d = Decision()
        if self.lst:
            self._base_phase(d)
        return d
