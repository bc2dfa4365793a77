"""The test harness of the live Kubernetes tests: a fake kubelet and inference autoscaler on a
virtual clock, around the Aryl controller and a real API server.

:class:`Harness` replays a job slice the way ``tests/test_schedule_client.py``'s manager
does (finishes, demand step, arrivals, then one decision per instant), but through the API
server: it creates TrainingJobs when they are submitted, writes the inference need to the
ConfigMap ``aryl-inference`` from the demand series, writes the virtual clock
(``aryl-clock``), lets the controller make its decision (``step``), then plays the kubelet:
bound pods become Running, evicted or deleted pods are removed, and a job's pods succeed
when the controller's own estimate of its finish (``status.expectedFinishS``, the work left
over the speed of its placement) is reached.  After every decision it checks that no node
holds more GPUs than it has, that every running job's bound pods match its placement and
lie in ``[minWorkers, maxWorkers]``, and that no pod was bound twice or to another node than
the decision named.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from aryl.k8s.kube import Kube
from aryl.k8s.objects import ANN_NODE, GROUP, LABEL_JOB, PLURAL, VERSION
from aryl.k8s.testenv import complete_job, kubelet_step, set_clock, set_config_map


def job_name(i: int) -> str:
    return f"j{i:04d}"


def job_object(row: dict[str, Any], i: int) -> dict[str, Any]:
    g = int(row["gpus_per_worker"])
    ref = int(row["gpus"]) // g
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainingJob",
        "metadata": {"name": job_name(i), "annotations": {"aryl.io/trace-id": str(row["job_id"])}},
        "spec": {
            "gpusPerWorker": g, "workers": ref, "minWorkers": int(row["min_workers"]),
            "maxWorkers": int(row["max_workers"]), "elastic": bool(row["elastic"]),
            "alpha": float(row["alpha"]), "durationS": float(row["duration_s"]),
            "template": {"spec": {"containers": [{"name": "trainer", "image": "trainer:1"}]}},
        },
    }


class Harness:
    """Drive ``jobs`` through the controller (``step(now)`` makes it decide at ``now``).

    Parameters
    ----------
    kube : Kube
        Admin connection in the test's namespace.
    jobs : DataFrame
        The slice (``aryl.traces`` columns, synthesised scaling columns).
    demand : list of (time_s, servers_needed)
        The inference need, ascending times (absolute); a callable ``k -> (t, v)`` for an
        unbounded series.
    step : callable
        Makes the controller decide at ``now`` and apply it (returns when applied).
    """

    def __init__(self, kube: Kube, jobs: pd.DataFrame,
                 demand: Callable[[int], tuple[float, int]],
                 step: Callable[[float], None]) -> None:
        self.kube = kube
        self.rows = jobs.to_dict("records")
        self.demand = demand
        self.step = step
        self.status: dict[str, dict[str, Any]] = {}
        self.spec: dict[str, dict[str, Any]] = {}
        self.bound: dict[str, str] = {}  # pod -> the node it was first seen bound to
        self.n_passes = 0
        self.after_pass: Callable[[int], None] | None = None
        self.placements: list[dict[str, dict[str, int]]] = []  # filled by an after_pass
        self.node_gpus: dict[str, int] | None = None

    def _jobs(self) -> list[dict[str, Any]]:
        k = self.kube
        return list(k.request("GET", k.ns_path(PLURAL, group=f"{GROUP}/{VERSION}"))["items"])

    def check(self, pods: list[dict[str, Any]]) -> None:
        """The invariants after a decision and the kubelet's step (AssertionError naming them)."""
        k = self.kube
        if self.node_gpus is None:
            self.node_gpus = {
                n["metadata"]["name"]: int(n["status"]["allocatable"]["nvidia.com/gpu"])
                for n in k.request("GET", "/api/v1/nodes")["items"]}
        nodes = self.node_gpus
        used: dict[str, int] = {}
        per_job: dict[str, dict[str, int]] = {}
        for p in pods:
            node = p["spec"].get("nodeName")
            name = p["metadata"]["name"]
            if node is None:
                continue
            assert self.bound.setdefault(name, node) == node, f"pod {name} bound twice"
            assert p["metadata"]["annotations"][ANN_NODE] == node, f"pod {name} on another node"
            if p["status"].get("phase") in ("Succeeded", "Failed"):
                continue
            job = p["metadata"]["labels"][LABEL_JOB]
            g = self.spec[job]["gpusPerWorker"]
            used[node] = used.get(node, 0) + g
            per_job.setdefault(job, {})
            per_job[job][node] = per_job[job].get(node, 0) + 1
        for node, gpus in used.items():
            assert gpus <= nodes[node], f"node {node}: {gpus} GPUs used of {nodes[node]}"
        for name, st in self.status.items():
            if st.get("phase") == "Running":
                want = {p["node"]: p["workers"] for p in st["placement"]}
                assert per_job.get(name, {}) == want, (
                    name, per_job.get(name), want, st,
                    [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase"),
                      p["metadata"].get("deletionTimestamp")) for p in pods
                     if p["metadata"]["labels"][LABEL_JOB] == name])
                spec = self.spec[name]
                assert spec["minWorkers"] <= st["workers"] <= spec["maxWorkers"], (name, st)
                assert sum(want.values()) == st["workers"]
            else:
                assert name not in per_job, f"job {name} ({st.get('phase')}) has live pods"

    def run(self, max_passes: int | None = None) -> None:
        """The whole slice (or ``max_passes`` decisions)."""
        k = self.kube
        rows = self.rows
        a, d = 0, 0
        t_d, v_d = self.demand(0)
        now = -math.inf
        while True:
            active = [n for n, s in self.status.items() if s.get("phase") in ("Queued", "Running")]
            if a >= len(rows) and not active:
                break
            finishes = [s["expectedFinishS"] for s in self.status.values()
                        if s.get("phase") == "Running" and s.get("expectedFinishS") is not None]
            t = min(min(finishes, default=math.inf),
                    float(rows[a]["submit_time_s"]) if a < len(rows) else math.inf, t_d)
            if now == -math.inf:
                t = float(rows[0]["submit_time_s"])  # the clock starts at the first arrival
            assert t < math.inf, "stalled"
            now = float(t)
            for name, s in self.status.items():
                if s.get("phase") == "Running" and s.get("expectedFinishS") is not None \
                        and s["expectedFinishS"] <= now:
                    complete_job(k, name)
            need = None
            while t_d <= now:
                need = v_d
                d += 1
                t_d, v_d = self.demand(d)
            if need is not None:
                set_config_map(k, "aryl-inference", {"serversNeeded": str(need)})
            while a < len(rows) and float(rows[a]["submit_time_s"]) <= now:
                obj = job_object(rows[a], a)
                self.spec[obj["metadata"]["name"]] = obj["spec"]
                k.request("POST", k.ns_path(PLURAL, group=f"{GROUP}/{VERSION}"), obj)
                a += 1
            set_clock(k, now)  # naming the writes it announces (the freshness rule)
            self.step(now)
            self.n_passes += 1
            pods = kubelet_step(k)
            self.status = {j["metadata"]["name"]: j.get("status") or {} for j in self._jobs()}
            self.check(pods)
            if self.after_pass is not None:
                self.after_pass(self.n_passes)
            if max_passes is not None and self.n_passes >= max_passes:
                break

    def events(self) -> pd.DataFrame:
        """The controller's Events on the jobs: job, kind, time, workers, reason."""
        k = self.kube
        out = []
        for e in k.request("GET", k.ns_path("events"))["items"]:
            ann = e["metadata"].get("annotations") or {}
            if e["involvedObject"]["kind"] != "TrainingJob" or "aryl.io/kind" not in ann:
                continue
            out.append({"job": e["involvedObject"]["name"], "kind": ann["aryl.io/kind"],
                        "time_s": float(ann["aryl.io/now_s"]),
                        "workers": int(ann["aryl.io/workers"]), "reason": e["reason"]})
        return pd.DataFrame(out, columns=["job", "kind", "time_s", "workers", "reason"])
