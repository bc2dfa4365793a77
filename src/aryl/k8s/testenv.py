"""A local Kubernetes control plane for tests and the tutorial: etcd + kube-apiserver.

The binaries come from ``scripts/k8s-testenv.sh build`` (kube-apiserver 1.20 built from
Debian's source package, etcd from Debian), cached in :func:`cache_dir`.  :class:`TestEnv`
starts etcd and the API server on free loopback ports with a static token file (an admin
token for the harness, a token for the controller whose rights come from RBAC only), waits
until the API server is ready and the ``default`` namespace exists, and writes two
kubeconfig files.  Nothing else runs: no kubelet, scheduler or controller-manager (the
test harness plays the kubelet).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from aryl.errors import ArylError

__all__ = ["CONTROLLER_USER", "TestEnv", "add_fake_nodes", "binaries", "cache_dir", "complete_job",
           "kubelet_step", "set_clock", "set_config_map"]

log = logging.getLogger(__name__)

#: The user the controller's token authenticates as: the ServiceAccount of deploy/rbac.yaml,
#: so the shipped ClusterRoleBinding (and nothing else) gives it its rights.
CONTROLLER_USER = "system:serviceaccount:aryl-system:aryl-controller"


def cache_dir() -> Path:
    """Where ``scripts/k8s-testenv.sh`` caches the binaries (``$ARYL_K8S_CACHE``)."""
    env = os.environ.get("ARYL_K8S_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aryl" / "k8s"


def binaries() -> tuple[Path, Path] | None:
    """``(kube-apiserver, etcd)`` when both are built, else None."""
    b = cache_dir() / "bin"
    api, etcd = b / "kube-apiserver", b / "etcd"
    if os.access(api, os.X_OK) and os.access(etcd, os.X_OK):
        return api, etcd
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(server: str, token: str, user: str, ca: Path) -> str:
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: aryl-test\n  cluster:\n    server: {server}\n"
        f"    certificate-authority: {ca}\n"
        f"users:\n- name: {user}\n  user:\n    token: {token}\n"
        f"contexts:\n- name: aryl-test\n  context:\n    cluster: aryl-test\n    user: {user}\n"
        "current-context: aryl-test\n"
    )


class TestEnv:
    """etcd + kube-apiserver on loopback ports under ``workdir``.

    Attributes
    ----------
    server : str
        ``https://127.0.0.1:PORT`` of the API server.
    admin_kubeconfig, controller_kubeconfig : Path
        Kubeconfig files: the harness's (``system:masters``) and the controller's
        (user :data:`CONTROLLER_USER`, rights from RBAC only).

    Raises
    ------
    ArylError
        The binaries are missing (naming the build command) or a process did not
        come up in time (with the tail of its log).
    """

    __test__ = False  # not a pytest class

    def __init__(self, workdir: Path | str) -> None:
        bins = binaries()
        if bins is None:
            raise ArylError(
                f"kube-apiserver/etcd not found in {cache_dir() / 'bin'}; "
                "build them with scripts/k8s-testenv.sh build"
            )
        self.apiserver_bin, self.etcd_bin = bins
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.etcd_port = _free_port()
        self.peer_port = _free_port()
        self.api_port = _free_port()
        self.server = f"https://127.0.0.1:{self.api_port}"
        self.admin_token = os.urandom(16).hex()
        self.controller_token = os.urandom(16).hex()
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        self.controller_kubeconfig = self.workdir / "controller.kubeconfig"
        self._etcd: subprocess.Popen[bytes] | None = None
        self._api: subprocess.Popen[bytes] | None = None

    # -- processes ---------------------------------------------------------------
    def start(self, timeout_s: float = 60.0) -> TestEnv:
        """Start etcd, then the API server; return when it serves the ``default`` namespace."""
        self._write_files()
        self.start_etcd()
        self.start_apiserver(timeout_s)
        return self

    def _write_files(self) -> None:
        d = self.workdir
        (d / "certs").mkdir(exist_ok=True)
        if not (d / "sa.key").exists():
            subprocess.run(["openssl", "genrsa", "-out", str(d / "sa.key"), "2048"],
                           check=True, capture_output=True)
            subprocess.run(["openssl", "rsa", "-in", str(d / "sa.key"), "-pubout", "-out",
                            str(d / "sa.pub")], check=True, capture_output=True)
        (d / "tokens.csv").write_text(
            f"{self.admin_token},aryl-admin,1,system:masters\n"
            f'{self.controller_token},{CONTROLLER_USER},2,"system:serviceaccounts,'
            'system:serviceaccounts:aryl-system"\n',
            encoding="utf-8",
        )

    def start_etcd(self) -> None:
        d = self.workdir
        u, p = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{self.peer_port}"
        with open(d / "etcd.log", "ab") as out:
            self._etcd = subprocess.Popen(
                [str(self.etcd_bin), "--name", "aryl", "--data-dir", str(d / "etcd"),
                 "--listen-client-urls", u, "--advertise-client-urls", u,
                 "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                 "--initial-cluster", f"aryl={p}", "--unsafe-no-fsync"],
                stdout=out, stderr=subprocess.STDOUT,
            )

    def start_apiserver(self, timeout_s: float = 60.0) -> None:
        """Start (or restart) the API server against the running etcd and wait until ready."""
        d = self.workdir
        with open(d / "apiserver.log", "ab") as out:
            self._api = subprocess.Popen(
                [str(self.apiserver_bin), f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                 "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                 f"--secure-port={self.api_port}", f"--cert-dir={d / 'certs'}",
                 f"--token-auth-file={d / 'tokens.csv'}", "--authorization-mode=RBAC",
                 "--service-account-issuer=https://kubernetes.default.svc",
                 f"--service-account-key-file={d / 'sa.pub'}",
                 f"--service-account-signing-key-file={d / 'sa.key'}",
                 "--service-cluster-ip-range=10.96.0.0/24",
                 "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                 "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"],
                stdout=out, stderr=subprocess.STDOUT,
            )
        self._wait_ready(timeout_s)
        # the API server's self-signed certificate (with its CA) verifies the connection
        ca = d / "certs" / "apiserver.crt"
        self.admin_kubeconfig.write_text(
            _kubeconfig(self.server, self.admin_token, "aryl-admin", ca), encoding="utf-8")
        self.controller_kubeconfig.write_text(
            _kubeconfig(self.server, self.controller_token, "aryl-controller", ca),
            encoding="utf-8")

    def _get(self, path: str) -> tuple[int, str]:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(self.server + path,
                                     headers={"Authorization": f"Bearer {self.admin_token}"})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
                return int(r.status), r.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def _wait_ready(self, timeout_s: float) -> None:
        t_end = time.monotonic() + timeout_s
        while time.monotonic() < t_end:
            assert self._api is not None
            if self._api.poll() is not None:
                raise ArylError("kube-apiserver exited:\n" + self._tail("apiserver.log"))
            code, _ = self._get("/api/v1/namespaces/default")
            if code == 200:
                return
            time.sleep(0.3)
        raise ArylError("kube-apiserver not ready in time:\n" + self._tail("apiserver.log"))

    def _tail(self, name: str, n: int = 20) -> str:
        try:
            lines = (self.workdir / name).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop_apiserver(self) -> None:
        """Stop the API server (etcd keeps the data)."""
        if self._api is not None and self._api.poll() is None:
            self._api.terminate()
            try:
                self._api.wait(10)
            except subprocess.TimeoutExpired:
                self._api.kill()
                self._api.wait()
        self._api = None

    def stop(self) -> None:
        """Stop both processes (the work directory is kept)."""
        self.stop_apiserver()
        if self._etcd is not None and self._etcd.poll() is None:
            self._etcd.terminate()
            try:
                self._etcd.wait(10)
            except subprocess.TimeoutExpired:
                self._etcd.kill()
                self._etcd.wait()
        self._etcd = None

    def remove(self) -> None:
        """Stop and delete the work directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


# -- the harness's side: fake nodes, a fake kubelet, the inference autoscaler ---------------
def add_fake_nodes(kube: Any, n_training: int, n_inference: int, *, gpus: int = 8,
                   gpu_type: str = "V100", prefix: str = "") -> list[str]:
    """Create GPU nodes (``{prefix}train-NNN`` then ``{prefix}infer-NNN``) with the labels,
    taint and ``nvidia.com/gpu`` capacity of docs/kubernetes.md, Ready; their names."""
    from aryl.k8s.objects import GPU_RESOURCE, LABEL_POOL, LABEL_PRODUCT, TAINT_KEY

    names = []
    width = max(3, len(str(max(n_training, n_inference))))
    for role, n in (("training", n_training), ("inference", n_inference)):
        for i in range(n):
            name = f"{prefix}{role[:5]}-{i:0{width}d}"
            spec: dict[str, Any] = {}
            if role == "inference":
                spec["taints"] = [{"key": TAINT_KEY, "value": "serving", "effect": "NoSchedule"}]
            kube.request("POST", "/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {LABEL_POOL: role, LABEL_PRODUCT: gpu_type}},
                "spec": spec})
            cap = {GPU_RESOURCE: str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"}
            kube.request("PATCH", f"/api/v1/nodes/{name}/status", {"status": {
                "capacity": cap, "allocatable": cap,
                "conditions": [{"type": "Ready", "status": "True", "reason": "FakeKubelet",
                                "message": "aryl test harness"}]}},
                content_type="application/merge-patch+json")
            names.append(name)
    return names


def kubelet_step(kube: Any) -> list[dict[str, Any]]:
    """Play the kubelet once: bound Pending pods become Running, terminating pods (evicted or
    deleted) are removed.  Returns the job pods as they are afterwards."""
    from aryl.k8s.kube import ApiError
    from aryl.k8s.objects import LABEL_JOB

    pods = kube.request("GET", kube.ns_path("pods"), query={"labelSelector": LABEL_JOB})
    out = []
    for p in pods.get("items", []):
        name = p["metadata"]["name"]
        try:
            if p["metadata"].get("deletionTimestamp"):
                kube.request("DELETE", kube.ns_path("pods", name), {"gracePeriodSeconds": 0},
                             query={"gracePeriodSeconds": "0"})
                continue
            if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase",
                                                                        "Pending") == "Pending":
                p = kube.request("PATCH", kube.ns_path("pods", name, "status"),
                                 {"status": {"phase": "Running"}},
                                 content_type="application/merge-patch+json")
        except ApiError as exc:
            if exc.status != 404:
                raise
            continue
        out.append(p)
    return out


def complete_job(kube: Any, job: str) -> int:
    """The job's work is done: its running pods succeed (their count)."""
    from aryl.k8s.objects import LABEL_JOB

    pods = kube.request("GET", kube.ns_path("pods"), query={"labelSelector": f"{LABEL_JOB}={job}"})
    n = 0
    for p in pods.get("items", []):
        if p["metadata"].get("deletionTimestamp") or not p["spec"].get("nodeName"):
            continue
        kube.request("PATCH", kube.ns_path("pods", p["metadata"]["name"], "status"),
                     {"status": {"phase": "Succeeded"}},
                     content_type="application/merge-patch+json")
        n += 1
    return n


def set_config_map(kube: Any, name: str, data: dict[str, str]) -> None:
    """Create or replace ConfigMap ``name`` with ``data`` (the autoscaler's need, the clock);
    one request when it exists (an unconditional update)."""
    from aryl.k8s.kube import ApiError

    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": kube.namespace}, "data": data}
    try:
        kube.request("PUT", kube.ns_path("configmaps", name), body)
    except ApiError as exc:
        if exc.status != 404:
            raise
        kube.request("POST", kube.ns_path("configmaps"), body)


def set_clock(kube: Any, now_s: float) -> None:
    """Move the virtual clock (ConfigMap ``aryl-clock``, ``data.nowS``) after ``kube``'s
    earlier writes, which it names in ``data.after`` (their resourceVersions: a controller's
    cache waits until it has seen them; docs/kubernetes.md, "The cache")."""
    import json

    set_config_map(kube, "aryl-clock", {"nowS": repr(float(now_s)),
                                        "after": json.dumps(kube.writes.take())})
