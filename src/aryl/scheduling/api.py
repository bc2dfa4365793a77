"""``aryl.schedule``: one scheduling pass, state in, plan out.

The pass, for every policy (the policy decides step 3 only):

1. **Reclaim** (the servers of the inference side's requests due by now,
   :meth:`ClusterState.reclaim_due`): choose which loaned servers go back with the
   reclaim kernel (``config.reclaim_policy``, default Aryl's cost greedy
   [Aryl]); jobs there shrink or are preempted.  Then loaned servers without
   training work go back for the requests not yet due (ascending index), so a
   server asked for takes no new work.  Later steps see the state after the
   reclaim.
2. **Offer** (loaning policies, when a job waits or an elastic job could grow,
   and not within ``config.loan_cooldown_s`` after a reclaim): the idle
   inference servers above ``config.loan_reserve_servers``, highest index
   first, are offered to this pass.
3. **Decide**: the policy's starts, resizes and preemptions.
4. **Settle loans**: offered servers that got a worker are borrowed; loaned
   servers left without training work are returned (option
   ``return_idle_loans``, default on; off: every offered server is borrowed
   and kept until reclaimed).
5. **Wake-up**: ``plan.next_wakeup_s``, the earliest later time at which a
   timed rule could change a decision with nothing else happening
   (:func:`next_wakeup_s`: a pending reclaim deadline, the end of the loan
   cool-down, the policy's own :meth:`Policy.next_wakeup_s`).  A client calls
   the pass again then, or on its next event if that comes first.

Deterministic and pure: the same state gives the same plan; nothing is
remembered between calls (the state's queue indexes are caches of its own
content).
"""

from __future__ import annotations

import math
from typing import Any

from aryl.scheduling.kernels import jobs_in_start_order, plan_reclaim
from aryl.scheduling.plan import Reason, SchedulePlan
from aryl.scheduling.policy import PassContext, Policy
from aryl.scheduling.registry import resolve_policy
from aryl.scheduling.state import IDLE, ClusterState, split_placement

__all__ = ["next_wakeup_s", "schedule", "schedule_python", "time_after"]


def schedule(
    state: ClusterState,
    *,
    policy: Any = "aryl",
    options: dict[str, Any] | None = None,
    backend: str | None = None,
) -> SchedulePlan:
    """One scheduling pass of ``policy`` over ``state``.

    Parameters
    ----------
    state : ClusterState
        The cluster now (not modified).
    policy : str or Policy
        ``aryl`` (default), ``aryl-no-loan``, ``aryl-no-elastic``,
        ``elastic-greedy``, ``fifo``, ``sjf``, ``tiresias``; or a policy object
        from :func:`aryl.scheduling.make_policy`; or a Python policy
        (:class:`aryl.Policy` instance, ``module:Class`` or an entry point of
        ``aryl.policies``), which always runs in the compiled pass (docs/policies.md).
    options : dict, optional
        Policy options (``return_idle_loans``; ``starvation_bound_s`` for the
        SJF-based policies; ``las_thresholds_gpu_s`` for ``tiresias``).
    backend : {"native", "reference"}, optional
        ``native``: the compiled pass (C++, ``aryl._core._sched``), reading the
        state's content directly; ``reference``: the Python pass (the reference
        twin; its kernels as ``state.config.backend`` says).  Both give the same
        plan.  Default: ``state.config.backend``.  Policies the compiled module
        lacks (the ``aryl`` family in a build without its pass, or a policy
        object of another class) run in Python.

    Returns
    -------
    SchedulePlan
        Starts, resizes, preemptions, servers to borrow and to return, each with
        a :class:`~aryl.scheduling.Reason`; apply it with
        :meth:`SchedulePlan.apply`.

    Raises
    ------
    InvalidInputError
        Unknown policy, option or backend; ``state.servers_needed`` not an integer
        in ``[0, inference servers]`` or ``state.elastic_memo`` not two integers in
        ``[-1, 2**62]`` (both set by the caller between passes; O(1) checks, the
        rest of the state is checked as it is built, :meth:`ClusterState.validate`).

    Notes
    -----
    Cost: the policy's pass (``aryl``: O(q log q) for the queue order the first
    time, then O(started x servers) placement, plus the MCKP over the elastic
    jobs when capacity changed) plus O(loaned servers x jobs on them) to settle
    loans; a reclaim copies the state (O(jobs)).
    """
    from aryl.scheduling.user import Policy as UserPolicy

    _check_inference_side(state)
    pol = policy if isinstance(policy, Policy) else resolve_policy(policy, options)
    b = state.config.backend if backend is None else backend
    if b not in ("native", "reference"):
        from aryl.errors import InvalidInputError

        raise InvalidInputError(f"backend: must be 'native' or 'reference', got {b!r}")
    if isinstance(pol, UserPolicy):  # Python policies run in the compiled pass only
        from aryl.scheduling.native import schedule_native

        return schedule_native(state, pol)
    if b == "native":
        from aryl.scheduling.native import native_policy, schedule_native

        if native_policy(pol):
            return schedule_native(state, pol)
    return schedule_python(state, pol)


def _check_inference_side(st: ClusterState) -> None:
    """The fields a caller sets directly between passes, where they enter the pass."""
    from aryl.errors import InvalidInputError
    from aryl.scheduling.jsonio import MAX_MEMO

    n_inf = st.n_servers - len(st.training_servers)
    v = st.servers_needed
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= n_inf:
        raise InvalidInputError(
            f"state.servers_needed: must be an integer in [0, {n_inf}] (the inference "
            f"servers), got {v!r}"
        )
    memo = st.elastic_memo
    if not (isinstance(memo, tuple) and len(memo) == 2 and all(
            not isinstance(x, bool) and isinstance(x, int) and -1 <= x <= MAX_MEMO
            for x in memo)):
        raise InvalidInputError(
            f"state.elastic_memo: must be two integers in [-1, {MAX_MEMO}], got {memo!r}"
        )


def schedule_python(state: ClusterState, pol: Policy) -> SchedulePlan:
    """:func:`schedule` in Python (the reference twin of the compiled pass; the
    Python simulator engine calls it on every pass)."""
    st = state
    plan = SchedulePlan(now_s=st.now_s, elastic_memo=st.elastic_memo)
    # 1. reclaim
    if st.n_loaned:
        n = st.reclaim_due()
        if n > 0:
            _reclaim(st, pol, n, plan)
            st = plan.apply(st)
        # loaned servers without training work that the inference side has asked
        # for (due later) go back now instead of taking new work
        asked = st.reclaim_asked()
        if asked > 0:
            jobs_on = st.jobs_on
            early = [s for s in st.loaned_servers() if not jobs_on[s]][:asked]
            if early:
                if n <= 0:
                    st = st.copy()
                for s in early:
                    st.give_back(s, reclaimed=True, now=st.now_s)
                st.set_serving()
                plan.reclaimed_servers.extend(early)
    # 2. offer idle inference servers
    cfg = st.config
    offered: list[int] = []
    if pol.loans:
        loanable = st.not_loaned() - st.servers_needed - cfg.loan_reserve_servers
        cooling = st.now_s - st.last_reclaim_s < cfg.loan_cooldown_s
        if loanable > 0 and not cooling and pol.wants_loan(st):
            status = st.server_status
            for s in reversed(st.inference_servers()):
                if loanable == 0:
                    break
                if status[s] == IDLE:
                    offered.append(s)
                    loanable -= 1
            offered.reverse()
    gpus = st.server_gpus
    loaned = st.loaned_servers()
    if offered:
        free = list(st.free)
        for s in offered:
            free[s] = gpus[s]
        loaned = sorted(loaned + offered)
    else:
        free = st.free
    capacity = st.training_gpus + sum(gpus[s] for s in loaned)
    keep_all = pol.loans and not pol.return_idle_loans
    if keep_all and offered:
        # every offered server is borrowed now and kept until reclaimed
        plan.borrowed_servers.extend((s, Reason.LOAN_KEPT) for s in reversed(offered))
        ctx = PassContext(free=free, loaned=loaned, offered=[], capacity_gpus=capacity)
    else:
        ctx = PassContext(free=free, loaned=loaned, offered=offered, capacity_gpus=capacity)
    # 3. the policy
    pol.decide(st, ctx, plan)
    # 4. settle loans
    if pol.loans and pol.return_idle_loans and loaned:
        _settle(st, pol, plan, loaned, offered)
    # 5. when a timed rule could change a decision
    plan.next_wakeup_s = next_wakeup_s(st, pol, plan)
    return plan


def time_after(origin_s: float, span_s: float) -> float:
    """The first float ``t`` with ``t - origin_s >= span_s``: ``origin_s + span_s``,
    moved up past rounding, so that a rule ``now - origin < span`` is off at ``t``
    (a wake-up there never finds the rule still on)."""
    t = origin_s + span_s
    while t - origin_s < span_s:
        t = math.nextafter(t, math.inf)
    return t


def next_wakeup_s(st: ClusterState, pol: Policy, plan: SchedulePlan) -> float:
    """The earliest time after ``st.now_s`` at which a timed rule could change a
    decision of the pass over the state after ``plan`` (``inf``: none).

    ``st`` is the pass's view (after its reclaim step).  The rules, every one the
    pass or a policy has:

    - a pending reclaim request falls due (:meth:`ClusterState.next_reclaim_deadline_s`);
    - the loan cool-down ends (loaning policies, while an idle inference server
      could be offered but for it);
    - the policy's own (:meth:`Policy.next_wakeup_s`; ``tiresias``: a running
      job's attained service reaches a level boundary above a waiting job's).

    A rule that cannot change a decision when it flips needs no wake-up: the SJF
    starvation bound (a job that starts starving with nothing else happening
    gets no more room than it failed to fit in the pass before) and the
    checkpoints (no pass reads them).  ``tests/test_timed_rules.py`` checks, for
    every policy, that a pass at a random time before the reported wake-up
    decides nothing that a pass at the same instant would not.
    """
    cfg = st.config
    t = min(pol.next_wakeup_s(st, plan), st.next_reclaim_deadline_s())
    if pol.loans and st.now_s - st.last_reclaim_s < cfg.loan_cooldown_s:
        loanable = (st.not_loaned() + len(plan.returned_servers) - st.servers_needed
                    - cfg.loan_reserve_servers)
        if loanable > 0:
            t = min(t, time_after(st.last_reclaim_s, cfg.loan_cooldown_s))
    return t


def _reclaim(st: ClusterState, pol: Policy, n: int, plan: SchedulePlan) -> None:
    """Step 1: return ``n`` loaned servers; jobs there shrink or are preempted."""
    servers, preempted = plan_reclaim(st, n, pol.elastic)
    plan.reclaim_shortfall = n - len(servers)
    returned = set(servers)
    affected: dict[int, None] = {}
    on = jobs_in_start_order(st, servers)
    for s in servers:
        for j in on[s]:
            affected[j] = None
    for j in affected:
        place = st.placement[j]
        assert place is not None
        left = {s: k for s, k in place.items() if s not in returned}
        w = sum(left.values())
        if j in preempted or w < pol.base_workers(st, j):
            plan.reclaim_actions.append((j, None, Reason.RECLAIM_PREEMPT))
        else:
            plan.reclaim_actions.append((j, left, Reason.RECLAIM_SCALE_IN))
    plan.reclaimed_servers.extend(servers)


def _settle(
    st: ClusterState, pol: Policy, plan: SchedulePlan, loaned: list[int], offered: list[int]
) -> None:
    """Step 4: borrow the offered servers the plan uses; return loans left empty.

    A borrowed server's reason is ``LOAN_FOR_BASE`` when a starting job's base
    workers (its first ``base`` workers in ascending server index) are on it,
    else ``LOAN_FOR_EXTRA``.

    Only the servers the plan touches get a copy of their job set.
    O(loaned servers + placement entries of the plan).
    """
    jobs_on = st.jobs_on
    is_loaned = set(loaned)
    after: dict[int, set[int]] = {}

    def jobs_after(s: int) -> set[int]:
        got = after.get(s)
        if got is None:
            got = after[s] = set(jobs_on[s])
        return got

    placement = st.placement
    for j, _ in plan.preemptions:
        for s in placement[j] or ():
            if s in is_loaned:
                jobs_after(s).discard(j)
    for j, _, _ in plan.resizes:
        for s in placement[j] or ():
            if s in is_loaned:
                jobs_after(s).discard(j)
    for j, place, _ in plan.resizes:
        for s in place:
            if s in is_loaned:
                jobs_after(s).add(j)
    for_base: set[int] = set()
    for j, place, _ in plan.starts:
        for s in place:
            if s in is_loaned:
                jobs_after(s).add(j)
        if any(s in is_loaned for s in place):
            base, _ = split_placement(place, pol.base_workers(st, j))
            for_base.update(s for s in base if s in is_loaned)

    def busy(s: int) -> bool:
        got = after.get(s)
        return bool(got) if got is not None else bool(jobs_on[s])

    for s in offered:
        if busy(s):
            reason = Reason.LOAN_FOR_BASE if s in for_base else Reason.LOAN_FOR_EXTRA
            plan.borrowed_servers.append((s, reason))
    fresh = set(offered)
    for s in loaned:
        if s not in fresh and not busy(s):
            plan.returned_servers.append((s, Reason.IDLE_LOAN))
