"""``aryl`` and its ablations: loaning + SJF base phase + MCKP elastic phase [Aryl].

One scheduling pass (docs/model.md):

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
   servers first), the rest go to servers already on loan first, then
   training, then servers merely offered to this pass, so that a reclaim
   mostly shrinks elastic jobs and a server is borrowed for an extra only when
   the others are full (base workers: training, on loan, offered).  Offered
   servers left empty are not borrowed and loaned servers left empty go back
   at the end of the pass (engine, ``return_idle_loans``).  A worker that no server can hold
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

import math
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
        self._el: dict[int, None] = {}  # running jobs that can scale (elastic, max > base)
        self._rank: dict[int, int] = {}  # position of each job of _el in its order
        self._n_el = 0
        # running scalable jobs below their maximum (kept by on_placement)
        self._below: dict[int, None] = {}
        self._split: dict[int, tuple[Placement, Placement, Placement]] = {}
        self._extras: dict[int, Placement] = {}
        self._groups: list[list[int]] = []
        self._groups_extra: list[list[int]] = []
        self._np_static: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        # extras of the running jobs, kept by on_placement: job -> extra part of
        # its placement (jobs above their base only), and extra GPUs per server
        self._ex_job: dict[int, Placement] = {}
        self._ex_srv: list[int] = [0] * len(view.free)
        self._held: list[int] = []
        self._loaned: list[int] = []
        self._real: list[int] = []
        self._real_left = 0
        self._scratch: list[int] | None = None
        self._displaced = False
        self._last_left = -1  # free GPUs left after the last elastic phase (or since)
        self.n_extra_repairs = 0  # elastic phases whose first choice could not be placed
        self._last_loaned = -1

    def on_finish(self, j: int) -> None:
        self._el.pop(j, None)
        self._split.pop(j, None)

    def on_placement(self, j: int) -> None:
        """Keep the extras of running jobs (per job and per server) up to date."""
        old = self._ex_job.pop(j, None)
        ex_srv = self._ex_srv
        v = self.view
        g = v.gpw[j]
        if old:
            for s, k in old.items():
                ex_srv[s] -= k * g
        if v.placement[j] is not None:
            w = v.workers[j]
            if w > v.base_workers[j]:
                _, e = self._split_of(j)
                for s, k in e.items():
                    ex_srv[s] += k * g
                self._ex_job[j] = e
            if w < v.max_workers[j] and self._scalable(j):
                self._below[j] = None
            else:
                self._below.pop(j, None)
        else:
            self._below.pop(j, None)

    def enqueue(self, j: int) -> None:
        self._el.pop(j, None)  # a preempted job is no longer running
        self._split.pop(j, None)
        super().enqueue(j)

    def _scalable(self, j: int) -> bool:
        v = self.view
        return self.elastic and v.elastic[j] and v.max_workers[j] > v.base_workers[j]

    def _split_of(self, j: int) -> tuple[Placement, Placement]:
        """Base and extra part of job j's placement, cached per placement object."""
        place = self.view.placement[j]
        assert place is not None
        c = self._split.get(j)
        if c is not None and c[0] is place:
            return c[1], c[2]
        b, e = split_placement(place, self.view.base_workers[j])
        self._split[j] = (place, b, e)
        return b, e

    def _set_groups(self, loaned: list[int]) -> None:
        """Server groups for base workers and for extras.

        Base workers: training, then servers already on loan, then servers
        merely offered to this pass.  Extras: servers already on loan, then
        training, then offered servers, so that a server is borrowed for an
        extra only when the others are full.  Without offered servers (no
        voluntary return) this is the previous training/loaned split.
        """
        v = self.view
        self._loaned = loaned
        offered = v.offered_servers() if loaned else []
        if offered:
            o = set(offered)
            held = [s for s in loaned if s not in o]
        else:
            held = loaned
        tr = v.training_servers
        self._groups = [grp for grp in (tr, held, offered) if grp]
        self._groups_extra = [grp for grp in (held, tr, offered) if grp]
        self._held = held

    def check_state(self) -> None:
        """Recompute the incremental bookkeeping from the view; raise if it drifted.

        Called by the invariant checker after every pass (``SimConfig(check=True)``).
        O(running jobs x servers per job + servers).

        Raises
        ------
        AssertionError
            The extras per job or per server, or the jobs below their maximum,
            differ from a recomputation over the running jobs.
        """
        super().check_state()
        v = self.view
        ex_srv = [0] * len(v.free)
        ex_job: dict[int, Placement] = {}
        below: set[int] = set()
        for j in v.running:
            place = v.placement[j]
            if place is None:
                raise AssertionError(f"running job {j} has no placement")
            if v.workers[j] > v.base_workers[j]:
                _, e = split_placement(place, v.base_workers[j])
                for s, k in e.items():
                    ex_srv[s] += k * v.gpw[j]
                ex_job[j] = e
            if self._scalable(j) and v.workers[j] < v.max_workers[j]:
                below.add(j)
            if self._scalable(j) and (j not in self._el or j not in self._rank):
                raise AssertionError(f"job {j} missing from the elastic set")
        # explicit raises: the check must also hold under ``python -O``
        if ex_srv != self._ex_srv:
            raise AssertionError("extra GPUs per server drifted")
        if ex_job != self._ex_job:
            raise AssertionError("extras per job drifted")
        if below != set(self._below):
            raise AssertionError("jobs below their maximum drifted")
        if not set(self._el) <= set(v.running):
            raise AssertionError("elastic set holds a job not running")

    # base phase hooks: the list passed around is the truly free GPUs; the
    # scratch (free + GPUs of the current extras) is built only when needed
    def _capacity_view(self) -> tuple[list[int], int]:
        v = self.view
        real = list(v.free)
        self._real = real
        self._scratch = None
        self._displaced = False
        loaned = v.loaned_servers()
        self._set_groups(loaned)
        # GPUs of the current extras: every running job is at or above its base,
        # and only the scalable ones (``_el``) can be above it
        ex_total = v.busy - v.base_busy
        # free GPUs of usable servers = their capacity minus busy GPUs
        avail = (len(v.training_servers) + len(loaned)) * v.gpus_per_server - v.busy
        self._real_left = avail
        return real, avail + ex_total

    def _build_scratch(self) -> list[int]:
        """Free GPUs plus the GPUs of every current extra worker (and ``_extras``)."""
        if self._scratch is None:
            # read-only use of the live extras dict (no placement changes during a pass)
            self._extras = self._ex_job
            self._scratch = [a + b for a, b in zip(self._real, self._ex_srv, strict=True)]
        return self._scratch

    def _place(self, free: list[int], j: int) -> Placement | None:
        """Best fit on truly free GPUs first; else also on GPUs of extra workers."""
        v = self.view
        w = v.base_workers[j]
        g = v.gpw[j]
        real = self._real
        p = bf_place(real, self._groups, w, g)
        if p is not None:
            self._real_left -= w * g
            if self._scratch is not None:
                for s, k in p.items():
                    self._scratch[s] -= k * g
            return p
        if not self._el:
            return None
        scratch = self._build_scratch()
        p = bf_place(scratch, self._groups, w, g)
        if p is None:
            return None
        for s, k in p.items():
            if real[s] < k * g:
                self._displaced = True
            took = min(real[s], k * g)
            real[s] -= took
            self._real_left -= took
        return p

    def _take(self, free: list[int], place: Placement, j: int) -> None:
        pass  # _place already took the GPUs

    def schedule(self, changed: bool) -> Decision:
        d = Decision()
        v = self.view
        phase1 = bool(self.lst)
        if phase1:
            self._base_phase(d)
        if not self.elastic:
            return d
        if phase1:
            loaned = self._loaned
            real: list[int] = self._real
        else:
            loaned = v.loaned_servers()
            real = v.free
        displaced = phase1 and self._displaced
        if phase1:
            left = self._real_left
        else:
            left = (len(v.training_servers) + len(loaned)) * v.gpus_per_server - v.busy
        new_el = any(self._scalable(j) for j, _, _ in d.starts)
        run = new_el or displaced or len(loaned) != self._last_loaned or left > self._last_left
        if run and not new_el and not displaced:
            # only capacity changed: nothing to do if every elastic job is at its maximum
            run = bool(self._below) or len(loaned) < self._last_loaned
        if run and (self._el or new_el):
            done = False
            free: list[int] | None = None
            if not displaced:
                # Fast exact path: jobs at their maximum keep their extras; if the
                # others' unconstrained best options fit the free GPUs, that is the
                # MCKP optimum (every class at its own best value).
                self._set_groups(loaned)
                wk, mw, bw, gw = v.workers, v.max_workers, v.base_workers, v.gpw
                upper = 0  # GPUs the candidates could take at most
                cap = left  # free GPUs + GPUs of the extras of the jobs below their max
                below = self._below
                for j in below:
                    g = gw[j]
                    upper += (mw[j] - bw[j]) * g
                    cap += (wk[j] - bw[j]) * g  # its extra workers (0 at base)
                for j, _, _ in d.starts:
                    if self._scalable(j):
                        upper += (mw[j] - bw[j]) * gw[j]
                # Gate: when everyone at their maximum would not fit, the fast path
                # usually fails, so go to the solver directly (both are optimal; only
                # the choice among equally good solutions may differ).
                if upper <= cap:
                    fast = list(real)
                    sub: list[int] = []
                    ex_sub: dict[int, Placement] = {}
                    if len(below) > 1:
                        below = dict.fromkeys(sorted(below, key=self._rank.__getitem__))
                    for j in below:  # the jobs below their maximum, in _el order
                        sub.append(j)
                        if wk[j] > bw[j]:
                            _, e = self._split_of(j)
                            g = gw[j]
                            for s, k in e.items():
                                fast[s] += k * g
                            ex_sub[j] = e
                    done = self._elastic_phase(
                        d, fast, sub, ex_sub, unconstrained_only=True, free_wo_extras=real
                    )
                if done:
                    free = fast
            if not done:
                if not phase1:
                    self._capacity_view()
                free = self._build_scratch()
                # not displaced: the scratch is exactly real + every current extra
                self._elastic_phase(
                    d, free, list(self._el), self._extras,
                    free_wo_extras=None if displaced else self._real,
                )
            assert free is not None
            # inference servers not on loan have no free GPUs (capacity 0), so the
            # free GPUs of training + loaned servers are the whole list's sum
            left = sum(free)
        self._last_left = left
        self._last_loaned = len(loaned)
        for j, _, _ in d.starts:
            if self._scalable(j):
                self._el[j] = None
                self._rank[j] = self._n_el
                self._n_el += 1
        return d

    def _elastic_phase(
        self,
        d: Decision,
        free: list[int],
        cand: list[int],
        extras_now: dict[int, Placement],
        unconstrained_only: bool = False,
        free_wo_extras: list[int] | None = None,
    ) -> bool:
        """Phase 2 over running jobs ``cand`` (+ elastic starts in ``d``) on ``free``.

        ``free`` counts the GPUs of the extras in ``extras_now`` as free.  With
        ``unconstrained_only``, gives up (returns False, nothing changed) unless
        every job's best option fits at once and can be placed.
        ``free_wo_extras`` (read only): when given, ``free`` is exactly this list
        plus the GPUs of every extra in ``extras_now`` (no base worker was placed
        on an extra's GPUs), which lets the keep pass skip the jobs whose extras
        do not change.

        Only extras that can be placed are chosen (docs/simulator.md, "Placement
        of extra workers"): (1) each job's options are capped at the workers of
        its size that the servers could hold on their own
        (``sum_s free_s // g``); (2) the solver's choice is placed; if some job's
        extras did not all fit, its cap becomes the number that did and the
        problem is solved again, until every chosen extra is placed (caps only
        decrease, so this ends); (3) after a repair, extra workers are added one
        at a time, best JCT reduction per GPU first, while a whole re-placement
        of the larger choice succeeds and the worker's marginal value is > 0.
        """
        v = self.view
        new = [(j, p) for j, p, _ in d.starts if self._scalable(j)]
        cand = list(cand)
        n_run = len(cand)
        cand.extend(j for j, _ in new)
        if not cand:
            return True
        capacity = sum(free)  # servers not in a group (not on loan) have none free
        if capacity <= 0 and not extras_now:
            return True
        from aryl.sim.adapters import extras_table, solve_extras

        n = len(cand)
        bw, wk = v.base_workers, v.workers
        ci = np.fromiter(cand, dtype=np.int64, count=n)
        rem = v.remaining_work_many(ci if n >= 8 else cand)
        if self._np_static is None:
            self._np_static = (
                np.asarray(bw, dtype=np.int64),
                np.asarray(v.max_workers, dtype=np.int64),
                np.asarray(v.gpw, dtype=np.int64),
                np.asarray(v.alpha, dtype=np.float64),
            )
        bw_a, mw_a, gw_a, al_a = self._np_static
        base = bw_a[ci]
        cur = np.array([wk[j] for j in cand[:n_run]] + [bw[j] for j, _ in new], dtype=np.int64)
        mx = mw_a[ci]
        g = gw_a[ci]
        alpha = al_a[ci]
        pause = np.zeros(n)
        pause[:n_run] = float(v.config.rescale_pause_s)
        values, weights = extras_table(rem, cur, base, mx, g, alpha, pause)
        backend = v.config.backend
        max_extra = mx - base
        # (1) per-job caps from per-server worker slots (1-GPU workers always fit)
        caps = self._slot_caps(free, g, max_extra) if int(g.max()) > 1 else None
        kk = solve_extras(
            values, weights, capacity, backend=backend, solver=self.solver,
            unconstrained_only=unconstrained_only, max_extra=caps,
        )
        if kk is None:
            return False
        k = kk
        ext = cur - base
        free0 = list(free)
        placed = self._place_extras(free, free_wo_extras, cand, extras_now, k, ext, ci, g, n_run)
        if placed[2]:
            if unconstrained_only:
                return False  # ``free`` is the caller's scratch copy; the solver path follows
            # (2) repair: cap the jobs whose extras did not all fit, solve again
            caps_r = max_extra.copy() if caps is None else caps.copy()
            while placed[2]:
                for i, got in placed[2].items():
                    caps_r[i] = got
                free[:] = free0
                kk = solve_extras(
                    values, weights, capacity, backend=backend, solver=self.solver,
                    max_extra=caps_r,
                )
                assert kk is not None
                k = kk
                placed = self._place_extras(
                    free, free_wo_extras, cand, extras_now, k, ext, ci, g, n_run
                )
            self.n_extra_repairs += 1
            # (3) fill: no placeable extra worker of positive marginal value is left
            k, placed = self._fill_extras(
                values, k, max_extra, g.tolist(), free, free0, placed,
                lambda kv: self._place_extras(
                    free, free_wo_extras, cand, extras_now, kv, ext, ci, g, n_run
                ),
            )
        new_extra, touched, _ = placed
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
        # the running jobs that may change, in candidate order (the order of the
        # resizes in the decision)
        for i in touched:
            j = cand[i]
            ex = new_extra.get(j, {})
            old = extras_now.get(j, {})
            if ex == old:
                continue
            b0, _ = self._split_of(j)
            newp = dict(b0)
            for s, c in ex.items():
                newp[s] = newp.get(s, 0) + c
            w_new = sum(newp.values())
            reason = self.scale_out_reason if w_new > v.workers[j] else (
                self.scale_in_reason if w_new < v.workers[j] else Reason.MCKP_MOVE
            )
            d.resizes.append((j, newp, reason))
        return True

    @staticmethod
    def _slot_caps(free: list[int], g: np.ndarray, max_extra: np.ndarray) -> np.ndarray:
        """Per-job cap on extra workers: ``min(max_extra, sum_s free_s // g)``.

        A job cannot get more workers of ``g`` GPUs than the servers hold on
        their own (exact for one job alone).  O(servers x distinct worker sizes).
        """
        caps = max_extra.copy()
        for gv in sorted(set(g.tolist())):
            if gv > 1:
                slots = sum(f // gv for f in free)
                sel = g == gv
                caps[sel] = np.minimum(caps[sel], slots)
        return caps

    def _place_extras(
        self,
        free: list[int],
        free_wo_extras: list[int] | None,
        cand: list[int],
        extras_now: dict[int, Placement],
        k: np.ndarray,
        ext: np.ndarray,
        ci: np.ndarray,
        g: np.ndarray,
        n_run: int,
    ) -> tuple[dict[int, Placement], list[int], dict[int, int]]:
        """Place ``k[i]`` extra workers of every job ``cand[i]``; takes them from ``free``.

        Existing extras are kept where they are when possible (loaned servers
        first), then the rest are placed best-fit decreasing by worker size
        (then by extra GPUs, then job index): servers on loan first, then
        training, then offered servers.  Decreasing worker size makes the
        placement exact when worker sizes divide each other (1, 2, 4, 8 GPUs):
        it then fails only if no placement exists (given the kept extras).

        Returns
        -------
        (new_extra, touched, short)
            Extra placement per job, the running jobs (candidate positions) that
            may change, and ``{position: workers placed}`` for the jobs that got
            fewer than ``k`` (empty when every chosen extra is placed).
        """
        pos = np.flatnonzero(k > 0)
        kp = k[pos]
        gp = g[pos]
        order_a = pos[np.lexsort((ci[pos], -(kp * gp), -gp))]
        k_l = k.tolist()
        g_l = g.tolist()
        groups_extra = self._groups_extra
        new_extra: dict[int, Placement] = {}
        if free_wo_extras is not None:
            order, touched = self._keep_exact(
                free, free_wo_extras, cand, extras_now, k, ext, order_a, n_run,
                k_l, g_l, new_extra,
            )
        else:
            order = order_a.tolist()
            self._keep(free, cand, extras_now, order, k_l, g_l, new_extra)
            # A running job can change only if it is given extras or has some now
            # (workers above base: exactly the jobs in ``extras_now``)
            touched = np.flatnonzero((k[:n_run] > 0) | (ext[:n_run] > 0)).tolist()
        short: dict[int, int] = {}
        # place the rest (k_l: workers still to place)
        for i in order:
            want = k_l[i]
            if not want:
                continue
            j = cand[i]
            gi = g_l[i]
            got = bf_place(free, groups_extra, want, gi)
            if got is None:  # not enough slots: as many as fit, one worker at a time
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
                missing = want - sum(got.values())
                if missing:
                    short[i] = int(k[i]) - missing
            ex = new_extra[j]
            for s, c in got.items():
                ex[s] = ex.get(s, 0) + c
        return new_extra, touched, short

    @staticmethod
    def _fill_extras(
        values: np.ndarray,
        k: np.ndarray,
        max_extra: np.ndarray,
        g_l: list[int],
        free: list[int],
        free0: list[int],
        placed: tuple[dict[int, Placement], list[int], dict[int, int]],
        place: Any,
    ) -> tuple[np.ndarray, tuple[dict[int, Placement], list[int], dict[int, int]]]:
        """Add extra workers while one more fits and is worth it (after a repair).

        Each round: the jobs whose next worker has a marginal value
        ``values[i, k] - values[i, k - 1] > 0`` (``values[i, -1]`` read as 0), in
        order of marginal value per GPU (descending, ties: position), each tried
        by a whole re-placement ``place(k + e_i)`` from ``free0``; the first that
        places every worker is taken.  Ends when none does, so no single job can
        get one more placeable worker of positive marginal value.  ``free`` ends
        as the accepted placement leaves it.  O(rounds x jobs x placement).
        """
        best_free = list(free)
        n = len(k)
        while True:
            cands: list[tuple[float, int]] = []
            for i in range(n):
                ki = int(k[i])
                if ki >= max_extra[i]:
                    continue
                nxt = float(values[i, ki])
                if math.isnan(nxt):
                    continue
                gain = nxt - (float(values[i, ki - 1]) if ki else 0.0)
                if gain > 0:
                    cands.append((-gain / g_l[i], i))
            cands.sort()
            for _, i in cands:
                k2 = k.copy()
                k2[i] += 1
                free[:] = free0
                res = place(k2)
                if not res[2]:
                    k, placed = k2, res
                    best_free = list(free)
                    break
            else:
                break
        free[:] = best_free
        return k, placed

    @staticmethod
    def _keep(
        free: list[int],
        cand: list[int],
        extras_now: dict[int, Placement],
        order: list[int],
        k_l: list[int],
        g_l: list[int],
        new_extra: dict[int, Placement],
    ) -> None:
        """Keep pass: each job in ``order`` keeps up to ``k_l[i]`` of its extras.

        Takes the kept GPUs from ``free``, records them in ``new_extra`` and
        leaves in ``k_l[i]`` the workers still to place.
        """
        get_old = extras_now.get
        for i in order:
            want = k_l[i]
            j = cand[i]
            kept: Placement = {}
            new_extra[j] = kept
            old = get_old(j)
            if old:
                gi = g_l[i]
                # old is in ascending server id order (split_placement): walk it
                # backwards, so loaned servers (the highest ids) come first
                for s in reversed(old):
                    t = old[s]  # min(old[s], want, free[s] // gi)
                    if t > want:
                        t = want
                    room = free[s] // gi
                    if t > room:
                        t = room
                    if t > 0:
                        kept[s] = t
                        free[s] -= t * gi
                        want -= t
                        if not want:
                            break
                k_l[i] = want  # still to place

    @staticmethod
    def _keep_exact(
        free: list[int],
        free_wo_extras: list[int],
        cand: list[int],
        extras_now: dict[int, Placement],
        k: np.ndarray,
        ext: np.ndarray,
        order_a: np.ndarray,
        n_run: int,
        k_l: list[int],
        g_l: list[int],
        new_extra: dict[int, Placement],
    ) -> tuple[list[int], list[int]]:
        """The keep pass of :meth:`_keep` when ``free`` = ``free_wo_extras`` + all extras.

        Then every current extra still has room where it is (the others only
        take back their own extras), so job ``i`` keeps ``min(k[i], ext[i])``
        of its ``ext[i]`` extra workers whatever the order, and the result is
        that of :meth:`_keep` computed from the few jobs whose count changes:
        start from ``free_wo_extras`` (all extras kept) and give back what the
        shrinking jobs drop.  A job whose count is unchanged keeps exactly its
        extras and gets no entry in ``new_extra`` (no resize).

        Returns
        -------
        (order, touched)
            The growing jobs in ``order_a`` order (workers still to place in
            ``k_l``), and the running jobs whose count changes, ascending.
        """
        free[:] = free_wo_extras
        for i in np.flatnonzero(k < ext).tolist():  # shrinking: same walk as _keep
            want = k_l[i]
            j = cand[i]
            gi = g_l[i]
            old = extras_now[j]
            kept: Placement = {}
            for s in reversed(old):
                t = old[s]
                if t > want:
                    t = want
                if t > 0:
                    kept[s] = t
                    want -= t
                    if not want:
                        break
            for s, c in old.items():
                back = c - kept.get(s, 0)
                if back:
                    free[s] += back * gi
            new_extra[j] = kept
        grow = k > ext
        order = order_a[grow[order_a]].tolist()
        ext_l = ext.tolist()
        for i in order:  # growing: keep every extra (in _keep's visiting order)
            j = cand[i]
            had = extras_now.get(j)
            new_extra[j] = dict(reversed(had.items())) if had else {}
            k_l[i] -= ext_l[i]
        touched = np.flatnonzero(k[:n_run] != ext[:n_run]).tolist()
        return order, touched

    def wants_loan(self) -> bool:
        if self.lst:
            return True
        if not self.elastic:
            return False
        return bool(self._below)


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
