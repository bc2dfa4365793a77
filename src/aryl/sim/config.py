"""Simulator configuration (one frozen dataclass, recorded in every summary)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from aryl._limits import MAX_DURATION_S
from aryl.errors import InvalidInputError

__all__ = [
    "DEFAULT_INFERENCE_SERVERS",
    "DEFAULT_TRAINING_SERVERS",
    "MAX_DURATION_S",
    "MAX_SERVERS",
    "MAX_TIMESERIES_POINTS",
    "SimConfig",
    "check_timeseries_size",
]

# largest time series (rows); a finer step is refused (timeseries_step_s)
MAX_TIMESERIES_POINTS = 5_000_000




def check_timeseries_size(span_s: float, step_s: float) -> None:
    """Raise if a time series over ``span_s`` at ``step_s`` would exceed
    ``MAX_TIMESERIES_POINTS`` rows (``InvalidInputError`` naming ``timeseries_step_s``)."""
    if span_s / step_s + 1 > MAX_TIMESERIES_POINTS:
        from aryl.errors import InvalidInputError

        raise InvalidInputError(
            f"timeseries_step_s: {step_s:g} s over a run of {span_s:.6g} s gives more than "
            f"{MAX_TIMESERIES_POINTS:,} time-series rows; use a step of at least "
            f"{span_s / (MAX_TIMESERIES_POINTS - 1):.3g} s"
        )


# How these were chosen: docs/simulator.md ("Default cluster sizes"). With 46
# training servers (368 GPUs) strict fifo on itp-c07 (mean offered load ~257 GPUs,
# bursty) has a mean queuing delay of ~4,100 s and a p95 of ~31,000 s, the
# regime [Aryl] reports (mean > 3,000 s) for its production trace.
DEFAULT_TRAINING_SERVERS = 46
DEFAULT_INFERENCE_SERVERS = 16

#: Largest server count of either pool (the engine does O(servers) work per pass).
MAX_SERVERS = 100_000

# (name, lowest, highest) of the integer fields
_INT_FIELDS = (
    ("n_training_servers", 0, MAX_SERVERS),
    ("n_inference_servers", 0, MAX_SERVERS),
    ("gpus_per_server", 1, 1024),
    ("seed", 0, 2**63 - 1),
    ("loan_reserve_servers", 0, MAX_SERVERS),
)
# (name, lowest) of the durations (all <= MAX_DURATION_S).  Periods are at
# least 1 s: a shorter tick, checkpoint or time-series step would make the run
# (or its time series) grow without bound.
_TIME_FIELDS = (
    ("tick_s", 1.0),
    ("rescale_pause_s", 0.0),
    ("checkpoint_interval_s", 1.0),
    ("restart_cost_s", 0.0),
    ("reclaim_grace_s", 0.0),
    ("loan_cooldown_s", 0.0),
    ("starvation_bound_s", 0.0),
    ("timeseries_step_s", 1.0),
)


@dataclass(frozen=True)
class SimConfig:
    """Options of one replay.  Times in seconds.

    Every field is checked at construction (:class:`~aryl.errors.InvalidInputError`
    naming the field): integers must be ``int`` (not ``bool`` or ``float``) in
    range, durations finite numbers of seconds in range (at most
    ``MAX_DURATION_S``; periods at least 1 s), flags ``bool``, names known.

    Attributes
    ----------
    n_training_servers, n_inference_servers : int
        Cluster shape: training and inference servers, ``0 .. MAX_SERVERS``
        (docs/simulator.md, "Default cluster sizes").
    gpus_per_server : int
        GPUs per server, ``1 .. 1024``.
    seed : int
        Seed of every random choice (elastic synthesis, ``random`` reclaim
        policy, ``diurnal`` demand noise); recorded; ``>= 0``.
    tick_s : float
        Period of the scheduling tick, seconds (``>= 1``); only policies that
        need it (``tiresias``) get ticks.
    rescale_pause_s, checkpoint_interval_s, restart_cost_s : float
        Overheads (docs/model.md): a rescale pauses a job for
        ``rescale_pause_s``; a job checkpoints every ``checkpoint_interval_s``
        (``>= 1``) of progress; a preemption loses the progress since the last
        checkpoint and the next start pays ``restart_cost_s``.
    loan_reserve_servers : int
        Idle inference servers kept back from loaning (safety reserve).
    reclaim_grace_s : float
        Time between an inference demand rise and the reclaim deadline of the
        servers that rise asks for (each rise its own deadline; 0: reclaim at
        once).
    reclaim_policy : str
        Which loaned servers a reclaim returns: ``aryl`` (cost greedy),
        ``random``, ``fewest-jobs``, ``most-idle``, ``exact`` (small cases).
    loan_cooldown_s : float
        Hysteresis against loan/reclaim thrash: no inference server is lent
        within this long after a reclaim (default 600 s, like the 10 min
        scale-down delay after a scale-up of cluster autoscalers; 0 disables).
    starvation_bound_s : float
        A job whose queue age (seconds queued since its first arrival, all waits
        summed) reaches this is starving: taken first, oldest first, and blocks
        backfill until it starts (``sjf`` and the ``aryl`` base phase).
    backend : {"native", "reference"}
        Kernel implementation for both kernels (compiled or pure Python).
    engine : {"native", "python"}
        The simulator engine: ``native`` runs the event loop and the scheduling
        pass compiled (C++), ``python`` runs them in Python (the reference
        twin).  Both give bit-identical results.  ``native`` runs the Python
        engine when ``backend`` is ``reference`` (the reference kernels are
        Python) and for a policy without a compiled pass (docs/simulator.md).
    start_time_s : float or None
        Start of the clock (absolute, trace time base); default the first arrival.
    horizon_s : float or None
        Stop at this absolute time (not before the clock start); jobs still
        queued or running are ``unfinished``, later ones ``not_arrived``.
    timeseries_step_s : float
        Step of the time series, seconds (``>= 1``).
    default_alpha : float
        Throughput parameter of jobs without an ``alpha`` column.
    check : bool
        Run the invariant checker after every scheduling pass (slower).
    record_events : bool
        Keep the per-job event log (start, rescale, preempt, finish).
    cluster : str or None
        A cluster spec with GPU pools of several types: a preset (``default``,
        ``lyra``) or a TOML file (docs/cluster.md).  It replaces
        ``n_training_servers``, ``n_inference_servers`` and ``gpus_per_server``,
        which must then keep their defaults.  None: those three give one pool of
        each role, one GPU type.
    speed_model : {"auto", "parametric", "measured"}
        How fast jobs run per GPU type: ``parametric`` (the curve of
        ``alpha``; every type equally fast unless ``loaned_gpu_speed``),
        ``measured`` (each job gets a model family and the bundled measured
        speeds and scaling per GPU type), ``auto`` (measured when the cluster
        has several GPU types, else parametric).
    loaned_gpu_speed : float or None
        Relative speed of the inference pools' GPUs (to the reference type, the
        first training pool's), ``(0, 10]``: the parametric factor, or the
        measured single-GPU speed for every family.  None: the model's own.
    mix_gpu_types : bool
        A job's workers may span GPU types (it runs at the pace of its slowest
        type); default False: each job stays on one type.
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
    loan_cooldown_s: float = 600.0
    starvation_bound_s: float = 4 * 3600.0
    backend: str = "native"
    start_time_s: float | None = None
    horizon_s: float | None = None
    timeseries_step_s: float = 300.0
    default_alpha: float = 0.05
    check: bool = False
    record_events: bool = True
    cluster: str | None = None
    speed_model: str = "auto"
    loaned_gpu_speed: float | None = None
    mix_gpu_types: bool = False
    engine: str = "native"

    def __post_init__(self) -> None:
        # integers: exact int type (bools and floats such as 2.5 or 2.0 refused)
        for name, lo, hi in _INT_FIELDS:
            v: Any = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise InvalidInputError(f"{name}: expected an integer, got {v!r}")
            if not lo <= int(v) <= hi:
                raise InvalidInputError(f"{name}: must be in [{lo}, {hi:,}], got {int(v)}")
            object.__setattr__(self, name, int(v))  # numpy ints -> int (JSON)
        # durations: finite numbers of seconds in range
        for name, t_lo in _TIME_FIELDS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise InvalidInputError(f"{name}: expected a number of seconds, got {v!r}")
            f = float(v)
            if not (math.isfinite(f) and t_lo <= f <= MAX_DURATION_S):
                raise InvalidInputError(
                    f"{name}: must be a finite number of seconds in "
                    f"[{t_lo:g}, {MAX_DURATION_S:g}], got {v!r}"
                )
            object.__setattr__(self, name, f)
        for name in ("start_time_s", "horizon_s"):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise InvalidInputError(f"{name}: expected a time in seconds or None, got {v!r}")
            if not math.isfinite(float(v)):
                raise InvalidInputError(f"{name}: must be finite (or None), got {v!r}")
            object.__setattr__(self, name, float(v))
        if (
            self.start_time_s is not None
            and self.horizon_s is not None
            and self.horizon_s < self.start_time_s
        ):
            raise InvalidInputError(
                f"horizon_s: {self.horizon_s:g} is before start_time_s {self.start_time_s:g}"
            )
        a = self.default_alpha
        if isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating)):
            raise InvalidInputError(f"default_alpha: expected a number, got {a!r}")
        if not 0.0 <= float(a) <= 1.0:  # NaN fails too
            raise InvalidInputError(f"default_alpha: must be in [0, 1], got {a!r}")
        object.__setattr__(self, "default_alpha", float(a))
        for name in ("check", "record_events", "mix_gpu_types"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                got = getattr(self, name)
                raise InvalidInputError(f"{name}: expected True or False, got {got!r}")
            object.__setattr__(self, name, bool(getattr(self, name)))
        if self.backend not in ("native", "reference"):
            raise InvalidInputError(
                f"backend: must be 'native' or 'reference', got {self.backend!r}"
            )
        if self.engine not in ("native", "python"):
            raise InvalidInputError(
                f"engine: must be 'native' or 'python', got {self.engine!r}"
            )
        if self.speed_model not in ("auto", "parametric", "measured"):
            raise InvalidInputError(
                f"speed_model: must be 'auto', 'parametric' or 'measured', "
                f"got {self.speed_model!r}"
            )
        v = self.loaned_gpu_speed
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise InvalidInputError(f"loaned_gpu_speed: expected a number or None, got {v!r}")
            if not 0.0 < float(v) <= 10.0:
                raise InvalidInputError(f"loaned_gpu_speed: must be in (0, 10], got {v!r}")
            object.__setattr__(self, "loaned_gpu_speed", float(v))
        c = self.cluster
        if c is not None:
            if not isinstance(c, str) or not c.strip():
                raise InvalidInputError(
                    f"cluster: expected a preset name or a TOML path, got {c!r}"
                )
            changed = [
                name for name, default in (
                    ("n_training_servers", DEFAULT_TRAINING_SERVERS),
                    ("n_inference_servers", DEFAULT_INFERENCE_SERVERS),
                    ("gpus_per_server", 8),
                ) if getattr(self, name) != default
            ]
            if changed:
                raise InvalidInputError(
                    f"cluster: {c!r} gives the server counts; do not also set "
                    f"{', '.join(changed)}"
                )
        from aryl.reclaiming import RECLAIM_POLICIES

        if not isinstance(self.reclaim_policy, str) or self.reclaim_policy not in RECLAIM_POLICIES:
            raise InvalidInputError(
                f"reclaim_policy: unknown {self.reclaim_policy!r}; "
                f"choose from {sorted(RECLAIM_POLICIES)}"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict of every option."""
        return asdict(self)
