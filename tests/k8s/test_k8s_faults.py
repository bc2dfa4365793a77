"""Faults: the controller (a separate ``aryl k8s run`` process) SIGKILLed at random instants
and restarted, the API server restarted (etcd kept), two controllers with the leader
killed — and the run still ends with the simulator's per-job result.

The slice: the first 40 jobs of the equivalence test's (212 decisions, 129 job events) on
the same 6 + 3 nodes; the harness checks its invariants after every decision.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from k8s_harness import Harness
from test_k8s_equivalence import (
    compare,
    demand_fn,
    setup_cluster,
    sim_events,
    slice_jobs,
)

from aryl.k8s.kube import ApiError, Kube

LEASE_S = 2.0


class Proc:
    """One controller process."""

    def __init__(self, testenv: Any, ns: str, identity: str, log: Path) -> None:
        self.identity = identity
        with open(log, "ab") as out:
            self.p = subprocess.Popen(
                [sys.executable, "-c", "from aryl.cli import main; main()", "-v", "k8s", "run",
                 "--kubeconfig", str(testenv.controller_kubeconfig), "--namespace", ns,
                 "--virtual-clock", "--poll-s", "0.05", "--lease-duration-s", str(LEASE_S),
                 "--identity", identity],
                stdout=out, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        self.p.kill()
        self.p.wait()


def record(admin: Kube) -> dict[str, str]:
    cm = admin.get_or_none(admin.ns_path("configmaps", "aryl-scheduler-state"))
    return dict((cm or {}).get("data") or {})


def wait_applied(admin: Kube, now: float, timeout_s: float = 60.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            d = record(admin)
        except ApiError:
            d = {}
        if "nowS" in d and float(d["nowS"]) == now and d.get("applied") == d.get("pass"):
            return time.monotonic() - t0
        time.sleep(0.02)
    raise AssertionError(f"no decision applied at {now} within {timeout_s} s")


def leader(admin: Kube) -> str:
    lease = admin.request("GET", admin.ns_path("leases", "aryl-controller",
                                               group="coordination.k8s.io/v1"))
    return str(lease["spec"]["holderIdentity"])


def test_kills_an_apiserver_restart_and_a_failover_keep_the_result(
        testenv: Any, admin: Kube, tmp_path: Path) -> None:
    from aryl.k8s.manifests import apply_file

    apply_file(admin, Path(__file__).resolve().parents[2] / "deploy" / "rbac.yaml")
    jobs = slice_jobs(40)
    ev, summary = sim_events(jobs)
    n_total = summary["n_decisions"]
    setup_cluster(admin)
    rng = random.Random(7)
    kills = set(rng.sample(range(3, n_total - 80), 3))
    api_restart = n_total - 60
    second, failover = n_total - 40, n_total - 30
    log = tmp_path / "controllers.log"
    procs = {"a": Proc(testenv, admin.namespace, "a", log)}
    seen: dict[str, Any] = {"kills": 0, "takeover_s": None}
    n = [0]

    def step(now: float) -> None:
        n[0] += 1
        i = n[0]
        if i in kills:  # SIGKILL at a random instant of the pass, restart (same identity)
            time.sleep(rng.uniform(0.0, 0.25))
            procs["a"].kill()
            procs["a"] = Proc(testenv, admin.namespace, "a", log)
            seen["kills"] += 1
        if i == api_restart:
            testenv.stop_apiserver()
            time.sleep(1.0)
            testenv.start_apiserver()
        if i == second:
            procs["b"] = Proc(testenv, admin.namespace, "b", log)
        if i == failover:
            who = leader(admin)
            assert who == "a"  # b waited: a renews its lease
            procs.pop(who).kill()
            t = wait_applied(admin, now)
            assert leader(admin) == "b"
            seen["takeover_s"] = t
            return
        wait_applied(admin, now)

    try:
        h = Harness(admin, jobs, demand_fn(jobs), step)
        try:
            h.run()
        except AssertionError as exc:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
            alive = {k: p.p.poll() for k, p in procs.items()}
            raise AssertionError(f"{exc}\nrecord {record(admin)}, processes {alive}, pass "
                                 f"{n[0]}, kills {sorted(kills)}\n-- controllers' log:\n"
                                 f"{tail}") from None
    finally:
        for p in procs.values():
            p.kill()
    assert seen["kills"] == 3
    # b takes over once a's lease (2 s) has expired, plus its poll and one pass
    assert seen["takeover_s"] is not None
    assert seen["takeover_s"] < LEASE_S + 3.0
    assert h.n_passes == n_total
    assert compare(h, jobs, ev) == len(ev)
