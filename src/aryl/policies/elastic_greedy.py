"""``elastic-greedy``: an Optimus/AFS-style marginal-gain peer on the same engine.

Base phase as in ``aryl`` (SJF with backfill, best fit); spare GPUs go to
elastic jobs one worker at a time, each to the job whose next worker gives the
largest JCT reduction per GPU (heap, ties: lower job index), until no positive
gain fits.  No capacity loaning.  Same value table as the MCKP (rescale pause
included), so the difference to ``aryl-no-loan`` is the solver only.
"""

from __future__ import annotations

from aryl.policies.aryl import ArylPolicy
from aryl.policies.base import Reason, register

__all__ = ["ElasticGreedyPolicy"]


@register("elastic-greedy")
class ElasticGreedyPolicy(ArylPolicy):
    """Marginal-gain greedy elastic allocation, no loans."""

    name = "elastic-greedy"
    loans = False
    solver = "greedy"
    scale_out_reason = Reason.GREEDY_SCALE_OUT
    scale_in_reason = Reason.GREEDY_SCALE_IN
