"""Scheduling policies on the shared simulator engine (one interface, a registry).

``fifo`` (the paper's baseline), ``sjf``, ``tiresias``, ``aryl`` and its
ablations ``aryl-no-loan`` / ``aryl-no-elastic``, and ``elastic-greedy``
(Optimus/AFS-style marginal gain).  See :mod:`aryl.policies.base`.
"""

from __future__ import annotations

from aryl.policies.base import (
    Decision,
    Policy,
    Reason,
    SimView,
    available_policies,
    make_policy,
    register,
)

__all__ = [
    "Decision",
    "Policy",
    "Reason",
    "SimView",
    "available_policies",
    "make_policy",
    "register",
]
