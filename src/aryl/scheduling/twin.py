"""The Python twins of the registered policies, run through the policy callback.

A registered policy's Python twin (``aryl``, ``fifo``, ``sjf``... in
:mod:`aryl.scheduling`) decides from a :class:`ClusterState`
(``decide(st, ctx, plan)``); the Python engine (``SimConfig(engine="python")``)
keeps that state and calls it.  :class:`TwinPolicy` runs the same twin inside
the compiled event loop as an :class:`aryl.Policy`: the events, the reclaim,
the loans' offers and settlement, the accounting and the output stay compiled,
and the adapter keeps a ``ClusterState`` *mirror* of the engine's state in step
from what changed since its previous call (``PassView.changes``,
:meth:`ClusterState.apply_changes`: the jobs that arrived, started, were
resized, preempted or finished, the servers lent and returned), then calls the
twin's ``decide`` on it and hands its plan back as a :class:`aryl.Decision`.
A replay costs the twin's own code plus O(changes) per pass, not
O(queued + running): the mirror is never rebuilt.

The results are those of the Python engine's replay of the twin, bit for bit
(and so of the compiled policy of the same name); tests/test_twin_callback.py
checks it.  Decisions carry the reason ``POLICY_DECISION`` instead of the
twin's own (no result reports reasons of starts and resizes).

Usage::

    from aryl.scheduling.twin import ArylTwin, twin_policy
    simulate(jobs, policy=ArylTwin())            # the twin of ``aryl``
    simulate(jobs, policy=twin_policy("sjf", {"starvation_bound_s": 600.0}))

or by name, ``policy="aryl-twin"`` (also ``fifo-twin``, ``sjf-twin``,
``aryl-no-loan-twin``...: :data:`TWINS`; ``aryl policies`` lists them).

Limits: ``tiresias`` has its own timed rule (a wake-up at a level boundary),
which the callback API does not carry, so it has no twin here; a policy object
whose class overrides ``wants_loan`` with another rule than the two known ones
(a waiting job; or also an elastic job below its maximum, ``aryl``'s) is
refused.  One replay at a time per instance (the mirror is the replay's).
"""

from __future__ import annotations

from typing import Any, ClassVar

from aryl.errors import InvalidInputError, PolicyError
from aryl.scheduling.aryl import (
    ArylNoElasticPolicy,
    ArylNoLoanPolicy,
    ArylPolicy,
    ElasticGreedyPolicy,
)
from aryl.scheduling.fifo import FifoPolicy
from aryl.scheduling.fifo_backfill import FifoBackfillPolicy
from aryl.scheduling.plan import SchedulePlan
from aryl.scheduling.policy import PassContext
from aryl.scheduling.policy import Policy as StatePolicy
from aryl.scheduling.sjf import SjfPolicy
from aryl.scheduling.state import ClusterState
from aryl.scheduling.tiresias import TiresiasPolicy
from aryl.scheduling.user import Decision, PassView, Policy

__all__ = ["TWINS", "ArylTwin", "TwinPolicy", "twin_policy"]


class TwinPolicy(Policy):
    """A registered policy's Python twin as an :class:`aryl.Policy`.

    Subclasses set ``twin`` (the registered name); :func:`twin_policy` makes the
    class for any name.  Options are the twin's (``return_idle_loans``,
    ``starvation_bound_s`` for the SJF family), checked by the twin.

    Attributes
    ----------
    twin : str (class attribute)
        The registered policy whose Python twin decides.
    direct : bool (class attribute)
        The engines call :meth:`decide_values` with the pass's values (default);
        false: :meth:`decide` with a view (the same decisions, slower).
    inner : aryl.scheduling.policy.Policy
        The twin (``make_policy(twin, options)``).

    Raises
    ------
    InvalidInputError
        Unknown twin or option; a twin with a timed rule of its own
        (``tiresias``) or an unknown loan rule.
    """

    twin: ClassVar[str] = ""
    #: the engines call :meth:`decide_values` with the pass's values (no view);
    #: false: through :meth:`decide` and a :class:`aryl.PassView` like any policy
    direct: ClassVar[bool] = True

    def __init__(self, options: dict[str, Any] | None = None, **kwargs: Any) -> None:
        given = {**dict(options or {}), **kwargs}
        inner = _state_policy_class(self.twin)(given)
        check_twin(inner)
        self.inner: StatePolicy = inner
        self.options = dict(given)
        self.return_idle_loans = bool(inner.return_idle_loans)
        self._mirror: ClusterState | None = None
        self._plan: SchedulePlan | None = None

    @classmethod
    def policy_name(cls) -> str:
        return cls.name or f"{cls.twin}-twin"

    def bind(self, state: ClusterState) -> None:
        """Start a replay: ``state`` (servers and jobs as the engine was given them,
        taken over, not copied) becomes the mirror.  Called by the engines."""
        self._mirror = state
        self._plan = None

    def decide(self, view: PassView) -> Decision | None:
        """Bring the mirror up to the pass (``view.changes``), run the twin on it.

        O(changes since the last call) + the twin's ``decide``.  (The engines
        call :meth:`decide_values` instead unless ``direct`` is false: the same
        step from the pass's values, no view.)

        Raises
        ------
        PolicyError
            No replay bound (:meth:`bind`).
        """
        jobs, servers, q_moved, r_moved = view.changes
        m = self.decide_values(view.now_s, jobs, servers, q_moved, r_moved,
                               view.last_reclaim_s, view.servers_needed,
                               view.free_gpus.tolist(), view.loaned.tolist(),
                               view.offered.tolist(), view.capacity_gpus)
        return None if m is None else Decision(m.starts, m.resizes, m.preemptions)

    def decide_values(self, now: float, jobs: list[Any], servers: list[Any],
                      q_moved: list[int], r_moved: list[int], last_reclaim_s: float,
                      servers_needed: int, free: list[int], loaned: list[int],
                      offered: list[int], capacity_gpus: int) -> Any:
        """One pass from plain values (what the engine passes, ``twin_decide`` of
        :func:`aryl.scheduling.native.user_policy_prep`).

        Parameters
        ----------
        now : float
            The pass time, s.
        jobs, servers, q_moved, r_moved : list
            ``PassView.changes`` (:meth:`ClusterState.apply_changes`).
        last_reclaim_s : float
        servers_needed : int
        free, loaned, offered : list of int
            The pass context (:class:`~aryl.scheduling.policy.PassContext`).
        capacity_gpus : int

        Returns
        -------
        object or None
            The twin's plan as a decision: ``starts``, ``resizes``, ``preemptions``
            lists as in :class:`aryl.Decision`; ``None`` when it decides nothing.

        Raises
        ------
        PolicyError
            No replay bound (:meth:`bind`); the twin's own errors pass through with
            a note naming the pass.

        Notes
        -----
        O(changes) to update the mirror, then the twin's ``decide``.  The plan
        object of a pass that decided nothing is reused by the next one (the
        pass's scratch).
        """
        st = self._mirror
        if st is None:
            raise PolicyError(f"policy {self.policy_name()!r}: no replay state bound; run it "
                              "with aryl.simulate or aryl.schedule")
        try:
            if jobs or servers or q_moved or r_moved:
                st.apply_changes(jobs, servers, q_moved, r_moved, last_reclaim_s)
            st.now_s = now
            st.servers_needed = servers_needed
            plan = self._plan
            if plan is None or plan.starts or plan.resizes or plan.preemptions \
                    or plan.n_extra_repairs:
                plan = self._plan = SchedulePlan(now_s=now, elastic_memo=st.elastic_memo)
            else:  # the last pass decided nothing: its plan is as new (the scratch of the pass)
                plan.now_s = now
                plan.elastic_memo = st.elastic_memo
            self.inner.decide(st, PassContext(free, loaned, offered, capacity_gpus), plan)
            st.elastic_memo = plan.elastic_memo
        except Exception as e:
            e.add_note(f"(raised in the decide step of policy {self.policy_name()!r} at "
                       f"t = {now:.10g} s)")
            raise
        if not (plan.starts or plan.resizes or plan.preemptions):
            return None
        return _Moves([(j, p) for j, p, _ in plan.starts], [(j, p) for j, p, _ in plan.resizes],
                      [j for j, _ in plan.preemptions])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options})" if self.options else \
            f"{type(self).__name__}()"


class _Moves:
    """A decision as the engine reads it (``aryl.Decision``'s three lists)."""

    __slots__ = ("preemptions", "resizes", "starts")

    def __init__(self, starts: list[Any], resizes: list[Any], preemptions: list[int]) -> None:
        self.starts = starts
        self.resizes = resizes
        self.preemptions = preemptions

    to_arrays = Decision.to_arrays  # the engine's path for other integer types


def check_twin(inner: StatePolicy) -> None:
    """Refuse a twin the callback cannot run as the Python engine does.

    Raises
    ------
    InvalidInputError
        Its class has its own ``next_wakeup_s`` (a timed rule) or a ``wants_loan``
        other than :class:`~aryl.scheduling.policy.Policy`'s and ``aryl``'s.
    """
    cls = type(inner)
    if cls.next_wakeup_s is not StatePolicy.next_wakeup_s:
        raise InvalidInputError(
            f"policy {inner.name!r}: its twin has a timed rule of its own (next_wakeup_s), "
            "which a policy through the callback cannot report; run it with the compiled "
            "or the Python engine")
    if cls.wants_loan not in (StatePolicy.wants_loan, ArylPolicy.wants_loan):
        raise InvalidInputError(
            f"policy {inner.name!r}: its twin's wants_loan is neither the base rule nor "
            "aryl's; the callback has no way to ask it")


_CLASSES: dict[str, type[TwinPolicy]] = {}


def twin_class(name: str) -> type[TwinPolicy]:
    """The :class:`TwinPolicy` subclass for registered policy ``name`` (made once).

    Raises
    ------
    InvalidInputError
        Unknown policy, or one :func:`check_twin` refuses.
    """
    cls = _CLASSES.get(name)
    if cls is not None:
        return cls
    pc = _state_policy_class(name)
    check_twin(pc())
    attrs = {
        "twin": name, "name": f"{name}-twin", "loans": pc.loans, "elastic": pc.elastic,
        "uses_tick": pc.uses_tick, "version": None,
        "loans_for_growth": pc.wants_loan is ArylPolicy.wants_loan,
        "__doc__": f"The Python twin of ``{name}`` through the policy callback.",
        "__module__": __name__,
    }
    cls = type(_class_name(name), (TwinPolicy,), attrs)
    _CLASSES[name] = cls
    return cls


def _class_name(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("-")) + "Twin"


def twin_policy(name: str, options: dict[str, Any] | None = None) -> TwinPolicy:
    """The Python twin of registered policy ``name`` as an :class:`aryl.Policy`.

    Raises
    ------
    InvalidInputError
        As :func:`twin_class` and the twin's option checks.
    """
    return twin_class(name)(options)


#: The registered policies' classes (aryl.scheduling.registry lists the same;
#: imported here directly so that the registry may import this module)
_STATE_POLICIES: dict[str, type[StatePolicy]] = {
    cls.name: cls for cls in (FifoPolicy, FifoBackfillPolicy, SjfPolicy, TiresiasPolicy,
                              ArylPolicy, ArylNoLoanPolicy, ArylNoElasticPolicy,
                              ElasticGreedyPolicy)
}


def _state_policy_class(name: str) -> type[StatePolicy]:
    try:
        return _STATE_POLICIES[name]
    except (KeyError, TypeError):
        raise InvalidInputError(f"policy: unknown policy {name!r} for a twin; choose from "
                                f"{sorted(_STATE_POLICIES)}") from None


def _twins() -> dict[str, type[TwinPolicy]]:
    out: dict[str, type[TwinPolicy]] = {}
    for name in sorted(_STATE_POLICIES):
        try:
            cls = twin_class(name)
        except InvalidInputError:
            continue
        out[cls.policy_name()] = cls
    return out


#: The twins by name (``aryl-twin``, ``fifo-twin``...), every registered policy
#: :func:`check_twin` accepts.
TWINS: dict[str, type[TwinPolicy]] = _twins()
# each twin's class importable by its name (``aryl.scheduling.twin:SjfTwin``)
globals().update({cls.__name__: cls for cls in TWINS.values()})

ArylTwin = TWINS["aryl-twin"]
