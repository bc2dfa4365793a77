"""The policy interface, reason codes, placement helpers and the registry.

A policy sees the simulator through a read-only :class:`SimView` and answers a
scheduling pass with a :class:`Decision`: jobs to start, running jobs to give a
new placement (scale in/out or move), jobs to preempt, each with a
:class:`Reason`.  The engine applies the decision (removals first, then
additions), so a policy works on a *scratch copy of the free-GPU list* only —
never on a copy of the whole state.  Policies own their queue (a heap or a
sorted list, never a per-pass scan of all jobs) and learn about arrivals,
requeues and finishes through :meth:`Policy.enqueue` and :meth:`Policy.on_finish`.

Placement (docs/model.md, "Placement"):

* :func:`gang_place` — the fifo baseline: a job that fits in one server goes
  on one server (best fit); a larger job takes whole free servers plus one
  best-fit server for the remainder.  Worker granularity: a server holds
  ``gpus_per_server // g`` workers of ``g`` GPUs, which equals the GPU rule when
  ``g`` divides the server size.
* :func:`bf_place` — best fit for one job's workers over an ordered list of
  server groups (training first, then loaned servers): one server that holds
  every worker if any (the fullest such, ties to the lower id), otherwise
  chunks on the servers with the most free GPUs.  Used in best-fit-decreasing
  order by the Aryl policy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar, Protocol

import numpy as np

__all__ = [
    "Decision",
    "Placement",
    "Policy",
    "Reason",
    "SimView",
    "available_policies",
    "bf_place",
    "gang_place",
    "make_policy",
    "register",
]

Placement = dict[int, int]
"""server id -> workers of the job on that server."""


class Reason(IntEnum):
    """Why a decision was taken (recorded per action in the event log)."""

    FIFO_HEAD = 1
    SJF_ORDER = 2
    BACKFILL = 3
    STARVATION_GUARD = 4
    LAS_PRIORITY = 5
    LAS_PREEMPT = 6
    MCKP_SCALE_OUT = 7
    MCKP_SCALE_IN = 8
    MCKP_MOVE = 9
    GREEDY_SCALE_OUT = 10
    GREEDY_SCALE_IN = 11
    RECLAIM_PREEMPT = 12
    RECLAIM_SCALE_IN = 13
    NEVER_FITS = 14


@dataclass(slots=True)
class Decision:
    """The answer of one scheduling pass.

    ``starts`` and ``resizes`` carry the job's complete new placement;
    ``preempts`` lists jobs to kill and requeue.  The engine applies preempts,
    then removes the old placements of resized jobs, then adds new placements.
    """

    starts: list[tuple[int, Placement, Reason]] = field(default_factory=list)
    resizes: list[tuple[int, Placement, Reason]] = field(default_factory=list)
    preempts: list[tuple[int, Reason]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.starts or self.resizes or self.preempts)


class SimView(Protocol):
    """What a policy may read.  Policies must not mutate any of it.

    Lists are indexed by server id (``free``, ``jobs_on``) or job index (the
    rest).  Servers ``0 .. n_training_servers-1`` are training servers.
    ``queued_since[j]``: start of job ``j``'s current (or last) wait;
    ``wait_s[j]``: seconds it waited before that (its earlier waits), so a
    queued job's queue age is ``wait_s[j] + now - queued_since[j]``.
    """

    now: float
    gpus_per_server: int
    training_servers: list[int]
    free: list[int]
    jobs_on: list[dict[int, int]]
    placement: list[Placement | None]
    workers: list[int]
    running: dict[int, None]
    submit: list[float]
    gpw: list[int]
    base_workers: list[int]
    max_workers: list[int]
    traced_workers: list[int]
    alpha: list[float]
    elastic: list[bool]
    paused_until: list[float]
    queued_since: list[float]
    wait_s: list[float]
    busy: int
    base_busy: int
    config: Any

    def loaned_servers(self) -> list[int]: ...

    def offered_servers(self) -> list[int]: ...

    def remaining_work(self, j: int) -> float: ...

    def remaining_work_many(self, jobs: list[int] | np.ndarray) -> np.ndarray: ...

    def remaining_time(self, j: int, workers: int) -> float: ...

    def attained_gpu_s(self, j: int) -> float: ...


class Policy(ABC):
    """A scheduling policy on the shared engine.

    Class attributes tell the engine what the policy uses: ``loans`` (borrow
    idle inference servers), ``elastic`` (elastic jobs run between their
    ``min_workers`` and ``max_workers``; otherwise every job runs at its traced
    size), ``uses_tick`` (run a pass on the periodic tick even if nothing
    happened).

    ``return_idle_loans`` (loaning policies; default True, policy option of the
    same name): the engine offers the loanable servers to a pass and keeps only
    those the pass placed a worker on, and a loaned server with no training
    worker after a pass goes back to the inference pool as idle.  False keeps
    every borrowed server until it is reclaimed (the behaviour before 2026-11-30).
    """

    name: ClassVar[str] = ""
    loans: ClassVar[bool] = False
    elastic: ClassVar[bool] = False
    uses_tick: ClassVar[bool] = False
    return_idle_loans: bool = True

    def __init__(self, view: SimView, options: dict[str, Any]) -> None:
        self.view = view
        self.options = options
        if "return_idle_loans" in options:
            self.return_idle_loans = bool(options["return_idle_loans"])

    @abstractmethod
    def enqueue(self, j: int) -> None:
        """Job ``j`` arrived or was preempted and waits (keeps its arrival time)."""

    @abstractmethod
    def n_queued(self) -> int:
        """Number of jobs waiting."""

    @abstractmethod
    def schedule(self, changed: bool) -> Decision:
        """One scheduling pass; ``changed`` is False on a tick with no event."""

    def on_finish(self, j: int) -> None:  # noqa: B027 - optional hook
        """Job ``j`` finished."""

    def on_placement(self, j: int) -> None:  # noqa: B027 - optional hook
        """Job ``j``'s placement was set or removed (start, rescale, reclaim, preemption,
        finish); called by the engine after the change, only if a policy overrides it."""

    def wants_loan(self) -> bool:
        """Whether borrowing idle inference servers would help right now."""
        return self.n_queued() > 0


_REGISTRY: dict[str, Callable[[SimView, dict[str, Any]], Policy]] = {}


def register(name: str) -> Callable[[type[Policy]], type[Policy]]:
    """Class decorator adding a policy to the registry under ``name``."""

    def deco(cls: type[Policy]) -> type[Policy]:
        _REGISTRY[name] = cls
        return cls

    return deco


def _load_builtin() -> None:
    from aryl.policies import aryl as _a  # noqa: F401
    from aryl.policies import elastic_greedy as _e  # noqa: F401
    from aryl.policies import fifo as _f  # noqa: F401
    from aryl.policies import sjf as _s  # noqa: F401
    from aryl.policies import tiresias as _t  # noqa: F401


def available_policies() -> list[str]:
    """Names accepted by :func:`make_policy`, sorted."""
    _load_builtin()
    return sorted(_REGISTRY)


def policy_class(name: str) -> type[Policy]:
    """The class registered under ``name``.

    Raises
    ------
    InvalidInputError
        Unknown name (the message lists the known ones).
    """
    from aryl.errors import InvalidInputError

    _load_builtin()
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise InvalidInputError(
            f"policy: unknown policy {name!r}; choose from {sorted(_REGISTRY)}"
        ) from None
    assert isinstance(cls, type)
    return cls


def make_policy(name: str, view: SimView, options: dict[str, Any]) -> Policy:
    """Instantiate the policy registered under ``name`` on ``view``."""
    return policy_class(name)(view, options)


# ---------------------------------------------------------------------------
# placement helpers (pure functions on a scratch free-GPU list)


def best_fit(free: Sequence[int], servers: Sequence[int], need: int) -> int:
    """Server with the fewest free GPUs that are ``>= need``; ties: lower id.

    ``servers`` must be in ascending id order.  Returns -1 if none.  O(len(servers)).
    """
    best = -1
    best_free = 1 << 62
    for s in servers:
        f = free[s]
        if need <= f < best_free:
            best, best_free = s, f
            if f == need:
                break
    return best


def gang_place(
    free: Sequence[int], servers: Sequence[int], workers: int, g: int, gpus_per_server: int
) -> Placement | None:
    """fifo gang placement (docs/model.md); ``None`` if it does not fit now.

    Whole free servers (lowest ids first) for ``workers // (S // g)`` full
    servers' worth, then one best-fit server for the remaining workers.
    """
    per_server = gpus_per_server // g
    n_full, rest = divmod(workers, per_server)
    if n_full == 0:
        s = best_fit(free, servers, rest * g)
        return None if s < 0 else {s: rest}
    full_free = gpus_per_server
    chosen: Placement = {}
    for s in servers:
        if free[s] == full_free:
            chosen[s] = per_server
            if len(chosen) == n_full:
                break
    if len(chosen) < n_full:
        return None
    if rest:
        need = rest * g
        best = -1
        best_free = 1 << 62
        for s in servers:
            f = free[s]
            if s not in chosen and need <= f < best_free:
                best, best_free = s, f
        if best < 0:
            return None
        chosen[best] = rest
    return chosen


def bf_place(
    free: list[int], groups: Sequence[Sequence[int]], workers: int, g: int
) -> Placement | None:
    """Best-fit placement of ``workers`` workers of ``g`` GPUs; mutates ``free``.

    Groups are tried in order (training, then loaned): first one server of a
    group that holds every remaining worker (best fit, ties lower id);
    otherwise the servers of the group with the most free GPUs (ties lower id)
    take chunks, and the rest spills to the next group.  Returns ``None`` and
    leaves ``free`` untouched when the workers do not fit.
    O(n_servers log n_servers).
    """
    need_total = workers * g
    avail = 0
    for grp in groups:
        for s in grp:
            avail += free[s] // g
    if avail < workers:
        return None
    place: Placement = {}
    left = workers
    for grp in groups:
        if not left:
            break
        s = best_fit(free, grp, left * g)
        if s >= 0:
            place[s] = place.get(s, 0) + left
            free[s] -= left * g
            left = 0
            break
        for s in sorted(grp, key=lambda x: (-free[x], x)):
            k = min(left, free[s] // g)
            if k <= 0:
                break
            place[s] = place.get(s, 0) + k
            free[s] -= k * g
            left -= k
            if not left:
                break
    assert left == 0, need_total
    return place
