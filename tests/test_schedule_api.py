"""``aryl.schedule`` on hand-computed states; purity; JSON errors; the plan and schema CLI."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from click.testing import CliRunner

import aryl
from aryl.cli import main
from aryl.errors import InvalidInputError
from aryl.scheduling import ClusterState, Reason, SchedulerConfig, schedule
from aryl.scheduling.jsonio import plan_from_json, plan_to_json, state_from_json, state_to_json


def two_jobs_state() -> dict[str, Any]:
    """t0: one 8-GPU training server; i0: one idle 8-GPU inference server; reserve 0.

    A: rigid, 8 workers of 1 GPU, 100 s left; B: rigid, 4 workers of 1 GPU, 50 s left.
    """
    return {
        "now_s": 0.0,
        "config": {"loan_reserve_servers": 0},
        "servers": [
            {"id": "t0", "role": "training", "gpus": 8},
            {"id": "i0", "role": "inference", "gpus": 8, "status": "idle"},
        ],
        "jobs": [
            {"id": "A", "arrival_s": 0.0, "gpus_per_worker": 1, "ref_workers": 8,
             "status": "queued", "remaining_s": 100.0},
            {"id": "B", "arrival_s": 0.0, "gpus_per_worker": 1, "ref_workers": 4,
             "status": "queued", "remaining_s": 50.0},
        ],
    }


def test_sjf_order_best_fit_and_a_borrowed_server() -> None:
    st = state_from_json(two_jobs_state())
    plan = schedule(st, policy="aryl")
    # SJF: B (50 s at its size) before A (100 s).  B takes 4 of t0's 8 GPUs (best fit).
    # A's 8 workers fit on no single server of the training group, so the group's
    # servers take chunks (t0: its 4 free GPUs) and the rest spills to the next group,
    # the offered i0 (4), which is therefore borrowed (for a base worker).
    doc = plan_to_json(plan, st)
    assert doc["start"] == [
        {"job": "B", "reason": "sjf_order", "placement": [{"server": "t0", "workers": 4}]},
        {"job": "A", "reason": "sjf_order",
         "placement": [{"server": "t0", "workers": 4}, {"server": "i0", "workers": 4}]},
    ]
    assert doc["borrow"] == [{"server": "i0", "reason": "loan_for_base"}]
    assert doc["return"] == []
    assert doc["preempt"] == []
    assert doc["resize"] == []
    # elastic memo: 16 GPUs (t0 + i0) - 12 busy = 4 free (on i0), 1 server loaned/offered
    assert plan.elastic_memo == (4, 1)


def test_a_reclaim_preempts_the_rigid_job_on_the_returned_server() -> None:
    st = state_from_json(two_jobs_state())
    st = schedule(st).apply(st)
    # at t = 10 the inference side needs its server back, due now
    st.now_s = 10.0
    st.servers_needed = 1
    st.reclaim_deadline_s = 10.0
    plan = schedule(st)
    a = st.job_index(["A"])[0]
    assert plan.reclaim_actions == [(a, None, Reason.RECLAIM_PREEMPT)]
    assert [st.server_id[s] for s in plan.reclaimed_servers] == ["i0"]
    # A (rigid) loses all 8 workers; it cannot restart at once: t0 has 4 free GPUs
    # (B holds 4) and no server may be lent (the inference side needs its only one)
    assert plan.starts == []
    assert plan.borrowed_servers == []
    after = plan.apply(st)
    assert after.status[a] == 1
    assert after.restarted[a]
    assert after.remaining_s[a] == 100.0  # back to the checkpoint taken at its start
    assert after.server_status[1] == 1  # i0 serves inference again


def test_schedule_is_pure_and_deterministic() -> None:
    st = state_from_json(two_jobs_state())
    before = json.dumps(state_to_json(st))
    p1 = plan_to_json(schedule(st), st)
    assert json.dumps(state_to_json(st)) == before
    assert plan_to_json(schedule(st), st) == p1
    assert plan_to_json(schedule(state_from_json(before)), st) == p1


def test_apply_returns_a_new_state_unless_inplace() -> None:
    st = state_from_json(two_jobs_state())
    plan = schedule(st)
    new = plan.apply(st)
    assert new is not st
    assert len(st.running) == 0
    assert len(new.running) == 2
    assert plan.apply(st, inplace=True) is st
    assert len(st.running) == 2
    # applying twice is an error that names what no longer fits (the borrow comes first)
    with pytest.raises(InvalidInputError,
                       match=r"servers\[1\] \('i0'\): only an idle inference server can be lent"):
        plan.apply(st)
    plan.borrowed_servers.clear()
    with pytest.raises(InvalidInputError, match="start of job 'B', not queued"):
        plan.apply(st)


def test_a_plan_round_trips_through_json() -> None:
    st = state_from_json(two_jobs_state())
    plan = schedule(st)
    again = plan_from_json(json.dumps(plan_to_json(plan, st)), st)
    assert plan_to_json(again, st) == plan_to_json(plan, st)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("servers"), r"state.servers: must be a non-empty list"),
        (lambda d: d["jobs"][0].update(gpus_per_worker=2.5),
         r"jobs\[0\] \('A'\).gpus_per_worker: must be an integer"),
        (lambda d: d["jobs"][1].update(status="done"),
         r"jobs\[1\] \('B'\).status: must be 'queued' or 'running'"),
        (lambda d: d["jobs"][0].update(status="running",
                                       placement=[{"server": "nope", "workers": 8}]),
         r"jobs\[0\] \('A'\).placement\[0\].server: unknown server 'nope'"),
        (lambda d: d["jobs"][0].update(status="running",
                                       placement=[{"server": "t0", "workers": 4}]),
         r"jobs\[0\] \('A'\).placement: 4 workers outside"),
        (lambda d: d["jobs"][1].update(id="A"), r"jobs\[1\] \('A'\).id: duplicate job id"),
        (lambda d: d["jobs"][0].update(remaning_s=1.0),
         r"unknown field\(s\) 'remaning_s' \(did you mean 'remaining_s'\?\)"),
        (lambda d: d["servers"][1].update(status="busy"), r"servers\[1\] \('i0'\).status"),
        (lambda d: d["servers"].reverse(),
         r"training servers must come before every inference server"),
        (lambda d: d["config"].update(rescale_pause_s=-1), r"config.rescale_pause_s"),
        (lambda d: d["config"].update(reclaim_policy="best"), r"config.reclaim_policy"),
        (lambda d: d["jobs"][0].update(min_workers=9, max_workers=8, elastic=True),
         r"max_workers 8 < min_workers 9"),
        (lambda d: d["jobs"][0].update(remaining_s=math.nan),
         r"jobs\[0\] \('A'\).remaining_s: must be a finite number"),
        (lambda d: d.update(running=["B"]), r"state.running\[0\]: 'B' is not a running job"),
    ],
)
def test_invalid_state_documents_name_the_item_and_field(edit: Any, message: str) -> None:
    doc = copy.deepcopy(two_jobs_state())
    edit(doc)
    with pytest.raises(InvalidInputError, match=message):
        state_from_json(doc)


def test_an_over_committed_server_is_refused() -> None:
    doc = two_jobs_state()
    doc["jobs"][0].update(status="running", placement=[{"server": "t0", "workers": 8}])
    doc["jobs"][1].update(status="running", placement=[{"server": "t0", "workers": 4}])
    with pytest.raises(InvalidInputError, match=r"jobs\[1\] \('B'\).placement: 4 worker\(s\) "
                                                 r"of 1 GPU\(s\) do not fit server 't0' "
                                                 r"\(0 of 8 GPUs free\)"):
        state_from_json(doc)


def test_unknown_policy_and_option_are_named() -> None:
    st = state_from_json(two_jobs_state())
    with pytest.raises(InvalidInputError, match=r"unknown policy 'arly' \(did you mean 'aryl'"):
        schedule(st, policy="arly")
    with pytest.raises(InvalidInputError, match=r"unknown option\(s\) \['bound'\]"):
        schedule(st, policy="sjf", options={"bound": 1})


def test_the_cli_prints_the_plan_and_the_schemas(tmp_path: Any) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(two_jobs_state()))
    res = CliRunner().invoke(main, ["plan", str(path)])
    assert res.exit_code == 0, res.output
    st = state_from_json(two_jobs_state())
    assert json.loads(res.output) == plan_to_json(schedule(st), st)
    res = CliRunner().invoke(main, ["plan", str(path), "--policy", "fifo"])
    # strict FIFO: A (first in arrival order; equal arrival, lower position) needs all
    # of t0 and nothing is borrowed; it blocks B
    assert [s["job"] for s in json.loads(res.output)["start"]] == ["A"]
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    res = CliRunner().invoke(main, ["plan", str(bad)])
    assert res.exit_code == 2
    assert "bad.json: state: not valid JSON" in res.output
    res = CliRunner().invoke(main, ["plan", str(tmp_path / "missing.json")])
    assert res.exit_code == 2
    assert "missing.json: file does not exist" in res.output
    js = pytest.importorskip("jsonschema")
    for doc in ("state", "plan"):
        res = CliRunner().invoke(main, ["schema", doc])
        assert res.exit_code == 0
        js.Draft202012Validator.check_schema(json.loads(res.output))
    js.validate(two_jobs_state(), json.loads(CliRunner().invoke(main, ["schema", "state"]).output))


def test_the_public_names() -> None:
    assert aryl.schedule is schedule
    assert aryl.ClusterState is ClusterState
    assert aryl.SchedulerConfig is SchedulerConfig
    assert set(aryl.scheduling.available_policies()) == {
        "fifo", "fifo-backfill", "sjf", "tiresias", "aryl", "aryl-no-loan", "aryl-no-elastic",
        "elastic-greedy",
    }


def test_the_state_schema_lists_every_scheduler_config_field() -> None:
    from aryl.scheduling.schema import state_schema

    props = state_schema()["properties"]["config"]["properties"]
    assert sorted(props) == sorted(SchedulerConfig.field_names())
