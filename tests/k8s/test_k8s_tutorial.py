"""The tutorial of docs/kubernetes.md with kubectl: the CRD and RBAC applied, the Deployment
in a server-side dry run, the tutorial's jobs submitted with ``kubectl apply``, ``kubectl
get`` / ``kubectl describe`` showing the phases and the Events with Aryl's reason codes, a
loan, then the inference demand raised and the reclaim choosing its node.

kubectl 1.20 comes from ``scripts/k8s-testenv.sh build --kubectl`` (Debian's
kubernetes-client); without it the test skips and says so.  The controller runs on the
wall clock with the ServiceAccount's token, one pass at a time; the test plays the kubelet.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from aryl.k8s.controller import Controller, ControllerOptions
from aryl.k8s.kube import Kube, load_api_client
from aryl.k8s.testenv import add_fake_nodes, cache_dir, kubelet_step

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "deploy" / "examples"


def kubectl_path() -> Path:
    p = cache_dir() / "bin" / "kubectl"
    if not os.access(p, os.X_OK):
        pytest.skip(f"kubectl not in {p.parent}: run scripts/k8s-testenv.sh build --kubectl")
    return p


def test_the_tutorial_with_kubectl(testenv: Any, admin: Kube) -> None:
    kubectl = kubectl_path()
    ns = admin.namespace

    def kc(*args: str, in_ns: bool = True) -> str:
        """kubectl as the admin (in the test's namespace, the tutorial's ``default``)."""
        where = ["-n", ns] if in_ns else []
        out = subprocess.run([str(kubectl), "--kubeconfig", str(testenv.admin_kubeconfig),
                              *where, *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out.stdout

    add_fake_nodes(admin, 2, 1)  # as `aryl k8s testenv --training-nodes 2 --inference-nodes 1`
    out = kc("apply", "-f", str(ROOT / "deploy" / "crd.yaml"), "-f",
             str(ROOT / "deploy" / "rbac.yaml"), in_ns=False)
    assert "clusterrole.rbac.authorization.k8s.io/aryl-controller" in out
    out = kc("apply", "--dry-run=server", "-f", str(ROOT / "deploy" / "deployment.yaml"),
             in_ns=False)
    assert "deployment.apps/aryl-controller created (server dry run)" in out
    kc("apply", "-f", str(EX / "inference-demand.yaml"))
    ctl = Controller(Kube(load_api_client(str(testenv.controller_kubeconfig)), ns),
                     ControllerOptions(namespace=ns, leader_election=False, poll_s=0.1))

    def decide() -> None:
        """One decision (the cache may see kubectl's writes a moment later: passes until
        one decides), then the kubelet's step."""
        t_end = time.monotonic() + 30
        while not ctl.run_once().decided:
            assert time.monotonic() < t_end, "no decision"
            time.sleep(0.1)
        kubelet_step(admin)

    try:
        assert "trainingjob.aryl.io/small created" in kc("apply", "-f", str(EX / "jobs.yaml"))
        decide()
        rows = {ln.split()[0]: ln.split() for ln in kc("get", "tj").splitlines()[1:]}
        # NAME PHASE WORKERS REASONS AGE: shortest first, resnet waits (no loan: reserve 1)
        assert rows["small"][1:4] == ["Running", "1", '["sjf_order"]']
        assert rows["bert"][1:4] == ["Running", "1", '["sjf_order"]']
        assert rows["resnet"][1:4] == ["Queued", "0", '["queued"]']
        desc = kc("describe", "tj", "small")
        assert "Events:" in desc
        assert "queued" in desc
        assert "sjf_order" in desc
        assert "started on train-000 x1" in desc

        kc("apply", "-f", str(EX / "loan-config.yaml"))  # loan reserve 0
        decide()
        rows = {ln.split()[0]: ln.split() for ln in kc("get", "tj").splitlines()[1:]}
        assert rows["resnet"][1:4] == ["Running", "2", '["sjf_order"]']
        assert "started on train-000 x1, infer-000 x1" in kc("describe", "tj", "resnet")
        assert "aryl.io/loaned=true" in kc("describe", "node", "infer-000")
        # the node's Events live in the controller's namespace (kubectl describe node looks
        # in default, for the kubelet's)
        node_events = ["get", "events", "--field-selector", "involvedObject.name=infer-000"]
        assert "loan_for_base" in kc(*node_events)

        kc("patch", "configmap", "aryl-inference", "-p", '{"data":{"serversNeeded":"1"}}')
        decide()
        rows = {ln.split()[0]: ln.split() for ln in kc("get", "tj").splitlines()[1:]}
        assert rows["resnet"][1:4] == ["Queued", "0", '["reclaim_preempt"]']
        assert rows["small"][1] == rows["bert"][1] == "Running"
        assert "preempted: its loaned node is reclaimed" in kc("describe", "tj", "resnet")
        assert "reclaimed" in kc(*node_events)
        node = kc("describe", "node", "infer-000")
        assert "aryl.io/inference=serving:NoSchedule" in node
        assert "Unschedulable:      true" in node
    finally:
        ctl.close()
