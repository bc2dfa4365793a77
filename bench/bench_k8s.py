"""The controller's pass at scale against the local API server (docs/kubernetes.md, "Scale").

Run: ``python bench/bench_k8s.py`` (1,000 fake 8-GPU nodes — 900 training, 100 inference —
and 1,000 rigid jobs of 5 one-GPU workers: 5,000 worker pods), or through pytest (a small
smoke size; skips without ``scripts/k8s-testenv.sh build``).

Measured: the first pass (every job admitted, 5,000 pods created and bound: bulk, timed
apart) and then steady passes — one job's pods succeed and one job arrives between two
passes — each split into read (the lists of nodes, jobs, pods, ConfigMaps), decide (of which
``aryl.schedule`` alone) and apply, with its API calls by verb and resource.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_bench(n_nodes: int, n_jobs: int, workers: int = 5, n_steady: int = 3) -> dict[str, Any]:
    from aryl.k8s.controller import Controller, ControllerOptions
    from aryl.k8s.kube import Kube, load_api_client
    from aryl.k8s.manifests import apply_file
    from aryl.k8s.testenv import TestEnv, add_fake_nodes, complete_job, set_config_map

    with tempfile.TemporaryDirectory() as d:
        env = TestEnv(Path(d)).start()
        try:
            admin = Kube(load_api_client(str(env.admin_kubeconfig)), "default")
            apply_file(admin, ROOT / "deploy" / "crd.yaml")
            time.sleep(2.0)
            n_inf = max(1, n_nodes // 10)
            n_train = n_nodes - n_inf
            with ThreadPoolExecutor(8) as pool:  # setup only: nodes in parallel
                list(pool.map(lambda i: add_fake_nodes(admin, 1, 0, prefix=f"n{i}-"),
                              range(n_train)))
                list(pool.map(lambda i: add_fake_nodes(admin, 0, 1, prefix=f"n{i}-"),
                              range(n_inf)))

            def job(i: int) -> dict[str, Any]:
                return {"apiVersion": "aryl.io/v1alpha1", "kind": "TrainingJob",
                        "metadata": {"name": f"job-{i:05d}"},
                        "spec": {"gpusPerWorker": 1, "workers": workers,
                                 "durationS": 3600.0 + i, "template": {"spec": {
                                     "containers": [{"name": "t", "image": "t"}]}}}}

            path = admin.ns_path("trainingjobs", group="aryl.io/v1alpha1")
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: admin.request("POST", path, job(i)), range(n_jobs)))
            set_config_map(admin, "aryl-inference", {"serversNeeded": str(n_inf)})
            ck = Kube(load_api_client(str(env.admin_kubeconfig)), "default", timeout_s=120)
            ctl = Controller(ck, ControllerOptions(virtual_clock=True, leader_election=False))
            set_config_map(admin, "aryl-clock", {"nowS": "0.0"})
            t = time.perf_counter()
            r = ctl.run_once()
            first = {"wall_s": time.perf_counter() - t, "read_s": r.read_s,
                     "decide_s": r.decide_s, "schedule_s": r.schedule_s, "apply_s": r.apply_s,
                     "n_calls": sum(ck.calls.values()), "calls": dict(ck.calls)}
            steady = []
            for s in range(n_steady):
                complete_job(admin, f"job-{s:05d}")
                admin.request("POST", path, job(n_jobs + s))
                set_config_map(admin, "aryl-clock", {"nowS": repr(3600.0 * (s + 1))})
                ck.calls.clear()
                t = time.perf_counter()
                r = ctl.run_once()
                assert r.decided
                steady.append({"wall_s": time.perf_counter() - t, "read_s": r.read_s,
                               "decide_s": r.decide_s, "schedule_s": r.schedule_s,
                               "apply_s": r.apply_s, "n_calls": sum(ck.calls.values()),
                               "calls": dict(ck.calls)})
            n_pods = len(admin.request("GET", admin.ns_path("pods"))["items"])
        finally:
            env.remove()
    return {"n_nodes": n_nodes, "n_jobs": n_jobs, "n_pods": n_pods, "first": first,
            "steady": steady}


def test_bench_k8s_pass_smoke() -> None:
    from aryl.k8s.testenv import binaries

    pytest.importorskip("kubernetes")
    if binaries() is None:
        pytest.skip("kube-apiserver/etcd not built: scripts/k8s-testenv.sh build")
    out = run_bench(20, 25, n_steady=1)  # 18 training nodes: 144 GPUs for 125 workers
    assert out["n_pods"] == 26 * 5  # every job started, one more arrived (the finished
    # job's pods stay, Succeeded)
    st = out["steady"][0]
    # a steady pass: 4 lists, the record twice, the finished job's status, the new job's pods
    assert st["calls"]["GET nodes"] == 1
    assert st["calls"]["GET pods"] == 1
    assert st["calls"]["POST pods"] == 5
    assert st["calls"]["POST pods/binding"] == 5


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=1000)
    a = ap.parse_args()
    print(json.dumps(run_bench(a.nodes, a.jobs), indent=1))
