"""The Kubernetes object model of the Aryl controller (docs/kubernetes.md).

* ``Node`` -> server: label ``aryl.io/pool`` (``training`` / ``inference``), label
  ``nvidia.com/gpu.product`` (GPU type), ``status.allocatable["nvidia.com/gpu"]``;
  inference nodes carry the taint ``aryl.io/inference=serving:NoSchedule`` except while
  lent (then also the label ``aryl.io/loaned=true``).
* ``TrainingJob`` (``aryl.io/v1alpha1``) -> job: :func:`parse_job` checks its spec and
  names the first bad field.
* ConfigMap ``aryl-inference`` (``data.serversNeeded``): the inference servers needed now,
  written by the inference autoscaler.
* worker pods: :func:`worker_pod` builds one from the job's pod template.

Pure functions over plain dicts (the API objects as JSON); no ``kubernetes`` import.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from aryl._limits import MAX_DURATION_S

__all__ = [
    "ANN_NODE", "CLOCK_CM", "CONFIG_CM", "GPU_RESOURCE", "GROUP", "INFERENCE_CM", "KIND",
    "LABEL_JOB", "LABEL_LOANED", "LABEL_POOL", "LABEL_PRODUCT", "LEASE", "MAX_DURATION_S",
    "MAX_GPUS_PER_WORKER", "MAX_WORKERS", "PLURAL", "SCHEDULER_NAME", "STATE_CM", "TAINT_KEY",
    "VERSION", "JobSpec", "NodeInfo", "SpecError", "parse_job", "parse_node", "worker_pod",
]

GROUP = "aryl.io"
VERSION = "v1alpha1"
KIND = "TrainingJob"
PLURAL = "trainingjobs"
SCHEDULER_NAME = "aryl"

LABEL_POOL = "aryl.io/pool"
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_LOANED = "aryl.io/loaned"
LABEL_JOB = "aryl.io/job"
ANN_NODE = "aryl.io/node"
TAINT_KEY = "aryl.io/inference"
GPU_RESOURCE = "nvidia.com/gpu"

STATE_CM = "aryl-scheduler-state"
INFERENCE_CM = "aryl-inference"
CONFIG_CM = "aryl-config"
CLOCK_CM = "aryl-clock"
LEASE = "aryl-controller"

#: Largest accepted values (a larger one is a bad field, named in the job's status).
MAX_WORKERS = 4096
MAX_GPUS_PER_WORKER = 1024


class SpecError(ValueError):
    """A TrainingJob field is invalid: ``field`` names it (``spec.minWorkers``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class JobSpec:
    """A checked TrainingJob spec (units in names; ``workers`` is the reference size)."""

    name: str
    uid: str
    gpus_per_worker: int
    workers: int
    min_workers: int
    max_workers: int
    elastic: bool
    alpha: float
    family: str | None
    duration_s: float
    template: dict[str, Any]


def _int(spec: dict[str, Any], key: str, lo: int, hi: int, default: int | None = None) -> int:
    v = spec.get(key, default)
    if v is None:
        raise SpecError(f"spec.{key}", "required")
    if isinstance(v, bool) or not isinstance(v, int):
        raise SpecError(f"spec.{key}", f"must be an integer, got {v!r}")
    if not lo <= v <= hi:
        raise SpecError(f"spec.{key}", f"must be in [{lo}, {hi}], got {v}")
    return v


def parse_job(obj: dict[str, Any], families: tuple[str, ...] = ()) -> JobSpec:
    """Check a TrainingJob object (as a dict) and return its spec.

    Parameters
    ----------
    obj : dict
        The custom object as the API server returns it.
    families : tuple of str
        Known model families (``spec.family`` must be one of them when given).

    Raises
    ------
    SpecError
        Naming the first bad field: missing or non-integer counts, ``gpusPerWorker``
        outside ``[1, 1024]``, workers outside ``[1, 4096]``, ``minWorkers >
        maxWorkers``, ``workers`` outside ``[minWorkers, maxWorkers]``, an elastic range
        on a job with ``elastic: false``, ``alpha`` outside ``[0, 1]``, a duration that is
        not a finite number in ``(0, 1e9]`` s, an unknown family.
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise SpecError("spec", "missing")
    g = _int(spec, "gpusPerWorker", 1, MAX_GPUS_PER_WORKER)
    w = _int(spec, "workers", 1, MAX_WORKERS)
    elastic = spec.get("elastic", False)
    if not isinstance(elastic, bool):
        raise SpecError("spec.elastic", f"must be true or false, got {elastic!r}")
    mn = _int(spec, "minWorkers", 1, MAX_WORKERS, w)
    mx = _int(spec, "maxWorkers", 1, MAX_WORKERS, w)
    if mn > mx:
        raise SpecError("spec.minWorkers", f"minWorkers {mn} > maxWorkers {mx}")
    if not mn <= w <= mx:
        raise SpecError("spec.workers", f"{w} is outside [minWorkers, maxWorkers] = [{mn}, {mx}]")
    if not elastic and mn != mx:
        raise SpecError("spec.elastic", f"false, but minWorkers {mn} != maxWorkers {mx}")
    alpha = spec.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise SpecError("spec.alpha", f"must be a number in [0, 1], got {alpha!r}")
    d = spec.get("durationS")
    if d is None:
        raise SpecError("spec.durationS", "required (expected run time at spec.workers, s)")
    if isinstance(d, bool) or not isinstance(d, (int, float)) or not (
        math.isfinite(d) and 0 < d <= MAX_DURATION_S
    ):
        raise SpecError("spec.durationS", f"must be a number in (0, {MAX_DURATION_S:g}] s, "
                                          f"got {d!r}")
    family = spec.get("family")
    if family is not None:
        if not isinstance(family, str):
            raise SpecError("spec.family", f"must be a string, got {family!r}")
        if families and family not in families:
            raise SpecError("spec.family", f"unknown family {family!r}; known: {list(families)}")
    template = spec.get("template")
    template = {} if template is None else template
    if not isinstance(template, dict):
        raise SpecError("spec.template", "must be a pod template object")
    tspec = template.get("spec") or {}
    if not isinstance(tspec, dict) or not isinstance(tspec.get("containers", []), list):
        raise SpecError("spec.template.spec", "must be a pod spec with a containers list")
    return JobSpec(
        name=str(meta.get("name", "")), uid=str(meta.get("uid", "")), gpus_per_worker=g,
        workers=w, min_workers=mn, max_workers=mx, elastic=elastic, alpha=float(alpha),
        family=family, duration_s=float(d), template=template,
    )


@dataclass(frozen=True)
class NodeInfo:
    """A node as a server: ``role`` is the pool label, ``gpus`` the allocatable GPUs."""

    name: str
    role: str
    gpus: int
    gpu_type: str
    taints: tuple[dict[str, Any], ...]
    unschedulable: bool
    loaned_label: bool


def parse_node(obj: dict[str, Any]) -> NodeInfo | None:
    """The server a Node is, or None when it is not Aryl's (no pool label, no GPUs)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    role = labels.get(LABEL_POOL)
    if role not in ("training", "inference"):
        return None
    alloc = ((obj.get("status") or {}).get("allocatable") or {})
    try:
        gpus = int(str(alloc.get(GPU_RESOURCE, "0")))
    except ValueError:
        return None
    if gpus < 1:
        return None
    spec = obj.get("spec") or {}
    return NodeInfo(
        name=str(meta["name"]), role=str(role), gpus=gpus,
        gpu_type=str(labels.get(LABEL_PRODUCT, "V100")),
        taints=tuple(spec.get("taints") or ()), unschedulable=bool(spec.get("unschedulable")),
        loaned_label=labels.get(LABEL_LOANED) == "true",
    )


def worker_pod(job: JobSpec, name: str, node: str, namespace: str) -> dict[str, Any]:
    """The manifest of one worker pod of ``job`` meant for ``node``.

    The pod template's metadata and spec are kept; the controller sets
    ``schedulerName: aryl`` (it binds the pod itself), ``restartPolicy: Never``, the job
    label, the target node as an annotation (so a restarted controller binds a pod it
    created but did not bind to the node it chose), ``nvidia.com/gpu`` limits of
    ``gpusPerWorker`` on the first container, and an owner reference to the job.
    """
    tmpl = copy.deepcopy(job.template)
    meta = tmpl.get("metadata") or {}
    spec = tmpl.get("spec") or {}
    labels = dict(meta.get("labels") or {})
    labels[LABEL_JOB] = job.name
    ann = dict(meta.get("annotations") or {})
    ann[ANN_NODE] = node
    containers = spec.get("containers") or [{"name": "worker", "image": "busybox"}]
    c0 = containers[0]
    res = c0.setdefault("resources", {})
    res.setdefault("limits", {})[GPU_RESOURCE] = str(job.gpus_per_worker)
    res.setdefault("requests", {})[GPU_RESOURCE] = str(job.gpus_per_worker)
    spec["containers"] = containers
    spec["schedulerName"] = SCHEDULER_NAME
    spec["restartPolicy"] = "Never"
    spec.pop("nodeName", None)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "labels": labels, "annotations": ann,
            "ownerReferences": [{
                "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": job.name,
                "uid": job.uid, "controller": True, "blockOwnerDeletion": False,
            }] if job.uid else [],
        },
        "spec": spec,
    }
