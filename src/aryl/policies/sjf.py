"""``sjf``: shortest-job-first with backfill and a starvation bound.

Queued jobs in order of estimated remaining time at their size (ties: arrival,
then trace order); a job that does not fit is skipped (backfill).  A job whose
*queue age* has reached ``starvation_bound_s`` (SimConfig) is *starving*: the
starving jobs are taken first, oldest first, and the first one that does not
fit blocks backfill until it starts, so large jobs do not starve.  No loaning,
no elastic scaling, gang placement on training servers.

Queue age (docs/simulator.md): the time a job has spent queued since its first
arrival, i.e. ``wait_s`` accumulated over earlier waits plus the current wait
``now - queued_since``.  A preemption does not reset it (the clock started at
the first arrival) and time spent running does not count.  While a job waits
its age grows at the rate of the clock, so ``queued_since - wait_s`` (its *wait
origin*, the first arrival for a job never started) is constant and orders the
queued jobs by age: the guard's heap is keyed by it, so the first job in heap
order that is not starving proves that no later one is (the non-starving jobs
are skipped, never a starving one behind them).
Also the base phase (phase 1) of the ``aryl`` policy, which overrides
:meth:`SjfPolicy._place` and :meth:`SjfPolicy._groups`.

Queue: a sorted list of ``(estimate, job)`` (bisect insert, delete by index)
plus a heap of ``(wait origin, job)`` for the oldest job (stale entries of
started or re-queued jobs are dropped when they reach the top); a pass stops
scanning as soon as no free GPU is left.
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
        self.oldest: list[tuple[float, int]] = []
        self.origin: dict[int, float] = {}  # queued job -> wait origin (its heap key)
        self.bound = float(options.get("starvation_bound_s", view.config.starvation_bound_s))

    def enqueue(self, j: int) -> None:
        k = self.view.remaining_time(j, self.view.base_workers[j])
        self.key[j] = k
        bisect.insort(self.lst, (k, j))
        # wait origin: first arrival, shifted by the time spent running since
        o = self.view.queued_since[j] - self.view.wait_s[j]
        self.origin[j] = o
        heapq.heappush(self.oldest, (o, j))

    def n_queued(self) -> int:
        return len(self.lst)

    def _remove(self, j: int) -> None:
        del self.origin[j]
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
        origin = self.origin
        key = self.key
        blocked = False
        # 1. starving jobs, oldest first; the first that does not fit blocks.
        while self.oldest:
            o, j = self.oldest[0]
            if origin.get(j) != o:  # started, or re-queued since (a newer entry)
                heapq.heappop(self.oldest)
                continue
            if now - o < self.bound:
                # queue age = now - origin; every entry behind this one has a
                # later origin, so no starving job is left: skip them all
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
            del origin[j]
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

    def queue_age_s(self, j: int) -> float:
        """Queue age of queued job ``j`` now: seconds queued since its first arrival.

        ``wait_s[j]`` (earlier waits) + ``now - queued_since[j]`` (this wait);
        time spent running does not count and a preemption does not reset it.
        """
        v = self.view
        return v.wait_s[j] + (v.now - v.queued_since[j])

    def check_state(self) -> None:
        """Recompute the queue bookkeeping; raise ``AssertionError`` if it drifted.

        Every queued job has a live heap entry whose key is its wait origin
        ``queued_since - wait_s`` (so heap order is queue-age order), and the
        SJF list and key dict agree.  O(queue length + heap size).
        """
        v = self.view
        if set(self.key) != set(self.origin) or len(self.lst) != len(self.key):
            raise AssertionError("SJF list, keys and wait origins disagree")
        live = {j for o, j in self.oldest if self.origin.get(j) == o}
        if live != set(self.origin):
            raise AssertionError("a queued job has no live entry in the oldest-job heap")
        for j, o in self.origin.items():
            if abs(o - (v.queued_since[j] - v.wait_s[j])) > 1e-9 * max(1.0, abs(o)):
                raise AssertionError(f"job {j}: wait origin {o} != queued_since - wait_s")
            if abs(self.queue_age_s(j) - (v.now - o)) > 1e-6 * max(1.0, abs(v.now)):
                raise AssertionError(f"job {j}: queue age inconsistent with its heap key")
