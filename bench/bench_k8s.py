"""The controller's pass at scale against the local API server (docs/kubernetes.md, "Scale").

Run: ``python bench/bench_k8s.py`` (1,000 fake 8-GPU nodes — 900 training, 100 inference —
and 1,000 rigid jobs of 5 one-GPU workers: 5,000 worker pods), or through pytest (a small
smoke size; skips without ``scripts/k8s-testenv.sh build``).

Measured: the first pass (every job admitted, 5,000 pods created and bound: bulk, timed
apart), the cache's first sync, and then steady passes — one job's pods succeed and one job
arrives between two passes — of two controllers in turn on the same cluster, one listing
every collection every pass (``watch=False``, the version before the cache) and one reading
its cache (list once, then watch); each pass split into read (the lists, or the cache's
freshness wait and snapshot), decide (of which ``aryl.schedule`` alone) and apply, with its
API calls by verb and resource and the watch events the cache received.
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
    from aryl.k8s.testenv import TestEnv, add_fake_nodes, complete_job, set_clock, set_config_map

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

            def controller(watch: bool) -> Any:
                ck = Kube(load_api_client(str(env.admin_kubeconfig)), "default", timeout_s=120)
                return Controller(ck, ControllerOptions(virtual_clock=True, leader_election=False,
                                                        watch=watch, cache_timeout_s=120))

            ctls = {"list": controller(False), "watch": controller(True)}
            set_clock(admin, 0.0)
            ck = ctls["list"].kube
            t = time.perf_counter()
            r = ctls["list"].run_once()
            first = {"wall_s": time.perf_counter() - t, "read_s": r.read_s,
                     "decide_s": r.decide_s, "schedule_s": r.schedule_s, "apply_s": r.apply_s,
                     "n_calls": sum(ck.calls.values()), "calls": dict(ck.calls)}
            # the cache's first sync (four lists, the watches opened): once per controller
            t = time.perf_counter()
            ctls["watch"].read()
            sync = {"wall_s": time.perf_counter() - t,
                    "calls": dict(ctls["watch"].cache.reflectors["pods"].kube.calls)}
            steady: dict[str, list[dict[str, Any]]] = {"list": [], "watch": []}
            for s in range(2 * n_steady):  # the two controllers in turn, on the same cluster
                mode = ("list", "watch")[s % 2]
                ctl = ctls[mode]
                complete_job(admin, f"job-{s:05d}")
                admin.request("POST", path, job(n_jobs + s))
                set_clock(admin, 3600.0 * (s + 1))
                ctl.kube.calls.clear()
                ev0 = _events(ctl)
                t = time.perf_counter()
                r = ctl.run_once()
                assert r.decided
                steady[mode].append({
                    "wall_s": time.perf_counter() - t, "read_s": r.read_s,
                    "decide_s": r.decide_s, "schedule_s": r.schedule_s, "apply_s": r.apply_s,
                    "n_calls": sum(ctl.kube.calls.values()), "calls": dict(ctl.kube.calls),
                    "watch_events": _events(ctl) - ev0})
            ctls["watch"].close()
            lists = list_costs(ctls["list"].kube)
            n_pods = len(admin.request("GET", admin.ns_path("pods"))["items"])
        finally:
            env.remove()
    return {"n_nodes": n_nodes, "n_jobs": n_jobs, "n_pods": n_pods, "first": first,
            "cache_sync": sync, "steady": steady, "lists": lists}


def list_costs(kube: Any) -> dict[str, dict[str, float]]:
    """Where a listing pass's read goes: per collection, the answer's size, the request
    (sent until the whole body is read) and the JSON parse, seconds."""
    from aryl.k8s.objects import LABEL_JOB

    out = {}
    for name, path, query in (
            ("configmaps", kube.ns_path("configmaps"), []),
            ("nodes", "/api/v1/nodes", []),
            ("trainingjobs", kube.ns_path("trainingjobs", group="aryl.io/v1alpha1"), []),
            ("pods", kube.ns_path("pods"), [("labelSelector", LABEL_JOB)])):
        ac = kube.api_client
        t = time.perf_counter()
        req = ac.param_serialize("GET", path, query_params=query,
                                 header_params={"Accept": "application/json"},
                                 auth_settings=["BearerToken"])
        resp = ac.call_api(*req, _request_timeout=120)
        body = resp.read()
        t_req = time.perf_counter() - t
        t = time.perf_counter()
        n = len(json.loads(body)["items"])
        out[name] = {"objects": n, "mb": len(body) / 1e6, "request_s": t_req,
                     "parse_s": time.perf_counter() - t}
    return out


def _events(ctl: Any) -> int:
    """Watch events the controller's cache has received so far (0 without a cache)."""
    if ctl.cache is None:
        return 0
    return sum(r.n_events for r in ctl.cache.reflectors.values())


def test_bench_k8s_pass_smoke() -> None:
    from aryl.k8s.testenv import binaries

    pytest.importorskip("kubernetes")
    if binaries() is None:
        pytest.skip("kube-apiserver/etcd not built: scripts/k8s-testenv.sh build")
    out = run_bench(20, 25, n_steady=1)  # 18 training nodes: 144 GPUs for 125 workers
    assert out["n_pods"] == 27 * 5  # every job started, two more arrived (the finished
    # jobs' pods stay, Succeeded)
    for mode in ("list", "watch"):
        st = out["steady"][mode][0]
        # a steady pass: the record twice, the finished job's status, the new job's pods
        # (and without the cache 4 lists)
        assert st["calls"].get("GET nodes", 0) == (mode == "list"), (mode, st)
        assert st["calls"].get("GET pods", 0) == (mode == "list"), (mode, st)
        assert st["calls"]["POST pods"] == 5
        assert st["calls"]["POST pods/binding"] == 5
        assert st["calls"]["PUT configmaps"] == 2
    # the watch pass saw the harness's writes as events (5 pods succeeded, 1 job, the clock)
    assert out["steady"]["watch"][0]["watch_events"] >= 7


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=1000)
    a = ap.parse_args()
    print(json.dumps(run_bench(a.nodes, a.jobs), indent=1))
