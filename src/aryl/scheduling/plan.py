"""What one scheduling pass decides: :class:`SchedulePlan`, with a reason per action.

A plan is applied in this order (:meth:`SchedulePlan.apply`), so that no server
is ever over-committed in between:

1. ``reclaim_actions``, in order: jobs on the servers the inference side takes
   back are preempted (placement ``None``) or scaled in to what they keep;
2. ``reclaimed_servers`` go back to the inference side;
3. ``borrowed_servers`` are lent to training (their GPUs become free);
4. ``preemptions``;
5. ``resizes``: every resized job's old placement is removed first, then the
   new placements are added (in list order);
6. ``starts``;
7. ``returned_servers``: loaned servers with no training worker left go back.

Placements are complete (the job's whole new placement, ``server index ->
workers``).  Reason codes tell why (:class:`Reason`).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Protocol

from aryl.scheduling.state import ClusterState, Placement, is_integer

__all__ = ["PlanObserver", "Reason", "SchedulePlan"]


class Reason(enum.IntEnum):
    """Why an action was taken (also the event log's and JSON's vocabulary)."""

    FIFO_HEAD = 1  #: start: head of the arrival-order queue
    SJF_ORDER = 2  #: start: next in shortest-job-first order
    BACKFILL = 3  #: start: a job behind one that did not fit
    STARVATION_GUARD = 4  #: start: waited past the starvation bound
    LAS_PRIORITY = 5  #: start: least attained service first (Tiresias)
    LAS_PREEMPT = 6  #: preemption: a lower-priority job makes room (Tiresias)
    MCKP_SCALE_OUT = 7  #: resize: the MCKP gives it more workers
    MCKP_SCALE_IN = 8  #: resize: the MCKP gives it fewer workers
    MCKP_MOVE = 9  #: resize: same size, workers moved
    GREEDY_SCALE_OUT = 10  #: resize: the marginal-gain greedy gives it more workers
    GREEDY_SCALE_IN = 11  #: resize: the greedy gives it fewer workers
    RECLAIM_PREEMPT = 12  #: preemption: its server is reclaimed and it cannot shrink
    RECLAIM_SCALE_IN = 13  #: resize: its server is reclaimed; it sheds the workers there
    NEVER_FITS = 14  #: (reported by the simulator) the job can never fit
    LOAN_FOR_BASE = 15  #: borrow: a starting job's base worker is placed on it
    LOAN_FOR_EXTRA = 16  #: borrow: an elastic job's extra worker is placed on it
    LOAN_KEPT = 17  #: borrow: idle loans are kept (policy option return_idle_loans=False)
    RECLAIMED = 18  #: return: the inference side asked for it
    IDLE_LOAN = 19  #: return: no training worker is left on it
    POLICY_DECISION = 20  #: start, resize or preemption decided by a Python policy (aryl.Policy)

    @property
    def label(self) -> str:
        return self.name.lower()


class PlanObserver(Protocol):
    """Hooks :meth:`SchedulePlan.apply` calls around each change (the simulator's accounting)."""

    def before_job_change(self, j: int) -> None: ...

    def job_started(self, j: int, reason: Reason) -> None: ...

    def job_resized(self, j: int, old_workers: int, reason: Reason) -> None: ...

    def job_preempted(self, j: int, reason: Reason) -> None: ...

    def server_lent(self, s: int, reason: Reason) -> None: ...

    def server_returned(self, s: int, reason: Reason) -> None: ...


@dataclass
class SchedulePlan:
    """The decisions of one pass at ``now_s`` (indexes into the state it was made for).

    Attributes
    ----------
    now_s : float
    reclaim_actions : list of (job, Placement or None, Reason)
        Consequences of a reclaim, in order: ``None`` preempts the job, a placement
        is what it keeps (``RECLAIM_SCALE_IN``).
    reclaimed_servers : list of int
        Servers returned to the inference side on its request, in the order chosen.
    reclaim_shortfall : int
        Servers asked for that could not be returned (0 normally).
    borrowed_servers : list of (server, Reason)
    preemptions : list of (job, Reason)
    resizes : list of (job, Placement, Reason)
    starts : list of (job, Placement, Reason)
    returned_servers : list of (server, Reason)
        Loaned servers left without training work (``IDLE_LOAN``).
    elastic_memo : tuple of (int, int)
        The elastic phase's capacity memo for the next pass (stored in the state).
    n_extra_repairs : int
        Diagnostic: elastic phases whose first knapsack choice could not all be
        placed and was repaired (docs/simulator.md, "Placement of extra workers").
    next_wakeup_s : float
        The earliest time after ``now_s`` at which a timed rule (a reclaim
        deadline, the end of the loan cool-down, the policy's own, e.g. a
        ``tiresias`` level boundary) could change a decision of a pass over the
        state after this plan with nothing else happening; ``inf``: none.  Call
        :func:`aryl.schedule` again by then (the simulator schedules a wake-up
        event there).  Not part of the state change (:meth:`apply` ignores it).
    """

    now_s: float
    reclaim_actions: list[tuple[int, Placement | None, Reason]] = field(default_factory=list)
    reclaimed_servers: list[int] = field(default_factory=list)
    reclaim_shortfall: int = 0
    borrowed_servers: list[tuple[int, Reason]] = field(default_factory=list)
    preemptions: list[tuple[int, Reason]] = field(default_factory=list)
    resizes: list[tuple[int, Placement, Reason]] = field(default_factory=list)
    starts: list[tuple[int, Placement, Reason]] = field(default_factory=list)
    returned_servers: list[tuple[int, Reason]] = field(default_factory=list)
    elastic_memo: tuple[int, int] = (-1, -1)
    n_extra_repairs: int = 0
    next_wakeup_s: float = math.inf

    def __bool__(self) -> bool:
        return bool(
            self.reclaim_actions or self.reclaimed_servers or self.borrowed_servers
            or self.preemptions or self.resizes or self.starts or self.returned_servers
        )

    @property
    def n_actions(self) -> int:
        return (
            len(self.reclaim_actions) + len(self.reclaimed_servers) + len(self.borrowed_servers)
            + len(self.preemptions) + len(self.resizes) + len(self.starts)
            + len(self.returned_servers)
        )

    def apply(
        self,
        state: ClusterState,
        *,
        inplace: bool = False,
        observer: PlanObserver | None = None,
        validate: bool = True,
    ) -> ClusterState:
        """The state after this plan (a copy unless ``inplace``).

        Jobs' progress, checkpoints and attained service are brought up to
        ``now_s`` where they change; preempted jobs roll back to their last
        checkpoint and requeue; resized jobs pause for ``rescale_pause_s``;
        starts of preempted jobs pay ``restart_cost_s``.  ``state.now_s`` becomes
        ``now_s``; ``elastic_memo`` is stored.  O(actions x servers per job).
        ``validate=False`` skips the placement checks (for plans that
        :func:`aryl.schedule` just made for this state).

        Raises
        ------
        InvalidInputError
            An action that does not fit the state (a job not running, a server not
            idle ...) or a placement that the state document's reader would refuse
            (:meth:`ClusterState.check_placement`, the same function: workers
            outside ``[min_workers, max_workers]``, a server that does not exist or
            is not on loan, more GPUs than a server has free).
        """
        from aryl.errors import InvalidInputError

        st = state if inplace else state.copy()
        now = self.now_s
        if not isinstance(now, (int, float)) or not math.isfinite(now):
            raise InvalidInputError(f"plan.now_s: must be a finite number, got {now!r}")
        if now < st.now_s:
            raise InvalidInputError(f"plan at {now} s is older than the state ({st.now_s} s)")
        n = st.n_servers
        for name, ids in (("reclaimed server", self.reclaimed_servers),
                          ("borrowed server", [x for x, _ in self.borrowed_servers]),
                          ("returned server", [x for x, _ in self.returned_servers])):
            for x in ids:
                if not is_integer(x) or not 0 <= x < n:
                    raise InvalidInputError(f"{name} {x!r}: no server with that index")
        st.now_s = now
        obs = observer
        running = st.running
        for j, place, reason in self.reclaim_actions:
            if j not in running:
                raise InvalidInputError(f"reclaim action on job {st.job_id[j]!r}, not running")
            if obs is not None:
                obs.before_job_change(j)
            if place is None:
                st.preempt(j, now)
                if obs is not None:
                    obs.job_preempted(j, reason)
            else:
                old = st.unplace_for_resize(j, now)
                if validate:
                    st.check_placement(j, place, st.free,
                                       f"reclaim action on job {st.job_id[j]!r}: placement")
                st.place_resized(j, place, now)
                if obs is not None:
                    obs.job_resized(j, old, reason)
        for s in self.reclaimed_servers:
            st.give_back(s, reclaimed=True, now=now)
            if obs is not None:
                obs.server_returned(s, Reason.RECLAIMED)
        for s, reason in self.borrowed_servers:
            st.lend(s)
            if obs is not None:
                obs.server_lent(s, reason)
        for j, reason in self.preemptions:
            if j not in running:
                raise InvalidInputError(f"preemption of job {st.job_id[j]!r}, not running")
            if obs is not None:
                obs.before_job_change(j)
            st.preempt(j, now)
            if obs is not None:
                obs.job_preempted(j, reason)
        if self.resizes:
            olds: list[int] = []
            for j, _, _ in self.resizes:
                if j not in running:
                    raise InvalidInputError(f"resize of job {st.job_id[j]!r}, not running")
                if obs is not None:
                    obs.before_job_change(j)
                olds.append(st.unplace_for_resize(j, now))
            for (j, place, reason), old in zip(self.resizes, olds, strict=True):
                if validate:
                    st.check_placement(j, place, st.free,
                                       f"resize of job {st.job_id[j]!r}: placement")
                st.place_resized(j, place, now)
                if obs is not None:
                    obs.job_resized(j, old, reason)
        queued = st.queued
        for j, place, reason in self.starts:
            if j not in queued:
                raise InvalidInputError(f"start of job {st.job_id[j]!r}, not queued")
            if validate:
                st.check_placement(j, place, st.free, f"start of job {st.job_id[j]!r}: placement")
            st.start(j, place, now)
            if obs is not None:
                obs.job_started(j, reason)
        for s, reason in self.returned_servers:
            st.give_back(s, reclaimed=False, now=now)
            if obs is not None:
                obs.server_returned(s, reason)
        if self.reclaimed_servers or self.returned_servers:
            st.set_serving()
        st.elastic_memo = self.elastic_memo
        return st

