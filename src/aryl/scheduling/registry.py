"""The registry of scheduling policies (names -> classes).

Listed explicitly (no import-time registration), so the policy modules never
import this one and imports point one way.
"""

from __future__ import annotations

from typing import Any

from aryl.errors import InvalidInputError
from aryl.scheduling.aryl import (
    ArylNoElasticPolicy,
    ArylNoLoanPolicy,
    ArylPolicy,
    ElasticGreedyPolicy,
)
from aryl.scheduling.fifo import FifoPolicy
from aryl.scheduling.fifo_backfill import FifoBackfillPolicy
from aryl.scheduling.policy import Policy
from aryl.scheduling.sjf import SjfPolicy
from aryl.scheduling.tiresias import TiresiasPolicy

__all__ = ["POLICIES", "available_policies", "make_policy", "policy_class"]

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (
        FifoPolicy,
        FifoBackfillPolicy,
        SjfPolicy,
        TiresiasPolicy,
        ArylPolicy,
        ArylNoLoanPolicy,
        ArylNoElasticPolicy,
        ElasticGreedyPolicy,
    )
}


def available_policies() -> list[str]:
    """Names accepted by :func:`aryl.schedule`, sorted."""
    return sorted(POLICIES)


def policy_class(name: str) -> type[Policy]:
    """The class registered under ``name``.

    Raises
    ------
    InvalidInputError
        Unknown name (the message lists the known ones and the closest match).
    """
    try:
        return POLICIES[name]
    except (KeyError, TypeError):
        import difflib

        close = difflib.get_close_matches(str(name), list(POLICIES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidInputError(
            f"policy: unknown policy {name!r}{hint}; choose from {sorted(POLICIES)}"
        ) from None


_CACHE: dict[tuple[str, tuple[tuple[str, Any], ...]], Policy] = {}


def make_policy(name: str, options: dict[str, Any] | None = None) -> Policy:
    """The policy ``name`` with ``options`` (instances are immutable and cached).

    Raises
    ------
    InvalidInputError
        Unknown policy or option, or an option value of the wrong type.
    """
    try:
        key = (name, tuple(sorted((options or {}).items(), key=lambda kv: kv[0])))
        pol = _CACHE.get(key)
    except TypeError:  # unhashable option values (lists): not cached
        return policy_class(name)(options)
    if pol is None:
        pol = policy_class(name)(options)
        _CACHE[key] = pol
    return pol
