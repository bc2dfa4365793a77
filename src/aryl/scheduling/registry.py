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

__all__ = [
    "POLICIES",
    "available_policies",
    "entry_point_policies",
    "is_policy_name",
    "load_policy_class",
    "make_policy",
    "policy_class",
    "policy_class_of",
    "policy_label",
    "resolve_policy",
    "twin_policies",
]

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


# ------------------------------------------------------------------ user policies
def twin_policies() -> dict[str, Any]:
    """The registered policies' Python twins through the policy callback
    (:mod:`aryl.scheduling.twin`): ``NAME-twin`` -> its :class:`aryl.Policy`
    class, sorted by name (every registered policy but ``tiresias``)."""
    from aryl.scheduling.twin import TWINS

    return dict(TWINS)


def entry_point_policies() -> dict[str, Any]:
    """The policies installed packages register in the entry-point group
    ``aryl.policies`` (:data:`aryl.scheduling.user.ENTRY_POINT_GROUP`): name ->
    entry point (not loaded), sorted by name; the first of equal names wins."""
    from importlib.metadata import entry_points

    from aryl.scheduling.user import ENTRY_POINT_GROUP

    out: dict[str, Any] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        out.setdefault(ep.name, ep)
    return out


def _user_class(obj: Any, spec: str) -> type:
    from aryl.scheduling.user import Policy as UserPolicy

    if not (isinstance(obj, type) and issubclass(obj, UserPolicy)):
        raise InvalidInputError(
            f"policy {spec!r}: {obj!r} is not a subclass of aryl.Policy")
    return obj


def load_policy_class(spec: str) -> type:
    """The :class:`aryl.Policy` subclass named by ``spec``: ``module:Class``
    (imported), a registered policy's twin (``aryl-twin``...,
    :func:`twin_policies`) or an entry point's name in the group ``aryl.policies``.

    Raises
    ------
    InvalidInputError
        The module cannot be imported (its error in the message), has no such
        attribute, the object is not an ``aryl.Policy`` subclass, or the name
        is neither registered nor an entry point.
    """
    import importlib

    if ":" in spec:
        mod_name, _, attr = spec.partition(":")
        if not mod_name or not attr:
            raise InvalidInputError(f"policy {spec!r}: expected module:Class")
        try:
            mod = importlib.import_module(mod_name)
        except Exception as e:  # the user's module: any error while importing it
            raise InvalidInputError(
                f"policy {spec!r}: cannot import module {mod_name!r}: "
                f"{type(e).__name__}: {e}") from e
        obj: Any = mod
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise InvalidInputError(
                    f"policy {spec!r}: module {mod_name!r} has no attribute {attr!r}")
            obj = getattr(obj, part)
        return _user_class(obj, spec)
    twins = twin_policies()
    if spec in twins:
        return twins[spec]
    eps = entry_point_policies()
    if spec in eps:
        try:
            obj = eps[spec].load()
        except Exception as e:
            raise InvalidInputError(
                f"policy {spec!r}: cannot load entry point {eps[spec].value!r}: "
                f"{type(e).__name__}: {e}") from e
        return _user_class(obj, spec)
    import difflib

    names = sorted([*POLICIES, *twins, *eps])
    close = difflib.get_close_matches(spec, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise InvalidInputError(
        f"policy: unknown policy {spec!r}{hint}; choose from {names} or give "
        "module:Class (an aryl.Policy subclass)")


def is_policy_name(spec: Any) -> bool:
    """Whether ``spec`` names a policy without loading it: a registered name, an
    entry point of ``aryl.policies``, or a ``module:Class`` string."""
    if not isinstance(spec, str):
        return False
    return (spec in POLICIES or ":" in spec or spec in twin_policies()
            or spec in entry_point_policies())


def resolve_policy(policy: Any, options: dict[str, Any] | None = None) -> Any:
    """The policy object for ``policy``: a registered name (a :class:`Policy` of
    the pass, :func:`make_policy`), ``module:Class`` or an entry point's name (an
    :class:`aryl.Policy` built with ``options``), or an ``aryl.Policy`` instance
    (returned as is; ``options`` must then be empty).

    Raises
    ------
    InvalidInputError
        Unknown policy or option; options given with an instance.
    """
    from aryl.scheduling.user import Policy as UserPolicy

    if isinstance(policy, UserPolicy):
        if options:
            raise InvalidInputError(
                f"policy {policy.policy_name()!r}: options {sorted(options)} given with a "
                "policy object; pass them to its constructor")
        return policy
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str) and policy in POLICIES:
        return make_policy(policy, options)
    if isinstance(policy, str):
        return load_policy_class(policy)(options)
    raise InvalidInputError(
        f"policy: expected a policy name, module:Class or an aryl.Policy, got {policy!r}")


def policy_label(policy: Any) -> str:
    """The name of a policy object in results and messages."""
    from aryl.scheduling.user import Policy as UserPolicy

    if isinstance(policy, UserPolicy):
        return policy.policy_name()
    return str(getattr(policy, "name", policy))


def policy_class_of(spec: str) -> Any:
    """The class of a policy name (registered, entry point or ``module:Class``),
    for its class attributes (``loans``, ``elastic``)."""
    return POLICIES[spec] if spec in POLICIES else load_policy_class(spec)
