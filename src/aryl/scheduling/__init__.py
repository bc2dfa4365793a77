"""The scheduling pass: cluster state in, plan out (``aryl.schedule``).

Layers (imports point one way only): the kernels (``aryl.elastic``,
``aryl.reclaiming``) <- this package (state, plan, policies, the pass) <- the
simulator (``aryl.sim``) <- experiments and the CLI.

* :class:`ClusterState` (:mod:`aryl.scheduling.state`) — servers, jobs, loans,
  configuration;
* :func:`schedule` (:mod:`aryl.scheduling.api`) — one pass of a policy;
* :class:`SchedulePlan`, :class:`Reason` (:mod:`aryl.scheduling.plan`) — its
  decisions, applied with :meth:`SchedulePlan.apply`;
* the JSON documents of ``aryl plan`` (:mod:`aryl.scheduling.jsonio`):
  :func:`state_to_json` / :func:`state_from_json`, :func:`plan_to_json` /
  :func:`plan_from_json` (docs/integration.md);
* policies: ``fifo``, ``sjf``, ``tiresias``, ``aryl``, ``aryl-no-loan``,
  ``aryl-no-elastic``, ``elastic-greedy`` (:func:`available_policies`).
"""

from __future__ import annotations

from aryl.scheduling.api import schedule
from aryl.scheduling.jsonio import plan_from_json, plan_to_json, state_from_json, state_to_json
from aryl.scheduling.plan import Reason, SchedulePlan
from aryl.scheduling.policy import PassContext, Policy
from aryl.scheduling.registry import available_policies, make_policy
from aryl.scheduling.state import ClusterState, Placement, SchedulerConfig

__all__ = [
    "ClusterState",
    "PassContext",
    "Placement",
    "Policy",
    "Reason",
    "SchedulePlan",
    "SchedulerConfig",
    "available_policies",
    "make_policy",
    "plan_from_json",
    "plan_to_json",
    "schedule",
    "state_from_json",
    "state_to_json",
]
