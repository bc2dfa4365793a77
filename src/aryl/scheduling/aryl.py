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

from typing import ClassVar

import numpy as np

from aryl.scheduling.kernels import mckp_extras
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

    def place(self, free: list[int], j: int) -> Placement | None:
        """Best fit on truly free GPUs first; else also on GPUs of extra workers."""
        st = self.st
        w = self.pol.base_workers(st, j)
        g = st.gpus_per_worker[j]
        real = self.real
        p = bf_place(real, self.groups, w, g)
        if p is not None:
            self.real_left -= w * g
            if self.scratch is not None:
                for s, k in p.items():
                    self.scratch[s] -= k * g
            return p
        if not self.el:
            return None
        scratch = self.build_scratch()
        p = bf_place(scratch, self.groups, w, g)
        if p is None:
            return None
        for s, k in p.items():
            if real[s] < k * g:
                self.displaced = True
            took = min(real[s], k * g)
            real[s] -= took
            self.real_left -= took
        return p

    def take(self, free: list[int], place: Placement, j: int) -> None:
        pass  # place already took the GPUs

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
        if run and (self.el or new_el):
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
    ) -> bool:
        """Phase 2 over running jobs ``cand`` (+ elastic starts in ``d``) on ``free``.

        ``free`` counts the GPUs of the extras in ``extras_now`` as free.  With
        ``unconstrained_only``, gives up (returns False, nothing changed) unless
        every job's best option fits at once.  ``free_wo_extras`` (read only):
        when given, ``free`` is exactly this list plus the GPUs of every extra in
        ``extras_now`` (no base worker was placed on an extra's GPUs), which
        lets the keep pass skip the jobs whose extras do not change.
        """
        st = self.st
        pol = self.pol
        new = [(j, p) for j, p, _ in d.starts if pol.scalable(st, j)]
        cand = list(cand)
        n_run = len(cand)
        cand.extend(j for j, _ in new)
        if not cand:
            return True
        capacity = sum(free)  # servers not in a group (not on loan) have none free
        if capacity <= 0 and not extras_now:
            return True
        n = len(cand)
        bw, wk = st.min_workers, st.workers
        ci = np.fromiter(cand, dtype=np.int64, count=n)
        now = st.now_s
        rem = np.array(st.remaining_work_many(cand, now), dtype=np.float64)
        bw_a, mw_a, gw_a, al_a = st.static_arrays()
        base = bw_a[ci]
        cur = np.array([wk[j] for j in cand[:n_run]] + [bw[j] for j, _ in new], dtype=np.int64)
        mx = mw_a[ci]
        g = gw_a[ci]
        alpha = al_a[ci]
        pause = np.zeros(n)
        pause[:n_run] = float(st.config.rescale_pause_s)
        kk = mckp_extras(
            rem, cur, base, mx, g, alpha, pause, capacity,
            backend=st.config.backend, solver=pol.solver, unconstrained_only=unconstrained_only,
        )
        if kk is None:
            return False
        k = kk
        # --- place extras: best-fit decreasing, keep existing ones first.  Only
        # the jobs given extras (k > 0) take part: they sort first in ``order``
        # (key -(k g) < 0), and a job absent from ``new_extra`` gets none.
        n_pos = int(np.count_nonzero(k))
        order_a = np.lexsort((ci, -(k * g)))[:n_pos]
        k_l = k.tolist()
        g_l = g.tolist()
        groups_extra = self.groups_extra
        new_extra: dict[int, Placement] = {}
        if free_wo_extras is not None:
            order, touched = self.keep_exact(
                free, free_wo_extras, cand, extras_now, k, cur - base, order_a, n_run,
                k_l, g_l, new_extra,
            )
        else:
            order = order_a.tolist()
            self.keep(free, cand, extras_now, order, k_l, g_l, new_extra)
            # A running job can change only if it is given extras or has some now
            # (workers above base: exactly the jobs in ``extras_now``)
            touched = np.flatnonzero((k[:n_run] > 0) | (cur[:n_run] > base[:n_run])).tolist()
        # place the rest (k_l: workers still to place)
        for i in order:
            want = k_l[i]
            if not want:
                continue
            j = cand[i]
            gi = g_l[i]
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
