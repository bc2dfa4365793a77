"""The controller against a real API server on hand-made scenarios: starts, binds, lends,
reclaims, finishes (with Events and status), bad objects, the shipped RBAC and YAML,
injected write conflicts."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from aryl.k8s.controller import Controller, ControllerOptions
from aryl.k8s.kube import ApiError, Kube, load_api_client
from aryl.k8s.manifests import apply_file, apply_manifest, load_manifests
from aryl.k8s.testenv import add_fake_nodes, complete_job, kubelet_step, set_clock, set_config_map

ROOT = Path(__file__).resolve().parents[2]
TJ = "aryl.io/v1alpha1"


def tj(name: str, g: int, w: int, mn: int | None = None, mx: int | None = None,
       elastic: bool = False, d: float = 3600.0, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"gpusPerWorker": g, "workers": w, "elastic": elastic,
                            "durationS": d, "minWorkers": w if mn is None else mn,
                            "maxWorkers": w if mx is None else mx,
                            "template": {"spec": {"containers": [{"name": "t", "image": "t"}]}}}
    spec.update(extra)
    return {"apiVersion": TJ, "kind": "TrainingJob", "metadata": {"name": name}, "spec": spec}


def jobs_by_name(k: Kube) -> dict[str, dict[str, Any]]:
    items = k.request("GET", k.ns_path("trainingjobs", group=TJ))["items"]
    return {j["metadata"]["name"]: j for j in items}


def pods_of(k: Kube) -> dict[str, dict[str, Any]]:
    items = k.request("GET", k.ns_path("pods"), query={"labelSelector": "aryl.io/job"})["items"]
    return {p["metadata"]["name"]: p for p in items}


def events_of(k: Kube, name: str) -> list[str]:
    evs = k.request("GET", k.ns_path("events"))["items"]
    return [e["reason"] for e in sorted(evs, key=lambda e: e["metadata"]["name"])
            if e["involvedObject"]["name"] == name]


def node(k: Kube, name: str) -> dict[str, Any]:
    return dict(k.request("GET", f"/api/v1/nodes/{name}"))


def controller_kube(testenv: Any, ns: str) -> Kube:
    return Kube(load_api_client(str(testenv.controller_kubeconfig)), ns)


@pytest.fixture
def rbac(admin: Kube) -> None:
    apply_file(admin, ROOT / "deploy" / "rbac.yaml")


def test_the_shipped_yaml_passes_a_server_side_dry_run(admin: Kube) -> None:
    # the namespace aryl-system must exist for its objects' dry runs (a dry-run namespace
    # is not stored)
    admin.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": "aryl-system"}}) \
        if admin.get_or_none("/api/v1/namespaces/aryl-system") is None else None
    for f in ("crd.yaml", "rbac.yaml", "deployment.yaml"):
        docs = load_manifests(ROOT / "deploy" / f)
        assert docs
        for d in docs:
            out = apply_manifest(admin, d, dry_run=True)
            assert out["kind"] == d["kind"]
            assert out["metadata"]["name"] == d["metadata"]["name"]
    # a dry run stores nothing: no Deployment exists afterwards
    with pytest.raises(ApiError) as e:
        admin.request("GET", "/apis/apps/v1/namespaces/aryl-system/deployments/aryl-controller")
    assert e.value.status == 404


def test_the_controller_token_has_the_role_and_nothing_more(testenv: Any, admin: Kube,
                                                             rbac: None) -> None:
    k = controller_kube(testenv, admin.namespace)
    k.request("GET", "/api/v1/nodes")  # allowed: list nodes
    k.request("GET", k.ns_path("trainingjobs", group=TJ))
    # the cache's watches are allowed (from the list's resourceVersion: the watch ends
    # after 1 s with no event), a watch of Secrets is not
    once = {"watch": "1", "timeoutSeconds": "1"}
    for path in ("/api/v1/nodes", k.ns_path("pods"), k.ns_path("configmaps"),
                 k.ns_path("trainingjobs", group=TJ)):
        rv = k.request("GET", path)["metadata"]["resourceVersion"]
        assert k.request("GET", path, query={**once, "resourceVersion": rv}) is None
    with pytest.raises(ApiError) as e:
        k.request("GET", k.ns_path("secrets"), query=once)
    assert e.value.status == 403
    refused = [
        ("DELETE", "/api/v1/nodes/x"), ("GET", "/api/v1/nodes/x"),
        ("GET", k.ns_path("secrets")), ("DELETE", k.ns_path("trainingjobs", "x", group=TJ)),
        ("PATCH", k.ns_path("pods", "x", "status")), ("GET", "/api/v1/namespaces"),
    ]
    for method, path in refused:
        with pytest.raises(ApiError) as e:
            k.request(method, path, {} if method == "PATCH" else None,
                      content_type="application/merge-patch+json")
        assert e.value.status == 403, (method, path, e.value)


def test_a_small_scenario_start_loan_reclaim_finish(testenv: Any, admin: Kube,
                                                     rbac: None) -> None:
    """2 training + 1 inference nodes of 8 GPUs, no loan reserve; jobs of one hour each.

    Pass 1 (t=0, inference needs 0): SJF with equal estimates keeps arrival order: a (2 x 4
    GPUs) fills train-000, b (elastic 1..3 x 8 GPUs) takes train-001 at its minimum, c (1 x 2
    GPUs) fits no training node, so infer-000 is lent (loan_for_base) and c starts there; b
    cannot scale out (8-GPU workers, 6 GPUs left on the loan).
    Pass 2 (t=60, inference needs 1): the only loan goes back: c is preempted
    (reclaim_preempt), its pod evicted, infer-000 tainted and cordoned.
    Pass 3 (t=3600): a's pods succeed: a finishes; c restarts on train-000 (sjf_order) and
    infer-000 (drained by the kubelet) is uncordoned.
    """
    add_fake_nodes(admin, 2, 1)
    set_config_map(admin, "aryl-config", {"loan_reserve_servers": "0"})
    set_config_map(admin, "aryl-inference", {"serversNeeded": "0"})
    for obj in (tj("a", 4, 2), tj("b", 8, 1, 1, 3, elastic=True), tj("c", 2, 1)):
        admin.request("POST", admin.ns_path("trainingjobs", group=TJ), obj)
    ctl = Controller(controller_kube(testenv, admin.namespace),
                     ControllerOptions(namespace=admin.namespace, virtual_clock=True,
                                       leader_election=False))
    set_clock(admin, 0.0)
    assert ctl.run_once().decided
    kubelet_step(admin)
    js = jobs_by_name(admin)
    assert {n: (j["status"]["phase"], j["status"]["placement"]) for n, j in js.items()} == {
        "a": ("Running", [{"node": "train-000", "workers": 2}]),
        "b": ("Running", [{"node": "train-001", "workers": 1}]),
        "c": ("Running", [{"node": "infer-000", "workers": 1}]),
    }
    assert js["c"]["status"]["reasons"] == ["sjf_order"]
    pods = pods_of(admin)
    assert {p: (v["spec"]["nodeName"], v["status"]["phase"]) for p, v in pods.items()} == {
        "a-w0": ("train-000", "Running"), "a-w1": ("train-000", "Running"),
        "b-w0": ("train-001", "Running"), "c-w0": ("infer-000", "Running")}
    assert pods["a-w0"]["spec"]["schedulerName"] == "aryl"
    assert pods["a-w0"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    inf = node(admin, "infer-000")
    assert inf["metadata"]["labels"].get("aryl.io/loaned") == "true"
    assert not inf["spec"].get("taints")
    assert not inf["spec"].get("unschedulable")
    assert events_of(admin, "c") == ["queued", "sjf_order"]
    assert "loan_for_base" in events_of(admin, "infer-000")

    set_config_map(admin, "aryl-inference", {"serversNeeded": "1"})
    set_clock(admin, 60.0)
    assert ctl.run_once().decided
    c_pod = pods_of(admin)["c-w0"]
    assert c_pod["metadata"].get("deletionTimestamp")  # evicted, not yet gone
    inf = node(admin, "infer-000")
    assert "aryl.io/loaned" not in inf["metadata"]["labels"]
    assert inf["spec"]["taints"][0]["key"] == "aryl.io/inference"
    assert inf["spec"]["unschedulable"] is True
    st = jobs_by_name(admin)["c"]["status"]
    assert (st["phase"], st["reasons"]) == ("Queued", ["reclaim_preempt"])
    assert "reclaimed" in events_of(admin, "infer-000")
    kubelet_step(admin)  # the evicted pod goes

    assert complete_job(admin, "a") == 2
    set_clock(admin, 3600.0)
    assert ctl.run_once().decided
    js = jobs_by_name(admin)
    assert js["a"]["status"]["phase"] == "Succeeded"
    assert js["a"]["status"]["finishTimeS"] == 3600
    assert js["c"]["status"]["placement"] == [{"node": "train-000", "workers": 1}]
    assert events_of(admin, "c")[-1] == "sjf_order"
    assert not node(admin, "infer-000")["spec"].get("unschedulable")
    # nothing new: no decision, no write
    n_writes = sum(v for key, v in ctl.kube.calls.items() if not key.startswith("GET"))
    assert not ctl.run_once().decided
    assert sum(v for key, v in ctl.kube.calls.items() if not key.startswith("GET")) == n_writes


BAD = [  # (spec changes, the field named, words of the message)
    ({"minWorkers": 3, "maxWorkers": 2, "elastic": True}, "spec.minWorkers", "> maxWorkers"),
    ({"gpusPerWorker": 0}, "spec.gpusPerWorker", "[1, 1024]"),
    ({"family": "no-such-model"}, "spec.family", "unknown family"),
    ({"workers": 10**9, "maxWorkers": 10**9}, "spec.workers", "[1, 4096]"),
    ({"durationS": -5}, "spec.durationS", "(0, 1e+09]"),
    ({"durationS": 1e300}, "spec.durationS", "(0, 1e+09]"),
    ({"minWorkers": 1, "maxWorkers": 4}, "spec.elastic", "false, but"),
    ({"alpha": 3}, "spec.alpha", "[0, 1]"),
    ({"workers": 5}, "spec.workers", "outside [minWorkers, maxWorkers]"),
]


def test_bad_objects_get_a_condition_and_an_event_and_the_rest_runs(admin: Kube) -> None:
    add_fake_nodes(admin, 1, 0)
    for i, (change, _, _) in enumerate(BAD):
        obj = tj(f"bad{i}", 1, 1)
        obj["spec"].update(change)
        admin.request("POST", admin.ns_path("trainingjobs", group=TJ), obj)
    del_obj = tj("nodur", 1, 1)
    del del_obj["spec"]["durationS"]
    admin.request("POST", admin.ns_path("trainingjobs", group=TJ), del_obj)
    admin.request("POST", admin.ns_path("trainingjobs", group=TJ), tj("good", 2, 2))
    admin.request("POST", admin.ns_path("trainingjobs", group=TJ), tj("huge", 8, 2))
    # refused by the API server itself (the CRD's types): nothing reaches the controller
    for change in ({"workers": "two"}, {"gpusPerWorker": 1.5}, {"elastic": "yes"}):
        obj = tj("typed", 1, 1)
        obj["spec"].update(change)
        with pytest.raises(ApiError) as e:
            admin.request("POST", admin.ns_path("trainingjobs", group=TJ), obj)
        assert e.value.status == 422
        assert "spec." in str(e.value)
    ctl = Controller(admin, ControllerOptions(namespace=admin.namespace, leader_election=False))
    assert ctl.run_once().decided
    js = jobs_by_name(admin)
    for i, (_, fld, words) in enumerate(BAD):
        st = js[f"bad{i}"]["status"]
        assert st["phase"] == "Invalid", (i, st)
        assert st["conditions"][0]["field"] == fld, (i, st)
        assert words in st["message"], (i, st)
        assert events_of(admin, f"bad{i}") == ["invalid_spec"]
    assert js["nodur"]["status"]["conditions"][0]["field"] == "spec.durationS"
    assert js["good"]["status"]["phase"] == "Running"
    assert js["huge"]["status"]["phase"] == "Unschedulable"  # 16 GPUs > 8 on the one node
    assert events_of(admin, "huge") == ["never_fits"]
    # the same problem is reported once: no new Event on the next pass
    ctl.run_once()
    assert events_of(admin, "bad0") == ["invalid_spec"]


class Flaky:
    """A Kube whose writes fail at random, before reaching the server or after it applied
    them (the answer lost): updates (PUT, PATCH) with 409 Conflict, creations and deletions
    with no answer (a dropped connection)."""

    def __init__(self, inner: Kube, rate: float, seed: int) -> None:
        self.inner = inner
        self.rng = random.Random(seed)
        self.rate = rate
        self.namespace = inner.namespace
        self.calls = inner.calls
        self.n_injected = 0

    def __getattr__(self, name: str) -> Any:  # writes, clone, stream: the inner Kube's
        return getattr(self.inner, name)

    def ns_path(self, *a: Any, **kw: Any) -> str:
        return self.inner.ns_path(*a, **kw)

    def get_or_none(self, path: str) -> Any:
        return self.inner.get_or_none(path)

    def request(self, method: str, path: str, *a: Any, **kw: Any) -> Any:
        if method != "GET" and self.rng.random() < self.rate:
            self.n_injected += 1
            if self.rng.random() < 0.5:
                self.inner.request(method, path, *a, **kw)
            status = 409 if method in ("PUT", "PATCH") else 0
            raise ApiError(status, "injected", method, path)
        return self.inner.request(method, path, *a, **kw)


def test_injected_conflicts_never_bind_a_pod_twice(admin: Kube) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from k8s_harness import Harness
    from test_k8s_equivalence import compare, demand_fn, sim_events, slice_jobs

    jobs = slice_jobs(30)
    ev, _ = sim_events(jobs)
    add_fake_nodes(admin, 6, 3)
    flaky = Flaky(admin, 0.15, seed=3)
    ctl = Controller(flaky, ControllerOptions(namespace=admin.namespace,  # type: ignore[arg-type]
                                              virtual_clock=True, leader_election=False))

    def step(now: float) -> None:
        for _ in range(200):
            try:
                ctl.run_once()
            except ApiError:
                continue
            cm = admin.request("GET", admin.ns_path("configmaps", "aryl-scheduler-state"))
            if float(cm["data"]["nowS"]) == now and cm["data"]["applied"] == cm["data"]["pass"]:
                return
        raise AssertionError(f"no decision applied at {now}")

    h = Harness(admin, jobs, demand_fn(jobs), step)
    h.run()
    assert flaky.n_injected > 50  # and the harness saw every pod bound once, to its node
    assert compare(h, jobs, ev) == len(ev)
