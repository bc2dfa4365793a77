"""Invariant checker (on in tests, ``--check`` in the CLI).

After every scheduling pass: no server over-committed and its free GPUs equal
capacity minus placements; no placement on an inference server that is not on
loan; no loaned server left without a training worker when the policy
returns idle loans; the policy's own incremental bookkeeping (``check_state``,
if it has one) matches a recomputation; every running job at or above its base
and at or below its maximum, its
worker count equal to its placement; the busy-GPU counter equal to the sum of
placements.  After a reclaim: the loaned servers no longer exceed what the
inference side allows (servers returned by their deadline).  At the end: every
job finished exactly once (or is listed unfinished/infeasible) and the per-job
GPU-seconds add up to the integral of busy GPUs.  Cost O(n_servers + n_running)
per pass.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aryl.sim.engine import Engine

__all__ = ["Checker", "InvariantError"]


class InvariantError(AssertionError):
    """A simulator invariant does not hold (a bug, never bad input)."""


class Checker:
    """Checks an :class:`~aryl.sim.engine.Engine` in place."""

    def __init__(self, eng: Engine) -> None:
        self.eng = eng

    def after_pass(self) -> None:
        from aryl.sim.engine import LOANED, RUNNING

        e = self.eng
        used = [0] * len(e.free)
        busy = 0
        base_busy = 0
        for j in e.running:
            if e.state[j] != RUNNING:
                raise InvariantError(f"job {j} in the running set but state {e.state[j]}")
            place = e.placement[j]
            if not place:
                raise InvariantError(f"running job {j} has no placement")
            w = sum(place.values())
            if w != e.workers[j]:
                raise InvariantError(f"job {j}: workers {e.workers[j]} != placement {w}")
            if not e.base_workers[j] <= w <= e.max_workers[j]:
                raise InvariantError(
                    f"job {j}: {w} workers outside [{e.base_workers[j]}, {e.max_workers[j]}]"
                )
            g = e.gpw[j]
            for s, k in place.items():
                if k <= 0 or e.jobs_on[s].get(j) != k:
                    raise InvariantError(f"job {j}: placement on server {s} inconsistent")
                used[s] += k * g
            busy += w * g
            base_busy += e.base_workers[j] * g
        for s in range(len(e.free)):
            if e.free[s] < 0:
                raise InvariantError(f"server {s} over-committed (free {e.free[s]})")
            if used[s] + e.free[s] != e.cap[s]:
                raise InvariantError(
                    f"server {s}: used {used[s]} + free {e.free[s]} != capacity {e.cap[s]}"
                )
            if s >= e.n_train and e.inf_state[s - e.n_train] != LOANED and used[s]:
                raise InvariantError(f"inference server {s} not on loan but hosts training work")
        if e.tentative:
            raise InvariantError(f"offered servers {e.tentative} left unsettled after a pass")
        if e.return_loans:
            for i, st in enumerate(e.inf_state):
                if st == LOANED and not e.jobs_on[e.n_train + i]:
                    raise InvariantError(f"loaned server {e.n_train + i} idle after a pass")
        if base_busy != e.base_busy:
            raise InvariantError(f"base-busy counter {e.base_busy} != placements {base_busy}")
        if busy != e.busy:
            raise InvariantError(f"busy counter {e.busy} != placements {busy}")
        if e.n_loaned > max(0, e.n_inf - e.needed) and e.config.reclaim_grace_s == 0:
            raise InvariantError(
                f"{e.n_loaned} servers on loan while inference needs {e.needed} of {e.n_inf}"
            )
        self_check = getattr(e.policy, "check_state", None)
        if self_check is not None:
            try:
                self_check()
            except AssertionError as exc:
                raise InvariantError(f"policy {e.policy_name}: {exc}") from exc
        if e.reclaim_deadline_misses:
            raise InvariantError("a reclaim returned fewer servers than asked by the deadline")

    def at_end(self) -> None:
        from aryl.sim.engine import DONE, INFEASIBLE, RUNNING

        e = self.eng
        if e.events is not None:
            finishes: dict[int, int] = {}
            for _, j, what, _w in e.events:
                if what == "finish":
                    finishes[j] = finishes.get(j, 0) + 1
            for j, c in finishes.items():
                if c != 1 or e.state[j] != DONE:
                    raise InvariantError(f"job {j} finished {c} times")
        for j, st in enumerate(e.state):
            if st == DONE and math.isnan(e.finish_t[j]):
                raise InvariantError(f"job {j} done without a finish time")
            if e.config.horizon_s is None and st not in (DONE, INFEASIBLE):
                raise InvariantError(f"job {j} never finished")
        total = 0.0
        for j in range(len(e.state)):
            g = e.gpu_s[j]
            if e.state[j] == RUNNING:
                g += e.workers[j] * e.gpw[j] * (e.now - e.alloc_t[j])
            total += g
        if not math.isclose(total, e.busy_int, rel_tol=1e-9, abs_tol=1e-6):
            raise InvariantError(f"GPU-seconds of jobs {total} != busy integral {e.busy_int}")
