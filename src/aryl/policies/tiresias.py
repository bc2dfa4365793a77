"""``tiresias``: discretised two-dimensional least-attained-service (2D-LAS).

Tiresias (Gu et al., NSDI'19) schedules without knowing durations: a job's
priority level is the number of thresholds its attained service (GPU-seconds,
the "2D" of GPUs x time) has crossed; lower levels go first, FIFO (arrival,
then trace order) within a level.  Thresholds default to 1 and 10 GPU-hours
(option ``las_thresholds_gpu_s``).

Each pass: queued jobs in (level, arrival) order start when gang placement on
the training servers finds room (backfill: a job that does not fit is
skipped).  Then, if the first job that did not fit outranks running jobs, the
lowest-priority running jobs (highest level, latest arrival first) are
preempted when that frees enough room to place it; one such preemption round
per pass.  Runs on the periodic tick too (levels grow while jobs run).  No
loaning, no elastic scaling.  Queue: sorted list of ``(level, job)``; levels of
queued jobs do not change while they wait.
"""

from __future__ import annotations

import bisect
from typing import Any

from aryl.policies.base import Decision, Placement, Policy, Reason, SimView, gang_place, register

__all__ = ["TiresiasPolicy"]


@register("tiresias")
class TiresiasPolicy(Policy):
    """Discretised 2D-LAS with preemption, no duration knowledge."""

    name = "tiresias"
    uses_tick = True

    def __init__(self, view: SimView, options: dict[str, Any]) -> None:
        super().__init__(view, options)
        th = options.get("las_thresholds_gpu_s", (3600.0, 36000.0))
        self.thresholds = sorted(float(x) for x in th)
        self.lst: list[tuple[int, int]] = []
        self.level: dict[int, int] = {}

    def _level(self, gpu_s: float) -> int:
        return bisect.bisect_right(self.thresholds, gpu_s)

    def enqueue(self, j: int) -> None:
        lv = self._level(self.view.attained_gpu_s(j))
        self.level[j] = lv
        bisect.insort(self.lst, (lv, j))

    def n_queued(self) -> int:
        return len(self.lst)

    def schedule(self, changed: bool) -> Decision:
        d = Decision()
        lst = self.lst
        if not lst:
            return d
        v = self.view
        servers = v.training_servers
        S = v.gpus_per_server
        free = list(v.free)
        avail = sum(free[s] for s in servers)
        i = 0
        blocked: tuple[int, int] | None = None
        while i < len(lst):
            lv, j = lst[i]
            g = v.gpw[j]
            w = v.base_workers[j]
            place = gang_place(free, servers, w, g, S) if w * g <= avail else None
            if place is None:
                if blocked is None:
                    blocked = (lv, j)
                if avail == 0:
                    break
                i += 1
                continue
            self._take(free, place, g)
            avail -= w * g
            del lst[i]
            del self.level[j]
            d.starts.append((j, place, Reason.LAS_PRIORITY if blocked is None else Reason.BACKFILL))
        if blocked is not None:
            self._preempt_for(d, free, blocked)
        return d

    @staticmethod
    def _take(free: list[int], place: Placement, g: int) -> None:
        for s, k in place.items():
            free[s] -= k * g

    def _preempt_for(self, d: Decision, free: list[int], head: tuple[int, int]) -> None:
        v = self.view
        lv, j = head
        g = v.gpw[j]
        w = v.base_workers[j]
        need = w * g
        started = {x for x, _, _ in d.starts}
        victims: list[tuple[int, int]] = []
        for r in v.running:
            if r in started:
                continue
            rl = self._level(v.attained_gpu_s(r))
            if rl > lv:
                victims.append((-rl, -r))
        if not victims:
            return
        victims.sort()
        servers = v.training_servers
        scratch = list(free)
        avail = sum(scratch[s] for s in servers)
        chosen: list[int] = []
        for _, neg in victims:
            r = -neg
            place = v.placement[r]
            assert place is not None
            gr = v.gpw[r]
            for s, k in place.items():
                scratch[s] += k * gr
            avail += v.workers[r] * gr
            chosen.append(r)
            if avail >= need:
                p = gang_place(scratch, servers, w, g, v.gpus_per_server)
                if p is not None:
                    for r2 in chosen:
                        d.preempts.append((r2, Reason.LAS_PREEMPT))
                    i = bisect.bisect_left(self.lst, (lv, j))
                    del self.lst[i]
                    del self.level[j]
                    d.starts.append((j, p, Reason.LAS_PRIORITY))
                    return
