"""The policy interface of the scheduling pass and the pass context.

A policy is stateless: :meth:`Policy.decide` reads a :class:`ClusterState` and a
:class:`PassContext` (this pass's view of capacity, including the idle
inference servers offered for loan) and fills a :class:`SchedulePlan` with
starts, resizes and preemptions.  Loans, returns and reclaims are decided
around it by :func:`aryl.scheduling.schedule`, the same for every policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from aryl.errors import InvalidInputError
from aryl.scheduling.plan import SchedulePlan
from aryl.scheduling.state import ClusterState

__all__ = ["PassContext", "Policy"]


@dataclass(slots=True)
class PassContext:
    """What one pass may use.

    Attributes
    ----------
    free : list of int
        Free GPUs per server for this pass: the state's, with the offered servers'
        GPUs free (copy before changing it).
    loaned : list of int
        Servers on loan or offered to this pass, ascending.
    offered : list of int
        Idle inference servers offered to this pass (borrowed only if used), ascending.
    capacity_gpus : int
        GPUs of the training servers plus the ``loaned`` ones.
    """

    free: list[int]
    loaned: list[int]
    offered: list[int]
    capacity_gpus: int


class Policy:
    """A scheduling policy: one pass from state to decisions, no memory between calls.

    Class attributes tell :func:`aryl.scheduling.schedule` what the policy uses:
    ``loans`` (borrow idle inference servers), ``elastic`` (elastic jobs run
    between ``min_workers`` and ``max_workers``; otherwise every job runs at
    its reference size), ``uses_tick`` (a pass on the periodic tick can change
    something).  Option ``return_idle_loans`` (loaning policies, default True):
    borrow only offered servers that the pass places a worker on and return
    loaned servers left without training work; False borrows every offered
    server and keeps it until it is reclaimed.
    """

    name: ClassVar[str] = ""
    loans: ClassVar[bool] = False
    elastic: ClassVar[bool] = False
    uses_tick: ClassVar[bool] = False
    return_idle_loans: bool = True  # the default; an option per instance
    options_known: ClassVar[tuple[str, ...]] = ("return_idle_loans",)

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        opts = dict(options or {})
        unknown = sorted(set(opts) - set(self.options_known))
        if unknown:
            raise InvalidInputError(
                f"policy {self.name!r}: unknown option(s) {unknown}; "
                f"known: {sorted(self.options_known)}"
            )
        self.options = opts
        rv = opts.get("return_idle_loans", True)
        if not isinstance(rv, bool):
            raise InvalidInputError(
                f"policy {self.name!r}: option return_idle_loans must be true or false"
            )
        self.return_idle_loans = rv

    # how the policy sees each job's size
    def base_workers(self, st: ClusterState, j: int) -> int:
        """Workers a job runs with at least: its minimum when elastic here, else its reference."""
        return st.min_workers[j] if (self.elastic and st.elastic[j]) else st.ref_workers[j]

    def scalable(self, st: ClusterState, j: int) -> bool:
        """Whether job ``j`` may get extra workers under this policy."""
        return self.elastic and st.elastic[j] and st.max_workers[j] > st.min_workers[j]

    def wants_loan(self, st: ClusterState) -> bool:
        """Whether borrowing idle inference servers could help now."""
        return bool(st.queued)

    def decide(self, st: ClusterState, ctx: PassContext, plan: SchedulePlan) -> None:
        """Fill ``plan`` (starts, resizes, preemptions, the elastic memo)."""
        raise NotImplementedError

    def next_wakeup_s(self, st: ClusterState, plan: SchedulePlan) -> float:
        """The earliest time after ``st.now_s`` at which one of this policy's timed
        rules could change its decision over the state after ``plan`` with nothing
        else happening (``inf``: none, the default).  A policy whose decisions
        depend on the clock must say when here (and in the compiled pass,
        ``sched_pass.hpp`` ``policy_wakeup``); the pass reports the minimum with
        its own rules as ``SchedulePlan.next_wakeup_s``."""
        return math.inf
