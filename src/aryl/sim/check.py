"""Invariant checker (on in tests, ``--check`` in the CLI).

After every scheduling pass: no server over-committed and its free GPUs equal
capacity minus placements; no placement on an inference server that is not on
loan; no loaned server left without a training worker when the policy
returns idle loans; the state's derived indexes (free GPUs, jobs per server,
extras, busy counters, queue indexes) match a recomputation; every running job
at or above its base and at or below its maximum, its worker count equal to
its placement; every job in exactly one of the state's sets.  After a reclaim:
the loaned servers no longer exceed what the inference side allows (servers
returned by their deadline).  At the end: every job finished exactly once (or
is listed unfinished/infeasible) and the per-job GPU-seconds add up to the
integral of busy GPUs.  Cost O(n_servers + n_running + n_queued) per pass.
"""

from __future__ import annotations

import math
from typing import Any

from aryl.scheduling.state import DONE, INFEASIBLE, LOANED, QUEUED, RUNNING, TRAINING

__all__ = ["Checker", "InvariantError"]


class InvariantError(AssertionError):
    """A simulator invariant does not hold (a bug, never bad input)."""


class Checker:
    """Checks an :class:`~aryl.sim.engine.Engine` in place (typed ``Any``: the engine
    imports this module, never the other way round)."""

    def __init__(self, eng: Any) -> None:
        self.eng = eng

    def after_pass(self) -> None:
        e = self.eng
        st = e.state
        used = [0] * st.n_servers
        busy = 0
        for j in st.running:
            if st.status[j] != RUNNING:
                raise InvariantError(f"job {j} in the running set but status {st.status[j]}")
            place = st.placement[j]
            if not place:
                raise InvariantError(f"running job {j} has no placement")
            w = sum(place.values())
            if w != st.workers[j]:
                raise InvariantError(f"job {j}: workers {st.workers[j]} != placement {w}")
            if not e.base_workers[j] <= w <= e.max_workers[j]:
                raise InvariantError(
                    f"job {j}: {w} workers outside [{e.base_workers[j]}, {e.max_workers[j]}]"
                )
            g = st.gpus_per_worker[j]
            for s, k in place.items():
                if k <= 0 or st.jobs_on[s].get(j) != k:
                    raise InvariantError(f"job {j}: placement on server {s} inconsistent")
                used[s] += k * g
            busy += w * g
        for j in st.queued:
            if st.status[j] != QUEUED or st.placement[j] is not None:
                raise InvariantError(f"job {j} in the queue but status {st.status[j]}")
        for s in range(st.n_servers):
            status = st.server_status[s]
            cap = st.server_gpus[s] if status in (TRAINING, LOANED) else 0
            if st.free[s] < 0:
                raise InvariantError(f"server {s} over-committed (free {st.free[s]})")
            if used[s] + st.free[s] != cap:
                raise InvariantError(
                    f"server {s}: used {used[s]} + free {st.free[s]} != capacity {cap}"
                )
            if status not in (TRAINING, LOANED) and used[s]:
                raise InvariantError(f"inference server {s} not on loan but hosts training work")
        pol = e.policy
        if pol.loans and pol.return_idle_loans:
            for s in st.loaned_servers():
                if not st.jobs_on[s]:
                    raise InvariantError(f"loaned server {s} idle after a pass")
        if busy != st.busy:
            raise InvariantError(f"busy counter {st.busy} != placements {busy}")
        if st.n_loaned > max(0, e.n_inf - st.servers_needed) and e.config.reclaim_grace_s == 0:
            raise InvariantError(
                f"{st.n_loaned} servers on loan while inference needs "
                f"{st.servers_needed} of {e.n_inf}"
            )
        try:
            st.check_indexes()
        except AssertionError as exc:
            raise InvariantError(f"cluster state: {exc}") from exc
        if e.reclaim_deadline_misses:
            raise InvariantError("a reclaim returned fewer servers than asked by the deadline")

    def at_end(self) -> None:
        e = self.eng
        st = e.state
        if e.events is not None:
            finishes: dict[int, int] = {}
            for _, j, what, _w in e.events:
                if what == "finish":
                    finishes[j] = finishes.get(j, 0) + 1
            for j, c in finishes.items():
                if c != 1 or st.status[j] != DONE:
                    raise InvariantError(f"job {j} finished {c} times")
        for j, status in enumerate(st.status):
            if status == DONE and math.isnan(e.finish_t[j]):
                raise InvariantError(f"job {j} done without a finish time")
            if e.config.horizon_s is None and status not in (DONE, INFEASIBLE):
                raise InvariantError(f"job {j} never finished")
        total = 0.0
        for j in range(st.n_jobs):
            total += st.attained_at(j, e.now)
        if not math.isclose(total, e.busy_int, rel_tol=1e-9, abs_tol=1e-6):
            raise InvariantError(f"GPU-seconds of jobs {total} != busy integral {e.busy_int}")
