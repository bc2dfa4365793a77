"""JSON form of :class:`ClusterState` and :class:`SchedulePlan` (any language can call the pass).

``aryl schema state|plan`` prints the JSON Schemas (:mod:`aryl.scheduling.schema`);
``aryl plan STATE.json`` reads a state and prints the plan.  Servers and jobs are
named by their ids in JSON and by dense indexes in Python.  Floats round-trip
exactly (shortest repr); ``null`` stands for "never" / infinity where a field
allows it.

State document (``schema_version`` 1)::

    {"schema_version": 1, "now_s": 3600.0,
     "config": {"rescale_pause_s": 30.0, ...},          # optional, SchedulerConfig fields
     "servers": [{"id": "t0", "role": "training", "gpus": 8,
                  "pool": "training", "gpu_type": "V100"},
                 {"id": "i0", "role": "inference", "gpus": 8, "status": "idle",
                  "reclaimed_s": null}],
     "inference": {"servers_needed": 0, "reclaim_deadline_s": null,
                   "reclaim_requests": [{"deadline_s": 4200.0, "servers": 1}]},
     "jobs": [{"id": "a", "arrival_s": 0.0, "gpus_per_worker": 1, "ref_workers": 4,
               "min_workers": 2, "max_workers": 8, "elastic": true, "alpha": 0.05,
               "status": "running", "remaining_s": 5000.0,
               "placement": [{"server": "t0", "workers": 4}]}],
     "running": ["a"],
     "elastic_memo": {"free_gpus": -1, "loaned_servers": -1}}

``jobs`` lists the active jobs (queued and running) in arrival order: their
position breaks every tie between jobs (equal SJF estimates, equal arrival
times); a job listed before an earlier one is refused, naming the pair
(:meth:`ClusterState.validate`, which also refuses times after ``now_s`` and
``servers_needed`` above the inference servers).  ``running`` lists the running
jobs' ids in the order they started (the elastic phase's order); when absent,
the order of ``jobs``.  Placements pass :meth:`ClusterState.check_placement`,
the check :meth:`SchedulePlan.apply` makes of every plan's placements.

Both documents are strict JSON (``json.dumps(doc, allow_nan=False)``): every
infinity is ``null``.  A speed model's table is ``"bundled"`` or written whole
(:meth:`aryl.speeds.SpeedTable.to_dict`), so that a state read back decides
exactly as the one written.

``inference.reclaim_requests`` (optional, default none): the inference side's
pending requests for servers back, each rise of its demand with its own
deadline (ordered by deadline on reading, ties in document order).
``inference.reclaim_deadline_s`` is the older form, still read: when it has
come, every server the inference side lacks is due.  The plan document carries
``next_wakeup_s``: when to call the pass again if nothing else happens first
(``null``: no timed rule pending).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aryl.errors import InvalidInputError
from aryl.scheduling.plan import Reason, SchedulePlan
from aryl.scheduling.state import (
    JOB_STATUS_NAMES,
    LOANED,
    MAX_WORKERS,
    QUEUED,
    RUNNING,
    SERVER_STATUS_NAMES,
    TRAINING,
    ClusterState,
    Placement,
    SchedulerConfig,
    is_finite_number,
)

__all__ = [
    "SCHEMA_VERSION",
    "plan_from_json",
    "plan_to_json",
    "read_state",
    "state_from_json",
    "state_to_json",
]

SCHEMA_VERSION = 1

_SERVER_KEYS = {"id", "role", "gpus", "pool", "gpu_type", "status", "reclaimed_s"}
_JOB_KEYS = {
    "id", "family", "arrival_s", "gpus_per_worker", "ref_workers", "min_workers", "max_workers",
    "elastic", "alpha", "status", "remaining_s", "progress_at_s", "checkpoint_remaining_s",
    "next_checkpoint_s", "restarted", "queued_since_s", "waited_s", "attained_gpu_s",
    "attained_at_s", "placement",
}
_TOP_KEYS = {
    "schema_version", "now_s", "config", "speed_model", "servers", "inference", "jobs",
    "running", "elastic_memo",
}


def _unknown(where: str, got: Mapping[str, Any], known: set[str]) -> None:
    extra = sorted(set(got) - known)
    if extra:
        import difflib

        hints = []
        for k in extra:
            close = difflib.get_close_matches(k, sorted(known), n=1)
            hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise InvalidInputError(f"{where}: unknown field(s) {', '.join(hints)}")


def _get(where: str, d: Mapping[str, Any], key: str, kind: str, default: Any = ...,
         lo: int | None = None, hi: int | None = None) -> Any:
    """Field ``key`` of ``d`` checked against ``kind`` (int, number, number_or_null, bool,
    str); an int also against ``[lo, hi]`` when given."""
    if key not in d:
        if default is ...:
            raise InvalidInputError(f"{where}.{key}: required field missing")
        return default
    v = d[key]
    name = f"{where}.{key}"
    if kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise InvalidInputError(f"{name}: must be an integer, got {v!r}")
        if lo is not None and hi is not None and not lo <= v <= hi:
            raise InvalidInputError(f"{name}: must be an integer in [{lo}, {hi}], got {v!r}")
    elif kind in ("number", "number_or_null"):
        if v is None and kind == "number_or_null":
            return math.inf
        if not is_finite_number(v):
            raise InvalidInputError(f"{name}: must be a finite number, got {v!r}")
        v = float(v)
    elif kind == "bool":
        if not isinstance(v, bool):
            raise InvalidInputError(f"{name}: must be true or false, got {v!r}")
    elif kind == "str" and (not isinstance(v, str) or not v):
        raise InvalidInputError(f"{name}: must be a non-empty string, got {v!r}")
    return v


def _reclaim_requests(v: Any) -> list[tuple[float, int]]:
    """``state.inference.reclaim_requests``: checked, ordered by deadline (stable)."""
    where = "state.inference.reclaim_requests"
    if not isinstance(v, list):
        raise InvalidInputError(f"{where}: must be a list")
    out: list[tuple[float, int]] = []
    for i, r in enumerate(v):
        w = f"{where}[{i}]"
        if not isinstance(r, Mapping):
            raise InvalidInputError(f"{w}: must be an object")
        _unknown(w, r, {"deadline_s", "servers"})
        d = _get(w, r, "deadline_s", "number")
        n = _get(w, r, "servers", "int", lo=1, hi=MAX_WORKERS)
        out.append((d, n))
    out.sort(key=lambda r: r[0])
    return out


def _num_or_null(x: float) -> float | None:
    return None if math.isinf(x) else x


def state_from_json(doc: Mapping[str, Any] | str) -> ClusterState:
    """A :class:`ClusterState` from its JSON document (a dict or a JSON string).

    Raises
    ------
    InvalidInputError
        Malformed JSON or any invalid field; the message names the item and the
        field (``jobs[3] ('a').placement[0].server: unknown server 'x'``).
    """
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"state: not valid JSON ({exc})") from None
    if not isinstance(doc, Mapping):
        raise InvalidInputError("state: the document must be a JSON object")
    _unknown("state", doc, _TOP_KEYS)
    _check_version("state", doc)
    now = _get("state", doc, "now_s", "number")
    cfg_doc = doc.get("config", {})
    if not isinstance(cfg_doc, Mapping):
        raise InvalidInputError("state.config: must be an object")
    _unknown("state.config", cfg_doc, set(SchedulerConfig.field_names()))
    cfg = dict(cfg_doc)
    if "starvation_bound_s" in cfg and cfg["starvation_bound_s"] is None:
        cfg["starvation_bound_s"] = math.inf  # null: no bound (JSON has no Infinity)
    try:
        config = SchedulerConfig(**cfg)
    except InvalidInputError as exc:
        raise InvalidInputError(f"state.{exc}") from None
    st = ClusterState(now_s=now, config=config, speeds=_speed_model(doc.get("speed_model")))
    servers = doc.get("servers")
    if not isinstance(servers, list) or not servers:
        raise InvalidInputError("state.servers: must be a non-empty list")
    server_index: dict[str, int] = {}
    for i, sd in enumerate(servers):
        where = f"servers[{i}]"
        if not isinstance(sd, Mapping):
            raise InvalidInputError(f"{where}: must be an object")
        _unknown(where, sd, _SERVER_KEYS)
        sid = _get(where, sd, "id", "str")
        where = f"servers[{i}] ({sid!r})"
        if sid in server_index:
            raise InvalidInputError(f"{where}.id: duplicate server id")
        role = _get(where, sd, "role", "str")
        status_name = sd.get("status")
        status: int | None = None
        if status_name is not None:
            if status_name not in SERVER_STATUS_NAMES:
                raise InvalidInputError(
                    f"{where}.status: must be one of {list(SERVER_STATUS_NAMES)}, "
                    f"got {status_name!r}"
                )
            status = SERVER_STATUS_NAMES.index(status_name)
        reclaimed = sd.get("reclaimed_s")
        server_index[sid] = st.add_server(
            sid,
            role=role,
            gpus=_get(where, sd, "gpus", "int"),
            pool=_get(where, sd, "pool", "str", None),
            gpu_type=_get(where, sd, "gpu_type", "str", "default"),
            status=status,
            reclaimed_s=-math.inf if reclaimed is None else _get(
                where, sd, "reclaimed_s", "number"
            ),
        )
    inf = doc.get("inference", {})
    if not isinstance(inf, Mapping):
        raise InvalidInputError("state.inference: must be an object")
    _unknown("state.inference", inf, {"servers_needed", "reclaim_deadline_s", "reclaim_requests"})
    needed = _get("state.inference", inf, "servers_needed", "int", 0)
    if needed < 0:
        raise InvalidInputError("state.inference.servers_needed: must be >= 0")
    st.servers_needed = needed
    st.reclaim_deadline_s = _get("state.inference", inf, "reclaim_deadline_s", "number_or_null",
                                 math.inf)
    st.reclaim_requests = _reclaim_requests(inf.get("reclaim_requests", []))
    jobs = doc.get("jobs", [])
    if not isinstance(jobs, list):
        raise InvalidInputError("state.jobs: must be a list")
    seen: set[str] = set()
    pending: list[tuple[int, Placement]] = []
    for i, jd in enumerate(jobs):
        where = f"jobs[{i}]"
        if not isinstance(jd, Mapping):
            raise InvalidInputError(f"{where}: must be an object")
        _unknown(where, jd, _JOB_KEYS)
        jid = _get(where, jd, "id", "str")
        where = f"jobs[{i}] ({jid!r})"
        if jid in seen:
            raise InvalidInputError(f"{where}.id: duplicate job id")
        seen.add(jid)
        status_name = _get(where, jd, "status", "str")
        if status_name not in ("queued", "running"):
            raise InvalidInputError(
                f"{where}.status: must be 'queued' or 'running' (list only active jobs), "
                f"got {status_name!r}"
            )
        ref = _get(where, jd, "ref_workers", "int")
        elastic = _get(where, jd, "elastic", "bool", False)
        j = st.add_job(
            jid,
            arrival_s=_get(where, jd, "arrival_s", "number"),
            gpus_per_worker=_get(where, jd, "gpus_per_worker", "int"),
            ref_workers=ref,
            remaining_s=_get(where, jd, "remaining_s", "number"),
            min_workers=_get(where, jd, "min_workers", "int", ref),
            max_workers=_get(where, jd, "max_workers", "int", ref),
            elastic=elastic,
            alpha=_get(where, jd, "alpha", "number", 0.05),
            family=jd.get("family"),
        )
        rem = st.remaining_s[j]
        st.checkpoint_remaining_s[j] = _get(where, jd, "checkpoint_remaining_s", "number", rem)
        st.next_checkpoint_s[j] = _get(where, jd, "next_checkpoint_s", "number_or_null",
                                       math.inf)
        st.restarted[j] = _get(where, jd, "restarted", "bool", False)
        st.queued_since_s[j] = _get(where, jd, "queued_since_s", "number", st.arrival_s[j])
        st.waited_s[j] = _get(where, jd, "waited_s", "number", 0.0)
        if st.waited_s[j] < 0:
            raise InvalidInputError(f"{where}.waited_s: must be >= 0")
        st.attained_gpu_s[j] = _get(where, jd, "attained_gpu_s", "number", 0.0)
        st.attained_at_s[j] = _get(where, jd, "attained_at_s", "number", now)
        st.progress_at_s[j] = _get(where, jd, "progress_at_s", "number", now)
        if st.attained_gpu_s[j] < 0:
            raise InvalidInputError(f"{where}.attained_gpu_s: must be >= 0")
        if status_name == "queued":
            if "placement" in jd:
                raise InvalidInputError(f"{where}.placement: a queued job has no placement")
            st.status[j] = QUEUED
            st.queued[j] = None
            continue
        place_doc = jd.get("placement")
        if not isinstance(place_doc, list) or not place_doc:
            raise InvalidInputError(f"{where}.placement: a running job needs a non-empty list")
        st.status[j] = RUNNING
        st.running[j] = None
        pending.append((j, _placement_from_json(f"{where}.placement", place_doc, server_index)))
    # every running job's placement through the check every plan's placements pass
    # (ClusterState.check_placement), on the GPUs the jobs before it left free
    free = [st.server_gpus[s] if st.server_status[s] in (TRAINING, LOANED) else 0
            for s in range(st.n_servers)]
    for j, place in pending:
        st.check_placement(j, place, free, f"jobs[{j}] ({st.job_id[j]!r}).placement")
        g = st.gpus_per_worker[j]
        for s, k in place.items():
            free[s] -= k * g
        w_total = sum(place.values())
        st.placement[j] = place
        st.workers[j] = w_total
        st.speed[j] = st.speed_at(j, w_total, place)
    order = doc.get("running")
    if order is not None:
        if not isinstance(order, list):
            raise InvalidInputError("state.running: must be a list of job ids")
        index = {st.job_id[j]: j for j in st.running}
        ranked: dict[int, None] = {}
        for i, x in enumerate(order):
            if not isinstance(x, str) or x not in index:
                raise InvalidInputError(
                    f"state.running[{i}]: {x!r} is not a running job of state.jobs"
                )
            if index[x] in ranked:
                raise InvalidInputError(f"state.running[{i}]: {x!r} listed twice")
            ranked[index[x]] = None
        if len(ranked) != len(st.running):
            missing = [st.job_id[j] for j in st.running if j not in ranked]
            raise InvalidInputError(f"state.running: running job(s) missing: {missing}")
        st.running = ranked
    memo = doc.get("elastic_memo")
    if memo is not None:
        if not isinstance(memo, Mapping):
            raise InvalidInputError("state.elastic_memo: must be an object")
        _unknown("state.elastic_memo", memo, {"free_gpus", "loaned_servers"})
        st.elastic_memo = _memo("state.elastic_memo", memo)
    st.rebuild_indexes()
    st.validate()
    return st


#: Largest value of an elastic-memo field (the compiled pass keeps them in int64).
MAX_MEMO = 1 << 62


def _memo(where: str, memo: Any) -> tuple[int, int]:
    """The elastic phase's memo ``(free GPUs, loaned servers)``; ``-1`` each: none."""
    if not isinstance(memo, Mapping):
        raise InvalidInputError(f"{where}: must be an object")
    _unknown(where, memo, {"free_gpus", "loaned_servers"})
    return (_get(where, memo, "free_gpus", "int", lo=-1, hi=MAX_MEMO),
            _get(where, memo, "loaned_servers", "int", lo=-1, hi=MAX_MEMO))


def _check_version(where: str, doc: Mapping[str, Any]) -> None:
    version = doc.get("schema_version", SCHEMA_VERSION)
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        raise InvalidInputError(
            f"{where}.schema_version: this aryl reads version {SCHEMA_VERSION}, got {version!r}"
        )


def _placement_from_json(where: str, doc: Any, server_index: Mapping[str, int]) -> Placement:
    """``[{"server": id, "workers": n}, ...]`` as server index -> workers (types and ids;
    :meth:`ClusterState.check_placement` checks the rest)."""
    if not isinstance(doc, list):
        raise InvalidInputError(f"{where}: must be a list")
    place: Placement = {}
    for k, pd_ in enumerate(doc):
        pw = f"{where}[{k}]"
        if not isinstance(pd_, Mapping):
            raise InvalidInputError(f"{pw}: must be an object")
        _unknown(pw, pd_, {"server", "workers"})
        sid = _get(pw, pd_, "server", "str")
        if sid not in server_index:
            raise InvalidInputError(f"{pw}.server: unknown server {sid!r}")
        s = server_index[sid]
        w = _get(pw, pd_, "workers", "int")
        if w < 1:
            raise InvalidInputError(f"{pw}.workers: must be >= 1")
        if s in place:
            raise InvalidInputError(f"{pw}.server: server {sid!r} listed twice")
        place[s] = w
    return place


def _speed_model(doc: Any) -> Any:
    """The state's speed model from its document (None: every GPU type equally fast)."""
    if doc is None:
        return None
    from aryl.scheduling.speed import SpeedModel

    if not isinstance(doc, Mapping):
        raise InvalidInputError("state.speed_model: must be an object or null")
    _unknown("state.speed_model", doc,
             {"reference_gpu_type", "factors", "table", "relative_speed_override"})
    table = None
    raw = doc.get("table")
    if raw is not None:
        from aryl.speeds import SpeedTable

        if raw == "bundled":
            table = SpeedTable.bundled()
        elif isinstance(raw, Mapping):
            table = SpeedTable.from_dict(raw, where="state.speed_model.table")
        else:
            raise InvalidInputError(
                f"state.speed_model.table: must be 'bundled', a table object or null, "
                f"got {raw!r}"
            )
    for key in ("factors", "relative_speed_override"):
        d = doc.get(key, {})
        if not isinstance(d, Mapping):
            raise InvalidInputError(f"state.speed_model.{key}: must be an object")
        for t, v in d.items():
            if not is_finite_number(v):
                raise InvalidInputError(
                    f"state.speed_model.{key}[{t!r}]: must be a finite number > 0, got {v!r}"
                )
    try:
        return SpeedModel(
            _get("state.speed_model", doc, "reference_gpu_type", "str", "default"),
            factors=doc.get("factors"), table=table,
            relative_speed_override=doc.get("relative_speed_override"),
        )
    except InvalidInputError as exc:
        raise InvalidInputError(f"state.speed_model: {exc}") from None


def read_state(path: str | Path) -> ClusterState:
    """:func:`state_from_json` of a file; errors name the file."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InvalidInputError(f"{p}: file does not exist") from None
    except OSError as exc:
        raise InvalidInputError(f"{p}: cannot read ({exc})") from None
    try:
        return state_from_json(text)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{p}: {exc}") from None


def _placement_json(st: ClusterState, place: Placement) -> list[dict[str, Any]]:
    return [{"server": st.server_id[s], "workers": k} for s, k in place.items()]


def state_to_json(st: ClusterState) -> dict[str, Any]:
    """The JSON document of ``st`` (active jobs only, in job-index order).

    ``state_from_json(state_to_json(st))`` decides exactly as ``st`` does, and
    the document is strict JSON (``json.dumps(doc, allow_nan=False)`` writes it:
    every infinity is ``null``).

    Raises
    ------
    InvalidInputError
        A state its reader would refuse (:meth:`ClusterState.validate`: jobs out
        of arrival order, a job that arrives after ``now_s`` ...).
    """
    st.validate()
    servers = []
    n_train = len(st.training_servers)
    for s in range(st.n_servers):
        d: dict[str, Any] = {
            "id": st.server_id[s],
            "role": "training" if s < n_train else "inference",
            "gpus": st.server_gpus[s],
            "pool": st.server_pool[s],
            "gpu_type": st.server_gpu_type[s],
        }
        if s >= n_train:
            d["status"] = SERVER_STATUS_NAMES[st.server_status[s]]
            d["reclaimed_s"] = None if math.isinf(st.server_reclaimed_s[s]) else (
                st.server_reclaimed_s[s]
            )
        servers.append(d)
    jobs = []
    for j in sorted([*st.queued, *st.running]):
        d = {
            "id": st.job_id[j],
            "arrival_s": st.arrival_s[j],
            "gpus_per_worker": st.gpus_per_worker[j],
            "ref_workers": st.ref_workers[j],
            "min_workers": st.min_workers[j],
            "max_workers": st.max_workers[j],
            "elastic": st.elastic[j],
            "alpha": st.alpha[j],
            "family": st.family[j],
            "status": JOB_STATUS_NAMES[st.status[j]],
            "remaining_s": st.remaining_s[j],
            "progress_at_s": st.progress_at_s[j],
            "checkpoint_remaining_s": st.checkpoint_remaining_s[j],
            "next_checkpoint_s": _num_or_null(st.next_checkpoint_s[j]),
            "restarted": st.restarted[j],
            "queued_since_s": st.queued_since_s[j],
            "waited_s": st.waited_s[j],
            "attained_gpu_s": st.attained_gpu_s[j],
            "attained_at_s": st.attained_at_s[j],
        }
        place = st.placement[j]
        if place is not None:
            d["placement"] = _placement_json(st, place)
        jobs.append(d)
    return {
        "schema_version": SCHEMA_VERSION,
        "now_s": st.now_s,
        "config": _config_json(st.config),
        "speed_model": None if st.speeds is None else st.speeds.to_dict(),
        "servers": servers,
        "inference": {
            "servers_needed": st.servers_needed,
            "reclaim_deadline_s": _num_or_null(st.reclaim_deadline_s),
            "reclaim_requests": [{"deadline_s": d, "servers": n}
                                 for d, n in st.reclaim_requests],
        },
        "jobs": jobs,
        "running": [st.job_id[j] for j in st.running],
        "elastic_memo": {"free_gpus": st.elastic_memo[0], "loaned_servers": st.elastic_memo[1]},
    }


def _config_json(config: SchedulerConfig) -> dict[str, Any]:
    d = config.to_dict()
    d["starvation_bound_s"] = _num_or_null(d["starvation_bound_s"])  # inf: no bound
    return d


def plan_to_json(plan: SchedulePlan, st: ClusterState) -> dict[str, Any]:
    """The JSON document of ``plan`` (made for ``st``), with server and job ids."""
    sid, jid = st.server_id, st.job_id

    def act(j: int, place: Placement | None, reason: Reason) -> dict[str, Any]:
        d: dict[str, Any] = {"job": jid[j], "reason": reason.label}
        if place is not None:
            d["placement"] = _placement_json(st, place)
        return d

    return {
        "schema_version": SCHEMA_VERSION,
        "now_s": plan.now_s,
        "reclaim": {
            "actions": [act(j, p, r) for j, p, r in plan.reclaim_actions],
            "servers": [sid[s] for s in plan.reclaimed_servers],
            "shortfall": plan.reclaim_shortfall,
        },
        "borrow": [{"server": sid[s], "reason": r.label} for s, r in plan.borrowed_servers],
        "preempt": [act(j, None, r) for j, r in plan.preemptions],
        "resize": [act(j, p, r) for j, p, r in plan.resizes],
        "start": [act(j, p, r) for j, p, r in plan.starts],
        "return": [{"server": sid[s], "reason": r.label} for s, r in plan.returned_servers],
        "elastic_memo": {"free_gpus": plan.elastic_memo[0],
                         "loaned_servers": plan.elastic_memo[1]},
        "next_wakeup_s": _num_or_null(plan.next_wakeup_s),
    }


def plan_from_json(doc: Mapping[str, Any] | str, st: ClusterState) -> SchedulePlan:
    """A :class:`SchedulePlan` for ``st`` from its JSON document (ids mapped to indexes).

    Strict like :func:`state_from_json`: every field the schema requires, no
    unknown field, ids of ``st``'s servers and jobs, reason labels, placements
    that list each server once.  Whether the actions fit ``st`` is checked when
    the plan is applied (:meth:`SchedulePlan.apply`, the reader's own placement
    check).  ``plan_to_json(plan_from_json(d, st), st) == d`` for every document
    ``plan_to_json`` writes.

    Raises
    ------
    InvalidInputError
        Malformed document, unknown ids or reasons; the message names the field
        (``plan.start[0].placement[1].server: server 't0' listed twice``).
    """
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"plan: not valid JSON ({exc})") from None
    if not isinstance(doc, Mapping):
        raise InvalidInputError("plan: the document must be a JSON object")
    _unknown("plan", doc, {"schema_version", "now_s", "reclaim", "borrow", "preempt", "resize",
                           "start", "return", "elastic_memo", "next_wakeup_s"})
    _check_version("plan", doc)
    servers = {x: i for i, x in enumerate(st.server_id)}
    jobs = {x: i for i, x in enumerate(st.job_id)}
    reasons = {r.label: r for r in Reason}

    def lst(where: str, d: Mapping[str, Any], key: str) -> list[Any]:
        if key not in d:
            raise InvalidInputError(f"{where}.{key}: required field missing")
        v = d[key]
        if not isinstance(v, list):
            raise InvalidInputError(f"{where}.{key}: must be a list, got {v!r}")
        return v

    def obj(where: str, x: Any, keys: set[str]) -> Mapping[str, Any]:
        if not isinstance(x, Mapping):
            raise InvalidInputError(f"{where}: must be an object")
        _unknown(where, x, keys)
        return x

    def server(where: str, x: Any) -> int:
        if not isinstance(x, str) or x not in servers:
            raise InvalidInputError(f"{where}: unknown server {x!r}")
        return servers[x]

    def job(where: str, d: Mapping[str, Any]) -> int:
        x = _get(where, d, "job", "str")
        if x not in jobs:
            raise InvalidInputError(f"{where}.job: unknown job {x!r}")
        return jobs[x]

    def reason(where: str, d: Mapping[str, Any]) -> Reason:
        x = _get(where, d, "reason", "str")
        if x not in reasons:
            raise InvalidInputError(f"{where}.reason: unknown reason {x!r}")
        return reasons[x]

    plan = SchedulePlan(now_s=_get("plan", doc, "now_s", "number"))
    rec = obj("plan.reclaim", doc.get("reclaim"), {"actions", "servers", "shortfall"})
    for i, a in enumerate(lst("plan.reclaim", rec, "actions")):
        w = f"plan.reclaim.actions[{i}]"
        a = obj(w, a, {"job", "placement", "reason"})
        plan.reclaim_actions.append((
            job(w, a),
            _placement_from_json(f"{w}.placement", a["placement"], servers)
            if "placement" in a else None,
            reason(w, a),
        ))
    plan.reclaimed_servers = [server(f"plan.reclaim.servers[{i}]", x)
                              for i, x in enumerate(lst("plan.reclaim", rec, "servers"))]
    plan.reclaim_shortfall = _get("plan.reclaim", rec, "shortfall", "int", lo=0,
                                  hi=st.n_servers)
    for key, target in (("borrow", plan.borrowed_servers), ("return", plan.returned_servers)):
        for i, a in enumerate(lst("plan", doc, key)):
            w = f"plan.{key}[{i}]"
            a = obj(w, a, {"server", "reason"})
            target.append((server(f"{w}.server", _get(w, a, "server", "str")), reason(w, a)))
    for i, a in enumerate(lst("plan", doc, "preempt")):
        w = f"plan.preempt[{i}]"
        a = obj(w, a, {"job", "reason"})
        plan.preemptions.append((job(w, a), reason(w, a)))
    for key, target2 in (("resize", plan.resizes), ("start", plan.starts)):
        for i, a in enumerate(lst("plan", doc, key)):
            w = f"plan.{key}[{i}]"
            a = obj(w, a, {"job", "placement", "reason"})
            if "placement" not in a:
                raise InvalidInputError(f"{w}.placement: required field missing")
            target2.append((job(w, a), _placement_from_json(f"{w}.placement", a["placement"],
                                                            servers), reason(w, a)))
    memo = doc.get("elastic_memo")
    if memo is not None:
        plan.elastic_memo = _memo("plan.elastic_memo", memo)
    plan.next_wakeup_s = _get("plan", doc, "next_wakeup_s", "number_or_null", math.inf)
    return plan
