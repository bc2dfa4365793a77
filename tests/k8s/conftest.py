"""Fixtures of the live Kubernetes tests: one etcd + kube-apiserver per session.

The binaries come from ``scripts/k8s-testenv.sh build`` (cached outside the repository);
without them, or without the ``kubernetes`` client, every test here skips and says why.
Each test gets a fresh namespace and a cluster without nodes (nodes are cluster-wide).
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aryl.k8s.testenv import TestEnv, binaries, cache_dir

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # k8s_harness
_counter = itertools.count()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Marked k8s, and run last (in their own order): CI starts the suite while
    # scripts/k8s-testenv.sh still builds the binaries, and the fixture below waits.
    live = []
    for item in items:
        if "tests/k8s/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.k8s)
            live.append(item)
    if live:
        chosen = set(map(id, live))
        items[:] = [i for i in items if id(i) not in chosen] + live


def _wait_for_build() -> None:
    """Wait for a build in progress, as CI runs it (``$ARYL_K8S_BUILD_STATUS``).

    CI starts ``scripts/k8s-testenv.sh build`` in the background and names a file the
    build's exit status is written to when it ends; the live tests then wait for it
    (at most ``$ARYL_K8S_BUILD_WAIT_S``, default 1800 s) instead of skipping, and a
    failed build fails them.  Without the variable nothing waits.
    """
    status = os.environ.get("ARYL_K8S_BUILD_STATUS")
    if not status:
        return
    text = os.environ.get("ARYL_K8S_BUILD_WAIT_S", "1800")
    try:
        limit_s = float(text)
    except ValueError:
        limit_s = float("nan")
    if not limit_s > 0:  # NaN too
        pytest.fail(f"ARYL_K8S_BUILD_WAIT_S: must be a number of seconds > 0, got {text!r}")
    path, t0 = Path(status), time.monotonic()
    while not path.exists():
        if time.monotonic() - t0 > limit_s:
            pytest.fail(f"the Kubernetes build did not end within {limit_s:.0f} s "
                        f"(no exit status in {path}, ARYL_K8S_BUILD_STATUS)")
        time.sleep(1.0)
    code = path.read_text().strip()
    if code != "0":
        pytest.fail(f"scripts/k8s-testenv.sh build failed (exit {code or 'none written'}, "
                    f"from {path}): its log is printed by .ci/run")


@pytest.fixture(scope="session")
def testenv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestEnv]:
    pytest.importorskip("kubernetes", reason="the kubernetes client is not installed "
                        "(pip install 'aryl[k8s]')")
    _wait_for_build()
    if binaries() is None:
        pytest.skip(f"kube-apiserver/etcd not built in {cache_dir() / 'bin'}: run "
                    "scripts/k8s-testenv.sh build")
    env = TestEnv(tmp_path_factory.mktemp("k8s")).start()
    try:
        from aryl.k8s.kube import Kube, load_api_client
        from aryl.k8s.manifests import apply_file

        admin = Kube(load_api_client(str(env.admin_kubeconfig)), "default")
        apply_file(admin, ROOT / "deploy" / "crd.yaml")
        _wait_crd(admin)
        yield env
    finally:
        env.remove()


def _wait_crd(admin: Any) -> None:
    for _ in range(100):
        crd = admin.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                   "trainingjobs.aryl.io")
        conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
        if conds.get("Established") == "True":
            return
        time.sleep(0.1)
    raise AssertionError("the TrainingJob CRD was not established")


@pytest.fixture
def admin(testenv: TestEnv) -> Any:
    """An admin connection to a fresh namespace; every node of earlier tests deleted."""
    from aryl.k8s.kube import Kube, load_api_client

    ns = f"t{next(_counter)}"
    k = Kube(load_api_client(str(testenv.admin_kubeconfig)), ns)
    k.request("POST", "/api/v1/namespaces",
              {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    k.request("DELETE", "/api/v1/nodes")  # the collection: every node
    return k
