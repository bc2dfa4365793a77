"""Reclaim: choose which loaned servers go back to the inference cluster.

When inference load rises, the inference cluster asks for ``n`` of its loaned
servers back.  Aryl [Aryl]_ chooses which, so that as few training jobs as
possible are preempted: elastic jobs that can lose workers and stay at or above
their base shrink instead of dying.

Semantics (shared by every policy)
----------------------------------
A job ``j`` has ``W_j`` workers in total (on loaned servers and elsewhere) and a
base ``b_j``.  An elastic job can still shed ``W_j - b_j`` workers (a rigid job
none); that budget is shared by all the servers returned.  When a server is
taken, each job still on it, in placement input order, either

* **scales in** (:attr:`ActionKind.SCALE_IN`): its workers there fit in its
  remaining budget; its total drops by that many; or
* is **preempted** (:attr:`ActionKind.PREEMPT`): it loses *all* its workers on
  every server (other servers' costs drop accordingly).

A server is *ineligible* if it is not of the requested ``gpu_type`` or if a
non-preemptible job on it cannot shed all its workers there; ineligible servers
are skipped (they never end the search) and once ineligible stay so.  If fewer
than ``n`` servers can be taken the plan reports the ``shortfall``.

Aryl's cost greedy (``policy="aryl"``)
--------------------------------------
The cost of a server is the sum, over the jobs on it that would be preempted,
of ``w_js / W_j`` (the fraction of the job's GPUs on that server); workers an
elastic job can shed cost 0, an idle server costs 0.  Repeatedly take the
cheapest server, apply it, update the servers that shared the affected jobs.
Order: cost rounded to the nearest 1e-9 (half to even; the float sum runs in
placement input order, identically in the C++ kernel and its Python twin), then
fewer jobs touched, then fewer busy GPUs, then lower server id.

Comparison policies run the same apply step (:meth:`aryl._reference.reclaim.ReclaimState.take`):
``"random"`` (a seeded random order over eligible servers), ``"fewest-jobs"``
(fewest jobs on it now, then fewer busy GPUs, lower id), ``"most-idle"`` (most
idle GPUs now, then fewer jobs, lower id) and ``"exact"`` (the fewest preempted
jobs over all feasible sets of the largest feasible size; small cases only).

References
----------
.. [Aryl] J. Li, H. Xu, Y. Zhu, Z. Liu, C. Guo, C. Wang. "Aryl: An Elastic
   Cluster Scheduler for Deep Learning", arXiv:2202.07896, 2022 (EuroSys 2023
   as "Lyra"), §"Capacity loaning: reclaiming".
"""

from __future__ import annotations

import enum
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from aryl._reference import reclaim as _ref
from aryl.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "EXACT_MAX_SUBSETS",
    "RECLAIM_POLICIES",
    "ActionKind",
    "ReclaimAction",
    "ReclaimPlan",
    "ReclaimReason",
    "ReclaimRequest",
    "reclaim",
]

logger = logging.getLogger(__name__)

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

#: ``policy="exact"`` refuses requests needing more candidate subsets than this.
EXACT_MAX_SUBSETS = 200_000

#: Largest ``server_gpus`` accepted (busy-GPU sums stay exact in float64 and int64).
_MAX_SERVER_GPUS = 1 << 52


class ActionKind(enum.IntEnum):
    """What an action does (values shared with the C++ kernel)."""

    RETURN = 0  #: a server goes back to the inference cluster
    SCALE_IN = 1  #: an elastic job loses its workers on that server and keeps running
    PREEMPT = 2  #: a job is killed everywhere and requeued


class ReclaimReason(enum.IntEnum):
    """Why an action was taken (values shared with the C++ kernel)."""

    IDLE_SERVER = 0  #: RETURN of a server with no training work left on it
    SELECTED = 1  #: RETURN of a busy server chosen by the policy
    ELASTIC_SHED = 2  #: SCALE_IN: the job stays at or above its base
    RIGID_JOB = 3  #: PREEMPT: the job is not elastic
    BELOW_BASE = 4  #: PREEMPT: shedding the workers would take the job below its base


@dataclass(frozen=True)
class ReclaimAction:
    """One step of a plan.

    Attributes
    ----------
    server_id : int
        The server being returned.
    job_id : int or None
        The job acted on; None for :attr:`ActionKind.RETURN`.
    kind : ActionKind
    workers_removed : int
        SCALE_IN: the job's workers on the server; PREEMPT: the job's whole total
        at that moment (everywhere); RETURN: 0.
    reason : ReclaimReason
    """

    server_id: int
    job_id: int | None
    kind: ActionKind
    workers_removed: int
    reason: ReclaimReason


# --------------------------------------------------------------------------------------
# Request
# --------------------------------------------------------------------------------------
def _asarray(name: str, value: Any) -> npt.NDArray[Any]:
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"{name}: cannot be read as an array: {exc}") from None


def _frozen(arr: npt.NDArray[Any], dtype: type) -> npt.NDArray[Any]:
    """A private read-only copy: the request cannot change after validation."""
    out: npt.NDArray[Any] = np.array(arr, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


def _int_array(name: str, value: Any) -> I64:
    arr = _asarray(name, value)
    if arr.ndim != 1:
        raise InvalidInputError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" and arr.size:
        raise InvalidInputError(f"{name}: expected integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise InvalidInputError(f"{name}: value does not fit in int64")
    return _frozen(arr, np.int64)


def _bool_array(name: str, value: Any) -> npt.NDArray[np.bool_]:
    arr = _asarray(name, value)
    if arr.ndim != 1:
        raise InvalidInputError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if arr.dtype.kind == "b" or not arr.size:
        return _frozen(arr, np.bool_)
    if arr.dtype.kind in "iu" and bool(np.all((arr == 0) | (arr == 1))):
        return _frozen(arr, np.bool_)
    raise InvalidInputError(f"{name}: expected booleans, got dtype {arr.dtype}")


def _require(ok: bool, name: str, message: str, bad: Any = None) -> None:
    if not ok:
        suffix = f" (first offending entry at index {int(bad)})" if bad is not None else ""
        raise InvalidInputError(f"{name}: {message}{suffix}")


def _first(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.argmax(mask))


Lookup = Callable[[I64], tuple[I64, npt.NDArray[np.bool_]]]


def _id_lookup(ids: I64, name: str) -> Lookup:
    """Check that ``ids`` are unique; return ``f(query) -> (positions, unknown mask)``.

    Dense ids (span at most 16 per id plus 4096) use a table, O(m + span + p);
    others a sort and binary search, O((m + p) log m).  A duplicate is reported
    at the first entry (in input order) that repeats an earlier id, on both paths.
    """
    m = ids.size
    if m == 0:
        return lambda q: (np.zeros(q.size, np.int64), np.ones(q.size, np.bool_))
    lo, hi = int(ids.min()), int(ids.max())
    span = hi - lo + 1
    if span <= 16 * m + 4096:
        off = ids - lo
        table = np.full(span, -1, dtype=np.int64)
        table[off[::-1]] = np.arange(m - 1, -1, -1, dtype=np.int64)  # first occurrence wins
        if int(np.count_nonzero(table >= 0)) != m:
            dup = np.flatnonzero(table[off] != np.arange(m))  # the repeats, ascending
            _require(False, name, "duplicate id", dup[0])

        def dense(q: I64) -> tuple[I64, npt.NDArray[np.bool_]]:
            d = q - lo
            inside = (d >= 0) & (d < span)
            pos = table[np.where(inside, d, 0)]
            return pos, ~inside | (pos < 0)

        return dense
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    dup = sorted_ids[1:] == sorted_ids[:-1]
    # stable sort: of two equal ids the later entry comes second; the earliest of those
    _require(not dup.any(), name, "duplicate id", order[1:][dup].min() if dup.any() else None)

    def sparse(q: I64) -> tuple[I64, npt.NDArray[np.bool_]]:
        pos = np.minimum(np.searchsorted(sorted_ids, q), m - 1)
        return order[pos], sorted_ids[pos] != q

    return sparse


@dataclass(frozen=True, eq=False, kw_only=True)
class ReclaimRequest:
    """Loaned servers, the training work on them, and how many servers to return.

    A struct of arrays; the arrays are copied to read-only ``int64`` / ``bool``
    arrays (the caller's arrays are untouched and later edits to them do not
    reach the request) and the whole request is validated on construction
    (vectorised, O(m + p + J) plus sorts).

    Parameters
    ----------
    server_id : int64 (m,)
        Loaned servers, unique ids.
    server_gpus : int64 (m,)
        GPUs per server, in ``[1, 2**52]``.
    placement_job : int64 (p,)
        Index into the job arrays (not a job id).
    placement_server : int64 (p,)
        A server id from ``server_id``.  (job, server) pairs are unique.
    placement_workers : int64 (p,)
        Workers of the job on the server, >= 1.
    job_id : int64 (J,)
        Unique job ids.
    job_workers : int64 (J,)
        Total workers of the job everywhere (loaned servers and elsewhere), >= the
        workers it has on loaned servers.
    job_gpus_per_worker : int64 (J,)
        >= 1.  A server's busy GPUs may not exceed ``server_gpus``.
    job_min_workers : int64 (J,)
        Base workers, ``1 <= base <= job_workers``; only elastic jobs may go down to it.
    job_elastic, job_preemptible : bool (J,)
        A non-preemptible job can only shed workers; a server it would have to be
        preempted from is ineligible.
    n_servers : int
        Servers to return, >= 0.
    server_gpu_type : sequence of str (m,), optional
        GPU type of each server; required if ``gpu_type`` is given.
    gpu_type : str, optional
        Return only servers of this GPU type.

    Raises
    ------
    InvalidInputError
        Naming the field: unreadable (e.g. ragged) input, wrong shape or dtype
        (floats, strings and objects are refused, not coerced), mismatched
        lengths, duplicate server or job ids, a placement on an unknown server or job, a duplicate
        (job, server) pair, workers < 1, placed workers above the job's total,
        busy GPUs above a server's GPUs, base outside ``[1, job_workers]``,
        ``n_servers < 0``, a ``gpu_type`` without ``server_gpu_type``.
    """

    server_id: I64
    server_gpus: I64
    placement_job: I64
    placement_server: I64
    placement_workers: I64
    job_id: I64
    job_workers: I64
    job_gpus_per_worker: I64
    job_min_workers: I64
    job_elastic: npt.NDArray[np.bool_]
    job_preemptible: npt.NDArray[np.bool_]
    n_servers: int
    server_gpu_type: Sequence[str] | npt.NDArray[Any] | None = None
    gpu_type: str | None = None
    # Derived: placement server *indices* and the GPU-type mask, for the kernels.
    _placement_server_index: I64 = field(init=False, repr=False)
    _server_allowed: I64 = field(init=False, repr=False)

    def __post_init__(self) -> None:
        put = object.__setattr__
        for name in (
            "server_id", "server_gpus", "placement_job", "placement_server",
            "placement_workers", "job_id", "job_workers", "job_gpus_per_worker",
            "job_min_workers",
        ):
            put(self, name, _int_array(name, getattr(self, name)))
        for name in ("job_elastic", "job_preemptible"):
            put(self, name, _bool_array(name, getattr(self, name)))
        n = self.n_servers
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise InvalidInputError(f"n_servers: expected an int, got {type(n).__name__}")
        _require(0 <= int(n) < 2**63, "n_servers", f"must be in [0, 2**63), got {int(n)}")
        put(self, "n_servers", int(n))

        m, p, n_jobs = self.server_id.size, self.placement_job.size, self.job_id.size
        for name, size, group in (
            ("server_gpus", m, "server_id"),
            ("placement_server", p, "placement_job"),
            ("placement_workers", p, "placement_job"),
            ("job_workers", n_jobs, "job_id"),
            ("job_gpus_per_worker", n_jobs, "job_id"),
            ("job_min_workers", n_jobs, "job_id"),
            ("job_elastic", n_jobs, "job_id"),
            ("job_preemptible", n_jobs, "job_id"),
        ):
            got = getattr(self, name).size
            _require(got == size, name, f"length {got} differs from {group} ({size})")

        # Servers.
        server_index = _id_lookup(self.server_id, "server_id")
        bad = self.server_gpus < 1
        _require(not bad.any(), "server_gpus", "must be >= 1", _first(bad) if bad.any() else None)
        self._check_types(m)

        # Jobs.
        _id_lookup(self.job_id, "job_id")
        for name, arr in (("job_workers", self.job_workers),
                          ("job_gpus_per_worker", self.job_gpus_per_worker),
                          ("job_min_workers", self.job_min_workers)):
            bad = arr < 1
            _require(not bad.any(), name, "must be >= 1", _first(bad) if bad.any() else None)
        bad = self.job_min_workers > self.job_workers
        _require(not bad.any(), "job_min_workers", "must be <= job_workers",
                 _first(bad) if bad.any() else None)

        # Placements.
        bad = (self.placement_job < 0) | (self.placement_job >= n_jobs)
        _require(not bad.any(), "placement_job", f"index out of range [0, {n_jobs})",
                 _first(bad) if bad.any() else None)
        bad = self.placement_workers < 1
        _require(not bad.any(), "placement_workers", "must be >= 1",
                 _first(bad) if bad.any() else None)
        sidx, bad = server_index(self.placement_server)
        _require(not bad.any(), "placement_server", "unknown server id (not in server_id)",
                 _first(bad) if bad.any() else None)
        pair = self.placement_job * max(m, 1) + sidx
        ps = np.sort(pair)
        _require(not (ps[1:] == ps[:-1]).any(), "placement_server",
                 "duplicate (job, server) placement; merge the workers into one entry")
        placed = np.bincount(self.placement_job, weights=self.placement_workers, minlength=n_jobs)
        bad = placed > self.job_workers
        _require(not bad.any(), "placement_workers",
                 "a job's workers on loaned servers exceed job_workers (job index)",
                 _first(bad) if bad.any() else None)
        bad = self.server_gpus > _MAX_SERVER_GPUS
        _require(not bad.any(), "server_gpus", "must be <= 2**52",
                 _first(bad) if bad.any() else None)
        # Per placement first, without overflow (workers * gpus_per_worker could wrap
        # int64); then every product is <= 2**52 and the float sums below are exact
        # wherever they matter (up to the server's GPUs).
        gpw = self.job_gpus_per_worker[self.placement_job]
        bad = self.placement_workers > self.server_gpus[sidx] // gpw
        _require(not bad.any(), "placement_workers",
                 "busy GPUs exceed server_gpus (placement index)",
                 _first(bad) if bad.any() else None)
        busy = np.bincount(sidx, weights=self.placement_workers * gpw, minlength=m)
        bad = busy > self.server_gpus
        _require(not bad.any(), "placement_workers",
                 "busy GPUs exceed server_gpus (server index)", _first(bad) if bad.any() else None)
        put(self, "_placement_server_index", sidx.astype(np.int64, copy=False))
        put(self, "_server_allowed", self._allowed_mask(m))

    def _check_types(self, m: int) -> None:
        put = object.__setattr__
        if self.server_gpu_type is not None:
            raw = self.server_gpu_type
            if isinstance(raw, np.ndarray) and raw.dtype.kind == "U":
                types = raw
            else:
                types = np.asarray(raw, dtype=object)
                ok = types.ndim == 1 and all(isinstance(t, str) for t in types)
                _require(ok, "server_gpu_type", "expected a 1-D sequence of str")
            _require(types.ndim == 1 and types.size == m, "server_gpu_type",
                     f"expected {m} entries, one per server")
            put(self, "server_gpu_type", types)
        if self.gpu_type is not None:
            _require(isinstance(self.gpu_type, str), "gpu_type", "expected a str or None")
            _require(self.server_gpu_type is not None, "gpu_type",
                     "a GPU type filter needs server_gpu_type")

    def _allowed_mask(self, m: int) -> I64:
        if self.gpu_type is None or self.server_gpu_type is None:
            return np.ones(m, dtype=np.int64)
        return (np.asarray(self.server_gpu_type) == self.gpu_type).astype(np.int64)

    @classmethod
    def _unchecked(cls, **arrays: Any) -> ReclaimRequest:
        """Private fast path: build a request *without* validation.

        For callers that already guarantee the contract (the simulator).  The
        arrays must already be 1-D ``int64`` (``job_elastic``/``job_preemptible``
        bool) and consistent; bad input here can give wrong plans (the kernel
        still bounds-checks indices).  Saves the O(p log p) validation.
        """
        self = object.__new__(cls)
        put = object.__setattr__
        arrays.setdefault("server_gpu_type", None)
        arrays.setdefault("gpu_type", None)
        for k, v in arrays.items():
            put(self, k, v)
        put(self, "n_servers", int(self.n_servers))
        ids = self.server_id
        put(self, "_placement_server_index", _id_lookup(ids, "server_id")(self.placement_server)[0])
        put(self, "_server_allowed", self._allowed_mask(ids.size))
        return self

    @classmethod
    def from_records(
        cls,
        *,
        servers: Iterable[Mapping[str, Any] | Sequence[Any]],
        jobs: Iterable[Mapping[str, Any] | Sequence[Any]],
        placements: Iterable[Mapping[str, Any] | Sequence[Any]],
        n_servers: int,
        gpu_type: str | None = None,
    ) -> ReclaimRequest:
        """Build a request from plain records (tests, notebooks).

        Parameters
        ----------
        servers : records ``(id, gpus[, gpu_type])`` or mappings with keys
            ``id``, ``gpus``, optional ``gpu_type``.
        jobs : records ``(id, workers, gpus_per_worker=1, min_workers=workers,
            elastic=False, preemptible=True)`` or mappings with those keys.
        placements : records ``(job_id, server_id, workers)`` or mappings with keys
            ``job``, ``server``, ``workers``; ``job`` is a job **id** here.
        n_servers, gpu_type : as in the class.

        Raises
        ------
        InvalidInputError
            A placement names an unknown job id, a record is malformed, or the
            assembled request is invalid.
        """
        sid: list[int] = []
        sgpus: list[int] = []
        stype: list[str | None] = []
        for i, rec in enumerate(servers):
            r = _record(rec, ("id", "gpus", "gpu_type"), {"gpu_type": None}, f"servers[{i}]")
            sid.append(r["id"])
            sgpus.append(r["gpus"])
            stype.append(r["gpu_type"])
        cols: dict[str, list[Any]] = {k: [] for k in (
            "id", "workers", "gpus_per_worker", "min_workers", "elastic", "preemptible")}
        for i, rec in enumerate(jobs):
            r = _record(
                rec, tuple(cols),
                {"gpus_per_worker": 1, "min_workers": None, "elastic": False, "preemptible": True},
                f"jobs[{i}]",
            )
            if r["min_workers"] is None:
                r["min_workers"] = r["workers"]
            for k in cols:
                cols[k].append(r[k])
        try:
            index = {jid: i for i, jid in enumerate(cols["id"])}
        except TypeError:
            raise InvalidInputError("jobs: each id must be an integer") from None
        pj: list[int] = []
        ps: list[int] = []
        pw: list[int] = []
        for i, rec in enumerate(placements):
            r = _record(rec, ("job", "server", "workers"), {}, f"placements[{i}]")
            if r["job"] not in index:
                raise InvalidInputError(f"placements[{i}]: unknown job id {r['job']!r}")
            pj.append(index[r["job"]])
            ps.append(r["server"])
            pw.append(r["workers"])
        has_types = any(t is not None for t in stype)
        if has_types and any(t is None for t in stype):
            raise InvalidInputError("servers: gpu_type given for some servers but not all")

        def ints(x: list[Any]) -> Any:
            # no dtype= coercion: 8.5 or "a" must fail validation, not become 8 or raise
            return np.asarray(x) if x else np.zeros(0, dtype=np.int64)

        return cls(
            server_id=ints(sid),
            server_gpus=ints(sgpus),
            placement_job=ints(pj),
            placement_server=ints(ps),
            placement_workers=ints(pw),
            job_id=ints(cols["id"]),
            job_workers=ints(cols["workers"]),
            job_gpus_per_worker=ints(cols["gpus_per_worker"]),
            job_min_workers=ints(cols["min_workers"]),
            job_elastic=ints(cols["elastic"]),  # "no" would be True as dtype=bool
            job_preemptible=ints(cols["preemptible"]),
            n_servers=n_servers,
            server_gpu_type=[str(t) for t in stype] if has_types else None,
            gpu_type=gpu_type,
        )

    def replace(self, **changes: Any) -> ReclaimRequest:
        """A validated copy with some fields changed (e.g. ``n_servers``)."""
        fields = {k: getattr(self, k) for k in (
            "server_id", "server_gpus", "placement_job", "placement_server",
            "placement_workers", "job_id", "job_workers", "job_gpus_per_worker",
            "job_min_workers", "job_elastic", "job_preemptible", "n_servers",
            "server_gpu_type", "gpu_type")}
        unknown = sorted(set(changes) - set(fields))
        if unknown:
            raise InvalidInputError(f"replace: unknown field(s) {unknown}")
        fields.update(changes)
        return ReclaimRequest(**fields)


def _record(
    rec: Mapping[str, Any] | Sequence[Any],
    keys: tuple[str, ...],
    defaults: Mapping[str, Any],
    where: str,
) -> dict[str, Any]:
    if isinstance(rec, Mapping):
        unknown = set(rec) - set(keys)
        if unknown:
            raise InvalidInputError(f"{where}: unknown key(s) {sorted(unknown)}")
        out = {**defaults, **rec}
    else:
        try:
            values = list(rec)
        except TypeError:
            raise InvalidInputError(
                f"{where}: expected a tuple or a mapping, got {type(rec).__name__}"
            ) from None
        if len(values) > len(keys):
            raise InvalidInputError(f"{where}: expected at most {len(keys)} fields")
        out = {**defaults, **dict(zip(keys, values, strict=False))}
    missing = [k for k in keys if k not in out]
    if missing:
        raise InvalidInputError(f"{where}: missing field(s) {missing}")
    return out


# --------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False, kw_only=True)
class ReclaimPlan:
    """Which servers go back, and what happens to the jobs on them.

    Attributes
    ----------
    servers : int64 (k,)
        Server ids in the order taken, ``k = n_servers - shortfall``.
    server_costs : float64 (k,)
        Each server's preemption cost when it was taken (fractions of jobs).
    preempted_jobs : int64
        Job ids preempted, in order.
    scaled_jobs, scaled_new_workers : int64
        Job ids scaled in (and not later preempted), first scale-in order, and
        their final total workers.
    shortfall : int
        Servers asked for but not returnable (0 when ``n_servers`` were taken).
    policy : str
    action_server, action_job, action_kind, action_workers, action_reason : int64
        The actions as arrays (``action_job`` is -1 for RETURN); :attr:`actions`
        is the same as a tuple of :class:`ReclaimAction`.
    """

    servers: I64
    server_costs: F64
    preempted_jobs: I64
    scaled_jobs: I64
    scaled_new_workers: I64
    shortfall: int
    policy: str
    action_server: I64
    action_job: I64
    action_kind: I64
    action_reason: I64
    action_workers: I64

    @cached_property
    def actions(self) -> tuple[ReclaimAction, ...]:
        """Every action in order: a RETURN per server, then the SCALE_IN/PREEMPT on it."""
        kinds = list(ActionKind)
        reasons = list(ReclaimReason)
        return tuple(
            ReclaimAction(s, None if k == ActionKind.RETURN else j, kinds[k], w, reasons[r])
            for s, j, k, w, r in zip(
                self.action_server.tolist(), self.action_job.tolist(),
                self.action_kind.tolist(), self.action_workers.tolist(),
                self.action_reason.tolist(), strict=True,
            )
        )

    @property
    def n_preemptions(self) -> int:
        """Number of jobs preempted."""
        return int(self.preempted_jobs.size)

    @property
    def n_returned(self) -> int:
        """Number of servers returned."""
        return int(self.servers.size)

    def apply_to(self, request: ReclaimRequest) -> ReclaimRequest:
        """The request left after this plan: for chaining reclaims (and for tests).

        Returned servers and their placements are removed, preempted jobs are
        removed (with all their placements), scaled jobs keep their new totals.
        ``n_servers`` and the GPU-type filter are unchanged.  O(m + p + J).

        Raises
        ------
        InvalidInputError
            If the plan does not come from ``request`` (unknown ids).
        """
        keep_srv = np.ones(request.server_id.size, dtype=bool)
        pos, bad = _id_lookup(request.server_id, "server_id")(self.servers)
        _require(not bad.any(), "plan.servers", "server not in the request")
        keep_srv[pos] = False
        find_job = _id_lookup(request.job_id, "job_id")
        keep_job = np.ones(request.job_id.size, dtype=bool)
        pos, bad = find_job(self.preempted_jobs)
        _require(not bad.any(), "plan.preempted_jobs", "job not in the request")
        keep_job[pos] = False
        workers = request.job_workers.copy()
        pos, bad = find_job(self.scaled_jobs)
        _require(not bad.any(), "plan.scaled_jobs", "job not in the request")
        workers[pos] = self.scaled_new_workers
        new_index = np.cumsum(keep_job) - 1
        keep_pl = keep_srv[request._placement_server_index] & keep_job[request.placement_job]
        types = request.server_gpu_type
        return ReclaimRequest(
            server_id=request.server_id[keep_srv],
            server_gpus=request.server_gpus[keep_srv],
            placement_job=new_index[request.placement_job[keep_pl]],
            placement_server=request.placement_server[keep_pl],
            placement_workers=request.placement_workers[keep_pl],
            job_id=request.job_id[keep_job],
            job_workers=workers[keep_job],
            job_gpus_per_worker=request.job_gpus_per_worker[keep_job],
            job_min_workers=request.job_min_workers[keep_job],
            job_elastic=request.job_elastic[keep_job],
            job_preemptible=request.job_preemptible[keep_job],
            n_servers=request.n_servers,
            server_gpu_type=None if types is None else np.asarray(types)[keep_srv],
            gpu_type=request.gpu_type,
        )

    def to_frame(self) -> pd.DataFrame:
        """The actions as a DataFrame (columns server_id, job_id, kind, workers_removed, reason)."""
        import pandas as pd

        return pd.DataFrame({
            "server_id": self.action_server,
            "job_id": pd.Series(self.action_job, dtype="Int64").mask(
                self.action_kind == ActionKind.RETURN
            ),
            "kind": [ActionKind(k).name for k in self.action_kind.tolist()],
            "workers_removed": self.action_workers,
            "reason": [ReclaimReason(r).name for r in self.action_reason.tolist()],
        })


# --------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------
GreedyResult = _ref.GreedyResult
Policy = Callable[[ReclaimRequest, int, str], GreedyResult]


def _state(req: ReclaimRequest) -> _ref.ReclaimState:
    return _ref.ReclaimState(
        req.server_id, req.server_gpus, req.placement_job, req._placement_server_index,
        req.placement_workers, req.job_workers, req.job_gpus_per_worker,
        req.job_min_workers, req.job_elastic, req.job_preemptible,
    )


def _aryl(req: ReclaimRequest, seed: int, backend: str) -> GreedyResult:
    if backend == "reference":
        fn = _ref.reclaim_greedy
    else:
        from aryl._core import _reclaim

        fn = _reclaim.reclaim_greedy
    return fn(
        req.server_id, req.server_gpus, req._server_allowed, req.placement_job,
        req._placement_server_index, req.placement_workers, req.job_workers,
        req.job_gpus_per_worker, req.job_min_workers, req.job_elastic, req.job_preemptible,
        req.n_servers,
    )


def _random(req: ReclaimRequest, seed: int, backend: str) -> GreedyResult:
    rank = np.random.default_rng(seed).permutation(req.server_id.size).tolist()
    return _ref.run_greedy(
        _state(req), req.n_servers, req._server_allowed, lambda st: (rank[st.index],)
    )


def _fewest_jobs(req: ReclaimRequest, seed: int, backend: str) -> GreedyResult:
    return _ref.run_greedy(
        _state(req), req.n_servers, req._server_allowed, lambda st: (st.touched, st.busy, st.id)
    )


def _most_idle(req: ReclaimRequest, seed: int, backend: str) -> GreedyResult:
    return _ref.run_greedy(
        _state(req), req.n_servers, req._server_allowed, lambda st: (-st.idle, st.touched, st.id)
    )


def _exact(req: ReclaimRequest, seed: int, backend: str) -> GreedyResult:
    """Fewest preempted jobs over every feasible set of the largest feasible size.

    Brute force, vectorised over chunks of subsets with a sparse (candidate x
    job) workers matrix, so memory follows the placements.  A job is preempted
    iff its workers on the chosen servers exceed its shed budget (the outcome
    does not depend on the order servers are taken); a set is feasible iff no
    non-preemptible job is preempted.  Ties: fewer jobs scaled in, then the lexicographically
    smallest set of server indices.  The chosen set is applied in Aryl's cost
    order, so costs and actions are comparable with the greedy's.
    """
    from scipy import sparse  # here, not at module level: a replay never needs it (11 MB)

    state = _state(req)
    allowed = req._server_allowed
    cand = [s for s in range(req.server_id.size) if allowed[s] and state.stats(s) is not None]
    jobs = sorted({state.pl_job[q] for s in cand for q in state.server_pl[s]})
    col = {j: c for c, j in enumerate(jobs)}
    # Sparse (candidate x job) workers: a dense table, and a chunk of subsets gathered
    # from it, took gigabytes on a few thousand servers x jobs (e.g. n_servers=1).
    entries = [(r, col[state.pl_job[q]], state.pl_workers[q])
               for r, s in enumerate(cand) for q in state.server_pl[s]]
    ent = np.asarray(entries, dtype=np.int64).reshape(-1, 3)
    load = sparse.csr_matrix((ent[:, 2], (ent[:, 0], ent[:, 1])),
                             shape=(len(cand), len(jobs)), dtype=np.int64)
    shed = np.asarray([state.shed[j] for j in jobs], dtype=np.int64)
    rigid_np = np.asarray([not state.preemptible[j] for j in jobs], dtype=bool)
    chosen: list[int] = []
    for k in range(min(req.n_servers, len(cand)), 0, -1):
        n_sub = math.comb(len(cand), k)
        if n_sub > EXACT_MAX_SUBSETS:
            raise InvalidInputError(
                f"n_servers: policy='exact' would enumerate {n_sub} server sets "
                f"({len(cand)} candidates choose {k}); the limit is {EXACT_MAX_SUBSETS}"
            )
        best: tuple[int, tuple[int, ...]] | None = None
        combos_iter = itertools.combinations(range(len(cand)), k)
        while True:
            chunk = list(itertools.islice(combos_iter, 20_000))
            if not chunk:
                break
            n_c = len(chunk)
            combos = np.asarray(chunk, dtype=np.int64).reshape(n_c, k)
            pick = sparse.csr_matrix(
                (np.ones(n_c * k, dtype=np.int64),
                 (np.repeat(np.arange(n_c), k), combos.ravel())),
                shape=(n_c, len(cand)),
            )
            x = (pick @ load).tocoo()  # workers each job loses, per subset (nonzeros)
            over = x.data > shed[x.col]  # preempted (x == 0 never is: shed >= 0)
            n_over = np.bincount(x.row[over], minlength=n_c)
            n_scaled = np.bincount(x.row[~over], minlength=n_c)
            blocked = np.bincount(x.row[over & rigid_np[x.col]], minlength=n_c) > 0
            score = n_over * (len(jobs) + 1) + n_scaled
            score = np.where(blocked, np.iinfo(np.int64).max, score)
            i = int(np.argmin(score))
            if score[i] != np.iinfo(np.int64).max and (best is None or score[i] < best[0]):
                best = (int(score[i]), tuple(chunk[i]))
        if best is not None:
            chosen = [cand[c] for c in best[1]]
            break
    mask = np.zeros(req.server_id.size, dtype=np.int64)
    mask[chosen] = 1
    out = _ref.run_greedy(state, len(chosen), mask, _ref.aryl_priority)
    return (*out[:-1], req.n_servers - len(chosen))


#: Reclaim policies by name: ``f(request, seed, backend) -> kernel-style result``.
RECLAIM_POLICIES: dict[str, Policy] = {
    "aryl": _aryl,
    "random": _random,
    "fewest-jobs": _fewest_jobs,
    "most-idle": _most_idle,
    "exact": _exact,
}

_BACKENDS = ("native", "reference")


def reclaim(
    request: ReclaimRequest,
    *,
    policy: str = "aryl",
    seed: int = 0,
    backend: str = "native",
) -> ReclaimPlan:
    """Choose ``request.n_servers`` loaned servers to return with the fewest job preemptions.

    Parameters
    ----------
    request : ReclaimRequest
        Validated on construction (see its docstring for shapes and dtypes).
    policy : {"aryl", "random", "fewest-jobs", "most-idle", "exact"}
        ``"aryl"`` is the cost greedy [Aryl]_; the others are comparison
        baselines running the same shrink-or-preempt step.  ``"exact"``
        minimises the number of preempted jobs by enumerating server sets and
        raises above :data:`EXACT_MAX_SUBSETS` sets.
    seed : int
        For ``"random"`` only.
    backend : {"native", "reference"}
        ``"aryl"`` only: the C++ kernel (GIL released) or its Python twin; the
        other policies always run in Python.

    Returns
    -------
    ReclaimPlan
        Servers in the order taken with their cost at that moment, jobs
        preempted, jobs scaled in with their new totals, every action with a
        reason code, and the shortfall (``n_servers`` minus servers returned)
        when too few servers are eligible.  Never hangs or raises for lack of
        eligible servers.

    Raises
    ------
    InvalidInputError
        Unknown ``policy`` or ``backend``, a non-int ``seed`` (or a negative one
        with ``"random"``), ``"exact"`` on a
        request too large, or a request that is not a :class:`ReclaimRequest`.

    Notes
    -----
    Cost of a server: the sum, over jobs on it that would be preempted, of the
    fraction of the job's workers (= GPUs) on it; workers an elastic job can
    shed while staying at or above its base cost 0.  Ties: cost (rounded to the
    nearest 1e-9), then fewer jobs touched, fewer busy GPUs, lower server id.
    Complexity (``"aryl"``): O(m + p + J) set-up, then per server taken
    O(log m) plus the jobs touched times their servers' placements.

    Examples
    --------
    >>> req = ReclaimRequest.from_records(
    ...     servers=[(1, 8), (2, 8)], jobs=[(10, 1), (20, 8)],
    ...     placements=[(10, 1, 1), (20, 2, 8)], n_servers=1)
    >>> plan = reclaim(req)
    >>> plan.servers.tolist(), plan.preempted_jobs.tolist()
    ([1], [10])
    """
    if not isinstance(request, ReclaimRequest):
        raise InvalidInputError(
            f"request: expected a ReclaimRequest, got {type(request).__name__}"
        )
    fn = RECLAIM_POLICIES.get(policy) if isinstance(policy, str) else None
    if fn is None:
        raise InvalidInputError(f"policy: unknown {policy!r}; known: {sorted(RECLAIM_POLICIES)}")
    if backend not in _BACKENDS:
        raise InvalidInputError(f"backend: unknown {backend!r}; known: {list(_BACKENDS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InvalidInputError(f"seed: expected an int, got {type(seed).__name__}")
    if policy == "random" and seed < 0:
        raise InvalidInputError(f"seed: must be >= 0 for policy='random', got {seed}")
    res = fn(request, int(seed), backend)
    plan = _build_plan(request, res, policy)
    if plan.shortfall:
        logger.debug(
            "reclaim(%s): %d of %d servers returned, shortfall %d",
            policy, plan.n_returned, request.n_servers, plan.shortfall,
        )
    return plan


def _build_plan(req: ReclaimRequest, res: GreedyResult, policy: str) -> ReclaimPlan:
    taken, cost, a_s, a_j, a_k, a_w, a_r, pre, scaled, scaled_w, shortfall = res
    sid, jid = req.server_id, req.job_id
    job_of = jid.take(np.maximum(a_j, 0)) if jid.size else np.zeros(a_j.size, np.int64)
    return ReclaimPlan(
        servers=sid.take(taken),
        server_costs=cost,
        preempted_jobs=jid.take(pre),
        scaled_jobs=jid.take(scaled),
        scaled_new_workers=scaled_w,
        shortfall=int(shortfall),
        policy=policy,
        action_server=sid.take(a_s),
        action_job=np.where(a_j >= 0, job_of, -1),
        action_kind=a_k,
        action_reason=a_r,
        action_workers=a_w,
    )

