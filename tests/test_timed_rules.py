"""Timed rules wake the pass; each reclaim request keeps its own deadline (issue 19, 1-2).

A time at which a rule changes is not an event of the trace: the pass reports
it (``SchedulePlan.next_wakeup_s``) and both engines schedule a wake-up there.
Hand-computed scenarios on 8-GPU servers, every engine and backend, and through
:func:`aryl.schedule` for a cluster manager; then, for every policy, a replay in
which an extra pass at a random time before the reported wake-up (or the next
event) must decide nothing that a pass at the same instant would not (the guard
that a new timed rule cannot forget its wake-up), with the compiled pass's plan
and wake-up equal to the Python pass's on each of those states.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl.scheduling import ClusterState, Reason, schedule
from aryl.scheduling.api import schedule_python, time_after
from aryl.scheduling.jsonio import plan_to_json, state_from_json, state_to_json
from aryl.sim import SimConfig, SimResult, simulate
from aryl.sim import engine as engine_mod
from aryl.traces.inference import InferenceDemand

ENGINES = ("python", "native")


def jobs_df(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rigid jobs of ``gpus`` GPUs as one worker (8 GPUs or fewer); elastic rows give
    ``gpus_per_worker``, ``min_workers``, ``max_workers``."""
    out = []
    for r in rows:
        r = dict(r)
        if "min_workers" not in r:
            r["gpus_per_worker"] = r["gpus"]
            r["min_workers"] = r["max_workers"] = 1
        r.setdefault("alpha", 0.05)
        r["elastic"] = r["max_workers"] > r["min_workers"]
        out.append(r)
    return pd.DataFrame(out).astype({
        "submit_time_s": "float64", "duration_s": "float64", "gpus": "int64",
        "gpus_per_worker": "int64", "min_workers": "int64", "max_workers": "int64",
        "elastic": "bool", "alpha": "float64",
    })


def run(rows: list[dict[str, Any]], policy: str, engine: str, demand: InferenceDemand | None,
        **cfg: Any) -> SimResult:
    cfg.setdefault("check", True)
    return simulate(jobs_df(rows), policy=policy, inference=demand if demand else False,
                    config=SimConfig(engine=engine, **cfg))


def job_events(res: SimResult, job: str) -> list[tuple[float, str]]:
    ev = res.events[res.events["job_id"] == job]
    return list(zip(ev["time_s"].tolist(), ev["event"].tolist(), strict=True))


def server_events(res: SimResult) -> list[tuple[float, str, int]]:
    ev = res.events[res.events["job_id"] == ""]
    return list(zip(ev["time_s"].tolist(), ev["event"].tolist(), ev["workers"].tolist(),
                    strict=True))


def finish(res: SimResult) -> dict[str, float]:
    return {str(k): float(v) for k, v in res.jobs.set_index("job_id")["finish_s"].items()}


# ------------------------------------------------------------ 1. the cool-down


COOL_ROWS = [
    dict(job_id="X", submit_time_s=0, duration_s=1e6, gpus=8),
    dict(job_id="J", submit_time_s=1, duration_s=3000, gpus=8),
]
COOL_DEMAND = InferenceDemand(np.array([0.0, 1000.0, 1500.0]), np.array([0, 1, 0]), n_servers=1)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("policy", ["aryl", "aryl-no-elastic"])
def test_the_end_of_the_cool_down_lends_the_idle_server_again(engine: str, policy: str) -> None:
    # 1 training + 1 inference server, reserve 0, cool-down 600 s.  X holds t0; J (t = 1)
    # borrows i0.  Demand 0 -> 1 at 1000: i0 reclaimed, J preempted (999 s of progress,
    # no checkpoint yet: all lost).  Demand 1 -> 0 at 1500: i0 idle but cooling until
    # 1000 + 600 = 1600, an instant at which nothing else happens: the wake-up lends it
    # there and J runs 60 s restart + 3000 s: finish 4660.
    res = run(COOL_ROWS, policy, engine, COOL_DEMAND, n_training_servers=1,
              n_inference_servers=1, loan_reserve_servers=0, horizon_s=20_000.0)
    assert job_events(res, "J") == [(1.0, "arrive"), (1.0, "start"), (1000.0, "preempt"),
                                    (1600.0, "start"), (4660.0, "finish")]
    assert server_events(res) == [(1.0, "loan", 1), (1000.0, "reclaim", 1), (1600.0, "loan", 1),
                                  (4660.0, "loan_return", 1)]
    assert res.summary["n_preemptions"] == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_the_cool_down_wake_up_respects_a_different_cool_down(engine: str) -> None:
    # the same with loan_cooldown_s = 250: J restarts at 1500 (the demand falls after the
    # cool-down ended at 1250, an event) -> 1500 + 60 + 3000 = 4560; with 900 the
    # wake-up is at 1900 -> 4960
    for cool, start in ((250.0, 1500.0), (900.0, 1900.0)):
        res = run(COOL_ROWS, "aryl", engine, COOL_DEMAND, n_training_servers=1,
                  n_inference_servers=1, loan_reserve_servers=0, loan_cooldown_s=cool,
                  horizon_s=20_000.0)
        assert job_events(res, "J")[3:] == [(start, "start"), (start + 3060.0, "finish")]


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_schedule_reports_the_end_of_the_cool_down(backend: str) -> None:
    # the state of the replay above at t = 1500 (i0 reclaimed at 1000, J queued): the
    # pass starts nothing and says when to call again, 1600; at 1600 it lends i0 to J.
    doc = {
        "now_s": 1500.0,
        "config": {"loan_reserve_servers": 0, "backend": backend},
        "servers": [
            {"id": "t0", "role": "training", "gpus": 8},
            {"id": "i0", "role": "inference", "gpus": 8, "status": "idle",
             "reclaimed_s": 1000.0},
        ],
        "jobs": [
            {"id": "X", "arrival_s": 0.0, "gpus_per_worker": 8, "ref_workers": 1,
             "status": "running", "remaining_s": 1e6 - 1500.0, "progress_at_s": 1500.0,
             "placement": [{"server": "t0", "workers": 1}]},
            {"id": "J", "arrival_s": 1.0, "gpus_per_worker": 8, "ref_workers": 1,
             "status": "queued", "remaining_s": 3000.0, "queued_since_s": 1000.0},
        ],
    }
    st = state_from_json(doc)
    plan = schedule(st, policy="aryl")
    assert not plan
    assert plan.next_wakeup_s == 1600.0
    assert plan_to_json(plan, st)["next_wakeup_s"] == 1600.0
    st.now_s = 1599.0
    assert not schedule(st, policy="aryl")  # still cooling
    st.now_s = 1600.0
    plan = schedule(st, policy="aryl")
    assert plan.borrowed_servers == [(1, Reason.LOAN_FOR_BASE)]
    assert [(j, p) for j, p, _ in plan.starts] == [(1, {1: 1})]
    assert plan.next_wakeup_s == math.inf
    assert plan_to_json(plan, st)["next_wakeup_s"] is None
    # nothing to lend (the reserve keeps i0), or a policy that never loans: no wake-up
    st.now_s = 1500.0
    cfg = st.config
    st.config = dataclasses.replace(cfg, loan_reserve_servers=1)
    assert schedule(st, policy="aryl").next_wakeup_s == math.inf
    st.config = cfg
    for policy in ("aryl-no-loan", "sjf", "fifo", "fifo-backfill", "elastic-greedy"):
        assert schedule(st, policy=policy).next_wakeup_s == math.inf, policy


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_a_pass_that_reclaims_then_a_fall_of_demand_reports_the_cool_down(backend: str) -> None:
    # t = 1000: the inference side asks i0 back (a request due now) while J runs on it:
    # J preempted, i0 returned.  Nothing is loanable after a reclaim (the inference
    # side needs every server not on loan), so no wake-up yet.  At 1200 the demand
    # falls: i0 could be lent but for the cool-down from 1000: wake-up at 1600.
    doc = {
        "now_s": 1000.0,
        "config": {"loan_reserve_servers": 0, "backend": backend},
        "servers": [
            {"id": "t0", "role": "training", "gpus": 8},
            {"id": "i0", "role": "inference", "gpus": 8, "status": "loaned"},
        ],
        "inference": {"servers_needed": 1,
                      "reclaim_requests": [{"deadline_s": 1000.0, "servers": 1}]},
        "jobs": [
            {"id": "X", "arrival_s": 0.0, "gpus_per_worker": 8, "ref_workers": 1,
             "status": "running", "remaining_s": 1e6, "progress_at_s": 1000.0,
             "placement": [{"server": "t0", "workers": 1}]},
            {"id": "J", "arrival_s": 1.0, "gpus_per_worker": 8, "ref_workers": 1,
             "status": "running", "remaining_s": 3000.0, "progress_at_s": 1000.0,
             "placement": [{"server": "i0", "workers": 1}]},
        ],
    }
    st = state_from_json(doc)
    plan = schedule(st, policy="aryl")
    assert plan.reclaimed_servers == [1]
    assert plan.reclaim_actions == [(1, None, Reason.RECLAIM_PREEMPT)]
    assert plan.next_wakeup_s == math.inf
    after = plan.apply(st)
    assert after.last_reclaim_s == 1000.0
    assert after.reclaim_requests == []
    after.now_s = 1200.0
    after.set_demand(0, 1200.0)
    plan = schedule(after, policy="aryl")
    assert not plan
    assert plan.next_wakeup_s == 1600.0


def test_time_after_never_lands_inside_the_rule() -> None:
    # 0.1 + 0.2 - 0.1 < 0.2 in floats: the wake-up moves up until the rule is off
    for origin, span in ((0.1, 0.2), (1000.1, 600.0), (1e9 + 0.3, 600.0), (-5.5, 0.7)):
        t = time_after(origin, span)
        assert t - origin >= span
        assert math.nextafter(t, -math.inf) - origin < span or t == origin + span


# ------------------------------------------------------ 2. per-reclaim deadlines


GRACE_ROWS = [
    dict(job_id="X", submit_time_s=0, duration_s=1e4, gpus=8),
    dict(job_id="A", submit_time_s=1, duration_s=5000, gpus=8),
    dict(job_id="B1", submit_time_s=2, duration_s=898, gpus=4),
    dict(job_id="B2", submit_time_s=2, duration_s=898, gpus=4),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("policy", ["aryl", "aryl-no-elastic"])
def test_each_rise_of_demand_gets_its_own_grace(engine: str, policy: str) -> None:
    # 1 training + 2 inference servers, grace 600 s.  X on t0; A (t = 1) is offered i0
    # and i1 and takes i0 (server 1, best fit ties: lower id); B1, B2 (t = 2) share
    # i1 (server 2).  Demand 0 -> 1 at 100 (due 700), 1 -> 2 at 400 (due 1000).  At 700
    # one server is due: the cheaper one is A's (cost 1 against 2 x 1/1): A preempted
    # (699 s lost), its server returned.  B1, B2 finish at 2 + 898 = 900; their server
    # is asked for (due 1000) so it goes back at once instead of taking A.  A waits for
    # X (10,000) and runs 60 + 5000: 15,060.  One preemption.
    res = run(GRACE_ROWS, policy, engine,
              InferenceDemand(np.array([0.0, 100.0, 400.0]), np.array([0, 1, 2]), n_servers=2),
              n_training_servers=1, n_inference_servers=2, loan_reserve_servers=0,
              reclaim_grace_s=600.0)
    assert finish(res) == {"X": 10_000.0, "A": 15_060.0, "B1": 900.0, "B2": 900.0}
    assert res.summary["n_preemptions"] == 1
    assert job_events(res, "A") == [(1.0, "arrive"), (1.0, "start"), (700.0, "preempt"),
                                    (10_000.0, "start"), (15_060.0, "finish")]
    assert server_events(res) == [(1.0, "loan", 1), (2.0, "loan", 2), (700.0, "reclaim", 1),
                                  (900.0, "reclaim", 2)]
    assert res.summary["n_reclaims"] == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_a_fall_of_demand_cancels_the_latest_request(engine: str) -> None:
    # the same cluster; demand 0 -> 1 at 100 (due 700), 1 -> 2 at 400 (due 1000),
    # 2 -> 1 at 500: what is still lacking has lacked since 100, so one server goes at
    # 700 (A preempted) and nothing at 1000.  B1, B2 finish at 900; their server, still
    # on loan and not asked for, takes A: 900 + 60 + 5000 = 5960, then the idle loan
    # goes back unasked (loan_return).
    res = run(GRACE_ROWS, "aryl", engine,
              InferenceDemand(np.array([0.0, 100.0, 400.0, 500.0]), np.array([0, 1, 2, 1]),
                              n_servers=2),
              n_training_servers=1, n_inference_servers=2, loan_reserve_servers=0,
              reclaim_grace_s=600.0)
    assert server_events(res) == [(1.0, "loan", 1), (2.0, "loan", 2), (700.0, "reclaim", 1),
                                  (5960.0, "loan_return", 2)]
    assert finish(res) == {"X": 10_000.0, "A": 5960.0, "B1": 900.0, "B2": 900.0}
    assert job_events(res, "A")[2:4] == [(700.0, "preempt"), (900.0, "start")]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_new_rise_after_a_fall_starts_a_new_grace(engine: str) -> None:
    # 1 training + 1 inference server, grace 600.  X on t0, A borrows i0 at 1.  Demand
    # 0 -> 1 at 100, 1 -> 0 at 200 (request cancelled), 0 -> 1 at 300: due 900, not
    # 700.  A preempted at 900 (899 s lost, no checkpoint), restarts when X ends at
    # 10,000: 10,000 + 60 + 5000 = 15,060.
    rows = GRACE_ROWS[:2]
    res = run(rows, "aryl", engine,
              InferenceDemand(np.array([0.0, 100.0, 200.0, 300.0]), np.array([0, 1, 0, 1]),
                              n_servers=1),
              n_training_servers=1, n_inference_servers=1, loan_reserve_servers=0,
              reclaim_grace_s=600.0)
    assert job_events(res, "A") == [(1.0, "arrive"), (1.0, "start"), (900.0, "preempt"),
                                    (10_000.0, "start"), (15_060.0, "finish")]


@pytest.mark.parametrize("engine", ENGINES)
def test_an_elastic_job_shrinks_once_per_due_server(engine: str) -> None:
    # 1 training + 2 inference servers, grace 600.  E elastic, 1-GPU workers, base 8,
    # max 24: runs 24 workers from t = 0 (t0 + both loans).  Demand 0 -> 1 at 100 (due
    # 700), 1 -> 2 at 400 (due 1000): E scales in to 16 at 700 and to 8 at 1000, never
    # preempted (before the fix both servers went at 700).
    rows = [dict(job_id="E", submit_time_s=0, duration_s=1e5, gpus=8, gpus_per_worker=1,
                 min_workers=8, max_workers=24)]
    res = run(rows, "aryl", engine,
              InferenceDemand(np.array([0.0, 100.0, 400.0]), np.array([0, 1, 2]), n_servers=2),
              n_training_servers=1, n_inference_servers=2, loan_reserve_servers=0,
              reclaim_grace_s=600.0, horizon_s=5000.0)
    ev = res.events[res.events["job_id"] == "E"]
    got = list(zip(ev["time_s"].tolist(), ev["event"].tolist(), ev["workers"].tolist(),
                   strict=True))
    assert got == [(0.0, "arrive", 0), (0.0, "start", 24), (700.0, "scale_in", 16),
                   (1000.0, "scale_in", 8)]


def grace_state(backend: str, now_s: float) -> ClusterState:
    """The replay of ``test_each_rise_of_demand_gets_its_own_grace`` at ``now_s`` with
    both requests pending and nothing reclaimed yet."""
    doc = {
        "now_s": now_s,
        "config": {"loan_reserve_servers": 0, "backend": backend},
        "servers": [
            {"id": "t0", "role": "training", "gpus": 8},
            {"id": "i0", "role": "inference", "gpus": 8, "status": "loaned"},
            {"id": "i1", "role": "inference", "gpus": 8, "status": "loaned"},
        ],
        "inference": {"servers_needed": 2,
                      "reclaim_requests": [{"deadline_s": 1000.0, "servers": 1},
                                           {"deadline_s": 700.0, "servers": 1}]},
        "jobs": [
            {"id": "X", "arrival_s": 0.0, "gpus_per_worker": 8, "ref_workers": 1,
             "status": "running", "remaining_s": 1e4, "progress_at_s": 0.0,
             "placement": [{"server": "t0", "workers": 1}]},
            {"id": "A", "arrival_s": 1.0, "gpus_per_worker": 8, "ref_workers": 1,
             "status": "running", "remaining_s": 5000.0, "progress_at_s": 1.0,
             "placement": [{"server": "i0", "workers": 1}]},
            {"id": "B1", "arrival_s": 2.0, "gpus_per_worker": 4, "ref_workers": 1,
             "status": "running", "remaining_s": 898.0, "progress_at_s": 2.0,
             "placement": [{"server": "i1", "workers": 1}]},
            {"id": "B2", "arrival_s": 2.0, "gpus_per_worker": 4, "ref_workers": 1,
             "status": "running", "remaining_s": 898.0, "progress_at_s": 2.0,
             "placement": [{"server": "i1", "workers": 1}]},
        ],
    }
    return state_from_json(doc)


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_schedule_reclaims_only_the_requests_due(backend: str) -> None:
    # the requests are read in deadline order; before 700 nothing is due (wake at 700)
    st = grace_state(backend, 400.0)
    assert st.reclaim_requests == [(700.0, 1), (1000.0, 1)]
    plan = schedule(st, policy="aryl")
    assert not plan
    assert plan.next_wakeup_s == 700.0
    # at 700: one server (A's, cost 1 < 2), then wake at the second deadline
    st.now_s = 700.0
    plan = schedule(st, policy="aryl")
    assert plan.reclaimed_servers == [1]
    assert plan.reclaim_actions == [(1, None, Reason.RECLAIM_PREEMPT)]
    assert plan.next_wakeup_s == 1000.0
    after = plan.apply(st)
    assert after.reclaim_requests == [(1000.0, 1)]
    assert state_to_json(after)["inference"]["reclaim_requests"] == [
        {"deadline_s": 1000.0, "servers": 1}]
    # at 900 B1 and B2 have finished: their idle server is asked for, so it goes back
    # now and A (queued) does not start on it
    for j in (2, 3):
        after.finish(j, 900.0)
    after.now_s = 900.0
    plan = schedule(after, policy="aryl")
    assert plan.reclaimed_servers == [2]
    assert plan.starts == []
    assert plan.borrowed_servers == []
    done = plan.apply(after)
    assert done.reclaim_requests == []
    assert done.server_status[1] == done.server_status[2]  # both idle again
    # the older field still works: a deadline that has come makes every lacking server due
    st = grace_state(backend, 400.0)
    st.reclaim_requests = []
    st.reclaim_deadline_s = 400.0
    assert sorted(schedule(st, policy="aryl").reclaimed_servers) == [1, 2]


def test_set_demand_asks_and_cancels_by_deadline() -> None:
    st = ClusterState()
    st.add_server("t0", role="training", gpus=8)
    for k in range(4):
        st.add_server(f"i{k}", role="inference", gpus=8, status="loaned")
    st.set_demand(1, 700.0)
    st.set_demand(3, 1000.0)  # two more lacking
    assert st.reclaim_requests == [(700.0, 1), (1000.0, 2)]
    assert (st.reclaim_due(699.0), st.reclaim_due(700.0), st.reclaim_due(1000.0)) == (0, 1, 3)
    assert st.next_reclaim_deadline_s() == 700.0
    st.set_demand(2, 1100.0)  # one less: the latest request shrinks
    assert st.reclaim_requests == [(700.0, 1), (1000.0, 1)]
    st.give_back(4, reclaimed=False, now=800.0)  # any server back serves the earliest
    assert st.reclaim_requests == [(1000.0, 1)]
    st.set_demand(0, 1200.0)
    assert st.reclaim_requests == []
    assert st.next_reclaim_deadline_s() == math.inf


# ----------------------------------------------------- policies' own timed rules


@pytest.mark.parametrize("engine", ENGINES)
def test_tiresias_preempts_when_the_level_is_crossed_not_at_the_next_tick(engine: str) -> None:
    # one 8-GPU server.  R (t = 0, 8 GPUs, 10,000 s) attains 8 GPU-s per s: it reaches
    # the 1-GPU-hour boundary (3600 GPU-s) at t = 450, between the ticks at 420 and 480.
    # Q (t = 10, level 0) waits and outranks R from then: R preempted at 450 (no
    # checkpoint: progress lost), Q runs 300 s to 750, R restarts: 750 + 60 + 10,000.
    rows = [dict(job_id="R", submit_time_s=0, duration_s=10_000, gpus=8),
            dict(job_id="Q", submit_time_s=10, duration_s=300, gpus=8)]
    res = run(rows, "tiresias", engine, None, n_training_servers=1, n_inference_servers=0)
    assert job_events(res, "Q") == [(10.0, "arrive"), (450.0, "start"), (750.0, "finish")]
    assert job_events(res, "R") == [(0.0, "arrive"), (0.0, "start"), (450.0, "preempt"),
                                    (750.0, "start"), (10_810.0, "finish")]


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_tiresias_wake_up_only_when_a_waiting_job_is_outranked(backend: str) -> None:
    doc = {
        "now_s": 100.0,
        "config": {"backend": backend},
        "servers": [{"id": "t0", "role": "training", "gpus": 8}],
        "jobs": [
            {"id": "R", "arrival_s": 0.0, "gpus_per_worker": 8, "ref_workers": 1,
             "status": "running", "remaining_s": 9900.0, "progress_at_s": 100.0,
             "attained_gpu_s": 0.0, "attained_at_s": 0.0,
             "placement": [{"server": "t0", "workers": 1}]},
            {"id": "Q", "arrival_s": 10.0, "gpus_per_worker": 8, "ref_workers": 1,
             "status": "queued", "remaining_s": 300.0, "queued_since_s": 10.0},
        ],
    }
    # R: 800 GPU-s at 100, level 0 like Q; at 450 it reaches 3600 (level 1 > 0)
    assert schedule(state_from_json(doc), policy="tiresias").next_wakeup_s == 450.0
    # Q already at level 1 (5000 GPU-s): R must pass level 1 too, 36,000 GPU-s at 4500
    doc["jobs"][1]["attained_gpu_s"] = 5000.0
    assert schedule(state_from_json(doc), policy="tiresias").next_wakeup_s == 4500.0
    # nobody waiting: nothing to wake for
    del doc["jobs"][1]
    assert schedule(state_from_json(doc), policy="tiresias").next_wakeup_s == math.inf


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("policy", ["sjf", "aryl", "aryl-no-loan", "elastic-greedy"])
def test_starvation_bound_crossing_alone_changes_nothing(engine: str, policy: str) -> None:
    # one 8-GPU server, bound 1000 s.  L (8 GPUs, 5000 s) runs from 0; big S (8 GPUs,
    # 500 s, t = 1) waits and starves from 1001, an instant with no event: it still does
    # not fit, so nothing may happen there.  Short jobs T1, T2 (8 GPUs, 100 s) arrive at
    # 10 and 20; without the bound SJF would run them before S.  At 5000 L ends: S goes
    # first (starving), 5000 -> 5500, then T1 5600, T2 5700.
    rows = [dict(job_id="L", submit_time_s=0, duration_s=5000, gpus=8),
            dict(job_id="S", submit_time_s=1, duration_s=500, gpus=8),
            dict(job_id="T1", submit_time_s=10, duration_s=100, gpus=8),
            dict(job_id="T2", submit_time_s=20, duration_s=100, gpus=8)]
    res = run(rows, policy, engine, None, n_training_servers=1, n_inference_servers=0,
              starvation_bound_s=1000.0)
    assert finish(res) == {"L": 5000.0, "S": 5500.0, "T1": 5600.0, "T2": 5700.0}
    # and with a bound that has not come by 5000, SJF order: T1, T2, then S
    res = run(rows, policy, engine, None, n_training_servers=1, n_inference_servers=0,
              starvation_bound_s=10_000.0)
    assert finish(res) == {"L": 5000.0, "T1": 5100.0, "T2": 5200.0, "S": 5700.0}


# ------------------------------------ every policy: no decision between wake-ups


POLICIES = ["fifo", "fifo-backfill", "sjf", "tiresias", "aryl", "aryl-no-loan",
            "aryl-no-elastic", "elastic-greedy"]


def mixed_trace(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 36
    rows = []
    for i in range(n):
        gpus = int(rng.choice([1, 2, 4, 8, 8, 16]))
        row: dict[str, Any] = dict(job_id=f"j{i}", submit_time_s=float(rng.integers(0, 6000)),
                                   duration_s=float(rng.integers(200, 4000)), gpus=gpus)
        if gpus > 8 or rng.random() < 0.4:
            row.update(gpus_per_worker=1, min_workers=max(1, gpus // 2), max_workers=2 * gpus)
        if gpus > 8 and "min_workers" not in row:
            row.update(gpus_per_worker=8, min_workers=gpus // 8, max_workers=gpus // 8)
        rows.append(row)
    rows.sort(key=lambda r: r["submit_time_s"])
    return jobs_df(rows)


# rises with a grace of 300 s, falls within the 450 s cool-down after a reclaim, a rise
# while another one's grace runs
MIXED_DEMAND = InferenceDemand(
    np.array([0.0, 700.0, 1100.0, 2000.0, 2100.0, 2450.0, 2900.0, 3100.0, 3500.0, 5000.0,
              5400.0, 6500.0]),
    np.array([0, 2, 0, 1, 3, 1, 0, 3, 0, 2, 0, 1]), n_servers=3)


def probe_times(now: float, nxt: float) -> list[float]:
    if math.isinf(nxt):
        return [now + 1.0, now + 5000.0, now + 1e6]
    gap = nxt - now
    return [now + gap * f for f in (0.001, 0.5, 0.999)] + [math.nextafter(nxt, -math.inf)]


@pytest.mark.parametrize("policy", POLICIES)
def test_no_pass_between_wake_ups_would_decide_anything(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the Python engine; after each pass, a pass over a copy of the state at times
    # before the next event or wake-up must decide nothing (when a pass at the same
    # instant decides nothing: tiresias preempts once per pass); the compiled pass
    # gives the same plans and wake-ups on those states
    from aryl.scheduling.native import native_policy, schedule_native

    n_probed = [0, 0]  # passes probed, wake-ups seen

    orig = engine_mod.Engine._pass

    def probed(self: engine_mod.Engine) -> None:
        orig(self)
        st = self.state
        now = self.now
        heap_next = min((e[0] for e in self.heap
                         if not (e[1] == engine_mod.FINISH and self.fin_seq[e[4]] != e[2])
                         and not (e[1] == engine_mod.WAKE and e[2] != self.wake_seq)),
                        default=math.inf)
        arr = self.submit[self.n_arrived] if self.n_arrived < len(self.submit) else math.inf
        nxt = min(heap_next, arr)
        pol = self.policy
        same = schedule_python(st.copy(), pol)
        if native_policy(pol):
            assert schedule_native(st.copy(), pol) == same, (policy, now)
        if same:
            return
        # the wake-up the pass computed from its state and plan is the one of the
        # state after the plan
        assert same.next_wakeup_s == self.wake_t, (policy, now)
        n_probed[0] += 1
        n_probed[1] += math.isfinite(self.wake_t)
        for t in probe_times(now, nxt):
            c = st.copy()
            c.now_s = t
            plan = schedule_python(c, pol)
            assert not plan, (policy, now, t, plan)
            if native_policy(pol):
                assert schedule_native(c, pol) == plan, (policy, t)

    monkeypatch.setattr(engine_mod.Engine, "_pass", probed)
    opts = {"las_thresholds_gpu_s": [2000.0, 20000.0]} if policy == "tiresias" else None
    cfg = SimConfig(engine="python", n_training_servers=3, n_inference_servers=3,
                    loan_reserve_servers=0, reclaim_grace_s=300.0, loan_cooldown_s=450.0,
                    starvation_bound_s=900.0, tick_s=250.0, check=True)
    simulate(mixed_trace(7), policy=policy, config=cfg, inference=MIXED_DEMAND,
             policy_options=opts)
    assert n_probed[0] > 10
    if policy in ("aryl", "aryl-no-elastic", "tiresias"):
        assert n_probed[1] > 0  # wake-ups happened (cool-downs, grace, levels)


@pytest.mark.parametrize("policy", POLICIES)
def test_both_engines_agree_with_grace_and_cool_down(policy: str) -> None:
    # the same replay in both engines: identical jobs, events and counts
    opts = {"las_thresholds_gpu_s": [2000.0, 20000.0]} if policy == "tiresias" else None
    out = []
    for engine in ENGINES:
        cfg = SimConfig(engine=engine, n_training_servers=3, n_inference_servers=3,
                        loan_reserve_servers=0, reclaim_grace_s=300.0, loan_cooldown_s=450.0,
                        starvation_bound_s=900.0, tick_s=250.0, check=True)
        out.append(simulate(mixed_trace(11), policy=policy, config=cfg, inference=MIXED_DEMAND,
                            policy_options=opts))
    py, nat = out
    pd.testing.assert_frame_equal(py.jobs, nat.jobs)
    pd.testing.assert_frame_equal(py.events, nat.events)
    skip = ("sched", "wall", "timing")
    keys = [k for k in py.summary if k != "config" and not k.startswith(skip)]
    assert {k: py.summary[k] for k in keys} == {k: nat.summary[k] for k in keys}
