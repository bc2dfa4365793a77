"""``aryl`` and its ablations: loaning + SJF base phase + MCKP elastic phase [Aryl].

The policy's part of one pass (:func:`aryl.schedule` adds the reclaim, the
offers of idle inference servers and the settling of loans around it):

0. **Split** every running elastic job's placement into base workers (the first
   ``min_workers`` workers over its servers in ascending index order, so
   training servers first) and extra workers (the rest; kept by the state as
   ``ex_job`` / ``ex_srv``).  Extras are re-decided from scratch each pass, so
   the GPUs they hold count as available to both phases.
1. **Base phase** (:class:`~aryl.scheduling.sjf.SjfPass`): queued jobs in SJF
   order of estimated remaining time at their base size (ties: lower job
   index), each placed with its base demand by best fit
   (:func:`~aryl.scheduling.placement.bf_place`), training servers first, then
   servers on loan, then servers offered to this pass; backfill with the
   starvation bound.  A base worker takes GPUs held by extras only when it fits
   nowhere else.
2. **Elastic phase**: the MCKP over the running and just-started elastic jobs
   (:func:`~aryl.scheduling.kernels.mckp_extras`: the JCT-reduction table and
   the exact ``solve_mckp``), capacity = free GPUs + GPUs of the current extras
   after phase 1.  The value of ``k`` extra workers is the JCT reduction minus
   the rescale pause when the size differs from today's (no pause for a job
   starting now).
3. **Extra placement**, best-fit decreasing (jobs by extra GPUs, descending,
   then index): an extra worker stays where it is when there is room (loaned
   servers first), the rest go to servers already on loan first, then
   training, then servers merely offered to this pass, so that a reclaim
   mostly shrinks elastic jobs and a server is borrowed for an extra only when
   the others are full.  A worker that no server can hold (fragmentation) is
   dropped.

Phase 2 runs only when capacity changed since it last ran (the state's
``elastic_memo``: the free GPUs left and the servers on loan after the last
pass): a start, a finish, a preemption, a loan or a reclaim; a pass after a
mere arrival that starts nothing costs only the phase-1 scan.  When every
candidate's best option fits at once, that is the MCKP optimum and the solver
is skipped.

Policies: ``aryl`` (loans, elastic), ``aryl-no-loan``, ``aryl-no-elastic``
(jobs at their reference size; loans), ``elastic-greedy`` (no loans, an
Optimus/AFS-style marginal-gain greedy instead of the MCKP).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from aryl.scheduling.kernels import (
    extras_table,
    extras_table_from_throughput,
    solve_extras,
    throughput_rows,
)
from aryl.scheduling.placement import best_fit, bf_place
from aryl.scheduling.plan import Reason, SchedulePlan
from aryl.scheduling.policy import PassContext
from aryl.scheduling.sjf import SjfPass, SjfPolicy
from aryl.scheduling.state import ClusterState, Placement, split_placement

__all__ = ["ArylNoElasticPolicy", "ArylNoLoanPolicy", "ArylPolicy", "ElasticGreedyPolicy"]


class ArylPass(SjfPass):
    """One ``aryl`` pass over a state: the scratch lists live here, never in the policy."""

    pol: ArylPolicy

    def __init__(self, pol: ArylPolicy, st: ClusterState, ctx: PassContext) -> None:
        super().__init__(pol, st, ctx)
        self.real: list[int] = []
        self.real_left = 0
        self.scratch: list[int] | None = None
        self.displaced = False
        self.groups: list[list[int]] = []
        self.groups_extra: list[list[int]] = []
        self.loaned: list[int] = []
        self.extras: dict[int, Placement] = {}
        # running jobs that can scale, in start order (empty unless the policy is elastic)
        self.el = st.elastic_running if pol.elastic else {}
        # several GPU types and no mixing: a job's workers stay on one type
        self.typed = st.multi_type and not st.config.mix_gpu_types
        self.groups_t: dict[str, list[list[int]]] = {}
        self.groups_extra_t: dict[str, list[list[int]]] = {}
        self.loan_set: set[int] = set()
        self._finishes: dict[str, list[tuple[float, int]]] = {}

    def set_groups(self, loaned: list[int]) -> None:
        """Server groups for base workers and for extras.

        Base workers: training, then servers already on loan, then servers
        merely offered to this pass.  Extras: servers already on loan, then
        training, then offered servers, so that a server is borrowed for an
        extra only when the others are full.
        """
        self.loaned = loaned
        offered = self.ctx.offered if loaned else []
        if offered:
            o = set(offered)
            held = [s for s in loaned if s not in o]
        else:
            held = loaned
        tr = self.st.training_servers
        self.groups = [grp for grp in (tr, held, offered) if grp]
        self.groups_extra = [grp for grp in (held, tr, offered) if grp]
        if self.typed:
            st = self.st
            gt = st.server_gpu_type
            self.loan_set = set(loaned)
            for t in st.gpu_types:
                tr_t = st.training_by_type[t]
                held_t = [x for x in held if gt[x] == t]
                off_t = [x for x in offered if gt[x] == t]
                self.groups_t[t] = [grp for grp in (tr_t, held_t, off_t) if grp]
                self.groups_extra_t[t] = [grp for grp in (held_t, tr_t, off_t) if grp]

    # base phase hooks: the list passed around is the truly free GPUs; the
    # scratch (free + GPUs of the current extras) is built only when needed
    def capacity_view(self) -> tuple[list[int], int]:
        st = self.st
        real = list(self.ctx.free)
        self.real = real
        self.scratch = None
        self.displaced = False
        loaned = self.ctx.loaned
        self.set_groups(loaned)
        # GPUs of the current extras: every running job is at or above its base,
        # and only the scalable ones can be above it
        ex_total = st.busy - st.base_busy if self.pol.elastic else 0
        # free GPUs of usable servers = their capacity minus busy GPUs
        avail = self.ctx.capacity_gpus - st.busy
        self.real_left = avail
        return real, avail + ex_total

    def build_scratch(self) -> list[int]:
        """Free GPUs plus the GPUs of every current extra worker (and ``extras``)."""
        if self.scratch is None:
            self.extras = self.st.ex_job
            self.scratch = [a + b for a, b in zip(self.real, self.st.ex_srv, strict=True)]
        return self.scratch

    def _took_free(self, p: Placement, w: int, g: int) -> Placement:
        """``p`` (``w`` workers) was placed on truly free GPUs: take them (and from
        the scratch view)."""
        self.real_left -= w * g
        if self.scratch is not None:
            for s, k in p.items():
                self.scratch[s] -= k * g
        return p

    def _took_scratch(self, p: Placement, g: int) -> Placement:
        """``p`` was placed on free GPUs and GPUs of extras: take the free ones; a
        server short of free GPUs displaces extras there."""
        real = self.real
        for s, k in p.items():
            if real[s] < k * g:
                self.displaced = True
            took = min(real[s], k * g)
            real[s] -= took
            self.real_left -= took
        return p

    def place(self, free: list[int], j: int) -> Placement | None:
        """Best fit on truly free GPUs first; else also on GPUs of extra workers."""
        if self.typed:
            return self.place_typed(j)
        st = self.st
        w = self.pol.base_workers(st, j)
        g = st.gpus_per_worker[j]
        real = self.real
        p = bf_place(real, self.groups, w, g)
        if p is not None:
            return self._took_free(p, w, g)
        if not self.el:
            return None
        scratch = self.build_scratch()
        p = bf_place(scratch, self.groups, w, g)
        if p is None:
            return None
        return self._took_scratch(p, g)

    def take(self, free: list[int], place: Placement, j: int) -> None:
        pass  # place already took the GPUs

    # ------------------------------------------------ several GPU types (typed)
    def place_typed(self, j: int) -> Placement | None:
        """The base workers on one GPU type: the fastest type for the job that holds
        them (training servers of the type first, then its loaned and offered
        servers), truly free GPUs first, else also GPUs of extras.  A placement
        that needs loaned or offered servers is taken only when the job finishes
        sooner there than by waiting for a faster training type
        (:meth:`loan_worth_it`).
        """
        st = self.st
        w = self.pol.base_workers(st, j)
        g = st.gpus_per_worker[j]
        order = st.type_order(j, w, [t for t in st.gpu_types if self.groups_t.get(t)])
        real = self.real
        p = self._first_type(order, real, j, w, g)
        if p is not None:
            return self._took_free(p, w, g)
        if not self.el:
            return None
        p = self._first_type(order, self.build_scratch(), j, w, g)
        if p is None:
            return None
        return self._took_scratch(p, g)

    def _first_type(
        self, order: list[str], free: list[int], j: int, w: int, g: int
    ) -> Placement | None:
        """Best fit on the first type of ``order`` that holds the job (and passes the
        loan gate when it needs loaned servers); takes the GPUs from ``free``."""
        for t in order:
            before = list(free)
            p = bf_place(free, self.groups_t[t], w, g)
            if p is None:
                continue
            if self.loan_set and any(s in self.loan_set for s in p) and not (
                self.loan_worth_it(j, t, w)
            ):
                free[:] = before
                continue
            return p
        return None

    def loan_worth_it(self, j: int, t: str, w: int) -> bool:
        """Start job ``j`` on ``w`` workers of type ``t`` (loaned servers) now, or wait?

        Yes when its completion there, ``now + R / speed_t``, is no later than
        the best of ``wait_u + R / speed_u`` over the training types ``u`` where
        it runs faster; ``wait_u`` estimates when enough GPUs of type ``u`` free
        up: the free GPUs of its training servers plus those of the jobs running
        there, released at their expected finish (remaining work at their
        current speed; fragmentation and the queue are ignored).
        """
        st = self.st
        sp_t = st.throughput_on(j, t, w)
        rem = st.remaining_s[j] * st.ref_throughput[j]  # work, throughput units x s
        need = w * st.gpus_per_worker[j]
        best = math.inf
        for u in st.gpu_types:
            tr = st.training_by_type[u]
            if not tr:
                continue
            sp_u = st.throughput_on(j, u, w)
            if sp_u <= sp_t:
                continue
            wait = self.wait_for(u, need, st.gpus_per_worker[j])
            best = min(best, wait + rem / sp_u)
        return rem / sp_t <= best

    def wait_for(self, u: str, need: int, g: int = 1) -> float:
        """Seconds until ``need`` GPUs of type ``u``'s training servers are free (estimate).

        Only servers that hold a worker of ``g`` GPUs count (all of them when the
        type's servers have one size; the estimate is then kept for the pass).
        """
        st = self.st
        tr = st.training_by_type[u]
        if any(st.server_gpus[s] < g for s in tr):  # servers too small for the worker
            tr = [s for s in tr if st.server_gpus[s] >= g]
            fin = None
            cache = False
        else:
            fin = self._finishes.get(u)
            cache = True
        have = sum(self.real[s] for s in tr)
        if have >= need:
            return 0.0
        if fin is None:
            on = set(tr)
            now = st.now_s
            fin = []
            for r in st.running:
                place = st.placement[r]
                assert place is not None
                gpus = sum(k for s, k in place.items() if s in on) * st.gpus_per_worker[r]
                if gpus:
                    left = st.remaining_at(r, now)
                    sp = st.speed[r]
                    t_end = max(st.progress_at_s[r], now) + (left / sp if sp > 0 else math.inf)
                    fin.append((t_end - now, gpus))
            fin.sort()
            if cache:
                self._finishes[u] = fin
        for dt, gpus in fin:
            have += gpus
            if have >= need:
                return dt
        return math.inf

    def base_type(self, j: int, place: Placement | None = None) -> str:
        """The GPU type of job ``j``'s base workers (of ``place`` for a job starting now)."""
        st = self.st
        p = place if place is not None else st.placement[j]
        assert p is not None
        return st.server_gpu_type[min(p)]

    def elastic_typed(self, d: SchedulePlan, free: list[int]) -> None:
        """Phase 2 per GPU type: one exact MCKP per type over its jobs and capacity.

        A job's extra workers go on its base workers' type (servers on loan, then
        training, then offered servers of that type), valued at that type's
        speed.  Jobs of different types never compete for the same GPU, so the
        per-type optima together are the optimum of the joint knapsack with one
        capacity per type (tested against ``scipy.optimize.milp``).
        """
        st = self.st
        pol = self.pol
        by_type: dict[str, list[int]] = {}
        for j in self.el:
            by_type.setdefault(self.base_type(j), []).append(j)
        new_types = {
            j: self.base_type(j, p) for j, p, _ in d.starts if pol.scalable(st, j)
        }
        for t in st.gpu_types:
            cand = by_type.get(t, [])
            if not cand and t not in new_types.values():
                continue
            servers = [s for grp in self.groups_t.get(t, []) for s in grp]
            if not servers:
                continue
            ex = {j: self.extras[j] for j in cand if j in self.extras}
            self.groups_extra = self.groups_extra_t[t]
            new_t = {j for j, x in new_types.items() if x == t}
            # every job's own best option fitting at once is the optimum: no solver
            fast = list(free)
            if self.elastic_phase(d, fast, cand, ex, unconstrained_only=True, servers=servers,
                                  gpu_type=t, new_filter=new_t):
                free[:] = fast
                continue
            self.elastic_phase(d, free, cand, ex, servers=servers, gpu_type=t,
                               new_filter=new_t)

    def run(self, d: SchedulePlan) -> None:
        st = self.st
        pol = self.pol
        ctx = self.ctx
        phase1 = bool(st.queued)
        if phase1:
            self.base_phase(d)
        loaned = ctx.loaned
        if not pol.elastic:
            d.elastic_memo = st.elastic_memo
            return
        if phase1:
            loaned = self.loaned
            real: list[int] = self.real
        else:
            real = ctx.free
        displaced = phase1 and self.displaced
        left = self.real_left if phase1 else ctx.capacity_gpus - st.busy
        last_left, last_loaned = st.elastic_memo
        new_el = any(pol.scalable(st, j) for j, _, _ in d.starts)
        run = new_el or displaced or len(loaned) != last_loaned or left > last_left
        if run and not new_el and not displaced:
            # only capacity changed: nothing to do if every elastic job is at its maximum
            run = bool(st.below) or len(loaned) < last_loaned
        if run and (self.el or new_el) and self.typed:
            if not phase1:
                self.capacity_view()
            free_t = self.build_scratch()
            self.elastic_typed(d, free_t)
            left = sum(free_t)
        elif run and (self.el or new_el):
            done = False
            free: list[int] | None = None
            if not displaced:
                # Fast exact path: jobs at their maximum keep their extras; if the
                # others' unconstrained best options fit the free GPUs, that is the
                # MCKP optimum (every class at its own best value).
                self.set_groups(loaned)
                wk, mw, bw, gw = st.workers, st.max_workers, st.min_workers, st.gpus_per_worker
                upper = 0  # GPUs the candidates could take at most
                cap = left  # free GPUs + GPUs of the extras of the jobs below their max
                below = st.below
                for j in below:
                    g = gw[j]
                    upper += (mw[j] - bw[j]) * g
                    cap += (wk[j] - bw[j]) * g  # its extra workers (0 at base)
                for j, _, _ in d.starts:
                    if pol.scalable(st, j):
                        upper += (mw[j] - bw[j]) * gw[j]
                # Gate: when everyone at their maximum would not fit, the fast path
                # usually fails, so go to the solver directly (both are optimal; only
                # the choice among equally good solutions may differ).
                if upper <= cap:
                    fast = list(real)
                    sub: list[int] = []
                    ex_sub: dict[int, Placement] = {}
                    if len(below) > 1:
                        below = {j: None for j in self.el if j in below}
                    ex_job = st.ex_job
                    for j in below:  # the jobs below their maximum, in start order
                        sub.append(j)
                        if wk[j] > bw[j]:
                            e = ex_job[j]
                            g = gw[j]
                            for s, k in e.items():
                                fast[s] += k * g
                            ex_sub[j] = e
                    done = self.elastic_phase(
                        d, fast, sub, ex_sub, unconstrained_only=True, free_wo_extras=real
                    )
                if done:
                    free = fast
            if not done:
                if not phase1:
                    self.capacity_view()
                free = self.build_scratch()
                # not displaced: the scratch is exactly real + every current extra
                self.elastic_phase(
                    d, free, list(self.el), self.extras,
                    free_wo_extras=None if displaced else self.real,
                )
            assert free is not None
            # inference servers not on loan have no free GPUs (capacity 0), so the
            # free GPUs of training + loaned servers are the whole list's sum
            left = sum(free)
        d.elastic_memo = (left, len(loaned))

    def elastic_phase(
        self,
        d: SchedulePlan,
        free: list[int],
        cand: list[int],
        extras_now: dict[int, Placement],
        unconstrained_only: bool = False,
        free_wo_extras: list[int] | None = None,
        servers: list[int] | None = None,
        gpu_type: str | None = None,
        new_filter: set[int] | None = None,
    ) -> bool:
        """Phase 2 over running jobs ``cand`` (+ elastic starts in ``d``) on ``free``.

        On a cluster of several GPU types (:meth:`elastic_typed`): ``servers``
        are the servers of ``gpu_type`` (the capacity and the worker slots count
        only them), values use that type's speed, and only the starts in
        ``new_filter`` take part.

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
        st = self.st
        pol = self.pol
        new = [(j, p) for j, p, _ in d.starts if pol.scalable(st, j)
               and (new_filter is None or j in new_filter)]
        cand = list(cand)
        n_run = len(cand)
        cand.extend(j for j, _ in new)
        if not cand:
            return True
        # servers not in a group (not on loan) have none free
        capacity = sum(free) if servers is None else sum(free[s] for s in servers)
        if capacity <= 0 and not extras_now:
            return True
        n = len(cand)
        bw, wk = st.min_workers, st.workers
        ci = np.fromiter(cand, dtype=np.int64, count=n)
        rem = np.array(st.remaining_work_many(cand, st.now_s), dtype=np.float64)
        bw_a, mw_a, gw_a, al_a = st.static_arrays()
        base = bw_a[ci]
        cur = np.array([wk[j] for j in cand[:n_run]] + [bw[j] for j, _ in new], dtype=np.int64)
        g = gw_a[ci]
        # the table is sized by what can be placed, not by max_workers: more extra
        # workers than ``capacity // g`` never fit, so those options are cut before
        # the table is built (no choice changes where max_workers fits; a huge
        # max_workers costs nothing)
        mx = np.minimum(mw_a[ci], base + capacity // g)
        alpha = al_a[ci]
        pause = np.zeros(n)
        pause[:n_run] = float(st.config.rescale_pause_s)
        if gpu_type is None:
            values, weights = extras_table(rem, cur, base, mx, g, alpha, pause)
        else:
            tput = throughput_rows(st, cand, base, mx, gpu_type)
            values, weights = extras_table_from_throughput(rem, cur, base, mx, g, tput, pause)
        backend = st.config.backend
        max_extra = mx - base
        # (1) per-job caps from per-server worker slots (1-GPU workers always fit)
        slot_free = free if servers is None else [free[s] for s in servers]
        caps = self.slot_caps(slot_free, g, max_extra) if int(g.max()) > 1 else None
        kk = solve_extras(
            values, weights, capacity, backend=backend, solver=pol.solver,
            unconstrained_only=unconstrained_only, max_extra=caps,
        )
        if kk is None:
            return False
        k = kk
        ext = cur - base
        free0 = list(free)
        placed = self.place_extras(free, free_wo_extras, cand, extras_now, k, ext, ci, g, n_run)
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
                    values, weights, capacity, backend=backend, solver=pol.solver,
                    max_extra=caps_r,
                )
                assert kk is not None
                k = kk
                placed = self.place_extras(
                    free, free_wo_extras, cand, extras_now, k, ext, ci, g, n_run
                )
            d.n_extra_repairs += 1
            # (3) fill: no placeable extra worker of positive marginal value is left
            k, placed = self.fill_extras(
                values, k, max_extra, g.tolist(), free, free0, placed,
                lambda kv: self.place_extras(
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
            place_j = st.placement[j]
            assert place_j is not None
            b0, _ = split_placement(place_j, bw[j])
            newp = dict(b0)
            for s, c in ex.items():
                newp[s] = newp.get(s, 0) + c
            w_new = sum(newp.values())
            reason = pol.scale_out_reason if w_new > wk[j] else (
                pol.scale_in_reason if w_new < wk[j] else Reason.MCKP_MOVE
            )
            d.resizes.append((j, newp, reason))
        return True

    @staticmethod
    def slot_caps(free: list[int], g: np.ndarray, max_extra: np.ndarray) -> np.ndarray:
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

    def place_extras(
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
        groups_extra = self.groups_extra
        new_extra: dict[int, Placement] = {}
        if free_wo_extras is not None:
            order, touched = self.keep_exact(
                free, free_wo_extras, cand, extras_now, k, ext, order_a, n_run,
                k_l, g_l, new_extra,
            )
        else:
            order = order_a.tolist()
            self.keep(free, cand, extras_now, order, k_l, g_l, new_extra)
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
    def fill_extras(
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
    def keep(
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
    def keep_exact(
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



class ArylPolicy(SjfPolicy):
    """Aryl: capacity loaning, SJF base allocation, MCKP elastic allocation [Aryl]."""

    name = "aryl"
    loans = True
    elastic = True
    solver = "mckp"
    scale_out_reason = Reason.MCKP_SCALE_OUT
    scale_in_reason = Reason.MCKP_SCALE_IN
    pass_class: ClassVar[type[SjfPass]] = ArylPass

    def decide(self, st: ClusterState, ctx: PassContext, plan: SchedulePlan) -> None:
        ArylPass(self, st, ctx).run(plan)

    def wants_loan(self, st: ClusterState) -> bool:
        if st.queued:
            return True
        if not self.elastic:
            return False
        return bool(st.below)


class ArylNoLoanPolicy(ArylPolicy):
    """Ablation: Aryl without capacity loaning."""

    name = "aryl-no-loan"
    loans = False


class ArylNoElasticPolicy(ArylPolicy):
    """Ablation: Aryl without elastic scaling (every job at its reference size)."""

    name = "aryl-no-elastic"
    elastic = False


class ElasticGreedyPolicy(ArylPolicy):
    """Marginal-gain greedy elastic allocation (Optimus/AFS style peer), no loans.

    Base phase as in ``aryl``; spare GPUs go to elastic jobs one worker at a
    time, each to the job whose next worker gives the largest JCT reduction per
    GPU (ties: lower job index), until no positive gain fits.  Same value table
    as the MCKP (rescale pause included), so the difference to ``aryl-no-loan``
    is the solver only.
    """

    name = "elastic-greedy"
    loans = False
    solver = "greedy"
    scale_out_reason = Reason.GREEDY_SCALE_OUT
    scale_in_reason = Reason.GREEDY_SCALE_IN
