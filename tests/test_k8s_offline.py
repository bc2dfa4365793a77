"""The Kubernetes controller's pure parts, without an API server: TrainingJob checks, the
worker pod manifest, node parsing, and `aryl k8s` without the optional client."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.k8s.kube import _resource
from aryl.k8s.objects import SpecError, parse_job, parse_node, worker_pod


def job(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"gpusPerWorker": 2, "workers": 2, "durationS": 60.0}
    base.update(spec)
    return {"metadata": {"name": "j", "uid": "u1"}, "spec": base}


def test_a_good_job_and_its_defaults() -> None:
    s = parse_job(job(), ("resnet50",))
    assert (s.min_workers, s.max_workers, s.elastic, s.alpha, s.family) == (2, 2, False, 0.05,
                                                                             None)
    e = parse_job(job(elastic=True, minWorkers=1, maxWorkers=4, family="resnet50"), ("resnet50",))
    assert (e.min_workers, e.workers, e.max_workers, e.family) == (1, 2, 4, "resnet50")


@pytest.mark.parametrize(("spec", "field", "message"), [
    ({"gpusPerWorker": None}, "spec.gpusPerWorker", "required"),
    ({"gpusPerWorker": True}, "spec.gpusPerWorker", "must be an integer, got True"),
    ({"gpusPerWorker": 2000}, "spec.gpusPerWorker", "must be in [1, 1024], got 2000"),
    ({"workers": 0}, "spec.workers", "must be in [1, 4096], got 0"),
    ({"elastic": True, "minWorkers": 3, "maxWorkers": 2}, "spec.minWorkers",
     "minWorkers 3 > maxWorkers 2"),
    ({"minWorkers": 1, "maxWorkers": 3}, "spec.elastic", "false, but minWorkers 1 != maxWorkers 3"),
    ({"elastic": True, "minWorkers": 3, "maxWorkers": 4}, "spec.workers",
     "2 is outside [minWorkers, maxWorkers] = [3, 4]"),
    ({"elastic": "yes"}, "spec.elastic", "must be true or false, got 'yes'"),
    ({"alpha": -0.1}, "spec.alpha", "must be a number in [0, 1], got -0.1"),
    ({"durationS": float("nan")}, "spec.durationS", "must be a number in (0, 1e+09] s, got nan"),
    ({"durationS": 0}, "spec.durationS", "must be a number in (0, 1e+09] s, got 0"),
    ({"family": "gpt-9"}, "spec.family", "unknown family 'gpt-9'; known: ['resnet50']"),
    ({"template": []}, "spec.template", "must be a pod template object"),
])
def test_each_bad_field_is_named(spec: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_job(job(**spec), ("resnet50",))
    assert (e.value.field, e.value.message) == (field, message)
    assert str(e.value) == f"{field}: {message}"


def test_no_spec_at_all() -> None:
    with pytest.raises(SpecError, match=r"^spec: missing$"):
        parse_job({"metadata": {"name": "x"}})


def test_the_worker_pod_keeps_the_template_and_sets_what_the_controller_needs() -> None:
    s = parse_job(job(template={"metadata": {"labels": {"team": "a"}}, "spec": {
        "nodeName": "sneaky", "containers": [{"name": "t", "image": "img", "resources": {
            "limits": {"cpu": "2"}}}]}}))
    p = worker_pod(s, "j-w0", "train-001", "ns")
    assert p["metadata"]["labels"] == {"team": "a", "aryl.io/job": "j"}
    assert p["metadata"]["annotations"] == {"aryl.io/node": "train-001"}
    assert p["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert p["spec"]["schedulerName"] == "aryl"
    assert "nodeName" not in p["spec"]  # bound through the Binding subresource only
    assert p["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "2", "nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}
    assert s.template["spec"]["nodeName"] == "sneaky"  # the job's template is not modified


def test_nodes_that_are_not_arylss_are_ignored() -> None:
    def node(labels: dict[str, str], gpus: str | None) -> dict[str, Any]:
        alloc = {} if gpus is None else {"nvidia.com/gpu": gpus}
        return {"metadata": {"name": "n", "labels": labels}, "spec": {},
                "status": {"allocatable": alloc}}

    assert parse_node(node({}, "8")) is None
    assert parse_node(node({"aryl.io/pool": "training"}, None)) is None
    assert parse_node(node({"aryl.io/pool": "training"}, "x")) is None
    n = parse_node(node({"aryl.io/pool": "inference", "nvidia.com/gpu.product": "A100"}, "4"))
    assert n is not None
    assert (n.role, n.gpus, n.gpu_type, n.loaned_label) == ("inference", 4, "A100", False)


def test_call_counts_are_keyed_by_resource() -> None:
    assert _resource("/api/v1/nodes") == "nodes"
    assert _resource("/api/v1/nodes/n1") == "nodes"
    assert _resource("/api/v1/namespaces/d/pods/p/binding") == "pods/binding"
    assert _resource("/api/v1/namespaces/d/pods?x=1") == "pods"
    assert _resource("/apis/aryl.io/v1alpha1/namespaces/d/trainingjobs/j/status") == \
        "trainingjobs/status"


def test_aryl_k8s_without_the_client_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # import kubernetes -> ImportError
    cfg = tmp_path / "kubeconfig"
    cfg.write_text("apiVersion: v1\n")
    r = CliRunner().invoke(main, ["k8s", "run", "--kubeconfig", str(cfg), "--once"])
    assert r.exit_code == 2
    assert "pip install 'aryl[k8s]'" in r.output
    assert "Traceback" not in r.output
