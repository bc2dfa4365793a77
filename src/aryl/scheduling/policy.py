"""The policy interface of the scheduling pass, the pass context and the registry.

A policy is stateless: :meth:`Policy.decide` reads a :class:`ClusterState` and a
:class:`PassContext` (this pass's view of capacity, including the idle
inference servers offered for loan) and fills a :class:`SchedulePlan` with
starts, resizes and preemptions.  Loans, returns and reclaims are decided
around it by :func:`aryl.scheduling.schedule`, the same for every policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from aryl.errors import InvalidInputError
from aryl.scheduling.plan import SchedulePlan
from aryl.scheduling.state import ClusterState

__all__ = [
    "PassContext",
    "Policy",
    "available_policies",
    "make_policy",
    "policy_class",
    "register",
]


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


_REGISTRY: dict[str, type[Policy]] = {}


def register(name: str) -> Callable[[type[Policy]], type[Policy]]:
    """Class decorator adding a policy to the registry under ``name``."""

    def deco(cls: type[Policy]) -> type[Policy]:
        _REGISTRY[name] = cls
        return cls

    return deco


def _load_builtin() -> None:
    from aryl.scheduling import aryl as _a  # noqa: F401
    from aryl.scheduling import fifo as _f  # noqa: F401
    from aryl.scheduling import sjf as _s  # noqa: F401
    from aryl.scheduling import tiresias as _t  # noqa: F401


def available_policies() -> list[str]:
    """Names accepted by :func:`aryl.schedule`, sorted."""
    _load_builtin()
    return sorted(_REGISTRY)


def policy_class(name: str) -> type[Policy]:
    """The class registered under ``name``.

    Raises
    ------
    InvalidInputError
        Unknown name (the message lists the known ones and the closest match).
    """
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidInputError(
            f"policy: unknown policy {name!r}{hint}; choose from {sorted(_REGISTRY)}"
        ) from None


_CACHE: dict[tuple[str, tuple[tuple[str, Any], ...]], Policy] = {}


def make_policy(name: str, options: dict[str, Any] | None = None) -> Policy:
    """The policy ``name`` with ``options`` (instances are immutable and cached)."""
    key = (name, tuple(sorted((options or {}).items(), key=lambda kv: kv[0])))
    try:
        pol = _CACHE.get(key)
    except TypeError:  # unhashable option values
        return policy_class(name)(options)
    if pol is None:
        pol = policy_class(name)(options)
        _CACHE[key] = pol
    return pol
