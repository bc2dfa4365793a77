"""The cluster state one scheduling pass reads: servers, jobs, loans, configuration.

:class:`ClusterState` is everything :func:`aryl.schedule` needs to decide, and
nothing it must remember between calls: a cluster manager (or the simulator)
keeps one, feeds it arrivals, finishes and inference demand, calls
:func:`aryl.schedule` and applies the returned plan
(:meth:`aryl.scheduling.SchedulePlan.apply`).  What must persist between passes
(attained service, checkpoints, when a server was last reclaimed, the elastic
phase's capacity memo) is a field of the state.

Storage
-------
Struct of arrays: one Python list per field, indexed by a dense *server index*
``0 .. n_servers-1`` or *job index* ``0 .. n_jobs-1`` (lists, not ndarrays: the
pass reads single elements, which lists do several times faster).  External
names (``server_id``, ``job_id``) are strings and appear only at the edges
(JSON, plans printed for people).  Finished jobs may stay in the lists with
status ``DONE``; the pass reads only :attr:`ClusterState.queued` and
:attr:`ClusterState.running`.

Derived indexes (``free``, ``jobs_on``, ``busy`` and the elastic-extras
bookkeeping) are functions of the placements, maintained by the mutators below
and recomputed by :meth:`ClusterState.rebuild_indexes`; :meth:`check_indexes`
verifies them (the simulator's invariant checker calls it).

Progress model (documented in docs/model.md)
--------------------------------------------
A job's work is measured in seconds *at its reference size* (its traced worker
count, ``ref_workers``): ``remaining_s`` is the time it still needs at that size.
At ``w`` workers it runs at ``speed = T(w) / T(ref)`` reference seconds per
second, ``T(w) = w / (1 + alpha (w - 1))``; a job at its reference size has speed
exactly 1, so a rigid job's run time is exactly its traced duration.
``remaining_s`` is exact as of ``progress_at_s``, which lies in the future while
a job pauses (a rescale pause, a restart cost).  A checkpoint is taken at every
(re)start and rescale and then every ``checkpoint_interval_s`` of progress time;
a preemption rolls ``remaining_s`` back to the last checkpoint.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

from aryl._limits import MAX_DURATION_S, MAX_REMAINING_S
from aryl.errors import InvalidInputError
from aryl.scheduling.speed import DEFAULT_GPU_TYPE, SpeedModel

__all__ = [
    "DONE",
    "IDLE",
    "INFERENCE",
    "LOANED",
    "MAX_SEED",
    "MAX_SERVER_GPUS",
    "MAX_WORKERS",
    "PENDING",
    "QUEUED",
    "RUNNING",
    "SERVING",
    "TRAINING",
    "ClusterState",
    "Placement",
    "SchedulerConfig",
    "split_placement",
]

Placement = dict[int, int]
"""server index -> workers of one job on that server (ascending server index)."""

# job status
PENDING, QUEUED, RUNNING, DONE, INFEASIBLE = 0, 1, 2, 3, 4
JOB_STATUS_NAMES = ("pending", "queued", "running", "done", "infeasible")

# server status: a training server is always TRAINING; an inference server is
# SERVING (inference needs it), IDLE (may be lent) or LOANED (lent to training)
TRAINING, SERVING, IDLE, LOANED = 0, 1, 2, 3
SERVER_STATUS_NAMES = ("training", "serving", "idle", "loaned")
INFERENCE = "inference"
ROLES = ("training", "inference")

RECLAIM_POLICIES = ("aryl", "random", "fewest-jobs", "most-idle", "exact")

# Sizes where they enter the compiled pass (int64 there; every product and sum of
# them stays far inside int64): published in the JSON Schema, checked by
# :meth:`ClusterState.add_server`, :meth:`ClusterState.add_job` and
# :class:`SchedulerConfig`.
#: Largest GPU count of one server (and so of one worker).
MAX_SERVER_GPUS = 1 << 20
#: Largest worker count of a job (min, max and reference size).
MAX_WORKERS = (1 << 31) - 1
#: Largest seed (the compiled pass keeps it in an int64).
MAX_SEED = (1 << 63) - 1


@dataclass(frozen=True)
class SchedulerConfig:
    """The knobs a scheduling pass reads (a subset of :class:`aryl.sim.SimConfig`).

    Attributes
    ----------
    rescale_pause_s : float
        Progress pause of a job whose size or placement changes (>= 0 s).
    checkpoint_interval_s : float
        Progress time between periodic checkpoints (> 0 s).
    restart_cost_s : float
        Pause before a preempted job makes progress again when it restarts (>= 0 s).
    loan_reserve_servers : int
        Idle inference servers never lent (>= 0).
    loan_cooldown_s : float
        No server is lent within this long after a reclaim (>= 0 s; hysteresis
        against loan/reclaim thrash, like the scale-down delay after a scale-up
        of cluster autoscalers).
    starvation_bound_s : float
        Queue age (seconds queued since the first arrival, every wait summed)
        after which a job is started first and blocks backfill (>= 0 s; ``inf``
        turns the guard off).
    reclaim_policy : str
        Which loaned servers a reclaim returns: ``aryl`` (cost greedy),
        ``random``, ``fewest-jobs``, ``most-idle``, ``exact``.
    seed : int
        Seed of the ``random`` reclaim policy.
    backend : {"native", "reference"}
        Kernel implementation (MCKP, reclaim).
    mix_gpu_types : bool
        A job's workers may span GPU types (it then runs at the pace of its
        slowest type); False keeps each job on one type (docs/model.md).
    """

    rescale_pause_s: float = 30.0
    checkpoint_interval_s: float = 1800.0
    restart_cost_s: float = 60.0
    loan_reserve_servers: int = 1
    loan_cooldown_s: float = 600.0
    starvation_bound_s: float = 4 * 3600.0
    reclaim_policy: str = "aryl"
    seed: int = 0
    backend: str = "native"
    mix_gpu_types: bool = False

    def __post_init__(self) -> None:
        for name in ("rescale_pause_s", "restart_cost_s", "loan_cooldown_s",
                     "checkpoint_interval_s"):
            _finite_in(f"config.{name}", getattr(self, name), 0.0, MAX_DURATION_S)
        if not self.checkpoint_interval_s > 0:
            raise InvalidInputError("config.checkpoint_interval_s: must be > 0")
        v = self.starvation_bound_s
        if not (v == math.inf or (is_finite_number(v) and 0 <= v <= MAX_DURATION_S)):
            raise InvalidInputError(
                f"config.starvation_bound_s: must be a number in [0, {MAX_DURATION_S:g}] "
                f"(or inf: no bound), got {v!r}"
            )
        _int_in_range("config.loan_reserve_servers", self.loan_reserve_servers, 0, MAX_WORKERS)
        _int_in_range("config.seed", self.seed, 0, MAX_SEED)
        if self.reclaim_policy not in RECLAIM_POLICIES:
            raise InvalidInputError(
                f"config.reclaim_policy: unknown {self.reclaim_policy!r}; "
                f"choose from {list(RECLAIM_POLICIES)}"
            )
        if not isinstance(self.mix_gpu_types, bool):
            raise InvalidInputError(
                f"config.mix_gpu_types: must be true or false, got {self.mix_gpu_types!r}"
            )
        if self.backend not in ("native", "reference"):
            raise InvalidInputError(
                f"config.backend: must be 'native' or 'reference', got {self.backend!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict of every field."""
        return asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def is_integer(v: Any) -> bool:
    """``v`` is an integer (a Python or numpy int; not a bool)."""
    return not isinstance(v, bool) and hasattr(v, "__index__") and not isinstance(v, float)


def is_finite_number(v: Any) -> bool:
    """``v`` is an int or float (not a bool) that is a finite float (huge ints are not)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _finite_at_least(name: str, v: Any, lo: float) -> None:
    if not is_finite_number(v) or v < lo:
        raise InvalidInputError(f"{name}: must be a finite number >= {lo:g}, got {v!r}")


def _finite_in(name: str, v: Any, lo: float, hi: float) -> None:
    """``v`` is a finite number in ``[lo, hi]``; the message names both ends."""
    if not is_finite_number(v) or not lo <= v <= hi:
        raise InvalidInputError(f"{name}: must be a number in [{lo:g}, {hi:g}], got {v!r}")


def _int_in_range(name: str, v: Any, lo: int, hi: int) -> None:
    """``v`` is an int (not a bool) in ``[lo, hi]``; the message names both ends."""
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InvalidInputError(f"{name}: must be an integer in [{lo}, {hi}], got {v!r}")


def throughput_1(w: int, alpha: float) -> float:
    """``T(w) = w / (1 + alpha (w - 1))`` for one job (the engine's arithmetic order)."""
    return w / (1.0 + alpha * (w - 1))


def split_placement(place: Placement, base: int) -> tuple[Placement, Placement]:
    """Split a placement into its base part and its extra part.

    The base part is the first ``base`` workers in ascending server index (so
    training servers, which have the lowest indexes, hold the base first); the
    rest are extra workers.  O(len(place) log len(place)).
    """
    b: Placement = {}
    e: Placement = {}
    left = base
    for s in sorted(place):
        k = place[s]
        take = k if k < left else left
        if take:
            b[s] = take
            left -= take
        if k - take:
            e[s] = k - take
    return b, e


class ClusterState:
    """Servers, jobs, loans and configuration of one cluster at time ``now_s``.

    Build one with :meth:`ClusterState.empty` plus :meth:`add_server` /
    :meth:`add_job`, or from JSON (:func:`aryl.scheduling.state_from_json`).
    Every list attribute is indexed by server index or job index.

    Servers
    -------
    ``server_id`` (str), ``server_pool`` (str), ``server_gpu_type`` (str),
    ``server_gpus`` (int), ``server_status`` (``TRAINING``, ``SERVING``,
    ``IDLE``, ``LOANED``), ``server_reclaimed_s`` (float: when an inference
    server was last reclaimed from training, ``-inf`` never).
    ``training_servers``: indexes of training servers, ascending (they come
    before every inference server).

    Jobs
    ----
    ``job_id`` (str), ``arrival_s``, ``gpus_per_worker``, ``min_workers``,
    ``max_workers``, ``ref_workers`` (the traced size), ``elastic`` (bool),
    ``alpha`` (throughput curve), ``status``, ``workers``, ``placement``
    (``Placement`` or None), ``remaining_s``, ``progress_at_s``, ``speed``,
    ``checkpoint_remaining_s``, ``next_checkpoint_s``, ``restarted`` (the next
    start pays the restart cost), ``queued_since_s`` (when it last entered the
    queue), ``attained_gpu_s`` + ``attained_at_s`` (GPU-seconds allocated up
    to ``attained_at_s``; a running job accrues ``workers x gpus_per_worker``
    per second after it).  ``queued`` and ``running``: dicts used as ordered
    sets of job indexes; ``running`` is in start order (the elastic phase's
    tie order).

    Inference
    ---------
    ``servers_needed``: inference servers the inference side needs now;
    ``reclaim_requests``: its pending requests for servers back, ``(deadline_s,
    n_servers)`` in ascending deadline order (ties: order of asking), each rise of
    the demand with its own deadline (:meth:`set_demand`); the servers returned
    serve the earliest request first (:meth:`give_back`).  ``reclaim_deadline_s``
    (the format before per-request deadlines, still honoured): when it is
    ``<= now_s`` every server the inference side lacks is due (``inf``: nothing
    asked that way).
    """

    __slots__ = (
        "alpha",
        "arrival_s",
        "attained_at_s",
        "attained_gpu_s",
        "base_busy",
        "below",
        "busy",
        "busy_by_pool",
        "busy_loaned",
        "checkpoint_remaining_s",
        "config",
        "elastic",
        "elastic_memo",
        "elastic_running",
        "ex_job",
        "ex_srv",
        "family",
        "free",
        "gpu_types",
        "gpus_per_worker",
        "job_id",
        "jobs_on",
        "last_reclaim_s",
        "loaned_gpus",
        "loaned_gpus_by_pool",
        "max_workers",
        "min_workers",
        "n_loaned",
        "native_cache",
        "next_checkpoint_s",
        "now_s",
        "np_static",
        "placement",
        "pool_names",
        "progress_at_s",
        "qidx",
        "queued",
        "queued_since_s",
        "reclaim_deadline_s",
        "reclaim_requests",
        "ref_throughput",
        "ref_workers",
        "remaining_s",
        "restarted",
        "running",
        "server_gpu_type",
        "server_gpus",
        "server_id",
        "server_pool",
        "server_pool_idx",
        "server_reclaimed_s",
        "server_status",
        "servers_by_type",
        "servers_needed",
        "speed",
        "speeds",
        "status",
        "training_by_type",
        "training_gpus",
        "training_servers",
        "waited_s",
        "workers",
    )

    def __init__(
        self,
        now_s: float = 0.0,
        config: SchedulerConfig | None = None,
        speeds: SpeedModel | None = None,
    ) -> None:
        self.now_s = float(now_s)
        self.config = config if config is not None else SchedulerConfig()
        # how fast jobs run per GPU type (None: one speed for every type, the
        # homogeneous model)
        self.speeds = speeds if speeds is not None and not speeds.is_trivial else None
        self.gpu_types: list[str] = []  # distinct GPU types, in server order
        self.servers_by_type: dict[str, list[int]] = {}  # every server of a type, ascending
        self.training_by_type: dict[str, list[int]] = {}  # training servers of a type
        # servers
        self.server_id: list[str] = []
        self.server_pool: list[str] = []
        self.server_gpu_type: list[str] = []
        self.server_gpus: list[int] = []
        self.server_status: list[int] = []
        self.server_reclaimed_s: list[float] = []
        self.training_servers: list[int] = []
        self.training_gpus = 0  # GPUs of all training servers
        self.free: list[int] = []
        self.jobs_on: list[dict[int, int]] = []
        self.n_loaned = 0
        self.loaned_gpus = 0  # GPUs of the servers on loan
        # pools (by name, in order of first server): busy GPUs and loaned GPUs per pool
        self.pool_names: list[str] = []
        self.server_pool_idx: list[int] = []
        self.busy_by_pool: list[int] = []
        self.loaned_gpus_by_pool: list[int] = []
        self.last_reclaim_s = -math.inf  # when a server was last reclaimed (loan cool-down)
        # inference side
        self.servers_needed = 0
        self.reclaim_deadline_s = math.inf
        self.reclaim_requests: list[tuple[float, int]] = []  # (deadline_s, n_servers)
        # jobs
        self.job_id: list[str] = []
        self.arrival_s: list[float] = []
        self.gpus_per_worker: list[int] = []
        self.min_workers: list[int] = []
        self.max_workers: list[int] = []
        self.ref_workers: list[int] = []
        self.elastic: list[bool] = []
        self.alpha: list[float] = []
        self.family: list[str | None] = []  # model family (measured speeds) or None
        self.ref_throughput: list[float] = []
        self.status: list[int] = []
        self.workers: list[int] = []
        self.placement: list[Placement | None] = []
        self.remaining_s: list[float] = []
        self.progress_at_s: list[float] = []
        self.speed: list[float] = []
        self.checkpoint_remaining_s: list[float] = []
        self.next_checkpoint_s: list[float] = []
        self.restarted: list[bool] = []
        self.queued_since_s: list[float] = []
        self.waited_s: list[float] = []  # seconds queued before the current wait
        self.attained_gpu_s: list[float] = []
        self.attained_at_s: list[float] = []
        self.queued: dict[int, None] = {}
        self.running: dict[int, None] = {}
        # derived: busy GPUs; GPUs of base workers of running jobs; elastic extras
        self.busy = 0
        self.base_busy = 0
        self.busy_loaned = 0  # GPUs of training workers on loaned servers
        self.ex_srv: list[int] = []  # GPUs of extra workers per server
        self.ex_job: dict[int, Placement] = {}  # running elastic job -> its extra part
        self.below: dict[int, None] = {}  # running scalable jobs below their maximum
        self.elastic_running: dict[int, None] = {}  # running scalable jobs, start order
        # queue indexes: name -> (key function, sorted [(key, job)], job -> key); built
        # on first use by sorted_queue, then kept by enqueue / start
        self.qidx: dict[str, tuple[Any, list[tuple[Any, int]], dict[int, Any]]] = {}
        # the elastic phase's memo: (free GPUs left after the last pass, servers on
        # loan or offered in it); (-1, -1) = no memo, the phase runs
        self.elastic_memo: tuple[int, int] = (-1, -1)
        self.np_static: tuple[Any, ...] | None = None
        # the compiled pass's scratch for this state (aryl.scheduling.native): its
        # static job columns, read once; tied to this state's job_id list
        self.native_cache: Any = None

    # ------------------------------------------------------------ building
    @property
    def n_servers(self) -> int:
        return len(self.server_id)

    @property
    def n_jobs(self) -> int:
        return len(self.job_id)

    def add_server(
        self,
        server_id: str,
        *,
        role: str,
        gpus: int,
        pool: str | None = None,
        gpu_type: str = DEFAULT_GPU_TYPE,
        status: int | str | None = None,
        reclaimed_s: float = -math.inf,
    ) -> int:
        """Append a server; returns its index.

        Training servers must all come before the first inference server.
        ``status``: an inference server's ``"serving"`` / ``"idle"`` (default) /
        ``"loaned"`` (or the constants ``SERVING``, ``IDLE``, ``LOANED``).

        Raises
        ------
        InvalidInputError
            Unknown role, GPUs < 1, a training server after an inference server,
            a status that does not fit the role.
        """
        i = self.n_servers
        where = f"servers[{i}] ({server_id!r})"
        if role not in ROLES:
            raise InvalidInputError(f"{where}.role: must be one of {list(ROLES)}, got {role!r}")
        if isinstance(status, str):
            if status not in SERVER_STATUS_NAMES:
                raise InvalidInputError(
                    f"{where}.status: must be one of {list(SERVER_STATUS_NAMES)}, got {status!r}"
                )
            status = SERVER_STATUS_NAMES.index(status)
        _int_in_range(f"{where}.gpus", gpus, 1, MAX_SERVER_GPUS)
        if role == "training":
            if self.n_servers > len(self.training_servers):
                raise InvalidInputError(
                    f"{where}: training servers must come before every inference server"
                )
            st = TRAINING if status is None else status
            if st != TRAINING:
                raise InvalidInputError(f"{where}.status: a training server has status 'training'")
        else:
            st = IDLE if status is None else status
            if st not in (SERVING, IDLE, LOANED):
                raise InvalidInputError(
                    f"{where}.status: an inference server is 'serving', 'idle' or 'loaned'"
                )
        self.server_id.append(str(server_id))
        pname = pool if pool is not None else role
        self.server_pool.append(pname)
        if pname not in self.pool_names:
            self.pool_names.append(pname)
            self.busy_by_pool.append(0)
            self.loaned_gpus_by_pool.append(0)
        pidx = self.pool_names.index(pname)
        self.server_pool_idx.append(pidx)
        gt = str(gpu_type)
        self.server_gpu_type.append(gt)
        if gt not in self.servers_by_type:
            self.gpu_types.append(gt)
            self.servers_by_type[gt] = []
            self.training_by_type[gt] = []
        self.servers_by_type[gt].append(i)
        if role == "training":
            self.training_by_type[gt].append(i)
        self.server_gpus.append(int(gpus))
        self.server_status.append(st)
        self.server_reclaimed_s.append(float(reclaimed_s))
        if reclaimed_s > self.last_reclaim_s:
            self.last_reclaim_s = float(reclaimed_s)
        if st == TRAINING:
            self.training_servers.append(i)
            self.training_gpus += int(gpus)
        cap = gpus if st in (TRAINING, LOANED) else 0
        self.free.append(cap)
        self.jobs_on.append({})
        self.ex_srv.append(0)
        if st == LOANED:
            self.n_loaned += 1
            self.loaned_gpus += int(gpus)
            self.loaned_gpus_by_pool[pidx] += int(gpus)
        return i

    def _checked_job(
        self,
        j: int,
        job_id: str,
        *,
        arrival_s: Any,
        gpus_per_worker: Any,
        ref_workers: Any,
        remaining_s: Any,
        min_workers: Any,
        max_workers: Any,
        elastic: Any,
        alpha: Any,
        family: Any,
    ) -> tuple[int, int, float]:
        """Check one job's fields (errors name it ``jobs[j] (id)``); ``(min, max, T(ref))``."""
        where = f"jobs[{j}] ({job_id!r})"
        mn = ref_workers if min_workers is None else min_workers
        mx = ref_workers if max_workers is None else max_workers
        _int_in_range(f"{where}.gpus_per_worker", gpus_per_worker, 1, MAX_SERVER_GPUS)
        _int_in_range(f"{where}.ref_workers", ref_workers, 1, MAX_WORKERS)
        _int_in_range(f"{where}.min_workers", mn, 1, MAX_WORKERS)
        _int_in_range(f"{where}.max_workers", mx, 1, MAX_WORKERS)
        if mx < mn:
            raise InvalidInputError(f"{where}: max_workers {mx} < min_workers {mn}")
        if not isinstance(elastic, bool):
            raise InvalidInputError(f"{where}.elastic: must be true or false, got {elastic!r}")
        if not elastic and mn != mx:
            raise InvalidInputError(f"{where}: a rigid job needs min_workers == max_workers")
        _finite_at_least(f"{where}.alpha", alpha, 0.0)
        if alpha > 1:
            raise InvalidInputError(f"{where}.alpha: must be in [0, 1], got {alpha!r}")
        _finite_in(f"{where}.remaining_s", remaining_s, 0.0, MAX_REMAINING_S)
        if not is_finite_number(arrival_s):
            raise InvalidInputError(f"{where}.arrival_s: must be a finite number")
        if family is not None and (not isinstance(family, str) or not family):
            raise InvalidInputError(f"{where}.family: must be a non-empty string or null")
        tput = self._ref_throughput(family, float(alpha), int(ref_workers), int(gpus_per_worker))
        return int(mn), int(mx), tput

    def add_job(
        self,
        job_id: str,
        *,
        arrival_s: float,
        gpus_per_worker: int,
        ref_workers: int,
        remaining_s: float,
        min_workers: int | None = None,
        max_workers: int | None = None,
        elastic: bool = False,
        alpha: float = 0.05,
        status: int = PENDING,
        family: str | None = None,
    ) -> int:
        """Append a job (status ``PENDING`` unless given); returns its index.

        ``remaining_s`` is the time left at ``ref_workers`` workers.  Rigid jobs
        default to ``min_workers = max_workers = ref_workers``.  Queue it with
        :meth:`enqueue` and start it with :meth:`start`.
        """
        j = self.n_jobs
        mn, mx, tput = self._checked_job(
            j, job_id, arrival_s=arrival_s, gpus_per_worker=gpus_per_worker,
            ref_workers=ref_workers, remaining_s=remaining_s, min_workers=min_workers,
            max_workers=max_workers, elastic=elastic, alpha=alpha, family=family,
        )
        # every check is done: nothing is appended for a refused job
        self.job_id.append(str(job_id))
        self.arrival_s.append(float(arrival_s))
        self.gpus_per_worker.append(int(gpus_per_worker))
        self.min_workers.append(int(mn))
        self.max_workers.append(int(mx))
        self.ref_workers.append(int(ref_workers))
        self.elastic.append(bool(elastic))
        self.alpha.append(float(alpha))
        self.family.append(family)
        self.ref_throughput.append(tput)
        self.status.append(status)
        self.workers.append(0)
        self.placement.append(None)
        rem = float(remaining_s)
        self.remaining_s.append(rem)
        self.progress_at_s.append(0.0)
        self.speed.append(0.0)
        self.checkpoint_remaining_s.append(rem)
        self.next_checkpoint_s.append(math.inf)
        self.restarted.append(False)
        self.queued_since_s.append(float(arrival_s))
        self.waited_s.append(0.0)
        self.attained_gpu_s.append(0.0)
        self.attained_at_s.append(0.0)
        return j

    def check_placement(self, j: int, place: Any, free: list[int], where: str) -> None:
        """Refuse a placement of job ``j`` that this state cannot hold.

        The one check of every placement that enters a state: the running jobs of
        a state document (:func:`aryl.scheduling.state_from_json`) and every
        start, resize and reclaim scale-in of :meth:`SchedulePlan.apply`.
        ``place`` maps server index -> workers (a dict lists each server once).

        Parameters
        ----------
        j : int
            Job index.
        place : dict of int to int
            The job's whole new placement.
        free : list of int
            Free GPUs per server before this placement (the caller's count).
        where : str
            Prefix of the messages (``jobs[1] ('R').placement``).

        Raises
        ------
        InvalidInputError
            A server that does not exist, an inference server not on loan (it
            hosts no training work), a worker count that is not an integer >= 1,
            a total outside ``[min_workers, max_workers]``, or more GPUs on a server
            than ``free`` has there; in that order, first offending server first.
        """
        if not isinstance(place, dict) or not place:
            raise InvalidInputError(f"{where}: must list at least one server, got {place!r}")
        g = self.gpus_per_worker[j]
        total = 0
        for s, k in place.items():
            if not is_integer(s) or not 0 <= s < self.n_servers:
                raise InvalidInputError(f"{where}: no server with index {s!r}")
            sid = self.server_id[s]
            if self.server_status[s] not in (TRAINING, LOANED):
                raise InvalidInputError(
                    f"{where}: server {sid!r} is an inference server that is not on loan; "
                    f"it cannot host training workers"
                )
            if not is_integer(k) or k < 1:
                raise InvalidInputError(
                    f"{where}: workers on server {sid!r} must be an integer >= 1, got {k!r}"
                )
            total += k
        lo, hi = self.min_workers[j], self.max_workers[j]
        if not lo <= total <= hi:
            raise InvalidInputError(
                f"{where}: {total} workers outside [min_workers, max_workers] = [{lo}, {hi}]"
            )
        for s, k in place.items():
            if k * g > free[s]:
                raise InvalidInputError(
                    f"{where}: {k} worker(s) of {g} GPU(s) do not fit server "
                    f"{self.server_id[s]!r} ({free[s]} of {self.server_gpus[s]} GPUs free)"
                )

    def validate(self) -> None:
        """Refuse a state that no cluster can be in (the checks of a state document).

        :func:`aryl.scheduling.state_from_json` runs it on every document it reads
        and :func:`aryl.scheduling.state_to_json` before writing one, so a state is
        written only if it reads back.  The active (queued and running) jobs, in
        job-index order, must be in arrival order (equal times allowed: the index
        breaks ties), and none may have arrived, entered the queue or closed its
        GPU-second account after ``now_s``; ``servers_needed`` is at most the
        inference servers; every time and amount is finite (``next_checkpoint_s``
        and ``reclaim_deadline_s`` may be ``inf``, a server's ``reclaimed_s``
        ``-inf``: the values JSON writes as ``null``) and no server was reclaimed
        after ``now_s``.  (Placements are checked as they enter:
        :meth:`check_placement`.)  O(servers + active jobs).

        Raises
        ------
        InvalidInputError
            The first offending job (``jobs[3] ('b')``, with the pair out of
            order) or field.
        """
        now = self.now_s
        if not math.isfinite(now):
            raise InvalidInputError(f"state.now_s: must be a finite number, got {now!r}")
        d = self.reclaim_deadline_s
        if not (math.isfinite(d) or d == math.inf):
            raise InvalidInputError(
                f"state.inference.reclaim_deadline_s: must be a finite number or inf (none "
                f"asked), got {d!r}"
            )
        for s in range(self.n_servers):
            r = self.server_reclaimed_s[s]
            if not (math.isfinite(r) or r == -math.inf) or r > now:
                raise InvalidInputError(
                    f"servers[{s}] ({self.server_id[s]!r}).reclaimed_s: must be a time up to "
                    f"now_s {now!r} or -inf (never), got {r!r}"
                )
        n_inf = self.n_servers - len(self.training_servers)
        if self.servers_needed > n_inf:
            raise InvalidInputError(
                f"state.inference.servers_needed: {self.servers_needed} is more than the "
                f"{n_inf} inference server(s)"
            )
        prev = -1
        for j in sorted([*self.queued, *self.running]):
            where = f"jobs[{j}] ({self.job_id[j]!r})"
            a = self.arrival_s[j]
            for name, t in (("arrival_s", a), ("queued_since_s", self.queued_since_s[j]),
                            ("attained_at_s", self.attained_at_s[j])):
                if not math.isfinite(t):
                    raise InvalidInputError(f"{where}.{name}: must be a finite number, got {t!r}")
                if t > now:
                    raise InvalidInputError(
                        f"{where}.{name}: {t!r} is after now_s {now!r} (list only jobs that "
                        f"have arrived, with their past)"
                    )
            if prev >= 0 and a < self.arrival_s[prev]:
                raise InvalidInputError(
                    f"{where}.arrival_s: {a!r} is before {self.arrival_s[prev]!r} of "
                    f"jobs[{prev}] ({self.job_id[prev]!r}); list the jobs in arrival order "
                    f"(the position breaks ties between equal times)"
                )
            prev = j
            for name, col in (("remaining_s", self.remaining_s),
                              ("progress_at_s", self.progress_at_s),
                              ("checkpoint_remaining_s", self.checkpoint_remaining_s),
                              ("waited_s", self.waited_s),
                              ("attained_gpu_s", self.attained_gpu_s)):
                if not math.isfinite(col[j]):
                    raise InvalidInputError(
                        f"{where}.{name}: must be a finite number, got {col[j]!r}"
                    )
            ck = self.checkpoint_remaining_s[j]
            if ck > MAX_REMAINING_S:
                raise InvalidInputError(
                    f"{where}.checkpoint_remaining_s: must be at most {MAX_REMAINING_S:g} s, "
                    f"got {ck!r}"
                )
            nc = self.next_checkpoint_s[j]
            if not (math.isfinite(nc) or nc == math.inf):
                raise InvalidInputError(
                    f"{where}.next_checkpoint_s: must be a finite number or inf (none), "
                    f"got {nc!r}"
                )

    def static_arrays(self) -> tuple[Any, Any, Any, Any]:
        """``min_workers``, ``max_workers``, ``gpus_per_worker`` (int64) and ``alpha``
        (float64) as ndarrays over every job (cached; rebuilt when jobs are added)."""
        import numpy as np

        c = self.np_static
        if c is None or c[0].shape[0] != len(self.job_id):
            c = (
                np.asarray(self.min_workers, dtype=np.int64),
                np.asarray(self.max_workers, dtype=np.int64),
                np.asarray(self.gpus_per_worker, dtype=np.int64),
                np.asarray(self.alpha, dtype=np.float64),
            )
            self.np_static = c
        return c[0], c[1], c[2], c[3]

    def check_job_columns(
        self,
        job_id: Any,
        *,
        arrival_s: Any,
        gpus_per_worker: Any,
        ref_workers: Any,
        remaining_s: Any,
        min_workers: Any,
        max_workers: Any,
        elastic: Any,
        alpha: Any,
    ) -> None:
        """The checks of :meth:`add_jobs` (lists or ndarrays), vectorised; O(n).

        Raises
        ------
        InvalidInputError
            The first invalid job, named by its id and field.
        """
        import numpy as np

        n = len(job_id)
        start = self.n_jobs
        cols = {"gpus_per_worker": (gpus_per_worker, MAX_SERVER_GPUS),
                "ref_workers": (ref_workers, MAX_WORKERS),
                "min_workers": (min_workers, MAX_WORKERS),
                "max_workers": (max_workers, MAX_WORKERS)}
        for name, (col, top) in cols.items():
            a = np.asarray(col)
            if n and (a.dtype.kind not in "iu" or a.min() < 1 or a.max() > top):
                i = 0 if a.dtype.kind not in "iu" else int(
                    np.flatnonzero((a < 1) | (a > top))[0])
                raise InvalidInputError(
                    f"jobs[{start + i}] ({job_id[i]!r}).{name}: must be an integer in "
                    f"[1, {top}]"
                )
        mn, mx, el = np.asarray(min_workers), np.asarray(max_workers), np.asarray(elastic)
        bad = (mx < mn) | (~el & (mn != mx)) if n else np.zeros(0, dtype=bool)
        for fcol, lo, hi in ((alpha, 0.0, 1.0), (remaining_s, 0.0, MAX_REMAINING_S)):
            fa = np.asarray(fcol, dtype=np.float64)
            bad |= ~np.isfinite(fa) | (fa < lo) | (fa > hi)
        bad |= ~np.isfinite(np.asarray(arrival_s, dtype=np.float64))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            # the scalar checks name the field (they append nothing)

            def py(x: Any) -> Any:
                return x.item() if hasattr(x, "item") else x

            self._checked_job(
                start + i, py(job_id[i]), arrival_s=py(arrival_s[i]),
                gpus_per_worker=py(gpus_per_worker[i]), ref_workers=py(ref_workers[i]),
                remaining_s=py(remaining_s[i]), min_workers=py(min_workers[i]),
                max_workers=py(max_workers[i]), elastic=bool(elastic[i]), alpha=py(alpha[i]),
                family=None,
            )
            raise AssertionError("unreachable: the scalar checks must reject this job")

    def add_jobs(
        self,
        job_id: list[str],
        *,
        arrival_s: list[float],
        gpus_per_worker: list[int],
        ref_workers: list[int],
        remaining_s: list[float],
        min_workers: list[int],
        max_workers: list[int],
        elastic: list[bool],
        alpha: list[float],
        family: list[str | None] | None = None,
    ) -> range:
        """Append many ``PENDING`` jobs at once (the simulator's trace); their indexes.

        The same checks as :meth:`add_job`, vectorised; O(n).

        Raises
        ------
        InvalidInputError
            The first invalid job, named by its id and field.
        """
        self.check_job_columns(job_id, arrival_s=arrival_s, gpus_per_worker=gpus_per_worker,
                               ref_workers=ref_workers, remaining_s=remaining_s,
                               min_workers=min_workers, max_workers=max_workers,
                               elastic=elastic, alpha=alpha)
        n = len(job_id)
        start = self.n_jobs
        self.job_id.extend(str(x) for x in job_id)
        self.arrival_s.extend(float(x) for x in arrival_s)
        self.gpus_per_worker.extend(int(x) for x in gpus_per_worker)
        self.min_workers.extend(int(x) for x in min_workers)
        self.max_workers.extend(int(x) for x in max_workers)
        self.ref_workers.extend(int(x) for x in ref_workers)
        self.elastic.extend(bool(x) for x in elastic)
        self.alpha.extend(float(x) for x in alpha)
        fams: list[str | None] = [None] * n if family is None else list(family)
        self.family.extend(fams)
        if self.speeds is None and family is None:
            self.ref_throughput.extend(
                throughput_1(w, a) for w, a in zip(ref_workers, alpha, strict=True)
            )
        else:
            self.ref_throughput.extend(
                self._ref_throughput(f, float(a), int(w), int(g))
                for f, a, w, g in zip(fams, alpha, ref_workers, gpus_per_worker, strict=True)
            )
        self.status.extend([PENDING] * n)
        self.workers.extend([0] * n)
        self.placement.extend([None] * n)
        rem = [float(x) for x in remaining_s]
        self.remaining_s.extend(rem)
        self.progress_at_s.extend([0.0] * n)
        self.speed.extend([0.0] * n)
        self.checkpoint_remaining_s.extend(rem)
        self.next_checkpoint_s.extend([math.inf] * n)
        self.restarted.extend([False] * n)
        self.queued_since_s.extend(float(x) for x in arrival_s)
        self.waited_s.extend([0.0] * n)
        self.attained_gpu_s.extend([0.0] * n)
        self.attained_at_s.extend([0.0] * n)
        return range(start, start + n)

    # ------------------------------------------------------------ job model
    def _ref_throughput(self, family: str | None, alpha: float, ref: int, g: int) -> float:
        """Throughput at the reference size on the reference type (the unit of work)."""
        sp = self.speeds
        if sp is None:
            if family is not None:
                raise InvalidInputError(
                    f"model family {family!r}: the state has no speed model for families"
                )
            return throughput_1(ref, alpha)
        return sp.throughput(family, alpha, sp.reference_gpu_type, ref, g)

    def throughput_on(self, j: int, gpu_type: str, w: int) -> float:
        """Throughput of job ``j`` on ``w`` workers of ``gpu_type`` (its reference size on
        the reference type: ``ref_throughput[j]``). O(1)."""
        sp = self.speeds
        a = self.alpha[j]
        if sp is None:
            return w / (1.0 + a * (w - 1)) if w > 0 else 0.0
        return sp.throughput(self.family[j], a, gpu_type, w, self.gpus_per_worker[j])

    def speed_at(self, j: int, w: int, place: Placement | None = None) -> float:
        """Progress rate of job ``j`` at ``w`` workers, reference seconds per second.

        On a cluster of several GPU types the rate depends on where it runs
        (``place``): the slowest type of its placement sets the pace.
        """
        if self.speeds is None:
            if w == self.ref_workers[j]:
                return 1.0
            a = self.alpha[j]
            return (w / (1.0 + a * (w - 1))) / self.ref_throughput[j]
        if place is None:
            raise InvalidInputError("speed_at: a placement is needed on a typed cluster")
        types = {self.server_gpu_type[s] for s in place}
        return min(self.throughput_on(j, t, w) for t in types) / self.ref_throughput[j]

    def placement_type(self, place: Placement) -> str:
        """The GPU type of a placement (the slowest is not needed: one type unless mixed;
        for a mixed placement the type of its first server)."""
        return self.server_gpu_type[next(iter(place))]

    def remaining_at(self, j: int, now: float) -> float:
        """Reference seconds job ``j`` still needs at ``now`` (no mutation)."""
        r = self.remaining_s[j]
        if self.status[j] == RUNNING:
            lt = self.progress_at_s[j]
            if now > lt:
                r = r - (now - lt) * self.speed[j]
                r = r if r > 0.0 else 0.0
        return r

    def remaining_work_many(self, jobs: list[int], now: float) -> list[float]:
        """:meth:`remaining_work` of several jobs at ``now`` (the same arithmetic). O(len)."""
        R, L, SP, ST, TT = (self.remaining_s, self.progress_at_s, self.speed, self.status,
                            self.ref_throughput)
        out = []
        for j in jobs:
            r = R[j]
            if ST[j] == RUNNING:
                lt = L[j]
                if now > lt:
                    r = r - (now - lt) * SP[j]
                    r = r if r > 0.0 else 0.0
            out.append(r * TT[j])
        return out

    def remaining_work(self, j: int, now: float | None = None) -> float:
        """Remaining work of job ``j`` in single-worker seconds at ``now`` (default: state's)."""
        t = self.now_s if now is None else now
        return self.remaining_at(j, t) * self.ref_throughput[j]

    def attained_at(self, j: int, now: float | None = None) -> float:
        """GPU-seconds allocated to job ``j`` up to ``now`` (default: the state's)."""
        t = self.now_s if now is None else now
        g = self.attained_gpu_s[j]
        if self.status[j] == RUNNING:
            g += self.workers[j] * self.gpus_per_worker[j] * (t - self.attained_at_s[j])
        return g

    def advance(self, j: int, now: float) -> None:
        """Bring job ``j``'s progress (and checkpoint) up to ``now``. O(1)."""
        lt = self.progress_at_s[j]
        if now > lt:
            sp = self.speed[j]
            r = self.remaining_s[j]
            nc = self.next_checkpoint_s[j]
            if now >= nc:
                iv = self.config.checkpoint_interval_s
                c = nc + math.floor((now - nc) / iv) * iv
                self.checkpoint_remaining_s[j] = max(0.0, r - (c - lt) * sp)
                self.next_checkpoint_s[j] = c + iv
            r -= (now - lt) * sp
            r = r if r > 0.0 else 0.0
            self.remaining_s[j] = r
            self.progress_at_s[j] = now

    def close_attained(self, j: int, now: float) -> None:
        """Fold the GPU-seconds accrued since ``attained_at_s`` into ``attained_gpu_s``."""
        self.attained_gpu_s[j] += (
            self.workers[j] * self.gpus_per_worker[j] * (now - self.attained_at_s[j])
        )
        self.attained_at_s[j] = now

    # ------------------------------------------------------------ mutators
    def enqueue(self, j: int, now: float) -> None:
        """Job ``j`` arrives (or comes back after a preemption) and waits."""
        self.status[j] = QUEUED
        self.queued[j] = None
        self.queued_since_s[j] = now
        for key, lst, keys in self.qidx.values():
            k = key(self, j)
            keys[j] = k
            insort(lst, (k, j))

    def _dequeue(self, j: int) -> None:
        del self.queued[j]
        for _, lst, keys in self.qidx.values():
            k = keys.pop(j)
            del lst[bisect_left(lst, (k, j))]

    def queue_age_s(self, j: int, now: float | None = None) -> float:
        """Seconds queued job ``j`` has waited since its first arrival (every wait summed).

        A preemption does not reset it and time spent running does not count:
        ``waited_s + (now - queued_since_s)``.
        """
        t = self.now_s if now is None else now
        return self.waited_s[j] + (t - self.queued_since_s[j])

    def sorted_queue(self, name: str, key: Any) -> list[tuple[Any, int]]:
        """Queued jobs as ``[(key, job)]`` sorted ascending (ties: lower job index).

        ``key(state, j)`` must depend only on fields that do not change while a
        job waits (static job fields, ``remaining_s``, ``attained_gpu_s``,
        ``arrival_s``).  The list is built on the first call for ``name``
        (O(q log q)) and kept up to date by :meth:`enqueue` and :meth:`start`
        afterwards (O(q) each); callers must not modify it.
        """
        ent = self.qidx.get(name)
        if ent is None:
            keys = {j: key(self, j) for j in self.queued}
            lst = sorted((k, j) for j, k in keys.items())
            self.qidx[name] = (key, lst, keys)
            return lst
        return ent[1]

    def _place(self, j: int, place: Placement) -> int:
        g = self.gpus_per_worker[j]
        free = self.free
        jobs_on = self.jobs_on
        nt = len(self.training_servers)
        bp = self.busy_by_pool
        spi = self.server_pool_idx
        w = 0
        for s, k in place.items():
            free[s] -= k * g
            on = jobs_on[s]
            on[j] = on.get(j, 0) + k
            w += k
            bp[spi[s]] += k * g
            if s >= nt:
                self.busy_loaned += k * g
        self.busy += w * g
        self.placement[j] = dict(place)
        self.workers[j] = w
        self._track_extras(j)
        return w

    def _unplace(self, j: int) -> None:
        place = self.placement[j]
        if not place:
            return
        g = self.gpus_per_worker[j]
        free = self.free
        jobs_on = self.jobs_on
        nt = len(self.training_servers)
        bp = self.busy_by_pool
        spi = self.server_pool_idx
        for s, k in place.items():
            free[s] += k * g
            del jobs_on[s][j]
            bp[spi[s]] -= k * g
            if s >= nt:
                self.busy_loaned -= k * g
        self.busy -= self.workers[j] * g
        self.placement[j] = None
        self.workers[j] = 0
        self._track_extras(j)

    def _track_extras(self, j: int) -> None:
        """Keep ``ex_srv``, ``ex_job`` and ``below`` in step with job ``j``'s placement."""
        old = self.ex_job.pop(j, None)
        g = self.gpus_per_worker[j]
        if old:
            ex_srv = self.ex_srv
            for s, k in old.items():
                ex_srv[s] -= k * g
        place = self.placement[j]
        if place is None or not self.elastic[j]:
            self.below.pop(j, None)
            return
        w = self.workers[j]
        mn = self.min_workers[j]
        if w > mn:
            _, e = split_placement(place, mn)
            ex_srv = self.ex_srv
            for s, k in e.items():
                ex_srv[s] += k * g
            self.ex_job[j] = e
        if w < self.max_workers[j] and self.max_workers[j] > mn:
            self.below[j] = None
        else:
            self.below.pop(j, None)

    def start(self, j: int, place: Placement, now: float) -> int:
        """Start queued job ``j`` on ``place`` at ``now``; returns its workers.

        Progress starts after the restart cost when the job was preempted before.
        """
        self._dequeue(j)
        w = self._place(j, place)
        self.status[j] = RUNNING
        self.running[j] = None
        if self.elastic[j] and self.max_workers[j] > self.min_workers[j]:
            self.elastic_running[j] = None
        self.base_busy += self.min_workers[j] * self.gpus_per_worker[j]
        self.waited_s[j] += now - self.queued_since_s[j]
        self.attained_at_s[j] = now
        self.speed[j] = self.speed_at(j, w, place)
        lt = now + (self.config.restart_cost_s if self.restarted[j] else 0.0)
        self.progress_at_s[j] = lt
        self.checkpoint_remaining_s[j] = self.remaining_s[j]
        self.next_checkpoint_s[j] = lt + self.config.checkpoint_interval_s
        return w

    def unplace_for_resize(self, j: int, now: float) -> int:
        """First half of a resize: progress and GPU-seconds up to ``now``, placement removed.

        Returns the old worker count.  Call :meth:`place_resized` next (a plan removes
        every resized job first, so that additions never over-commit a server).
        """
        self.advance(j, now)
        self.close_attained(j, now)
        w = self.workers[j]
        self._unplace(j)
        return w

    def place_resized(self, j: int, place: Placement, now: float) -> int:
        """Second half of a resize: new placement, checkpoint, rescale pause; new workers."""
        w = self._place(j, place)
        self.speed[j] = self.speed_at(j, w, place)
        lt = max(self.progress_at_s[j], now + self.config.rescale_pause_s)
        self.progress_at_s[j] = lt
        self.checkpoint_remaining_s[j] = self.remaining_s[j]
        self.next_checkpoint_s[j] = lt + self.config.checkpoint_interval_s
        return w

    def preempt(self, j: int, now: float) -> None:
        """Kill running job ``j`` at ``now``: back to its checkpoint, requeued."""
        self.advance(j, now)
        self.close_attained(j, now)
        self._unplace(j)
        del self.running[j]
        self.elastic_running.pop(j, None)
        self.base_busy -= self.min_workers[j] * self.gpus_per_worker[j]
        self.remaining_s[j] = self.checkpoint_remaining_s[j]
        self.progress_at_s[j] = now
        self.next_checkpoint_s[j] = math.inf
        self.restarted[j] = True
        self.speed[j] = 0.0
        self.enqueue(j, now)

    def finish(self, j: int, now: float) -> None:
        """Running job ``j`` completes at ``now``."""
        self.advance(j, now)
        self.remaining_s[j] = 0.0
        self.close_attained(j, now)
        self._unplace(j)
        del self.running[j]
        self.elastic_running.pop(j, None)
        self.base_busy -= self.min_workers[j] * self.gpus_per_worker[j]
        self.status[j] = DONE

    def lend(self, s: int) -> None:
        """Inference server ``s`` goes on loan to training (its GPUs become free)."""
        if self.server_status[s] != IDLE:
            raise InvalidInputError(
                f"servers[{s}] ({self.server_id[s]!r}): only an idle inference server can be lent"
            )
        self.server_status[s] = LOANED
        gpus = self.server_gpus[s]
        self.free[s] = gpus
        self.n_loaned += 1
        self.loaned_gpus += gpus
        self.loaned_gpus_by_pool[self.server_pool_idx[s]] += gpus

    def give_back(self, s: int, *, reclaimed: bool, now: float) -> None:
        """Loaned server ``s`` returns to the inference side (must host no training work)."""
        if self.server_status[s] != LOANED or self.jobs_on[s]:
            raise InvalidInputError(
                f"servers[{s}] ({self.server_id[s]!r}): only an empty loaned server can be returned"
            )
        self.server_status[s] = IDLE
        self.free[s] = 0
        self.n_loaned -= 1
        gpus = self.server_gpus[s]
        self.loaned_gpus -= gpus
        self.loaned_gpus_by_pool[self.server_pool_idx[s]] -= gpus
        if reclaimed:
            self.server_reclaimed_s[s] = now
            if now > self.last_reclaim_s:
                self.last_reclaim_s = now
        # a server back on the inference side serves the earliest request
        req = self.reclaim_requests
        if req:
            d, n = req[0]
            if n > 1:
                req[0] = (d, n - 1)
            else:
                del req[0]

    def set_demand(self, servers_needed: int, deadline_s: float) -> None:
        """The inference side now needs ``servers_needed`` servers.

        A rise of the servers it lacks (:meth:`reclaim_deficit`) above those already
        asked for adds a request for the difference, due at ``deadline_s`` (the
        simulator: now + ``reclaim_grace_s``); a fall cancels the requests with the
        latest deadlines first (what is still lacking has been lacking since the
        earlier requests).  Then :meth:`set_serving`.  O(requests).
        """
        self.servers_needed = int(servers_needed)
        req = self.reclaim_requests
        deficit = self.reclaim_deficit()
        asked = sum(n for _, n in req)
        if deficit > asked:
            d = float(deadline_s)
            k = len(req)
            while k > 0 and req[k - 1][0] > d:
                k -= 1
            req.insert(k, (d, deficit - asked))
        else:
            while asked > deficit:
                d, n = req[-1]
                cut = min(n, asked - deficit)
                asked -= cut
                if n > cut:
                    req[-1] = (d, n - cut)
                else:
                    req.pop()
        self.set_serving()

    def reclaim_due(self, now: float | None = None) -> int:
        """Loaned servers the inference side may take back at ``now`` (default
        ``now_s``): those of its requests due by then (every server it lacks if the
        legacy ``reclaim_deadline_s <= now``), at most the servers it lacks and the
        servers on loan.  O(requests)."""
        t = self.now_s if now is None else now
        deficit = self.reclaim_deficit()
        if self.reclaim_deadline_s <= t:
            due = deficit
        else:
            due = 0
            for d, n in self.reclaim_requests:
                if d > t:
                    break
                due += n
        return min(due, deficit, self.n_loaned)

    def reclaim_asked(self) -> int:
        """Servers the inference side has asked back, due or not (every server it lacks
        while the legacy ``reclaim_deadline_s`` is set), at most the servers it lacks."""
        deficit = self.reclaim_deficit()
        if self.reclaim_deadline_s < math.inf:
            return deficit
        return min(deficit, sum(n for _, n in self.reclaim_requests))

    def next_reclaim_deadline_s(self) -> float:
        """The earliest deadline after ``now_s`` of a pending request (or of the legacy
        ``reclaim_deadline_s``) while the inference side lacks servers; ``inf`` if none."""
        if self.reclaim_deficit() == 0:
            return math.inf
        now = self.now_s
        t = self.reclaim_deadline_s if self.reclaim_deadline_s > now else math.inf
        for d, _ in self.reclaim_requests:
            if d > now:
                return min(t, d)
        return t

    def set_serving(self) -> None:
        """The lowest-index inference servers not on loan serve ``servers_needed``; the
        others are idle."""
        left = self.servers_needed
        st = self.server_status
        for s in range(len(self.training_servers), self.n_servers):
            if st[s] == LOANED:
                continue
            if left > 0:
                st[s] = SERVING
                left -= 1
            else:
                st[s] = IDLE

    def apply_changes(
        self,
        jobs: list[tuple[Any, ...]],
        servers: list[tuple[int, int, float]],
        queue_moved: list[int],
        running_moved: list[int],
        last_reclaim_s: float,
    ) -> None:
        """Bring the state in step with another engine's, from what changed there.

        The compiled event loop reports its changes (``aryl.PassView.changes``,
        the adapter :mod:`aryl.scheduling.twin`); this sets the same values here
        and keeps the indexes (queue, running set, free GPUs, extras, loans, the
        queue orders) as the mutators would.

        Parameters
        ----------
        jobs : list of tuple
            ``(job, status, placement or None, remaining_s, progress_at_s, speed,
            checkpoint_remaining_s, next_checkpoint_s, queued_since_s, waited_s,
            attained_gpu_s, attained_at_s, restarted)`` for every job whose dynamic
            fields changed: their new values.
        servers : list of (int, int, float)
            ``(server, status, reclaimed_s)`` of every server whose status or last
            reclaim time changed.
        queue_moved, running_moved : list of int
            The queue's (running set's) members from the first position where
            its order leaves the previous one, in their order now: they are
            moved to the end, in that order (``running_moved`` also in
            ``elastic_running``).
        last_reclaim_s : float

        Notes
        -----
        Changed jobs leave the queue and their servers first, then the servers
        change status, then the jobs take their new status and placement (so a
        returned server is empty and a lent one is there before its workers).
        ``jobs_on``'s order within a server may differ from the other engine's
        (no pass reads it). O(changes + moved + their placements).
        """
        status = self.status
        running = self.running
        er = self.elastic_running
        mn = self.min_workers
        gpw = self.gpus_per_worker
        for t in jobs:
            j = t[0]
            old = status[j]
            if old == QUEUED:
                self._dequeue(j)
            elif old == RUNNING:
                self._unplace(j)
                self.base_busy -= mn[j] * gpw[j]
                if t[1] != RUNNING:
                    del running[j]
                    er.pop(j, None)
        ss = self.server_status
        for s, new, rec in servers:
            self.server_reclaimed_s[s] = rec
            old = ss[s]
            if old == new:
                continue
            g = self.server_gpus[s]
            p = self.server_pool_idx[s]
            if old == LOANED:
                self.free[s] = 0
                self.n_loaned -= 1
                self.loaned_gpus -= g
                self.loaned_gpus_by_pool[p] -= g
            elif new == LOANED:
                self.free[s] = g
                self.n_loaned += 1
                self.loaned_gpus += g
                self.loaned_gpus_by_pool[p] += g
            ss[s] = new
        self.last_reclaim_s = last_reclaim_s
        R, L, SP, CR, NC = (self.remaining_s, self.progress_at_s, self.speed,
                            self.checkpoint_remaining_s, self.next_checkpoint_s)
        QS, WS, AG, AA = self.queued_since_s, self.waited_s, self.attained_gpu_s, self.attained_at_s
        for j, st, place, r, lt, sp, cr, nc, qs, ws, ag, aa, rs in jobs:
            R[j] = r
            L[j] = lt
            SP[j] = sp
            CR[j] = cr
            NC[j] = nc
            WS[j] = ws
            AG[j] = ag
            AA[j] = aa
            self.restarted[j] = rs
            if st == QUEUED:
                self.enqueue(j, qs)
                continue
            QS[j] = qs
            status[j] = st
            if st == RUNNING:
                self._place(j, place)
                self.base_busy += mn[j] * gpw[j]
                if j not in running:
                    running[j] = None
                    if self.elastic[j] and self.max_workers[j] > mn[j]:
                        er[j] = None
        if queue_moved:
            q = self.queued
            for j in queue_moved:
                del q[j]
                q[j] = None
        for j in running_moved:
            del running[j]
            running[j] = None
            if j in er:
                del er[j]
                er[j] = None

    # ------------------------------------------------------------ views
    @property
    def multi_type(self) -> bool:
        """More than one GPU type: placement keeps a job's workers on one type."""
        return len(self.gpu_types) > 1

    def type_order(self, j: int, w: int, types: list[str] | None = None) -> list[str]:
        """GPU types by job ``j``'s throughput on ``w`` workers there, fastest first
        (ties: the order of the types' first servers)."""
        ts = self.gpu_types if types is None else types
        rank = {t: i for i, t in enumerate(self.gpu_types)}
        return sorted(ts, key=lambda t: (-self.throughput_on(j, t, w), rank[t]))

    def inference_servers(self) -> range:
        return range(len(self.training_servers), self.n_servers)

    def loaned_servers(self) -> list[int]:
        """Indexes of servers on loan, ascending."""
        st = self.server_status
        return [s for s in self.inference_servers() if st[s] == LOANED]

    def not_loaned(self) -> int:
        return self.n_servers - len(self.training_servers) - self.n_loaned

    def reclaim_deficit(self) -> int:
        """Servers the inference side lacks now (>= 0)."""
        return max(0, self.servers_needed - self.not_loaned())

    # ------------------------------------------------------------ indexes
    def rebuild_indexes(self) -> None:
        """Recompute ``free``, ``jobs_on``, ``busy``, ``base_busy``, the extras and the
        loan count from the placements, independently of the incremental code.

        ``base_busy`` counts ``min_workers`` of every running job.
        O(n_servers + placements).
        """
        (self.free, self.jobs_on, self.ex_srv, self.ex_job, self.below, self.elastic_running,
         self.busy, self.base_busy, self.n_loaned, self.busy_loaned, self.busy_by_pool,
         self.loaned_gpus_by_pool) = self._recompute()
        self.loaned_gpus = sum(self.loaned_gpus_by_pool)
        self.last_reclaim_s = max(self.server_reclaimed_s, default=-math.inf)

    def _recompute(self) -> tuple[Any, ...]:
        n = self.n_servers
        free = [
            self.server_gpus[s] if self.server_status[s] in (TRAINING, LOANED) else 0
            for s in range(n)
        ]
        jobs_on: list[dict[int, int]] = [{} for _ in range(n)]
        ex_srv = [0] * n
        ex_job: dict[int, Placement] = {}
        below: dict[int, None] = {}
        elastic_running: dict[int, None] = {}
        busy = 0
        base_busy = 0
        busy_loaned = 0
        busy_by_pool = [0] * len(self.pool_names)
        nt = len(self.training_servers)
        for j in self.running:
            place = self.placement[j]
            if place is None:
                raise InvalidInputError(
                    f"jobs[{j}] ({self.job_id[j]!r}): running with no placement"
                )
            g = self.gpus_per_worker[j]
            w = 0
            for s, k in place.items():
                free[s] -= k * g
                jobs_on[s][j] = k
                w += k
                busy_by_pool[self.server_pool_idx[s]] += k * g
                if s >= nt:
                    busy_loaned += k * g
            if w != self.workers[j]:
                raise InvalidInputError(
                    f"jobs[{j}] ({self.job_id[j]!r}): workers {self.workers[j]} != placement {w}"
                )
            busy += w * g
            mn = self.min_workers[j]
            base_busy += mn * g
            if self.elastic[j] and self.max_workers[j] > mn:
                elastic_running[j] = None
                if w < self.max_workers[j]:
                    below[j] = None
            if self.elastic[j] and w > mn:
                left = mn
                e: Placement = {}
                for s in sorted(place):
                    k = place[s]
                    take = k if k < left else left
                    left -= take
                    if k - take:
                        e[s] = k - take
                        ex_srv[s] += (k - take) * g
                ex_job[j] = e
        n_loaned = sum(1 for st in self.server_status if st == LOANED)
        loaned_gpus_by_pool = [0] * len(self.pool_names)
        for s in range(n):
            if self.server_status[s] == LOANED:
                loaned_gpus_by_pool[self.server_pool_idx[s]] += self.server_gpus[s]
        return (free, jobs_on, ex_srv, ex_job, below, elastic_running, busy, base_busy, n_loaned,
                busy_loaned, busy_by_pool, loaned_gpus_by_pool)

    def check_indexes(self) -> None:
        """Raise AssertionError if a derived index differs from an independent
        recomputation (the state itself is left as it is).  O(n_servers + placements).
        """
        now = (
            self.free, self.jobs_on, self.ex_srv, self.ex_job, set(self.below),
            list(self.elastic_running), self.busy, self.base_busy, self.n_loaned,
            self.busy_loaned, self.busy_by_pool, self.loaned_gpus_by_pool, self.loaned_gpus,
            self.last_reclaim_s,
        )
        r = self._recompute()
        ref = (r[0], r[1], r[2], r[3], set(r[4]), list(r[5]), r[6], r[7], r[8], r[9], r[10],
               r[11], sum(r[11]), max(self.server_reclaimed_s, default=-math.inf))
        names = ("free GPUs per server", "jobs per server", "extra GPUs per server",
                 "extra workers per job", "jobs below their maximum",
                 "running elastic jobs (start order)", "busy GPUs", "base-worker GPUs",
                 "loaned servers", "GPUs busy on loaned servers", "busy GPUs per pool",
                 "loaned GPUs per pool", "loaned GPUs", "last reclaim time")
        for name, a, b in zip(names, now, ref, strict=True):
            if a != b:
                raise AssertionError(f"{name} drifted")
        for name, (key, lst, keys) in self.qidx.items():
            if sorted(keys) != sorted(self.queued) or lst != sorted(
                (key(self, j), j) for j in self.queued
            ):
                raise AssertionError(f"queue index {name!r} drifted")

    def copy(self) -> ClusterState:
        """An independent copy. O(n_servers + n_jobs) list copies.

        Placement dicts and the extras' dicts are shared: the mutators replace them
        and never change one in place.
        """
        c = ClusterState.__new__(ClusterState)
        for name in ClusterState.__slots__:
            v = getattr(self, name)
            if isinstance(v, (list, dict)):
                v = v.copy()
            setattr(c, name, v)
        c.jobs_on = [d.copy() for d in self.jobs_on]
        c.servers_by_type = {t: v.copy() for t, v in self.servers_by_type.items()}
        c.training_by_type = {t: v.copy() for t, v in self.training_by_type.items()}
        c.qidx = {n: (k, lst.copy(), keys.copy()) for n, (k, lst, keys) in self.qidx.items()}
        c.native_cache = None  # scratch of one state: the copy makes its own
        return c

    def job_index(self, ids: Iterable[str]) -> list[int]:
        lookup = {x: i for i, x in enumerate(self.job_id)}
        return [lookup[x] for x in ids]

