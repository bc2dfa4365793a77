"""``aryl`` and its ablations: loaning + SJF base phase + MCKP elastic phase [Aryl].

One scheduling pass (ARYL.md §3):

0. **Split** every running elastic job's placement into base workers (the first
   ``b`` workers over its servers in ascending id order, so training servers
   first) and extra workers (the rest).  Extras are re-decided from scratch each
   pass, so the GPUs they hold count as available to both phases.
1. **Base phase** (inherited from :mod:`aryl.policies.sjf`): queued jobs in SJF
   order of estimated remaining time at their base size (ties: arrival, then
   trace order), each placed with its base demand by best fit
   (:func:`~aryl.policies.base.bf_place`), training servers first, loaned
   servers when training is full; backfill with the starvation bound.
2. **Elastic phase**: the MCKP over the running and just-started elastic jobs
   (``aryl.elastic.jct_reduction_table`` + ``solve_mckp`` through
   :func:`aryl.sim.adapters.mckp_extras`), capacity = free GPUs + GPUs of the
   current extras after phase 1.  The value of ``k`` extra workers is the JCT
   reduction minus the rescale pause when the size differs from today's (no
   pause for a job starting now).
3. **Extra placement**, best-fit decreasing (jobs by extra GPUs, descending,
   then index): an extra worker stays where it is when there is room (loaned
   servers first), the rest go to loaned servers first, then training, so that
   a reclaim mostly shrinks elastic jobs.  A worker that no server can hold
   (fragmentation) is dropped.

Phase 2 runs only when something it depends on changed since it last ran: a
start, a finish, a preemption, a loan or a reclaim (a signature of busy GPUs,
loaned servers, finishes and running jobs); a pass after a mere arrival that
starts nothing costs only the phase-1 scan.

Policies: ``aryl`` (loans, elastic), ``aryl-no-loan``, ``aryl-no-elastic``
(jobs at their traced size; loans), ``elastic-greedy`` (in
:mod:`aryl.policies.elastic_greedy`: no loans, marginal-gain greedy instead of
the MCKP).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aryl.policies.base import Decision, Placement, Reason, SimView, best_fit, bf_place, register
from aryl.policies.sjf import SjfPolicy

__all__ = ["ArylNoElasticPolicy", "ArylNoLoanPolicy", "ArylPolicy"]


def split_placement(place: Placement, base: int) -> tuple[Placement, Placement]:
    """Base part (first ``base`` workers in ascending server id) and extra part."""
    b: Placement = {}
    e: Placement = {}
    left = base
    for s in sorted(place):
        k = place[s]
        take = k if k < left else left
        if take:
            b[s] = take
            left -= take
        if k - take:
            e[s] = k - take
    return b, e


@register("aryl")
class ArylPolicy(SjfPolicy):
    """Aryl: capacity loaning, SJF base allocation, MCKP elastic allocation."""

    name = "aryl"
    loans = True
    elastic = True
    solver = "mckp"
    scale_out_reason = Reason.MCKP_SCALE_OUT
    scale_in_reason = Reason.MCKP_SCALE_IN

    def __init__(self, view: SimView, options: dict[str, Any]) -> None:
        super().__init__(view, options)
        self._sig: tuple[int, int, int, int] | None = None
        self._n_fin = 0
        self._extras: dict[int, Placement] = {}
        self._groups: list[list[int]] = []

    def on_finish(self, j: int) -> None:
        self._n_fin += 1

    # base phase hooks: scratch = free + GPUs of the current extras
    def _capacity_view(self) -> tuple[list[int], int]:
        v = self.view
        free = list(v.free)
        extras: dict[int, Placement] = {}
        if self.elastic:
            for j in v.running:
                if v.elastic[j]:
                    place = v.placement[j]
                    assert place is not None
                    if v.workers[j] > v.base_workers[j]:
                        _, e = split_placement(place, v.base_workers[j])
                        g = v.gpw[j]
                        for s, k in e.items():
                            free[s] += k * g
                        extras[j] = e
        self._extras = extras
        loaned = v.loaned_servers()
        self._groups = [v.training_servers, loaned] if loaned else [v.training_servers]
        avail = sum(free[s] for s in v.training_servers) + sum(free[s] for s in loaned)
        return free, avail

    def _place(self, free: list[int], j: int) -> Placement | None:
        v = self.view
        return bf_place(free, self._groups, v.base_workers[j], v.gpw[j])

    def _take(self, free: list[int], place: Placement, j: int) -> None:
        pass  # bf_place already took the GPUs

    def schedule(self, changed: bool) -> Decision:
        d = Decision()
        v = self.view
        if not self.lst and not self.elastic:
            return d
        if self.lst:
            free, _ = self._base_phase(d)
        else:
            free, _ = self._capacity_view()
        if not self.elastic:
            return d
        sig = (v.busy, len(self._groups), self._n_fin, len(v.running))
        if not d.starts and sig == self._sig:
            return d
        self._sig = sig
        self._elastic_phase(d, free)
        return d

    def _elastic_phase(self, d: Decision, free: list[int]) -> None:
        v = self.view
        new = [
            (j, p) for j, p, _ in d.starts if v.elastic[j] and v.max_workers[j] > v.base_workers[j]
        ]
        cand = [j for j in v.running if v.elastic[j] and v.max_workers[j] > v.base_workers[j]]
        n_run = len(cand)
        cand.extend(j for j, _ in new)
        if not cand:
            return
        servers = [s for grp in self._groups for s in grp]
        capacity = sum(free[s] for s in servers)
        extras_now = self._extras
        if capacity <= 0 and not extras_now:
            return
        from aryl.sim.adapters import mckp_extras

        n = len(cand)
        rem = np.empty(n)
        cur = np.empty(n, dtype=np.int64)
        base = np.empty(n, dtype=np.int64)
        mx = np.empty(n, dtype=np.int64)
        g = np.empty(n, dtype=np.int64)
        alpha = np.empty(n)
        pause = np.zeros(n)
        p = float(v.config.rescale_pause_s)
        for i, j in enumerate(cand):
            rem[i] = v.remaining_work(j)
            b = v.base_workers[j]
            base[i] = b
            mx[i] = v.max_workers[j]
            g[i] = v.gpw[j]
            alpha[i] = v.alpha[j]
            if i < n_run:
                cur[i] = v.workers[j]
                pause[i] = p
            else:
                cur[i] = b
        k = mckp_extras(
            rem, cur, base, mx, g, alpha, pause, capacity,
            backend=v.config.backend, solver=self.solver,
        )
        # --- place extras: best-fit decreasing, keep existing ones first
        order = sorted(range(n), key=lambda i: (-int(k[i] * g[i]), cand[i]))
        loaned = self._groups[1] if len(self._groups) > 1 else []
        loaned_set = set(loaned)
        groups_extra = [loaned, v.training_servers] if loaned else [v.training_servers]
        new_extra: dict[int, Placement] = {}
        # keep pass
        for i in order:
            want = int(k[i])
            j = cand[i]
            gi = int(g[i])
            kept: Placement = {}
            old = extras_now.get(j)
            if old and want:
                for s in sorted(old, key=lambda s: (s not in loaned_set, s)):
                    if not want:
                        break
                    t = min(old[s], want, free[s] // gi)
                    if t > 0:
                        kept[s] = t
                        free[s] -= t * gi
                        want -= t
            new_extra[j] = kept
            k[i] = want  # still to place
        # place the rest
        for i in order:
            want = int(k[i])
            if not want:
                continue
            j = cand[i]
            gi = int(g[i])
            got = bf_place(free, groups_extra, want, gi)
            if got is None:  # fragmentation: one worker at a time
                got = {}
                for _ in range(want):
                    s = -1
                    for grp in groups_extra:
                        s = best_fit(free, grp, gi)
                        if s >= 0:
                            break
                    if s < 0:
                        break
                    free[s] -= gi
                    got[s] = got.get(s, 0) + 1
            ex = new_extra[j]
            for s, c in got.items():
                ex[s] = ex.get(s, 0) + c
        # --- turn into decisions
        start_index = {j: idx for idx, (j, _, _) in enumerate(d.starts)}
        for j, base_place in new:
            ex = new_extra.get(j, {})
            if ex:
                merged = dict(base_place)
                for s, c in ex.items():
                    merged[s] = merged.get(s, 0) + c
                idx = start_index[j]
                d.starts[idx] = (j, merged, d.starts[idx][2])
        for j in cand[:n_run]:
            ex = new_extra.get(j, {})
            old = extras_now.get(j, {})
            if ex == old:
                continue
            place = v.placement[j]
            assert place is not None
            newp, _ = split_placement(place, v.base_workers[j])
            for s, c in ex.items():
                newp[s] = newp.get(s, 0) + c
            w_new = sum(newp.values())
            reason = self.scale_out_reason if w_new > v.workers[j] else (
                self.scale_in_reason if w_new < v.workers[j] else Reason.MCKP_MOVE
            )
            d.resizes.append((j, newp, reason))

    def wants_loan(self) -> bool:
        if self.lst:
            return True
        if not self.elastic:
            return False
        v = self.view
        return any(v.workers[j] < v.max_workers[j] for j in v.running if v.elastic[j])


@register("aryl-no-loan")
class ArylNoLoanPolicy(ArylPolicy):
    """Ablation: Aryl without capacity loaning."""

    name = "aryl-no-loan"
    loans = False


@register("aryl-no-elastic")
class ArylNoElasticPolicy(ArylPolicy):
    """Ablation: Aryl without elastic scaling (every job at its traced size)."""

    name = "aryl-no-elastic"
    elastic = False
