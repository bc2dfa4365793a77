"""The scheduling pass: cluster state in, plan out (``aryl.schedule``).

Layers (imports point one way only): the kernels (``aryl.elastic``,
``aryl.reclaiming``) <- this package (state, plan, policies, the pass) <- the
simulator (``aryl.sim``) <- experiments and the CLI.

* :class:`ClusterState` (:mod:`aryl.scheduling.state`) — servers, jobs, loans,
  configuration;
* :func:`schedule` (:mod:`aryl.scheduling.api`) — one pass of a policy;
* :class:`SchedulePlan`, :class:`Reason` (:mod:`aryl.scheduling.plan`) — its
  decisions, applied with :meth:`SchedulePlan.apply`;
* policies: ``fifo``, ``sjf``, ``tiresias``, ``aryl``, ``aryl-no-loan``,
  ``aryl-no-elastic``, ``elastic-greedy`` (:func:`available_policies`).
"""

from __future__ import annotations

from aryl.scheduling.api import schedule
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
    "schedule",
]
