"""The Aryl controller: a level-triggered loop around :func:`aryl.schedule`.

One *pass* (:meth:`Controller.run_once`):

1. **read** the cluster: Nodes, TrainingJobs, their worker pods, the ConfigMaps
   ``aryl-scheduler-state`` (the last decision), ``aryl-inference`` (servers needed),
   ``aryl-config`` (knobs) and, with a virtual clock, ``aryl-clock`` — from the cache
   (:mod:`aryl.k8s.informer`: listed once, then watched) once it has seen this
   controller's own last writes and those an announcing ConfigMap names (the freshness
   rule), or with four lists (``watch=False``);
2. **finish applying** the last decision if a previous controller stopped half-way
   (:meth:`reconcile`, idempotent);
3. **decide** when due: the state of the last decision (a ClusterState JSON document,
   docs/integration.md) plus what happened since (jobs whose pods succeeded finish, new
   jobs are queued, the inference need is read), one :func:`aryl.schedule`, its
   ``SchedulePlan`` applied to the state; the new decision (state, desired pods per job,
   Events) is written to ``aryl-scheduler-state`` in **one** update guarded by the
   ConfigMap's resourceVersion (a stale or second controller gets 409 and writes
   nothing);
4. **apply** it (:meth:`reconcile`): inference nodes lent are untainted and labelled,
   reclaimed ones tainted and cordoned; pods not in the decision are evicted (on a
   reclaimed node) or deleted; missing pods are created under deterministic names and
   bound to their node through the Binding subresource; job statuses and Events written;
   the decision marked applied.

A controller killed at any instant restarts from what the API server holds: either the
decision was written (it is applied again; creating a pod that exists, binding a bound pod
or creating an Event again are no-ops) or it was not (it is made again from the same
state: the same plan).  :meth:`Controller.run` adds leader election through a
``coordination.k8s.io/v1`` Lease and backoff when the API server does not answer.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import logging
import math
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aryl.errors import ArylError, InvalidInputError
from aryl.k8s.informer import Cache, parse_after
from aryl.k8s.kube import ApiError, Kube
from aryl.k8s.objects import (
    ANN_NODE,
    CLOCK_CM,
    CONFIG_CM,
    GROUP,
    INFERENCE_CM,
    KIND,
    LABEL_JOB,
    LABEL_LOANED,
    LEASE,
    PLURAL,
    STATE_CM,
    TAINT_KEY,
    VERSION,
    JobSpec,
    NodeInfo,
    SpecError,
    parse_job,
    parse_node,
    worker_pod,
)
from aryl.scheduling import SchedulerConfig, schedule
from aryl.scheduling.jsonio import state_from_json, state_to_json

__all__ = ["Controller", "ControllerOptions", "PassResult"]

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Unschedulable")
_TAINT = {"key": TAINT_KEY, "value": "serving", "effect": "NoSchedule"}
RECORD_KEY = "record.json.gz"


@dataclass
class ControllerOptions:
    """How a controller runs.

    Attributes
    ----------
    namespace : str
        Namespace of the jobs, pods, Events, ConfigMaps and Lease.
    identity : str
        Holder identity in the Lease (default the host name: a pod's name in a Deployment,
        and the same for successive ``--once`` runs on one machine).
    virtual_clock : bool
        Read "now" from the ConfigMap ``aryl-clock`` (``data.nowS``, seconds) and make one
        decision per value written there (the test harness's clock); else the wall clock
        and a decision whenever the inputs changed or ``resync_s`` passed.
    policy : str
        Scheduling policy (``aryl`` by default; any of ``aryl replay --policy``).
    poll_s : float
        Seconds between passes of :meth:`Controller.run`.
    resync_s : float
        Wall clock: decide at least this often even when nothing changed.
    leader_election : bool
        Take part in the Lease election (only the leader writes).
    lease_duration_s : float
        A leader that has not renewed for this long is replaced.
    watch : bool
        Keep a cache (list once, then watch; :mod:`aryl.k8s.informer`) instead of listing
        every collection every pass.
    cache_timeout_s : float
        How long a pass waits for the cache to have seen the writes it depends on (the
        freshness rule) before it fails and the watches list again.
    """

    namespace: str = "default"
    identity: str = field(default_factory=socket.gethostname)
    virtual_clock: bool = False
    policy: str = "aryl"
    poll_s: float = 1.0
    resync_s: float = 60.0
    leader_election: bool = True
    lease_duration_s: float = 15.0
    watch: bool = True
    cache_timeout_s: float = 10.0


@dataclass
class PassResult:
    """What one pass did: ``decided`` (a new decision was made and applied), its number
    and the seconds spent reading, deciding (``aryl.schedule`` alone in ``schedule_s``)
    and applying."""

    decided: bool = False
    pass_no: int = 0
    read_s: float = 0.0
    decide_s: float = 0.0
    schedule_s: float = 0.0
    apply_s: float = 0.0
    n_actions: int = 0


@dataclass
class Snapshot:
    """One read of the cluster."""

    nodes: list[NodeInfo]
    node_objs: dict[str, dict[str, Any]]
    jobs: dict[str, dict[str, Any]]
    pods: dict[str, dict[str, Any]]
    record: dict[str, Any] | None
    record_rv: str | None
    config: dict[str, Any]
    servers_needed: int | None
    clock_s: float | None


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_iso(s: str) -> float:
    return dt.datetime.strptime(s[:26].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=dt.timezone.utc).timestamp()


def _pod_node(pod: dict[str, Any]) -> str | None:
    return (pod.get("spec") or {}).get("nodeName")


def _pod_phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", "Pending"))


def _terminating(pod: dict[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _families() -> tuple[str, ...]:
    from aryl.speeds import SpeedTable

    return tuple(SpeedTable.bundled().families)


class Controller:
    """The Aryl controller over one namespace (see the module docstring).

    Parameters
    ----------
    kube : Kube
        The API connection (its namespace is the controller's).
    options : ControllerOptions
    """

    def __init__(self, kube: Kube, options: ControllerOptions | None = None) -> None:
        self.kube = kube
        self.opts = options or ControllerOptions(namespace=kube.namespace)
        self.ns = kube.namespace
        self.families = _families()
        self._reported_invalid: dict[str, str] = {}
        self.cache: Cache | None = None

    # ------------------------------------------------------------------ reading
    def read(self) -> Snapshot:
        """Every object a pass needs: from the cache (``options.watch``), else four lists.

        Raises
        ------
        ApiError
            A list failed, or the cache did not become fresh (the freshness rule,
            :mod:`aryl.k8s.informer`) within ``options.cache_timeout_s``.
        """
        if not self.opts.watch:
            return self._list_all()
        c = self._cache()
        own = self.kube.writes.peek()
        # the ConfigMaps first: the record must be the one this controller last wrote, and
        # the announcing ConfigMaps (clock, need) name the writes they announce
        wants = [own.get("configmaps", {})]
        if self.opts.virtual_clock:
            # the clock is read consistently (one small list): nobody tells the cache that it
            # moved, and its ConfigMap stream must be at least as new as the value read
            k = self.kube
            doc = k.request("GET", k.ns_path("configmaps"),
                            query={"fieldSelector": f"metadata.name={CLOCK_CM}"})
            for item in doc.get("items", []):
                wants.append({"rv": int(item["metadata"]["resourceVersion"])})
        self.kube.writes.prune("configmaps", c.wait_fresh("configmaps", *wants))
        cms = c["configmaps"].snapshot()
        after: dict[str, list[dict[str, Any]]] = {}
        for name in (CLOCK_CM, INFERENCE_CM):
            data = (cms.get(name) or {}).get("data") or {}
            for kind, want in parse_after(data.get("after"), f"configmap {name}").items():
                after.setdefault(kind, []).append(want)
        for kind in ("nodes", PLURAL, "pods"):
            seen = c.wait_fresh(kind, own.get(kind, {}), *after.get(kind, []))
            self.kube.writes.prune(kind, seen)
        return self._snapshot(cms, c["nodes"].snapshot(), c[PLURAL].snapshot(),
                              c["pods"].snapshot())

    def _cache(self) -> Cache:
        if self.cache is None:
            k = self.kube
            self.cache = Cache(k, {
                "configmaps": (k.ns_path("configmaps"), None),
                "nodes": ("/api/v1/nodes", None),
                PLURAL: (k.ns_path(PLURAL, group=f"{GROUP}/{VERSION}"), None),
                "pods": (k.ns_path("pods"), {"labelSelector": LABEL_JOB}),
            }, timeout_s=self.opts.cache_timeout_s)
        return self.cache

    def close(self) -> None:
        """Stop the cache's watches (a controller without ``watch`` has none)."""
        if self.cache is not None:
            self.cache.close()
            self.cache = None

    def _list_all(self) -> Snapshot:
        k = self.kube
        # the ConfigMaps first: the clock (and the inference need) are written after what
        # they announce, so everything read after them is at least as new
        cms_doc = k.request("GET", k.ns_path("configmaps"))
        cms = {c["metadata"]["name"]: c for c in cms_doc.get("items", [])}
        nodes_doc = k.request("GET", "/api/v1/nodes")
        node_objs = {n["metadata"]["name"]: n for n in nodes_doc.get("items", [])}
        jobs_doc = k.request("GET", k.ns_path(PLURAL, group=f"{GROUP}/{VERSION}"))
        jobs = {j["metadata"]["name"]: j for j in jobs_doc.get("items", [])}
        pods_doc = k.request("GET", k.ns_path("pods"), query={"labelSelector": LABEL_JOB})
        pods = {p["metadata"]["name"]: p for p in pods_doc.get("items", [])}
        return self._snapshot(cms, node_objs, jobs, pods)

    def _snapshot(self, cms: dict[str, dict[str, Any]], node_objs: dict[str, dict[str, Any]],
                  jobs: dict[str, dict[str, Any]], pods: dict[str, dict[str, Any]]) -> Snapshot:
        nodes = [ni for ni in (parse_node(n) for n in node_objs.values()) if ni is not None]
        record, rv = None, None
        if STATE_CM in cms:
            cm = cms[STATE_CM]
            rv = cm["metadata"]["resourceVersion"]
            blob = (cm.get("binaryData") or {}).get(RECORD_KEY)
            if blob:
                record = json.loads(gzip.decompress(base64.b64decode(blob)))
        config = dict((cms.get(CONFIG_CM) or {}).get("data") or {})
        needed: int | None = None
        inf = (cms.get(INFERENCE_CM) or {}).get("data") or {}
        if "serversNeeded" in inf:
            try:
                needed = int(inf["serversNeeded"])
                if needed < 0:
                    raise ValueError
            except ValueError:
                log.error("configmap %s: data.serversNeeded must be an integer >= 0, got %r; "
                          "ignored", INFERENCE_CM, inf["serversNeeded"])
                needed = None
        clock: float | None = None
        if self.opts.virtual_clock:
            c = (cms.get(CLOCK_CM) or {}).get("data") or {}
            if "nowS" in c:
                clock = float(c["nowS"])
        return Snapshot(nodes, node_objs, jobs, pods, record, rv, config, needed, clock)

    # ------------------------------------------------------------------ a pass
    def run_once(self) -> PassResult:
        """One pass: finish the last decision, make a new one when due, apply it.

        Raises
        ------
        ApiError
            A request failed (the caller backs off and runs the pass again; a 409 on the
            decision means another controller wrote first).
        """
        res = PassResult()
        t0 = time.perf_counter()
        snap = self.read()
        res.read_s = time.perf_counter() - t0
        rec = snap.record
        if rec is not None and rec["applied"] < rec["pass"]:
            ta = time.perf_counter()
            self.reconcile(snap, rec)
            res.apply_s += time.perf_counter() - ta
            snap = self.read()
            rec = snap.record
        now = self._now(snap)
        if now is None or not self._due(snap, now):
            return res
        td = time.perf_counter()
        new = self.decide(snap, now, res)
        res.decide_s = time.perf_counter() - td
        ta = time.perf_counter()
        snap.record_rv = self._write_record(new, snap.record_rv)
        self.reconcile(snap, new)
        res.apply_s += time.perf_counter() - ta
        res.decided = True
        res.pass_no = new["pass"]
        return res

    def _now(self, snap: Snapshot) -> float | None:
        if self.opts.virtual_clock:
            return snap.clock_s
        return time.time()

    def _inputs(self, snap: Snapshot) -> dict[str, Any]:
        """What a decision depends on besides time: a change makes a pass due."""
        finished = sorted({p["metadata"]["labels"][LABEL_JOB] for p in snap.pods.values()
                           if _pod_phase(p) == "Succeeded"})
        jobs = sorted(f"{n}@{j['metadata'].get('generation', 0)}" for n, j in snap.jobs.items()
                      if (j.get("status") or {}).get("phase") not in TERMINAL_PHASES)
        return {"jobs": jobs, "finished": finished, "needed": snap.servers_needed,
                "nodes": sorted(n.name for n in snap.nodes), "config": snap.config}

    def _due(self, snap: Snapshot, now: float) -> bool:
        rec = snap.record
        if rec is None:
            return True
        if self.opts.virtual_clock:
            return bool(now != rec["now_s"])
        return bool(self._inputs(snap) != rec["inputs"] or now - rec["now_s"] >= self.opts.resync_s)

    # ------------------------------------------------------------------ deciding
    def _config(self, snap: Snapshot) -> tuple[SchedulerConfig, str, float]:
        kw: dict[str, Any] = {}
        policy, grace = self.opts.policy, 0.0
        for key, text in snap.config.items():
            try:
                v = json.loads(text)
            except ValueError:
                v = text
            if key == "policy":
                policy = str(v)
            elif key == "reclaimGraceS":
                grace = float(v)
            elif key in SchedulerConfig.field_names():
                kw[key] = v
            else:
                log.error("configmap %s: unknown key %r ignored (known: policy, reclaimGraceS, "
                          "%s)", CONFIG_CM, key, ", ".join(SchedulerConfig.field_names()))
        try:
            cfg = SchedulerConfig(**kw)
        except InvalidInputError as exc:
            log.error("configmap %s: %s; using the defaults", CONFIG_CM, exc)
            cfg = SchedulerConfig()
        return cfg, policy, grace

    def decide(self, snap: Snapshot, now: float, res: PassResult | None = None) -> dict[str, Any]:
        """The next decision (a record) from the last one and what happened since."""
        rec = snap.record
        cfg, policy, grace = self._config(snap)
        prev_doc = rec["state"] if rec else None
        prev_servers = {s["id"]: s for s in (prev_doc or {}).get("servers", [])}
        train = sorted((n for n in snap.nodes if n.role == "training"), key=lambda n: n.name)
        infer = sorted((n for n in snap.nodes if n.role == "inference"), key=lambda n: n.name)
        servers = []
        for n in train + infer:
            d: dict[str, Any] = {"id": n.name, "role": n.role, "gpus": n.gpus,
                                 "gpu_type": n.gpu_type}
            if n.role == "inference":
                p = prev_servers.get(n.name, {})
                d["status"] = p.get("status", "serving")
                d["reclaimed_s"] = p.get("reclaimed_s")
            servers.append(d)
        if not servers:
            raise ArylError("no node carries the label aryl.io/pool=training|inference "
                            "and nvidia.com/gpu capacity")
        known = {s["id"] for s in servers}
        doc: dict[str, Any] = {
            "schema_version": 1,
            "now_s": prev_doc["now_s"] if prev_doc else now,
            "config": cfg.to_dict(), "speed_model": None, "servers": servers,
            "inference": (prev_doc or {}).get("inference",
                                               {"servers_needed": 0, "reclaim_deadline_s": None}),
            "jobs": [], "running": [],
        }
        lost: list[str] = []
        if prev_doc:
            for jd in prev_doc["jobs"]:
                if jd["status"] == "queued" and jd["id"] not in snap.jobs:
                    continue  # deleted while queued: forgotten
                if any(p["server"] not in known for p in jd.get("placement", [])):
                    # its node is gone: requeued (progress since the last checkpoint lost)
                    lost.append(jd["id"])
                    jd = {**jd, "status": "queued", "restarted": True, "queued_since_s": now,
                          "remaining_s": jd.get("checkpoint_remaining_s", jd["remaining_s"])}
                    jd.pop("placement", None)
                    jd.pop("next_checkpoint_s", None)
                doc["jobs"].append(jd)
            doc["running"] = [x for x in prev_doc["running"] if x not in lost]
            doc["elastic_memo"] = prev_doc["elastic_memo"]
        st = state_from_json(doc)
        meta: dict[str, dict[str, Any]] = {
            k: v for k, v in (rec or {}).get("jobs", {}).items()
            if v["phase"] not in TERMINAL_PHASES
        }
        events: list[dict[str, Any]] = []
        index = {st.job_id[j]: j for j in [*st.queued, *st.running]}
        for name in lost:
            events.append({"job": name, "reason": "node_lost",
                           "message": "a node of its placement is gone: requeued"})

        # finishes: a job whose pod succeeded, or whose object was deleted
        succeeded = {p["metadata"]["labels"][LABEL_JOB] for p in snap.pods.values()
                     if _pod_phase(p) == "Succeeded"}
        done: dict[str, float] = {}
        for j in list(st.running):
            name = st.job_id[j]
            if name in succeeded or name not in snap.jobs:
                st.advance(j, now)
                st.finish(j, now)
                done[name] = now
                if name in snap.jobs:
                    events.append({"job": name, "reason": "finished", "kind": "finish",
                                   "message": f"finished at {now:.0f} s", "now_s": now,
                                   "workers": 0})
        for name in done:
            m = meta.pop(name, None)
            if name in snap.jobs:
                entry = dict(m or {})
                entry.update(phase="Succeeded", finish_s=now, pods={}, workers=0,
                             placement=[], expected_finish_s=None)
                meta[name] = entry

        # the inference side
        n_inf = len(infer)
        needed = snap.servers_needed
        st.servers_needed = min(n_inf, needed if needed is not None else n_inf)
        st.set_serving()

        # arrivals (in creation order), bad objects reported
        max_gpus = max((n.gpus for n in train), default=0)
        train_gpus = sum(n.gpus for n in train)
        invalid: dict[str, str] = {}
        fresh = [o for n, o in snap.jobs.items()
                 if n not in index and n not in meta
                 and (o.get("status") or {}).get("phase") not in TERMINAL_PHASES]
        fresh.sort(key=lambda o: (o["metadata"].get("creationTimestamp", ""),
                                  o["metadata"]["name"]))
        for obj in fresh:
            name = obj["metadata"]["name"]
            try:
                spec = parse_job(obj, self.families)
            except SpecError as exc:
                invalid[name] = str(exc)
                continue
            base = spec.min_workers if spec.elastic else spec.workers
            if spec.gpus_per_worker > max_gpus or base * spec.gpus_per_worker > train_gpus:
                meta[name] = {"phase": "Unschedulable", "pods": {}, "workers": 0,
                              "placement": [], "reasons": ["never_fits"], "next_pod": 0}
                events.append({"job": name, "reason": "never_fits", "message":
                               f"{base} workers x {spec.gpus_per_worker} GPUs can never fit the "
                               f"training nodes ({len(train)} nodes, {train_gpus} GPUs, at most "
                               f"{max_gpus} per node)"})
                continue
            j = st.add_job(name, arrival_s=now, gpus_per_worker=spec.gpus_per_worker,
                           ref_workers=spec.workers, remaining_s=spec.duration_s,
                           min_workers=spec.min_workers, max_workers=spec.max_workers,
                           elastic=spec.elastic, alpha=spec.alpha)
            st.enqueue(j, now)
            index[name] = j
            meta[name] = {"phase": "Queued", "pods": {}, "workers": 0, "placement": [],
                          "reasons": ["queued"], "next_pod": 0, "uid": spec.uid}
            events.append({"job": name, "reason": "queued",
                           "message": f"queued ({spec.min_workers}..{spec.max_workers} workers "
                                      f"x {spec.gpus_per_worker} GPUs)"})

        if st.servers_needed > st.not_loaned():
            st.reclaim_deadline_s = min(st.reclaim_deadline_s, now + grace)
        st.now_s = now
        ts = time.perf_counter()
        plan = schedule(st, policy=policy)
        if res is not None:
            res.schedule_s = time.perf_counter() - ts
            res.n_actions = plan.n_actions
        reasons: dict[str, list[str]] = {}
        sid = st.server_id

        cur_workers: dict[int, int] = {}

        def note(j: int, code: str, msg: str, place: Any = None, kind: str = "") -> None:
            name = st.job_id[j]
            reasons.setdefault(name, []).append(code)
            new_w = sum(place.values()) if place else 0
            old_w = cur_workers.get(j, st.workers[j])  # after this pass's earlier actions
            cur_workers[j] = new_w
            if not kind:
                kind = ("scale_out" if new_w > old_w else "scale_in" if new_w < old_w
                        else "move")
            events.append({"job": name, "reason": code, "message": msg, "kind": kind,
                           "workers": new_w, "now_s": now})

        def where(place: Any) -> str:
            return ", ".join(f"{sid[s]} x{w}" for s, w in place.items())

        node_events: list[dict[str, Any]] = []
        for s in plan.reclaimed_servers:
            node_events.append({"node": sid[s], "reason": "reclaimed",
                                "message": "returned to inference (cordoned, training pods "
                                           "evicted)"})
        for j, place, r in plan.reclaim_actions:
            if place is None:
                note(j, r.label, "preempted: its loaned node is reclaimed", kind="preempt")
            else:
                note(j, r.label, f"scaled in to {where(place)}: its loaned node is reclaimed",
                     place)
        for s, r in plan.borrowed_servers:
            node_events.append({"node": sid[s], "reason": r.label,
                                "message": "lent to training (untainted)"})
        for j, r in plan.preemptions:
            note(j, r.label, "preempted (requeued)", kind="preempt")
        for j, place, r in plan.resizes:
            note(j, r.label, f"resized to {where(place)}", place)
        for j, place, r in plan.starts:
            note(j, r.label, f"started on {where(place)}", place, kind="start")
        for s, r in plan.returned_servers:
            node_events.append({"node": sid[s], "reason": r.label,
                                "message": "given back to inference (no training pod left)"})
        plan.apply(st, inplace=True)
        if st.reclaim_deadline_s <= now:
            st.reclaim_deadline_s = math.inf

        # desired pods: keep a job's pods where its placement keeps workers, name new ones
        old_pods_by_job: dict[str, dict[str, str]] = {k: dict(v.get("pods", {}))
                                                      for k, v in meta.items()}
        for j in [*st.queued, *st.running]:
            name = st.job_id[j]
            m = meta.setdefault(name, {"pods": {}, "next_pod": 0})
            place = st.placement[j] if st.status[j] == 2 else None
            old = old_pods_by_job.get(name, {})
            pods: dict[str, str] = {}
            nxt = int(m.get("next_pod", 0))
            if place:
                for s, w in place.items():
                    node = sid[s]
                    keep = sorted(p for p, nd in old.items() if nd == node)[:w]
                    for p in keep:
                        pods[p] = node
                    for _ in range(w - len(keep)):
                        pods[f"{name}-w{nxt}"] = node
                        nxt += 1
            running = st.status[j] == 2
            m.update(
                phase="Running" if running else "Queued", pods=pods, next_pod=nxt,
                workers=st.workers[j] if running else 0,
                placement=[{"node": sid[s], "workers": w} for s, w in (place or {}).items()],
                expected_finish_s=(st.progress_at_s[j] + st.remaining_s[j] / st.speed[j]
                                   if running and st.speed[j] > 0 else None),
            )
            if running:
                m.setdefault("start_s", now)
            if name in reasons:
                m["reasons"] = reasons[name]
                m["reason_pass"] = (rec["pass"] + 1) if rec else 1
        new_doc = state_to_json(st)
        n_pass = (rec["pass"] + 1) if rec else 1
        self._reported_invalid = invalid
        return {
            "pass": n_pass, "applied": n_pass - 1, "now_s": now, "state": new_doc,
            "jobs": meta, "invalid": invalid, "reclaimed": [sid[s] for s in
                                                            plan.reclaimed_servers],
            "events": events, "node_events": node_events, "inputs": self._inputs(snap),
            "policy": policy,
        }

    # ------------------------------------------------------------------ the record
    def _write_record(self, rec: dict[str, Any], rv: str | None) -> str:
        k = self.kube
        blob = base64.b64encode(gzip.compress(json.dumps(rec).encode(), 6)).decode()
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": STATE_CM, "namespace": self.ns},
            "data": {"pass": str(rec["pass"]), "applied": str(rec["applied"]),
                     "nowS": repr(float(rec["now_s"]))},
            "binaryData": {RECORD_KEY: blob},
        }
        if rv is None:
            out = k.request("POST", k.ns_path("configmaps"), body)
        else:
            body["metadata"]["resourceVersion"] = rv
            out = k.request("PUT", k.ns_path("configmaps", STATE_CM), body)
        return str(out["metadata"]["resourceVersion"])

    # ------------------------------------------------------------------ applying
    def reconcile(self, snap: Snapshot, rec: dict[str, Any]) -> None:
        """Make the cluster match decision ``rec`` (idempotent), then mark it applied."""
        k = self.kube
        desired: dict[str, tuple[str, str]] = {}
        for name, m in rec["jobs"].items():
            if m["phase"] == "Running":
                for p, node in m["pods"].items():
                    desired[p] = (name, node)
        evict_nodes = set(rec["reclaimed"])
        # 1. nodes: untaint the lent, taint (and cordon while training pods remain) the others
        live_on: dict[str, int] = {}
        for p in snap.pods.values():
            nd = _pod_node(p)
            if nd and _pod_phase(p) not in ("Succeeded", "Failed"):
                live_on[nd] = live_on.get(nd, 0) + 1
        status = {s["id"]: s.get("status") for s in rec["state"]["servers"]
                  if s["role"] == "inference"}
        for ni in snap.nodes:
            if ni.role != "inference" or ni.name not in status:
                continue
            loaned = status[ni.name] == "loaned"
            others = [t for t in ni.taints if t.get("key") != TAINT_KEY]
            taints = others if loaned else [*others, _TAINT]
            busy = live_on.get(ni.name, 0) > 0
            cordon = (not loaned) and (busy or ni.name in evict_nodes)
            want_label = "true" if loaned else None
            if (list(ni.taints) != taints or ni.unschedulable != cordon
                    or (ni.loaned_label != loaned)):
                patch = {"metadata": {"labels": {LABEL_LOANED: want_label},
                                      "resourceVersion": snap.node_objs[ni.name]["metadata"][
                                          "resourceVersion"]},
                         "spec": {"taints": taints or None, "unschedulable": cordon or None}}
                k.request("PATCH", f"/api/v1/nodes/{ni.name}", patch,
                          content_type="application/merge-patch+json")
        # 2. pods not in the decision: evicted on a reclaimed node, else deleted
        for name, p in snap.pods.items():
            if name in desired or _terminating(p) or _pod_phase(p) in ("Succeeded", "Failed"):
                continue
            try:
                if _pod_node(p) in evict_nodes:
                    k.request("POST", k.ns_path("pods", name, "eviction"), {
                        "apiVersion": "policy/v1beta1", "kind": "Eviction",
                        "metadata": {"name": name, "namespace": self.ns}})
                else:
                    k.request("DELETE", k.ns_path("pods", name))
            except ApiError as exc:
                if exc.status != 404:
                    raise
        # 3. missing pods created and bound
        specs: dict[str, JobSpec] = {}
        for pname, (job, node) in sorted(desired.items()):
            pod = snap.pods.get(pname)
            if pod is None:
                if job not in snap.jobs:
                    continue  # deleted since the decision: the next one finishes it
                if job not in specs:
                    try:
                        specs[job] = parse_job(snap.jobs[job], self.families)
                    except SpecError as exc:  # edited into a bad spec while running
                        log.error("job %s: %s; its missing pods are not created", job, exc)
                        continue
                try:
                    pod = k.request("POST", k.ns_path("pods"),
                                    worker_pod(specs[job], pname, node, self.ns))
                except ApiError as exc:
                    if exc.status != 409:
                        raise
                    pod = k.request("GET", k.ns_path("pods", pname))
            have = _pod_node(pod)
            if have is None:
                try:
                    k.request("POST", k.ns_path("pods", pname, "binding"), {
                        "apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": pname, "namespace": self.ns},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
                except ApiError as exc:
                    if exc.status != 409:
                        raise
                    have = _pod_node(k.request("GET", k.ns_path("pods", pname)))
                    if have is None:  # a conflict on an unbound pod: the pass runs again
                        raise ApiError(409, "binding conflict", "POST", pname) from None
                    if have != node:
                        raise ArylError(f"pod {pname}: bound to {have}, decided {node}") from None
            elif have != node:
                raise ArylError(f"pod {pname}: bound to {have}, decided {node} "
                                f"(annotation {ANN_NODE})")
        # 4. job statuses
        for name, obj in snap.jobs.items():
            want = self._status(name, rec)
            if want is None:
                continue
            have_st = obj.get("status") or {}
            if any(have_st.get(key) != v for key, v in want.items()):
                try:
                    k.request("PATCH", k.ns_path(PLURAL, name, "status",
                                                 group=f"{GROUP}/{VERSION}"),
                              {"status": want}, content_type="application/merge-patch+json")
                except ApiError as exc:
                    if exc.status != 404:
                        raise
        # 5. Events (deterministic names: applying again creates none twice)
        self._events(snap, rec)
        # 6. done
        rec["applied"] = rec["pass"]
        snap.record_rv = self._write_record(rec, snap.record_rv)

    def _status(self, name: str, rec: dict[str, Any]) -> dict[str, Any] | None:
        if name in rec["invalid"]:
            msg = rec["invalid"][name]
            return {"phase": "Invalid", "workers": 0, "placement": [],
                    "reasons": ["invalid_spec"], "message": msg,
                    "conditions": [{"type": "SpecValid", "status": "False",
                                    "reason": "InvalidField", "message": msg,
                                    "field": msg.split(":", 1)[0]}]}
        m = rec["jobs"].get(name)
        if m is None:
            return None
        out = {"phase": m["phase"], "workers": m.get("workers", 0),
               "placement": m.get("placement", []), "reasons": m.get("reasons", []),
               "expectedFinishS": m.get("expected_finish_s"),
               "lastDecisionPass": m.get("reason_pass", 0),
               "message": m.get("message", m["phase"].lower()),
               "conditions": [{"type": "SpecValid", "status": "True", "reason": "Valid",
                               "message": "the spec is valid"}]}
        if "start_s" in m:
            out["startTimeS"] = m["start_s"]
        if "finish_s" in m:
            out["finishTimeS"] = m["finish_s"]
        return out

    def _events(self, snap: Snapshot, rec: dict[str, Any]) -> None:
        k = self.kube
        n = rec["pass"]
        ts = _now_iso()[:19] + "Z"
        items: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for i, e in enumerate(rec["events"]):
            obj = snap.jobs.get(e["job"])
            if obj is None:
                continue
            ref = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": e["job"],
                   "namespace": self.ns, "uid": obj["metadata"].get("uid", "")}
            items.append(({"name": f"{e['job']}.aryl-{n}-{i}"} | e, ref))
        for name, msg in rec["invalid"].items():
            obj = snap.jobs.get(name)
            if obj is None or (obj.get("status") or {}).get("message") == msg:
                continue  # reported once per distinct problem
            ref = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": name,
                   "namespace": self.ns, "uid": obj["metadata"].get("uid", "")}
            items.append(({"name": f"{name}.aryl-{n}-invalid", "reason": "invalid_spec",
                           "message": msg, "type": "Warning"}, ref))
        for i, e in enumerate(rec["node_events"]):
            ref = {"apiVersion": "v1", "kind": "Node", "name": e["node"], "namespace": self.ns,
                   "uid": snap.node_objs.get(e["node"], {}).get("metadata", {}).get("uid", "")}
            items.append(({"name": f"{e['node']}.aryl-{n}-{i}"} | e, ref))
        for e, ref in items:
            body = {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": e["name"], "namespace": self.ns, "annotations": {
                    f"aryl.io/{key}": str(e[key]) for key in ("kind", "workers", "now_s")
                    if key in e}},
                "involvedObject": ref, "reason": e["reason"], "message": e["message"],
                "type": e.get("type", "Normal"), "source": {"component": "aryl-controller"},
                "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
                "reportingComponent": "aryl-controller",
                "reportingInstance": self.opts.identity[:128],
            }
            try:
                k.request("POST", k.ns_path("events"), body)
            except ApiError as exc:
                if exc.status != 409:
                    raise

    # ------------------------------------------------------------------ the loop
    def try_lead(self) -> bool:
        """Take or renew the Lease ``aryl-controller``; True while this controller leads."""
        k = self.kube
        path = k.ns_path("leases", LEASE, group="coordination.k8s.io/v1")
        me = self.opts.identity
        dur = max(1, math.ceil(self.opts.lease_duration_s))
        lease = k.get_or_none(path)
        now_iso = _now_iso()
        if lease is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": LEASE, "namespace": self.ns},
                    "spec": {"holderIdentity": me, "leaseDurationSeconds": dur,
                             "acquireTime": now_iso, "renewTime": now_iso,
                             "leaseTransitions": 0}}
            try:
                k.request("POST", k.ns_path("leases", group="coordination.k8s.io/v1"), body)
                return True
            except ApiError as exc:
                if exc.status == 409:
                    return False
                raise
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renew = spec.get("renewTime")
        expired = renew is None or time.time() > _parse_iso(renew) + float(
            spec.get("leaseDurationSeconds", dur))
        if holder != me and not expired:
            return False
        if holder != me:
            spec["acquireTime"] = now_iso
            spec["leaseTransitions"] = int(spec.get("leaseTransitions", 0)) + 1
            log.info("lease %s: taking over from %s", LEASE, holder)
        spec.update(holderIdentity=me, renewTime=now_iso, leaseDurationSeconds=dur)
        lease["spec"] = spec
        try:
            k.request("PUT", path, lease)
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def run(self, stop: threading.Event | None = None, max_passes: int | None = None) -> int:
        """Pass after pass until ``stop`` is set (or ``max_passes`` decisions); returns the
        number of decisions.  A failed request backs off (0.2 s doubling to 10 s) and the
        pass is run again; the controller never exits on an API error."""
        stop = stop or threading.Event()
        backoff = 0.0
        decided = 0
        while not stop.is_set():
            try:
                if self.opts.leader_election and not self.try_lead():
                    stop.wait(self.opts.poll_s)
                    continue
                r = self.run_once()
                backoff = 0.0
                if r.decided:
                    decided += 1
                    log.info("pass %d: %d actions (read %.3f s, decide %.3f s, apply %.3f s)",
                             r.pass_no, r.n_actions, r.read_s, r.decide_s, r.apply_s)
                    if max_passes is not None and decided >= max_passes:
                        break
                    continue  # decide again at once if more is due
            except ApiError as exc:
                backoff = min(10.0, max(0.2, 2 * backoff))
                log.warning("%s; retrying in %.1f s", exc, backoff)
                stop.wait(backoff)
                continue
            except Exception:  # never exit: log, back off, read everything again
                backoff = min(10.0, max(0.2, 2 * backoff))
                log.exception("pass failed; retrying in %.1f s", backoff)
                stop.wait(backoff)
                continue
            stop.wait(self.opts.poll_s)
        return decided
