"""The public policy API: write a scheduling policy in Python (``aryl.Policy``).

A policy subclasses :class:`Policy` and implements :meth:`Policy.decide`: once
per scheduling pass it gets a :class:`PassView` (read-only numpy arrays: the
time, the queue in arrival order, the running jobs with their placements, the
free GPUs per server, the GPU types and speeds, the idle inference servers
offered for loan) and returns a :class:`Decision` (starts with placements,
resizes, preemptions).  The compiled engine calls it from its event loop
(``aryl._core._sched``, policy kind "python callback"): events, the reclaim,
the loans' settlement, the accounting, the checks of the decision and the
output stay compiled, so a pass costs what the policy's own code costs.

The rules a decision must keep are checked before it is applied
(``sched_callback.hpp``); a broken rule raises :class:`aryl.errors.PolicyError`
naming the policy, the pass time, the job and the rule.  docs/policies.md is
the guide, with three worked examples.

Loans: a loaning policy (``loans = True``) sees the idle inference servers
offered to this pass (:attr:`PassView.offered`, their GPUs free in
:attr:`PassView.free_gpus`); placing a worker there borrows the server; a loaned
server left without workers is given back after the pass (option
``return_idle_loans``, default true; false keeps every offered server until the
inference side reclaims it).  Reclaims are decided by the engine, before the
policy, with ``SimConfig.reclaim_policy``.
"""

from __future__ import annotations

import hashlib
import inspect
import operator
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from aryl.errors import InvalidInputError, PolicyError

__all__ = ["ENTRY_POINT_GROUP", "Decision", "PassView", "Policy", "policy_identity"]

#: The entry-point group through which installed packages register policies
#: (``name = "module:Class"``).
ENTRY_POINT_GROUP = "aryl.policies"

_OPTION_TYPES = (bool, int, float, str)


class Policy:
    """Base class of a scheduling policy written in Python.

    Subclass it, set the class attributes, implement :meth:`decide`.

    Attributes
    ----------
    name : str (class attribute)
        The name in results, messages and sweep keys (default: the class name).
    version : str or None (class attribute)
        The policy's version in a sweep's run key.  ``None``: the version of the
        installed distribution that holds its module, else a hash of the
        module's source (:func:`policy_identity`).
    loans : bool (class attribute)
        Whether the policy borrows idle inference servers (offered to each pass
        while a job waits).
    loans_for_growth : bool (class attribute)
        With ``loans`` and ``elastic``: servers are also offered while nothing
        waits but a running elastic job is below its ``top_workers`` (the rule
        of the registered ``aryl``; default false).
    elastic : bool (class attribute)
        Whether elastic jobs may run between ``min_workers`` and ``max_workers``;
        otherwise every job runs at exactly its traced size (``ref_workers``).
    uses_tick : bool (class attribute)
        Whether a pass on the periodic tick (``SimConfig.tick_s``) can change
        something (passes run at arrivals, finishes and demand changes anyway).
    only_starts : bool (class attribute)
        The policy only starts queued jobs (never resizes or preempts; a
        decision that does raises :class:`aryl.errors.PolicyError`).  The engine
        then skips the call in a pass where no queued job can start: for each
        queued job, the servers a placement may use (the training servers and
        ``loaned``) hold fewer than ``base_workers`` whole workers of its
        ``gpus_per_worker`` GPUs (``sum(free_gpus[s] // gpus_per_worker)`` over
        them), e.g. when the queue is empty.  Such a pass is the same as one
        where ``decide`` returned ``None``.
    defaults : mapping of str to bool, int, float or str (class attribute)
        The options the policy takes and their defaults; ``return_idle_loans``
        (default true) is always known.
    options : dict
        The instance's options: ``defaults`` updated with the constructor's.

    Parameters
    ----------
    options : dict, optional
    **kwargs
        Options (``MyPolicy(threshold=3)`` or ``MyPolicy({"threshold": 3})``).

    Raises
    ------
    InvalidInputError
        An unknown option, or a value of another type than its default (an int
        is accepted for a float option).
    """

    name: ClassVar[str] = ""
    version: ClassVar[str | None] = None
    loans: ClassVar[bool] = False
    loans_for_growth: ClassVar[bool] = False
    elastic: ClassVar[bool] = False
    uses_tick: ClassVar[bool] = False
    only_starts: ClassVar[bool] = False
    defaults: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, options: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        given = {**dict(options or {}), **kwargs}
        known = {"return_idle_loans": True, **dict(self.defaults)}
        label = self.policy_name()
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise InvalidInputError(
                f"policy {label!r}: unknown option(s) {unknown}; known: {sorted(known)}")
        opts = dict(known)
        for k, v in given.items():
            d = known[k]
            ok = (type(v) is bool) if isinstance(d, bool) else (
                isinstance(v, (int, float)) and not isinstance(v, bool)
                if isinstance(d, float) else
                isinstance(v, int) and not isinstance(v, bool) if isinstance(d, int)
                else isinstance(v, type(d)) if isinstance(d, _OPTION_TYPES) else True)
            if not ok:
                raise InvalidInputError(
                    f"policy {label!r}: option {k} must be of type {type(d).__name__} "
                    f"(like its default {d!r}), got {v!r}")
            opts[k] = float(v) if isinstance(d, float) else v
        self.options: dict[str, Any] = opts
        self.return_idle_loans: bool = bool(opts["return_idle_loans"])

    @classmethod
    def policy_name(cls) -> str:
        """``name``, or the class name when it is empty."""
        return cls.name or cls.__name__

    def decide(self, view: PassView) -> Decision | None:
        """One scheduling pass: what to start, resize and preempt now.

        Parameters
        ----------
        view : PassView
            The cluster at the pass time (read-only arrays; its attributes are
            read during the call).

        Returns
        -------
        Decision or None
            ``None``: nothing changes.

        Notes
        -----
        Called once per pass, after the reclaim and the loan offers and before
        the loans are settled.  Must be deterministic for replays to repeat
        (seed any randomness from the view, e.g. ``view.now_s``).
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        extra = {k: v for k, v in self.options.items()
                 if not (k == "return_idle_loans" and v is True)}
        return f"{type(self).__name__}({extra})" if extra else f"{type(self).__name__}()"


class PassView:
    """What a policy sees at one pass: read-only numpy arrays, no per-job objects.

    Job indexes run over the trace's jobs in arrival order (ties: input row);
    server indexes over the training servers first (``0 .. n_training - 1``),
    then the inference servers.

    The per-job columns (``arrival_s`` .. ``top_workers``) and the servers'
    static columns are built once per replay.  The per-pass attributes (the
    queue, the running jobs, the free GPUs, the loans, ``server_status``,
    ``capacity_gpus``, ``servers_needed``) are built by the engine on their first
    read in a pass, then kept for that pass: a pass costs the attributes the
    policy reads (each O(its length)), not O(queue).  Arrays are copies, so an
    array kept after the pass stays as it was; an attribute first read after
    the pass (a view kept by the policy) raises ``ValueError``.

    Attributes
    ----------
    now_s : float
        The pass time, s.
    policy : Policy
        The policy deciding (its ``options``).
    job_ids : ndarray of object (n_jobs,)
        Each job's ``job_id``.
    arrival_s : ndarray of float64 (n_jobs,)
    gpus_per_worker, ref_workers, min_workers, max_workers : ndarray of int64 (n_jobs,)
        Each job's worker size and worker range; ``ref_workers`` is its traced
        size.
    elastic : ndarray of bool (n_jobs,)
    alpha : ndarray of float64 (n_jobs,)
        Each job's scaling loss: throughput ``T(w) = w / (1 + alpha (w - 1))``
        single-worker units at ``w`` workers (the model of docs/model.md and of
        :func:`aryl.jct_reduction_table`; a cluster's speed model, if any, is in
        ``speed``).
    rescale_pause_s : float
        ``SchedulerConfig.rescale_pause_s``: the progress pause of a resize.
    speed : ndarray of float64 (n_jobs, n_types)
        Each job's speed at its base size on each GPU type, relative to its
        traced speed (1.0: as traced): measured speeds per model family when the
        cluster has a speed model (``aryl.speeds``), else every type counts as
        the reference one.
    base_workers, top_workers : ndarray of int64 (n_jobs,)
        The sizes a job may run with under this policy, ``[base, top]``:
        ``[min_workers, max_workers]`` for an elastic job when the policy is
        elastic, else ``ref_workers`` for both.
    queue : ndarray of int64 (q,)
        Queued jobs in arrival order (ties: job index).
    queue_remaining_s : ndarray of float64 (q,)
        Remaining work of each queued job: seconds at its traced size on the
        reference GPU type.
    queue_waited_s, queue_attained_gpu_s : ndarray of float64 (q,)
        Time queued so far (all waits), s; GPU-seconds received so far.
    running : ndarray of int64 (r,)
        Running jobs in start order.
    running_workers : ndarray of int64 (r,)
    running_ptr : ndarray of int64 (r + 1,)
        Placements as CSR: running job ``i`` has ``running_server_workers[k]``
        workers on server ``running_server[k]`` for ``k`` in
        ``running_ptr[i] .. running_ptr[i + 1] - 1``.
    running_server, running_server_workers : ndarray of int64 (p,)
    running_remaining_s : ndarray of float64 (r,)
        Remaining work now, s at the traced size (time left: divided by
        ``running_speed``).
    running_speed : ndarray of float64 (r,)
        Current speed relative to the traced speed.
    running_attained_gpu_s : ndarray of float64 (r,)
    free_gpus : ndarray of int64 (n_servers,)
        Free GPUs per server for this pass (offered servers entirely free;
        inference servers not on loan 0).
    server_gpus, server_type, server_pool : ndarray of int64 (n_servers,)
        GPUs, GPU type index (into ``gpu_types``), pool index (into the
        cluster's pools, training pools first).
    server_status : ndarray of int8 (n_servers,)
        0 training, 1 serving inference, 2 idle inference, 3 on loan.
    n_training : int
    gpu_types : list of str
    type_factor : ndarray of float64 (n_types,)
        Throughput of a GPU of each type relative to the reference type (1.0
        without a speed model).
    loaned : ndarray of int64
        Inference servers on loan or offered to this pass, ascending.
    offered : ndarray of int64
        Idle inference servers offered to this pass (borrowed if a worker is
        placed there), ascending; empty for a policy without ``loans``.
    capacity_gpus : int
        GPUs of the training servers and of ``loaned``.
    servers_needed : int
        Inference servers the inference side needs now.
    last_reclaim_s : float
        When a loaned server was last reclaimed (``-inf``: never), s.
    changes : tuple (jobs, servers, queue_moved, running_moved)
        What changed in the engine's state since ``changes`` was last read in
        this replay (any earlier pass; at the first read: against a state where
        no job has arrived and no server has a status), for a policy that keeps
        its own copy of the state (:mod:`aryl.scheduling.twin` keeps a
        ``ClusterState`` with :meth:`ClusterState.apply_changes`, whose
        docstring gives the layout).  Lists of tuples of Python numbers, built
        in O(queued + running + servers) compiled steps plus O(changes) Python
        objects.
    """

    # annotations for mypy (set from the engine's dicts)
    now_s: float
    policy: Policy
    job_ids: np.ndarray
    arrival_s: np.ndarray
    gpus_per_worker: np.ndarray
    ref_workers: np.ndarray
    min_workers: np.ndarray
    max_workers: np.ndarray
    elastic: np.ndarray
    alpha: np.ndarray
    rescale_pause_s: float
    speed: np.ndarray
    base_workers: np.ndarray
    top_workers: np.ndarray
    queue: np.ndarray
    queue_remaining_s: np.ndarray
    queue_waited_s: np.ndarray
    queue_attained_gpu_s: np.ndarray
    running: np.ndarray
    running_workers: np.ndarray
    running_ptr: np.ndarray
    running_server: np.ndarray
    running_server_workers: np.ndarray
    running_remaining_s: np.ndarray
    running_speed: np.ndarray
    running_attained_gpu_s: np.ndarray
    free_gpus: np.ndarray
    server_gpus: np.ndarray
    server_type: np.ndarray
    server_pool: np.ndarray
    server_status: np.ndarray
    n_training: int
    gpu_types: list[str]
    type_factor: np.ndarray
    loaned: np.ndarray
    offered: np.ndarray
    capacity_gpus: int
    servers_needed: int
    last_reclaim_s: float
    changes: tuple[Any, ...]

    def placement(self, i: int) -> dict[int, int]:
        """The placement ``{server: workers}`` of the ``i``-th running job
        (``running[i]``), a new dict."""
        a, b = int(self.running_ptr[i]), int(self.running_ptr[i + 1])
        return dict(zip(self.running_server[a:b].tolist(),
                        self.running_server_workers[a:b].tolist(), strict=True))

    def usable_servers(self) -> np.ndarray:
        """Servers a placement may use this pass: the training servers and
        ``loaned`` (int64, ascending)."""
        return np.concatenate([np.arange(self.n_training, dtype=np.int64), self.loaned])

    def free_gpus_per_pool(self) -> np.ndarray:
        """Free GPUs per pool (int64, ``server_pool``'s indexes)."""
        n = int(self.server_pool.max()) + 1 if self.server_pool.size else 0
        return np.bincount(self.server_pool, weights=self.free_gpus, minlength=n).astype(np.int64)


class _PassAttr:
    """A per-pass attribute of :class:`PassView`: read from the engine's pass object
    on first access, then kept in the view's ``__dict__`` (a non-data descriptor,
    so later reads are plain attribute reads)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        v = getattr(d["_pass"], self.name)
        d[self.name] = v
        return v


#: PassView's attributes built per pass on first read (the engine's CallbackPass).
PER_PASS_ATTRIBUTES = (
    "queue", "queue_remaining_s", "queue_waited_s", "queue_attained_gpu_s",
    "running", "running_workers", "running_ptr", "running_server", "running_server_workers",
    "running_remaining_s", "running_speed", "running_attained_gpu_s",
    "free_gpus", "loaned", "offered", "server_status", "capacity_gpus", "servers_needed",
    "last_reclaim_s", "changes",
)
for _name in PER_PASS_ATTRIBUTES:
    setattr(PassView, _name, _PassAttr(_name))
del _name


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _int64(x: Any) -> int:
    """``operator.index(x)``, refused (``OverflowError``) outside int64 and
    (``TypeError``) for a bool (``True`` is no worker count or index)."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{x!r} is a bool, not an integer")
    v = operator.index(x)
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise OverflowError(f"{v} does not fit in int64")
    return v


@dataclass
class Decision:
    """What a pass decides; applied in the order preemptions, resizes, starts.

    Attributes
    ----------
    starts : list of (int, dict of int to int)
        ``(job, {server: workers})`` for queued jobs.
    resizes : list of (int, dict of int to int)
        ``(job, {server: workers})`` for running jobs: their new whole placement
        (a move when the size is the same).
    preemptions : list of int
        Running jobs to stop (they go back to the queue and lose the work since
        their last checkpoint, ``SimConfig.checkpoint_interval_s``).

    Notes
    -----
    The engine checks (:class:`aryl.errors.PolicyError` otherwise): a start's
    job is queued, a resize's or preemption's running, each job at most once; a
    placement uses servers that exist and are training servers or ``loaned``,
    each once, with >= 1 worker each, and its total size is within the job's
    ``[base_workers, top_workers]``; its servers have one GPU type unless
    ``SchedulerConfig.mix_gpu_types``; no server gets more GPUs than are free at
    that point of the decision (preemptions and resizes free theirs first).
    """

    starts: list[tuple[int, dict[int, int]]] = field(default_factory=list)
    resizes: list[tuple[int, dict[int, int]]] = field(default_factory=list)
    preemptions: list[int] = field(default_factory=list)

    def start(self, job: int, placement: Mapping[int, int]) -> None:
        """Start queued ``job`` with ``placement`` (``{server: workers}``)."""
        self.starts.append((job, dict(placement)))

    def resize(self, job: int, placement: Mapping[int, int]) -> None:
        """Give running ``job`` the new placement ``{server: workers}``."""
        self.resizes.append((job, dict(placement)))

    def preempt(self, job: int) -> None:
        """Preempt running ``job``."""
        self.preemptions.append(job)

    def to_arrays(self, where: str = "decision") -> tuple[np.ndarray, ...]:
        """The 9 int64 arrays the engine reads: starts (job, ptr, server, workers),
        resizes (the same), preempted jobs.

        Raises
        ------
        PolicyError
            An entry that is not ``(int, {int: int})`` (``where`` names the pass).
        """
        out: list[np.ndarray] = []
        for kind, moves in (("starts", self.starts), ("resizes", self.resizes)):
            jobs: list[int] = []
            ptr = [0]
            srv: list[int] = []
            wk: list[int] = []
            for i, m in enumerate(moves):
                try:
                    j, place = m
                    jobs.append(_int64(j))
                    for s, k in place.items():
                        srv.append(_int64(s))
                        wk.append(_int64(k))
                except (TypeError, ValueError, AttributeError, OverflowError):
                    raise PolicyError(
                        f"{where}: Decision.{kind}[{i}] = {m!r}: expected (job index, "
                        "{server index: workers}) with integers (int64)") from None
                ptr.append(len(srv))
            out += [np.asarray(jobs, dtype=np.int64), np.asarray(ptr, dtype=np.int64),
                    np.asarray(srv, dtype=np.int64), np.asarray(wk, dtype=np.int64)]
        try:
            pre = [_int64(j) for j in self.preemptions]
        except (TypeError, OverflowError):
            raise PolicyError(f"{where}: Decision.preemptions = {self.preemptions!r}: "
                              "expected job indexes (integers, int64)") from None
        out.append(np.asarray(pre, dtype=np.int64))
        return tuple(out)


class _Bridge:
    """The engine's callback: (static columns, this pass) -> the decision.  Built
    once per replay (or per :func:`aryl.schedule`).

    Per pass: one view object, its ``__dict__`` filled with the static columns
    (one dict update) and the engine's pass object, whose arrays the view builds
    on first read (:data:`PER_PASS_ATTRIBUTES`).  The decision goes back as the
    :class:`Decision` itself (the binding reads its lists; other integer types
    go through :meth:`arrays`)."""

    def __init__(self, policy: Policy, job_ids: Any) -> None:
        self.policy = policy
        self.label = policy.policy_name()
        ids = np.asarray(job_ids, dtype=object).copy()
        ids.flags.writeable = False
        self.job_ids = ids
        self._statics: Any = None
        self._static_vals: dict[str, Any] = {}
        #: decide calls so far (passes skipped by ``only_starts`` are not counted)
        self.n_calls = 0

    def job_label(self, j: int) -> str:
        """Job index -> its job id (for messages)."""
        return repr(str(self.job_ids[j])) if 0 <= j < len(self.job_ids) else f"#{j}"

    def where(self, now_s: float) -> str:
        """The pass in messages: ``policy 'NAME' at t = T s``."""
        return f"policy {self.label!r} at t = {now_s:.10g} s"

    def arrays(self, dec: Decision, now_s: float) -> tuple[np.ndarray, ...]:
        """The decision as :meth:`Decision.to_arrays` (the binding's slow path)."""
        return dec.to_arrays(self.where(now_s))

    def __call__(self, statics: dict[str, Any], p: Any) -> Decision | None:
        if statics is not self._statics:
            self._statics = statics
            self._static_vals = {**statics, "job_ids": self.job_ids, "policy": self.policy,
                                 "gpu_types": list(statics["gpu_types"])}
        self.n_calls += 1
        view = PassView.__new__(PassView)
        vd = view.__dict__
        vd.update(self._static_vals)
        vd["_pass"] = p
        vd["now_s"] = p.now_s
        try:
            dec = self.policy.decide(view)
        except Exception as e:
            e.add_note(f"(raised in the decide step of {self.where(p.now_s)})")
            raise
        if dec is None:
            return None
        if not isinstance(dec, Decision):
            raise PolicyError(f"{self.where(p.now_s)}: decide returned {type(dec).__name__}, "
                              "expected aryl.Decision or None")
        if not (dec.starts or dec.resizes or dec.preemptions):
            return None
        return dec


def policy_identity(policy: Any) -> dict[str, Any]:
    """What identifies a policy's code in a sweep's run key.

    Returns
    -------
    dict
        ``name``, ``class`` (``module:qualname``; ``builtin`` for the registered
        policies) and ``version``: the class attribute ``version`` if set, else the
        version of the installed distribution that holds the class's module, else
        ``"sha256:"`` + the first 16 hex digits of the SHA-256 of the module's
        source file (so an edited local policy gets another key).

    Raises
    ------
    InvalidInputError
        A local policy whose source cannot be read.
    """
    cls = policy if isinstance(policy, type) else type(policy)
    from importlib import metadata

    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        try:
            own = metadata.version("aryl")
        except metadata.PackageNotFoundError:  # pragma: no cover - a bare source tree
            own = "0+unknown"
        return {"name": getattr(policy, "name", str(policy)), "class": "builtin",
                "version": own}
    mod = cls.__module__
    ident = {"name": cls.policy_name(), "class": f"{mod}:{cls.__qualname__}"}
    if cls.version is not None:
        return {**ident, "version": str(cls.version)}
    top = mod.split(".")[0]

    try:
        dists = metadata.packages_distributions().get(top, [])
    except Exception:  # pragma: no cover - broken metadata in the environment
        dists = []
    for dist in dists:
        try:
            return {**ident, "version": f"{dist}=={metadata.version(dist)}"}
        except metadata.PackageNotFoundError:  # pragma: no cover
            continue
    module = sys.modules.get(mod)
    try:
        src = inspect.getsource(module) if module is not None else inspect.getsource(cls)
    except (OSError, TypeError):
        raise InvalidInputError(
            f"policy {cls.policy_name()!r}: cannot read the source of module {mod!r} to "
            "version it; set the class attribute `version`") from None
    return {**ident, "version": "sha256:" + hashlib.sha256(src.encode()).hexdigest()[:16]}
