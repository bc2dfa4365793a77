"""Simulator configuration (one frozen dataclass, recorded in every summary)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from aryl.errors import InvalidInputError

__all__ = ["DEFAULT_INFERENCE_SERVERS", "DEFAULT_TRAINING_SERVERS", "SimConfig"]

# How these were chosen: docs/simulator.md ("Default cluster sizes"). With 46
# training servers (368 GPUs) strict fifo on itp-c07 (mean offered load ~257 GPUs,
# bursty) has a mean queuing delay of ~4,100 s and a p95 of ~31,000 s, the
# regime [Aryl] reports (mean > 3,000 s) for its production trace.
DEFAULT_TRAINING_SERVERS = 46
DEFAULT_INFERENCE_SERVERS = 16


@dataclass(frozen=True)
class SimConfig:
    """Options of one replay.  Times in seconds.

    Attributes
    ----------
    n_training_servers, n_inference_servers, gpus_per_server : int
        Cluster shape: training and inference servers of ``gpus_per_server``
        GPUs each (docs/simulator.md, "Default cluster sizes").
    seed : int
        Seed of every random choice (elastic synthesis, ``random`` reclaim
        policy, ``diurnal`` demand noise); recorded.
    tick_s : float
        Period of the scheduling tick, seconds; only policies that need it
        (``tiresias``) get ticks.
    rescale_pause_s, checkpoint_interval_s, restart_cost_s : float
        Overheads (docs/model.md): a rescale pauses a job for
        ``rescale_pause_s``; a job checkpoints every ``checkpoint_interval_s``
        of progress; a preemption loses the progress since the last checkpoint
        and the next start pays ``restart_cost_s``.
    loan_reserve_servers : int
        Idle inference servers kept back from loaning (safety reserve).
    reclaim_grace_s : float
        Time between an inference demand rise and the reclaim deadline (0:
        reclaim at once).
    reclaim_policy : str
        Which loaned servers a reclaim returns: ``aryl`` (cost greedy),
        ``random``, ``fewest-jobs``, ``most-idle``, ``exact`` (small cases).
    starvation_bound_s : float
        After this long in the queue, a job blocks backfill until it starts
        (``sjf`` and the ``aryl`` base phase).
    backend : {"native", "reference"}
        Kernel implementation for both kernels (compiled or pure Python).
    start_time_s : float or None
        Start of the clock (absolute, trace time base); default the first arrival.
    horizon_s : float or None
        Stop at this absolute time; unfinished jobs are reported separately.
    timeseries_step_s : float
        Step of the time series, seconds.
    default_alpha : float
        Throughput parameter of jobs without an ``alpha`` column.
    check : bool
        Run the invariant checker after every scheduling pass (slower).
    record_events : bool
        Keep the per-job event log (start, rescale, preempt, finish).
    """

    n_training_servers: int = DEFAULT_TRAINING_SERVERS
    n_inference_servers: int = DEFAULT_INFERENCE_SERVERS
    gpus_per_server: int = 8
    seed: int = 0
    tick_s: float = 60.0
    rescale_pause_s: float = 30.0
    checkpoint_interval_s: float = 1800.0
    restart_cost_s: float = 60.0
    loan_reserve_servers: int = 1
    reclaim_grace_s: float = 0.0
    reclaim_policy: str = "aryl"
    starvation_bound_s: float = 4 * 3600.0
    backend: str = "native"
    start_time_s: float | None = None
    horizon_s: float | None = None
    timeseries_step_s: float = 300.0
    default_alpha: float = 0.05
    check: bool = False
    record_events: bool = True

    def __post_init__(self) -> None:
        for name in ("n_training_servers", "n_inference_servers", "loan_reserve_servers"):
            if int(getattr(self, name)) < 0:
                raise InvalidInputError(f"{name}: must be >= 0")
        if self.gpus_per_server < 1:
            raise InvalidInputError("gpus_per_server: must be >= 1")
        for name in (
            "tick_s",
            "checkpoint_interval_s",
            "timeseries_step_s",
        ):
            v = float(getattr(self, name))
            if not math.isfinite(v) or v <= 0:
                raise InvalidInputError(f"{name}: must be a finite number > 0")
        for name in ("rescale_pause_s", "restart_cost_s", "reclaim_grace_s", "starvation_bound_s"):
            v = float(getattr(self, name))
            if not (v >= 0):
                raise InvalidInputError(f"{name}: must be >= 0")
        if self.backend not in ("native", "reference"):
            raise InvalidInputError("backend: must be 'native' or 'reference'")
        if not 0.0 <= self.default_alpha <= 1.0:
            raise InvalidInputError("default_alpha: must be in [0, 1]")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict of every option."""
        return asdict(self)
