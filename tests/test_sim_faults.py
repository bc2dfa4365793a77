"""Simulator semantics faults of issue 9 (items 1, 3, 6, 7): each case with its right value.

Notation of the issue: ``name(submit s, GPUs, duration s)``; servers of 8 GPUs.
Item 2 (placement of extra workers) is in ``test_sim_extras_placement.py``,
item 8 (accounting) in ``test_sim_properties.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl.sim import SimConfig, SimResult, simulate
from aryl.traces.inference import InferenceDemand


def jobs_df(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Canonical jobs; rows without scaling columns are rigid (one server's worth per worker)."""
    out = []
    for r in rows:
        r = dict(r)
        if "min_workers" not in r:
            g = r.get("gpus_per_worker", r["gpus"] if r["gpus"] <= 8 else 8)
            r.setdefault("gpus_per_worker", g)
            r["min_workers"] = r["max_workers"] = r["gpus"] // g
        r.setdefault("alpha", 0.05)
        r.setdefault("elastic", r["max_workers"] > r["min_workers"])
        out.append(r)
    return pd.DataFrame(out).astype({
        "submit_time_s": "float64", "duration_s": "float64", "gpus": "int64",
        "gpus_per_worker": "int64", "min_workers": "int64", "max_workers": "int64",
        "elastic": "bool", "alpha": "float64",
    })


def run(rows: list[dict[str, Any]], policy: str, **cfg: Any) -> SimResult:
    inference = cfg.pop("inference", False)
    cfg.setdefault("n_inference_servers", 0)
    cfg.setdefault("check", True)
    return simulate(jobs_df(rows), policy=policy, config=SimConfig(**cfg), inference=inference)


def events_of(res: SimResult, job: str) -> list[tuple[float, str, int]]:
    ev = res.events[res.events["job_id"] == job]
    return list(zip(ev["time_s"].tolist(), ev["event"].tolist(), ev["workers"].tolist(),
                    strict=True))


def row(res: SimResult, job: str) -> pd.Series:
    return res.jobs.set_index("job_id").loc[job]


# ------------------------------------------------------------ 1. queue age


def _queue_age_rows() -> list[dict]:
    rows = [
        dict(job_id="P", submit_time_s=0, duration_s=2000, gpus=8),
        dict(job_id="A", submit_time_s=1, duration_s=1e6, gpus=8),
        dict(job_id="B", submit_time_s=2, duration_s=100, gpus=8),
    ]
    t, i = 3.0, 0
    while t <= 3000.0:  # a 1-GPU 30 s job every 20 s from t = 3 until t = 3000
        rows.append(dict(job_id=f"s{i}", submit_time_s=t, duration_s=30, gpus=1))
        t += 20.0
        i += 1
    return rows


QUEUE_AGE_CFG = dict(n_training_servers=1, n_inference_servers=1, loan_reserve_servers=0,
                     starvation_bound_s=1000.0,
                     inference=InferenceDemand(np.array([0.0, 1500.0]), np.array([0, 1]),
                                               n_servers=1))


@pytest.mark.parametrize("policy", ["aryl", "aryl-no-elastic"])
def test_requeued_job_keeps_its_queue_age_and_the_guard_skips_young_jobs(policy: str) -> None:
    # P runs on the training server over [0, 2000].  A (t = 1) runs on the loaned
    # inference server from t = 1; B (t = 2) and every 1-GPU job wait (no free GPU).
    # At 1500 the inference demand takes the server back: A is preempted.
    # At 2000 P ends.  Queue ages (time queued since the first arrival):
    #   A: 0 s (started at arrival) + 2000 - 1500 = 500 s < 1000 -> not starving
    #   B: 2000 - 2 = 1998 s -> starving; s0 (t = 3): 1997 s, ... s49 (t = 983): 1017 s
    # Oldest starving first: B (the largest age) takes the 8 free GPUs at 2000 and ends
    # at 2100.  (Before the fix the guard stopped at A, the heap top by arrival, whose
    # age counted from the reclaim: 2000 - 1500 < 1000; later A blocked everything and
    # B started at 1,002,573.)
    res = run(_queue_age_rows(), policy, **QUEUE_AGE_CFG)
    assert events_of(res, "B") == [(2.0, "arrive", 0), (2000.0, "start", 1),
                                   (2100.0, "finish", 0)]
    assert [e[:2] for e in events_of(res, "A")[:3]] == [(1.0, "arrive"), (1.0, "start"),
                                                       (1500.0, "preempt")]
    assert row(res, "B")["queuing_delay_s"] == 1998.0


def test_oldest_starving_job_first_under_sjf() -> None:
    # Same jobs under sjf (no loans): A waits from t = 1 on, B from t = 2.  At 2000 both
    # are starving (1999 s and 1998 s >= 1000): the oldest, A, starts at 2000 and runs
    # 1e6 s; B starts when A ends, at 1,002,000, and ends at 1,002,100.
    res = run(_queue_age_rows(), "sjf", n_training_servers=1, starvation_bound_s=1000.0)
    assert events_of(res, "A")[1] == (2000.0, "start", 1)
    assert events_of(res, "B")[1:] == [(1_002_000.0, "start", 1), (1_002_100.0, "finish", 0)]


def test_tiresias_requeues_by_first_arrival_not_by_preemption_time() -> None:
    # 2 servers; tiresias (levels at 3600 and 36000 GPU-s).  X (0, 8, 1e4) on s0,
    # Y (10, 8, 1e4) on s1; both cross 3600 GPU-s (level 1) at 450 s and 460 s.
    # Z1 (500, 8, 100): level 0, blocked; victims level > 0, latest arrival first: Y is
    # preempted at 500 (requeued at 500), Z1 runs [500, 600] on s1.
    # Z2 (550, 8, 100): blocked; victims: X (level 1; Z1 is level 0) -> X preempted at
    # 550, Z2 runs [550, 650] on s0.
    # At 600 Z1 ends: queue X (level 1, arrival 0, requeued 550), Y (level 1, arrival 10,
    # requeued 500): first arrival first, so X restarts at 600 (Y would by requeue time),
    # and Y at 650 when Z2 ends.
    rows = [
        dict(job_id="X", submit_time_s=0, duration_s=10_000, gpus=8),
        dict(job_id="Y", submit_time_s=10, duration_s=10_000, gpus=8),
        dict(job_id="Z1", submit_time_s=500, duration_s=100, gpus=8),
        dict(job_id="Z2", submit_time_s=550, duration_s=100, gpus=8),
    ]
    res = run(rows, "tiresias", n_training_servers=2)
    assert [e[:2] for e in events_of(res, "X")[:4]] == [
        (0.0, "arrive"), (0.0, "start"), (550.0, "preempt"), (600.0, "start")]
    assert [e[:2] for e in events_of(res, "Y")[:4]] == [
        (10.0, "arrive"), (10.0, "start"), (500.0, "preempt"), (650.0, "start")]


# ------------------------------------------------------------ 3. horizon


@pytest.mark.parametrize("policy", ["fifo", "aryl"])
def test_job_after_the_horizon_is_not_arrived(policy: str) -> None:
    # a(0, 8, 1000) ends at 1000 = horizon; d(1500, 8, 10) arrives after the horizon:
    # not "unfinished", no wait, no negative delay.  One server, so usage = 8 x 1000 /
    # (8 x 1000) = 1.
    rows = [dict(job_id="a", submit_time_s=0, duration_s=1000, gpus=8),
            dict(job_id="d", submit_time_s=1500, duration_s=10, gpus=8)]
    res = run(rows, policy, n_training_servers=1, horizon_s=1000.0)
    s = res.summary
    assert (s["n_finished"], s["n_unfinished"], s["n_not_arrived"]) == (1, 0, 1)
    assert s["end_s"] == 1000.0
    assert s["cluster_usage"] == 1.0
    assert res.not_arrived["job_id"].tolist() == ["d"]
    assert res.unfinished.empty
    d = row(res, "d")
    assert d["status"] == "not_arrived"
    for col in ("first_start_s", "finish_s", "queuing_delay_s", "wait_s", "jct_s"):
        assert np.isnan(d[col]), col
    assert d["gpu_s"] == 0.0
    assert s["wait_s"]["max"] == 0.0  # over finished jobs: a only


def test_horizon_before_the_first_arrival() -> None:
    from aryl.errors import InvalidInputError

    rows = [dict(job_id="x", submit_time_s=5000, duration_s=100, gpus=8)]
    # the clock starts at the first arrival (5000) by default: a horizon at 1000 is an error
    with pytest.raises(InvalidInputError, match="horizon_s: 1000 s is before the clock start"):
        run(rows, "fifo", n_training_servers=1, horizon_s=1000.0)
    # with the clock started at 0 the run covers [0, 1000]: the job has not arrived
    res = run(rows, "fifo", n_training_servers=1, horizon_s=1000.0, start_time_s=0.0)
    s = res.summary
    assert s["end_s"] == 1000.0
    assert (s["n_not_arrived"], s["n_unfinished"], s["n_finished"]) == (1, 0, 0)
    assert s["cluster_usage"] == 0.0  # 0 GPU-s allocated of 8 x 1000 available
    assert res.timeseries["time_s"].tolist() == [0.0, 300.0, 600.0, 900.0]
    assert res.timeseries["queue_length"].tolist() == [0, 0, 0, 0]


def test_preempted_job_still_queued_at_the_horizon_counts_its_current_wait() -> None:
    # A(0, 8, 1e4) on the training server, B(10, 8, 1000) on the loaned server; the
    # demand takes the server back at 500: B is preempted and waits.  Horizon 1500:
    # B's total wait = 0 (started at arrival) + 1500 - 500 = 1000 s; its queuing
    # delay (first start - arrival) is 0.
    rows = [dict(job_id="A", submit_time_s=0, duration_s=10_000, gpus=8),
            dict(job_id="B", submit_time_s=10, duration_s=1000, gpus=8)]
    demand = InferenceDemand(np.array([0.0, 500.0]), np.array([0, 1]), n_servers=1)
    res = run(rows, "aryl", n_training_servers=1, n_inference_servers=1,
              loan_reserve_servers=0, inference=demand, horizon_s=1500.0)
    b = row(res, "B")
    assert b["status"] == "unfinished"
    assert b["wait_s"] == 1000.0
    assert b["queuing_delay_s"] == 0.0
    assert b["gpu_s"] == 8 * 490.0
    assert row(res, "A")["gpu_s"] == 8 * 1500.0


def test_replay_cli_horizon_lists_only_submitted_jobs_as_unfinished(tmp_path: Any) -> None:
    # itp-c07 (12,699 jobs over 60 days), one day: every job submitted after
    # t0 + 86,400 s is "not_arrived"; the unfinished ones were all submitted by then,
    # and finished + unfinished + infeasible = the jobs submitted by then.
    import json

    from click.testing import CliRunner

    from aryl.cli import main
    from aryl.traces import load_trace

    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["replay", "--horizon", "86400", "--out", str(out)])
    assert r.exit_code == 0, r.output
    jobs = pd.read_parquet(out / "jobs.parquet")
    summary = json.loads((out / "summary.json").read_text())
    sub = load_trace("itp-c07").jobs["submit_time_s"]
    end = float(sub.min()) + 86400.0
    n_by_then = int((sub <= end).sum())
    assert summary["end_s"] == end
    assert summary["n_not_arrived"] == len(sub) - n_by_then
    assert (summary["n_finished"] + summary["n_unfinished"] + summary["n_infeasible"]
            == n_by_then)
    unfinished = jobs[jobs["status"] == "unfinished"]
    assert (unfinished["submit_time_s"] <= end).all()
    assert 0 < len(unfinished) < 200  # not 12,607 of 12,699
    assert (jobs.loc[jobs["status"] == "not_arrived", "submit_time_s"] > end).all()
    line = next(x for x in r.output.splitlines() if "not arrived by the horizon" in x)
    assert f"{len(sub) - n_by_then:,}" in line


# ------------------------------------------------------------ 6. loan/reclaim thrash


def _thrash(**cfg: Any) -> SimResult:
    # 2 training + 2 inference servers, reserve 0; inference demand 1 server at t = 0,
    # then 2, 1, 2, ... every 60 s until t = 600 (rises at 60, 180, 300, 420, 540).
    # T1 (8 GPUs) fills s0; T2 (4) and E's base (4 x 1 GPU) fill s1; E's 4 extra
    # workers (elastic 4..8) go to the loaned server 3, and X (t = 1, 4 GPUs) too.
    rows = [
        dict(job_id="T1", submit_time_s=0, duration_s=1e4, gpus=8),
        dict(job_id="T2", submit_time_s=0, duration_s=2e4, gpus=4),
        dict(job_id="E", submit_time_s=0, duration_s=1e5, gpus=8, gpus_per_worker=1,
             min_workers=4, max_workers=8),
        dict(job_id="X", submit_time_s=1, duration_s=5e4, gpus=4),
    ]
    times = np.arange(0.0, 601.0, 60.0)
    demand = InferenceDemand(times, np.array([1, 2] * 5 + [1]), n_servers=2)
    return run(rows, "aryl", n_training_servers=2, n_inference_servers=2,
               loan_reserve_servers=0, inference=demand, horizon_s=600.0, **cfg)


def test_demand_flapping_every_minute_does_not_thrash() -> None:
    # Default loan_cooldown_s = 600: the rise at 60 reclaims server 3 (X preempted, E
    # scaled in from 8 to 4 workers); the falls at 120 ... 480 come within 600 s of that
    # reclaim, so nothing is lent again before 660: 1 preemption + 1 scale-in <= 5 rises.
    res = _thrash()
    s = res.summary
    rises = 5
    assert s["n_preemptions"] + s["n_scale_in"] == 2 <= rises
    assert (s["n_loans"], s["n_reclaims"]) == (1, 1)
    assert events_of(res, "X") == [(1.0, "arrive", 0), (1.0, "start", 1), (60.0, "preempt", 0)]
    assert events_of(res, "E")[1:] == [(0.0, "start", 8), (60.0, "scale_in", 4)]


def test_without_the_cooldown_every_rise_preempts() -> None:
    # loan_cooldown_s = 0 (the behaviour before): each fall lends server 3 again, X
    # restarts and E grows there, and each of the 5 rises preempts X and shrinks E:
    # 5 + 5 = 10 > 5 rises.
    s = _thrash(loan_cooldown_s=0.0).summary
    assert (s["n_preemptions"], s["n_scale_in"], s["n_reclaims"]) == (5, 5, 5)
    # 300 s: lent again at 360 (300 s after the reclaim at 60), reclaimed at 420
    s = _thrash(loan_cooldown_s=300.0).summary
    assert (s["n_preemptions"], s["n_scale_in"], s["n_reclaims"]) == (2, 2, 2)


# ------------------------------------------------------------ 7. configuration, stalls


@pytest.mark.parametrize(("field", "value", "message"), [
    ("n_training_servers", 2.5, "n_training_servers: expected an integer"),
    ("n_training_servers", True, "n_training_servers: expected an integer"),
    ("n_training_servers", 2.0, "n_training_servers: expected an integer"),
    ("n_training_servers", -1, "n_training_servers: must be in"),
    ("n_training_servers", 10**9, "n_training_servers: must be in"),
    ("n_inference_servers", "4", "n_inference_servers: expected an integer"),
    ("gpus_per_server", 0, "gpus_per_server: must be in"),
    ("seed", -1, "seed: must be in"),
    ("seed", 1.5, "seed: expected an integer"),
    ("loan_reserve_servers", None, "loan_reserve_servers: expected an integer"),
    ("tick_s", 0.0, "tick_s: must be a finite number"),
    ("tick_s", 1e-300, "tick_s: must be a finite number"),
    ("tick_s", float("nan"), "tick_s: must be a finite number"),
    ("rescale_pause_s", float("inf"), "rescale_pause_s: must be a finite number"),
    ("rescale_pause_s", -1.0, "rescale_pause_s: must be a finite number"),
    ("checkpoint_interval_s", 1e-9, "checkpoint_interval_s: must be a finite number"),
    ("restart_cost_s", float("nan"), "restart_cost_s: must be a finite number"),
    ("reclaim_grace_s", 1e300, "reclaim_grace_s: must be a finite number"),
    ("loan_cooldown_s", -5.0, "loan_cooldown_s: must be a finite number"),
    ("starvation_bound_s", float("inf"), "starvation_bound_s: must be a finite number"),
    ("timeseries_step_s", 0.001, "timeseries_step_s: must be a finite number"),
    ("tick_s", True, "tick_s: expected a number"),
    ("tick_s", "60", "tick_s: expected a number"),
    ("start_time_s", float("nan"), "start_time_s: must be finite"),
    ("horizon_s", float("inf"), "horizon_s: must be finite"),
    ("default_alpha", float("nan"), "default_alpha: must be in"),
    ("default_alpha", 1.5, "default_alpha: must be in"),
    ("check", 1, "check: expected True or False"),
    ("record_events", "yes", "record_events: expected True or False"),
    ("backend", "gpu", "backend: must be"),
    ("reclaim_policy", "cheapest", "reclaim_policy: unknown"),
])
def test_every_config_field_is_checked(field: str, value: Any, message: str) -> None:
    from aryl.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=message):
        SimConfig(**{field: value})


def test_config_accepts_numpy_scalars_and_stores_builtins() -> None:
    import json

    cfg = SimConfig(n_training_servers=np.int64(3), tick_s=np.float32(30.0), check=np.bool_(True))
    assert type(cfg.n_training_servers) is int
    assert cfg.n_training_servers == 3
    assert type(cfg.tick_s) is float
    assert cfg.tick_s == 30.0
    assert cfg.check is True
    json.dumps(cfg.to_dict())
    from aryl.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="horizon_s: 5 is before start_time_s 10"):
        SimConfig(start_time_s=10.0, horizon_s=5.0)


def test_time_series_that_would_be_too_large_is_refused_before_the_replay() -> None:
    from aryl.errors import InvalidInputError

    # last arrival 1e7 s after the first: a 1 s step gives 1e7 + 1 > 5e6 rows
    rows = [dict(job_id="a", submit_time_s=0, duration_s=10, gpus=1),
            dict(job_id="b", submit_time_s=1e7, duration_s=10, gpus=1)]
    with pytest.raises(InvalidInputError, match="timeseries_step_s: 1 s over a run of 1e"):
        run(rows, "fifo", n_training_servers=1, timeseries_step_s=1.0)
    assert run(rows, "fifo", n_training_servers=1, timeseries_step_s=10.0).summary[
        "n_finished"] == 2


def test_job_whose_workers_never_fit_is_infeasible_not_a_hang() -> None:
    # 3 servers of 8 GPUs: 4 workers of 5 GPUs (20 <= 24 GPUs) need 4 servers (one
    # 5-GPU worker per server): infeasible at arrival.  Before, it was queued forever,
    # and under fifo with the periodic default demand the replay never ended.
    rows = [dict(job_id="w", submit_time_s=0, duration_s=100, gpus=20, gpus_per_worker=5,
                 min_workers=4, max_workers=4),
            dict(job_id="ok", submit_time_s=1, duration_s=100, gpus=15, gpus_per_worker=5,
                 min_workers=3, max_workers=3)]
    for policy in ("fifo", "sjf", "aryl"):
        res = simulate(jobs_df(rows), policy=policy, config=SimConfig(
            n_training_servers=3, n_inference_servers=2, check=True))
        assert res.infeasible["job_id"].tolist() == ["w"], policy
        assert row(res, "ok")["finish_s"] == 101.0, policy


def test_clock_that_stops_advancing_raises_promptly() -> None:
    import time

    # A tick of 1e-300 s (refused by SimConfig; forced here) at t = 1000: t + tick == t
    # in floating point, so every tick is due again at once.  The watchdog stops the
    # loop when the events and iterations at that time exceed 2 n + 1000 = 1002: the
    # arrival's iteration counts 0, the first tick 1 ... the 1003rd event trips it.
    cfg = SimConfig(n_training_servers=1, n_inference_servers=0)
    object.__setattr__(cfg, "tick_s", 1e-300)
    rows = jobs_df([dict(job_id="a", submit_time_s=1000, duration_s=100, gpus=8)])
    t = time.perf_counter()
    with pytest.raises(RuntimeError, match=r"stalled at t = 1000 s: 1003 events and iterations "
                                           r"at the same time.*queue length 1, 0 running.*"
                                           r"last event: tick"):
        simulate(rows, policy="tiresias", config=cfg, inference=False)
    assert time.perf_counter() - t < 10.0


@pytest.mark.parametrize(("policy", "events"), [("tiresias", "tick"), ("fifo", "demand")])
def test_policy_that_never_starts_anything_raises(
    policy: str, events: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aryl.scheduling.registry import policy_class

    # A policy that always answers with a no-op: the job waits forever while ticks
    # (tiresias) or the daily inference demand (fifo, bundled profile) keep the clock
    # going.  After 1000 passes with nothing running it raises.
    monkeypatch.setattr(policy_class(policy), "decide", lambda self, st, ctx, plan: None)
    rows = jobs_df([dict(job_id="a", submit_time_s=0, duration_s=100, gpus=8)])
    inference = False if policy == "tiresias" else None
    with pytest.raises(RuntimeError, match=r"1001 passes in a row with nothing running.*"
                                           r"queue length 1, 0 running, 1 jobs open.*"
                                           r"1001 passes so far"):
        simulate(rows, policy=policy, inference=inference,  # the Python pass is patched
                 config=SimConfig(n_training_servers=1, n_inference_servers=2, engine="python"))


# ------------------------------------------------------------ 8. accounting


def test_shares_stay_in_unit_interval_during_a_grace_period() -> None:
    # 1 training + 2 inference servers; three (0, 8, 1000) jobs: j0 on training, j1 and
    # j2 on the two loaned servers.  Demand 2 from t = 500, grace 300 s: reclaimed at
    # 800 (j1, j2 preempted, no checkpoint yet: all progress lost).  j0 ends at 1000;
    # j1 restarts then (60 s restart cost) and ends at 2060; j2 runs 2060 + 60 + 1000 =
    # 3120.  GPU-s: training 8000 + 2 x 8 x 1060 = 24960 = 8 x 3120 (usage 1); loaned
    # 2 x 8 x 800 = 12800, all used.  Inference: serving 0 until 800 (both servers on
    # loan, though 2 are needed from 500), then 2 up to 3120: 2 x 2320 = 4640 of
    # 2 x 3120 = 6240 server-s; with loans (4640 + 2 x 800) / 6240 = 1.
    rows = [dict(job_id=f"j{i}", submit_time_s=0, duration_s=1000, gpus=8) for i in range(3)]
    demand = InferenceDemand(np.array([0.0, 500.0]), np.array([0, 2]), n_servers=2)
    res = run(rows, "aryl", n_training_servers=1, n_inference_servers=2,
              loan_reserve_servers=0, inference=demand, reclaim_grace_s=300.0)
    s = res.summary
    assert s["end_s"] == 3120.0
    assert s["gpu_s_allocated"] == 37760.0
    assert s["gpu_s_allocated_on_loans"] == 12800.0
    assert s["cluster_usage"] == 1.0
    assert s["training_usage_no_loans"] == 1.0  # was 37760 / 24960 = 1.51
    assert s["loan_usage"] == 1.0
    assert s["inference_utilisation"] == pytest.approx(4640 / 6240, rel=1e-12)
    assert s["inference_utilisation_with_loans"] == pytest.approx(1.0, rel=1e-12)  # was 1.096


def test_check_result_catches_broken_accounting() -> None:
    from aryl.sim.check import InvariantError, check_result

    rows = [dict(job_id="a", submit_time_s=0, duration_s=1000, gpus=8),
            dict(job_id="d", submit_time_s=1500, duration_s=10, gpus=8)]
    res = run(rows, "fifo", n_training_servers=2, horizon_s=1000.0)
    check_result(res)  # consistent
    cases: list[tuple[str, Any]] = [
        ("cluster_usage = 1.5 outside", lambda r: r.summary.__setitem__("cluster_usage", 1.5)),
        ("jct_s.mean = -1", lambda r: r.summary["jct_s"].__setitem__("mean", -1.0)),
        ("not arrived but with a start, wait",
         lambda r: r.jobs.__setitem__("wait_s", r.jobs["wait_s"].fillna(-500.0))),
        ("more GPU-seconds than its maximum size",
         lambda r: r.jobs.__setitem__("gpu_s", r.jobs["gpu_s"] * 2)),
        ("GPU-seconds of jobs 4000", lambda r: r.jobs.__setitem__("gpu_s", r.jobs["gpu_s"] / 2)),
        ("summary n_not_arrived", lambda r: r.summary.__setitem__("n_not_arrived", 0)),
        ("unknown status", lambda r: r.jobs.__setitem__("status", "done")),
        ("time series busy_gpus negative",
         lambda r: r.timeseries.__setitem__("busy_gpus", -r.timeseries["busy_gpus"] - 1)),
    ]
    for message, corrupt in cases:
        bad = run(rows, "fifo", n_training_servers=2, horizon_s=1000.0)
        corrupt(bad)
        with pytest.raises(InvariantError, match=message):
            check_result(bad)
