"""aryl — capacity loaning and elastic scaling for GPU deep-learning clusters.

Implements Aryl [Aryl]_: training and inference run on separate GPU clusters;
idle inference servers are **loaned** to training and **reclaimed** with the
fewest job preemptions, and spare GPUs go to **elastic** jobs by solving a
multiple-choice knapsack (MCKP) over each extra worker's JCT reduction.

Public API (imported lazily, so ``import aryl`` stays cheap):

* :func:`solve_mckp`, :func:`solve` — elastic allocation (MCKP), :mod:`aryl.elastic`.
* :func:`reclaim` — choose loaned servers to return, :mod:`aryl.reclaiming`.
* :func:`schedule` — one whole scheduling pass (state in, plan out):
  :class:`ClusterState`, :class:`SchedulePlan`, :mod:`aryl.scheduling`.
* :func:`load_trace` — canonical job traces, :mod:`aryl.traces`.
* :func:`simulate` — the discrete-event simulator, :mod:`aryl.sim`.
* :class:`Policy`, :class:`PassView`, :class:`Decision` — write a scheduling
  policy in Python (docs/policies.md), :mod:`aryl.scheduling.user`.

References
----------
.. [Aryl] J. Li, H. Xu, Y. Zhu, Z. Liu, C. Guo, C. Wang. "Aryl: An Elastic
   Cluster Scheduler for Deep Learning", arXiv:2202.07896, 2022; published as
   "Lyra: Elastic Scheduling for Deep Learning Clusters", EuroSys 2023.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from aryl.errors import ArylError, InvalidInputError, PolicyError, TraceFormatError

try:
    __version__ = version("aryl")
except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0+unknown"

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "solve_mckp": "aryl.elastic",
    "solve": "aryl.elastic",
    "MCKPResult": "aryl.elastic",
    "ElasticJob": "aryl.elastic",
    "ElasticRequest": "aryl.elastic",
    "ElasticDecision": "aryl.elastic",
    "DecisionReason": "aryl.elastic",
    "ElasticReply": "aryl.elastic",
    "reclaim": "aryl.reclaiming",
    "ReclaimRequest": "aryl.reclaiming",
    "ReclaimPlan": "aryl.reclaiming",
    "ReclaimAction": "aryl.reclaiming",
    "ActionKind": "aryl.reclaiming",
    "ReclaimReason": "aryl.reclaiming",
    "schedule": "aryl.scheduling",
    "ClusterState": "aryl.scheduling",
    "SchedulePlan": "aryl.scheduling",
    "SchedulerConfig": "aryl.scheduling",
    "Reason": "aryl.scheduling",
    "Policy": "aryl.scheduling.user",
    "PassView": "aryl.scheduling.user",
    "Decision": "aryl.scheduling.user",
    "load_trace": "aryl.traces",
    "simulate": "aryl.sim",
    "SimConfig": "aryl.sim",
    "SimResult": "aryl.sim",
}

__all__ = [
    "ActionKind",
    "ArylError",
    "ClusterState",
    "Decision",
    "DecisionReason",
    "ElasticDecision",
    "ElasticJob",
    "ElasticReply",
    "ElasticRequest",
    "InvalidInputError",
    "MCKPResult",
    "PassView",
    "Policy",
    "PolicyError",
    "Reason",
    "ReclaimAction",
    "ReclaimPlan",
    "ReclaimReason",
    "ReclaimRequest",
    "SchedulePlan",
    "SchedulerConfig",
    "SimConfig",
    "SimResult",
    "TraceFormatError",
    "__version__",
    "load_trace",
    "reclaim",
    "schedule",
    "simulate",
    "solve",
    "solve_mckp",
]

if TYPE_CHECKING:  # pragma: no cover
    from aryl.elastic import (
        DecisionReason,
        ElasticDecision,
        ElasticJob,
        ElasticReply,
        ElasticRequest,
        MCKPResult,
        solve,
        solve_mckp,
    )
    from aryl.reclaiming import (
        ActionKind,
        ReclaimAction,
        ReclaimPlan,
        ReclaimReason,
        ReclaimRequest,
        reclaim,
    )
    from aryl.scheduling import ClusterState, Reason, SchedulePlan, SchedulerConfig, schedule
    from aryl.scheduling.user import Decision, PassView, Policy
    from aryl.sim import SimConfig, SimResult, simulate
    from aryl.traces import load_trace


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'aryl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
