"""The controller's cache (list once, then watch) against the real API server: events
applied, the write log of the freshness rule, a relist after 410 Gone when the API server
restarts, and a pass that refuses to act on a cache older than its own last write."""

from __future__ import annotations

import time
from typing import Any

import pytest

from aryl.k8s.controller import Controller, ControllerOptions
from aryl.k8s.informer import Reflector, parse_after
from aryl.k8s.kube import ApiError, Kube, WriteLog
from aryl.k8s.testenv import add_fake_nodes, set_clock, set_config_map


def wait(pred: Any, timeout_s: float = 20.0) -> None:
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_the_write_log_names_versions_and_deletions() -> None:
    log = WriteLog()
    log.note("pods", "POST", "/api/v1/namespaces/n/pods", {"metadata": {"name": "a",
                                                                         "resourceVersion": "7"}})
    log.note("pods", "PATCH", "/p", {"metadata": {"name": "a", "resourceVersion": "5"}})
    # a graceful deletion answers the object with deletionTimestamp: a new version
    log.note("pods", "DELETE", "/p/b", {"metadata": {"name": "b", "resourceVersion": "9",
                                                     "deletionGracePeriodSeconds": 30}})
    # deleted at once (grace 0): the answer is the object *before* its DELETED event
    log.note("pods", "DELETE", "/p/c", {"metadata": {"name": "c", "resourceVersion": "11",
                                                     "uid": "u-c",
                                                     "deletionGracePeriodSeconds": 0}})
    log.note("configmaps", "DELETE", "/cm/x", {"kind": "Status", "metadata": {},
                                                "details": {"name": "x", "uid": "u-x"}})
    log.note("configmaps", "DELETE", "/cm/y", {"kind": "Status", "metadata": {}})
    log.note("pods", "POST", "/p/d/binding", {"kind": "Status", "metadata": {}})  # no version
    want = {"configmaps": {"rv": 0, "gone": {"x": "u-x", "y": ""}},
            "pods": {"rv": 9, "gone": {"c": "u-c"}}}
    assert log.peek() == want
    assert parse_after(__import__("json").dumps(log.take()), "cm") == want
    assert log.take() == {}
    assert parse_after("not json", "cm") == {}
    assert parse_after(None, "cm") == {}


def test_a_reflector_follows_the_collection_and_relists_after_a_restart(
        testenv: Any, admin: Kube) -> None:
    r = Reflector(admin.clone(), "configmaps", admin.ns_path("configmaps"))
    r.start()
    try:
        set_config_map(admin, "a", {"x": "1"})
        wait(lambda: r.snapshot().get("a", {}).get("data") == {"x": "1"})
        set_config_map(admin, "a", {"x": "2"})
        set_config_map(admin, "b", {"y": "1"})
        admin.request("DELETE", admin.ns_path("configmaps", "b"))
        # the write log names the deletion; the reflector is fresh once b is gone
        want = admin.writes.take()["configmaps"]
        assert list(want["gone"]) == ["b"]
        assert r.wait_fresh(want, time.monotonic() + 10) == ["b"]
        assert r.snapshot()["a"]["data"] == {"x": "2"}
        assert "b" not in r.snapshot()
        # a new object under the deleted name is not the deleted one
        set_config_map(admin, "b", {"y": "2"})
        wait(lambda: "b" in r.snapshot())
        assert r.fresh(want) == (True, ["b"])
        assert r.fresh({"gone": {"b": r.snapshot()["b"]["metadata"]["uid"]}}) == (False, [])
        assert r.n_lists == 1
        # a write of another kind moves etcd's revision past the reflector's: after the
        # restart the new watch cache starts there, the old resourceVersion is 410 Gone
        add_fake_nodes(admin, 1, 0)
        testenv.stop_apiserver()
        time.sleep(0.5)
        testenv.start_apiserver()
        set_config_map(admin, "a", {"x": "3"})
        wait(lambda: r.snapshot().get("a", {}).get("data") == {"x": "3"}, 40.0)
        assert r.n_lists == 2  # listed again (410), not just re-watched
        # a version it will never see: not fresh, an error naming the kind, a relist asked
        with pytest.raises(ApiError, match="configmaps cache is not fresh"):
            r.wait_fresh({"rv": 10**12}, time.monotonic() + 0.5)
        wait(lambda: r.n_lists == 3)
    finally:
        r.stop()


def test_a_pass_never_decides_on_a_cache_older_than_its_last_write(admin: Kube) -> None:
    add_fake_nodes(admin, 1, 0)
    ctl = Controller(admin, ControllerOptions(namespace=admin.namespace, virtual_clock=True,
                                              leader_election=False, cache_timeout_s=1.0))
    try:
        set_clock(admin, 0.0)
        assert ctl.run_once().decided
        set_clock(admin, 10.0)
        assert ctl.cache is not None
        cms = ctl.cache["configmaps"]
        wait(lambda: cms.snapshot()["aryl-clock"]["data"]["nowS"] == "10.0")
        cms.stop()  # the ConfigMap stream stops: the cache keeps the record of pass 1
        assert ctl.run_once().decided  # pass 2 decides from the record of pass 1 ...
        # ... and writes its own record, which the frozen cache never sees: the next pass
        # waits for it and fails instead of deciding from the older record
        with pytest.raises(ApiError, match="configmaps cache is not fresh"):
            ctl.run_once()
        rec = admin.request("GET", admin.ns_path("configmaps", "aryl-scheduler-state"))
        assert rec["data"]["pass"] == rec["data"]["applied"] == "2"
    finally:
        ctl.close()


def test_a_reflector_lists_again_when_its_list_is_old(admin: Kube) -> None:
    # relist_s = 0: every watch the server ends (after 1 s) is followed by a list, which
    # picks up a change made meanwhile like the watch would
    r = Reflector(admin.clone(), "configmaps", admin.ns_path("configmaps"),
                  watch_timeout_s=(1.0, 1.0), relist_s=0.0)
    r.start()
    try:
        wait(lambda: r.synced)
        set_config_map(admin, "c", {"z": "1"})
        wait(lambda: r.n_lists >= 3, 30.0)
        assert r.snapshot()["c"]["data"] == {"z": "1"}
    finally:
        r.stop()
