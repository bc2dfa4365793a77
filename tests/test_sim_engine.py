"""Simulator: hand-computed scenarios on 8-GPU servers (issue 5)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from aryl.errors import InvalidInputError
from aryl.sim import SimConfig, SimResult, simulate
from aryl.traces.inference import InferenceDemand


def jobs_df(rows: list[dict]) -> pd.DataFrame:
    """Canonical job DataFrame; rows may carry scaling columns (filled for rigid jobs)."""
    out = []
    for r in rows:
        r = dict(r)
        if "min_workers" not in r:
            g = r.get("gpus_per_worker", r["gpus"] if r["gpus"] <= 8 else 8)
            r.setdefault("gpus_per_worker", g)
            r["min_workers"] = r["max_workers"] = r["gpus"] // g
            r.setdefault("elastic", False)
        r.setdefault("alpha", 0.05)
        r.setdefault("elastic", r["max_workers"] > r["min_workers"])
        out.append(r)
    df = pd.DataFrame(out)
    return df.astype(
        {
            "submit_time_s": "float64",
            "duration_s": "float64",
            "gpus": "int64",
            "gpus_per_worker": "int64",
            "min_workers": "int64",
            "max_workers": "int64",
            "elastic": "bool",
            "alpha": "float64",
        }
    )


def run(rows: list[dict] | pd.DataFrame, policy: str, **cfg: object) -> SimResult:
    df = rows if isinstance(rows, pd.DataFrame) else jobs_df(rows)
    inference = cfg.pop("inference", False)
    cfg.setdefault("n_inference_servers", 0)
    cfg.setdefault("check", True)
    return simulate(df, policy=policy, config=SimConfig(**cfg), inference=inference)  # type: ignore[arg-type]


def events_of(res: SimResult, job: str) -> list[tuple[float, str, int]]:
    ev = res.events[res.events["job_id"] == job]
    cols = (ev["time_s"].tolist(), ev["event"].tolist(), ev["workers"].tolist())
    return list(zip(*cols, strict=True))


def row(res: SimResult, job: str) -> pd.Series:
    return res.jobs.set_index("job_id").loc[job]


# --------------------------------------------------------------- elastic


def test_elastic_job_shrinks_to_make_room_not_to_base_and_grows_back() -> None:
    rows = [
        dict(job_id="E", submit_time_s=0, duration_s=10_000, gpus=8, gpus_per_worker=1,
             min_workers=3, max_workers=8),
        dict(job_id="R", submit_time_s=100, duration_s=500, gpus=2),
    ]
    res = run(rows, "aryl", n_training_servers=1)
    ev = events_of(res, "E")
    assert ev[:4] == [
        (0.0, "arrive", 0),
        (0.0, "start", 8),
        (100.0, "scale_in", 6),
        (600.0, "scale_out", 8),
    ]
    assert ev[-1][1] == "finish"
    assert events_of(res, "R") == [(100.0, "arrive", 0), (100.0, "start", 1), (600.0, "finish", 0)]
    assert res.summary["n_preemptions"] == 0
    e = row(res, "E")
    assert e["n_scale_in"] == 1
    assert e["n_scale_out"] == 1
    # E runs at 8 workers (speed 1) except 100..600 at 6 workers with two 30 s pauses
    alpha = 0.05

    def T(w: float) -> float:
        return w / (1 + alpha * (w - 1))

    done = 100 + (500 - 30) * T(6) / T(8)  # traced seconds of work by t=600
    assert e["finish_s"] == pytest.approx(600 + 30 + (10_000 - done), rel=1e-12)


def test_second_elastic_job_gets_its_base_at_once() -> None:
    rows = [
        dict(job_id="A", submit_time_s=0, duration_s=10_000, gpus=8, gpus_per_worker=1,
             min_workers=8, max_workers=16),
        dict(job_id="B", submit_time_s=1000, duration_s=10_000, gpus=8, gpus_per_worker=1,
             min_workers=8, max_workers=16),
    ]
    res = run(rows, "aryl", n_training_servers=2)
    # 16 GPUs: A alone takes all 16 workers; when B arrives both bases (8 + 8 workers
    # of 1 GPU) fill the cluster, so B starts at exactly 8 and A shrinks to 8
    assert events_of(res, "A")[:3] == [(0.0, "arrive", 0), (0.0, "start", 16),
                                       (1000.0, "scale_in", 8)]
    b = events_of(res, "B")
    assert b[:2] == [(1000.0, "arrive", 0), (1000.0, "start", 8)]
    assert row(res, "B")["queuing_delay_s"] == 0.0
    assert res.summary["n_preemptions"] == 0


# --------------------------------------------------------------- blocking


def _stream_with_big_job() -> list[dict]:
    rows = [
        dict(job_id=f"s{i}", submit_time_s=100.0 * i, duration_s=1000 + 7 * (i % 5), gpus=1)
        for i in range(300)
    ]
    rows.append(dict(job_id="big", submit_time_s=5050.0, duration_s=2000, gpus=32))
    return rows


@pytest.mark.parametrize(("policy", "bound"), [("fifo", 0.0), ("sjf", 0.0), ("aryl", 0.0)])
def test_large_job_starts_when_the_jobs_running_at_its_arrival_end(
    policy: str, bound: float
) -> None:
    rows = _stream_with_big_job()
    res = run(rows, policy, n_training_servers=4, starvation_bound_s=bound)
    jobs = res.jobs.set_index("job_id")
    arr = 5050.0
    running = jobs[(jobs["first_start_s"] <= arr) & (jobs["finish_s"] > arr)]
    assert len(running) >= 5
    assert jobs.loc["big", "first_start_s"] <= running["finish_s"].max()
    assert res.summary["n_finished"] == len(rows)


def test_starvation_bound_caps_the_bypass() -> None:
    rows = _stream_with_big_job()
    bound = 1500.0
    res = run(rows, "aryl", n_training_servers=4, starvation_bound_s=bound)
    jobs = res.jobs.set_index("job_id")
    # after `bound` it blocks backfill; the jobs running then end within 1,004 s
    assert jobs.loc["big", "first_start_s"] <= 5050 + bound + 1004
    assert jobs.loc["big", "first_start_s"] > 5050  # it was bypassed at first (SJF)


def test_job_that_never_fits_is_reported_and_others_run(caplog: pytest.LogCaptureFixture) -> None:
    rows = [
        dict(job_id="a", submit_time_s=0, duration_s=100, gpus=8),
        dict(job_id="huge", submit_time_s=10, duration_s=100, gpus=64),
        dict(job_id="b", submit_time_s=20, duration_s=100, gpus=8),
        dict(job_id="c", submit_time_s=30, duration_s=100, gpus=4, gpus_per_worker=1,
             min_workers=2, max_workers=8),
    ]
    demand = InferenceDemand(np.array([0.0]), np.array([0]), n_servers=2)
    with caplog.at_level(logging.WARNING, logger="aryl.sim.engine"):
        res = run(rows, "aryl", n_training_servers=2, n_inference_servers=2,
                  loan_reserve_servers=0, inference=demand)
    assert "huge" in caplog.text
    assert res.infeasible["job_id"].tolist() == ["huge"]
    assert res.summary["n_infeasible"] == 1
    assert res.summary["n_finished"] == 3
    for key in ("n_preemptions", "n_reclaims", "n_scale_in"):
        assert res.summary[key] == 0, key
    ev = res.events
    assert (ev[ev["job_id"] == "huge"]["event"] == "infeasible").all()
    assert np.isnan(row(res, "huge")["first_start_s"])


# --------------------------------------------------------------- order


def test_same_time_ties_go_by_input_order_not_name() -> None:
    rows = [
        dict(job_id=n, submit_time_s=0, duration_s=100, gpus=8)
        for n in ("job-10", "job-9", "job-100")
    ]
    res = run(rows, "fifo", n_training_servers=1)
    starts = res.events[res.events["event"] == "start"]
    assert starts["job_id"].tolist() == ["job-10", "job-9", "job-100"]
    assert starts["time_s"].tolist() == [0.0, 100.0, 200.0]
    assert res.jobs["job_id"].tolist() == ["job-10", "job-9", "job-100"]


def test_fifo_is_strict_head_of_line() -> None:
    rows = [
        dict(job_id="a", submit_time_s=0, duration_s=100, gpus=4),
        dict(job_id="b", submit_time_s=1, duration_s=100, gpus=8),
        dict(job_id="c", submit_time_s=2, duration_s=100, gpus=1),  # fits but must wait
    ]
    res = run(rows, "fifo", n_training_servers=1)
    j = res.jobs.set_index("job_id")
    assert j.loc["b", "first_start_s"] == 100.0
    assert j.loc["c", "first_start_s"] == 200.0
    res = run(rows, "sjf", n_training_servers=1)  # backfill
    assert res.jobs.set_index("job_id").loc["c", "first_start_s"] == 2.0


def test_gang_placement_whole_servers_plus_best_fit() -> None:
    rows = [
        dict(job_id="x", submit_time_s=0, duration_s=1000, gpus=6),   # server 0
        dict(job_id="y", submit_time_s=1, duration_s=1000, gpus=3),   # server 1 (only fit)
        dict(job_id="z", submit_time_s=2, duration_s=1000, gpus=10),  # 8 on s2 + 2 on s0
    ]
    df = jobs_df(rows)
    df.loc[2, "gpus_per_worker"] = 1
    df.loc[2, ["min_workers", "max_workers"]] = 10
    res = run(df, "fifo", n_training_servers=3)
    assert (res.jobs["first_start_s"] == [0.0, 1.0, 2.0]).all()


# --------------------------------------------------------------- reclaim


def test_reclaim_preempts_and_the_job_restarts_once() -> None:
    rows = [
        dict(job_id="A", submit_time_s=0, duration_s=10_000, gpus=8),
        dict(job_id="B", submit_time_s=10, duration_s=1000, gpus=8),
    ]
    demand = InferenceDemand(np.array([0.0, 500.0, 2000.0]), np.array([0, 1, 0]), n_servers=1)
    res = run(rows, "aryl", n_training_servers=1, n_inference_servers=1,
              loan_reserve_servers=0, inference=demand, restart_cost_s=60.0)
    assert res.jobs["job_id"].tolist().count("B") == 1
    b = row(res, "B")
    assert b["n_preemptions"] == 1
    ev = [(t, e) for t, e, _ in events_of(res, "B")]
    assert ev == [(10.0, "arrive"), (10.0, "start"), (500.0, "preempt"), (2000.0, "start"),
                  (3060.0, "finish")]
    assert b["queuing_delay_s"] == 0.0
    assert b["wait_s"] == 1500.0
    assert b["gpu_s"] == 8 * 490 + 8 * 1060
    assert row(res, "A")["n_preemptions"] == 0
    s = res.summary
    assert s["n_loans"] == 2
    assert s["n_reclaims"] == 1
    assert s["n_reclaim_preemptions"] == 1


def test_reclaim_shrinks_an_elastic_job_instead_of_killing_it() -> None:
    rows = [
        dict(job_id="E", submit_time_s=0, duration_s=5000, gpus=8, gpus_per_worker=1,
             min_workers=4, max_workers=16),
    ]
    demand = InferenceDemand(np.array([0.0, 500.0]), np.array([0, 1]), n_servers=1)
    res = run(rows, "aryl", n_training_servers=1, n_inference_servers=1,
              loan_reserve_servers=0, inference=demand)
    ev = events_of(res, "E")
    assert ev[1] == (0.0, "start", 16)
    assert ev[2] == (500.0, "scale_in", 8)
    assert res.summary["n_preemptions"] == 0
    assert res.summary["n_reclaims"] == 1


def test_non_loaning_policies_never_loan() -> None:
    rows = [dict(job_id=f"j{i}", submit_time_s=i, duration_s=500, gpus=8) for i in range(4)]
    demand = InferenceDemand(np.array([0.0]), np.array([0]), n_servers=4)
    for policy in ("fifo", "sjf", "tiresias", "aryl-no-loan", "elastic-greedy"):
        res = run(rows, policy, n_training_servers=1, n_inference_servers=4, inference=demand)
        assert res.summary["n_loans"] == 0, policy
        if policy != "tiresias":  # tiresias preempts past 1 GPU-hour
            assert res.summary["end_s"] == 2000.0, policy
    res = run(rows, "aryl", n_training_servers=1, n_inference_servers=4, inference=demand,
              loan_reserve_servers=0)
    # one server per job that waits (j0 runs on the training server)
    assert res.summary["n_loans"] == 3
    assert res.summary["n_loan_returns"] == 3  # each goes back when its job ends
    assert res.summary["end_s"] == 503.0
    assert res.summary["queuing_delay_s"]["max"] == 0.0
    ev = res.events[res.events["job_id"] == ""]
    assert list(zip(ev["time_s"], ev["event"], ev["workers"], strict=True)) == [
        (1.0, "loan", 1), (2.0, "loan", 2), (3.0, "loan", 3),
        (501.0, "loan_return", 1), (502.0, "loan_return", 2), (503.0, "loan_return", 3),
    ]
    # the previous behaviour: every loanable server as soon as a job waits, kept
    res = simulate(jobs_df(rows), policy="aryl", inference=demand,
                   config=SimConfig(n_training_servers=1, n_inference_servers=4,
                                    loan_reserve_servers=0, check=True),
                   policy_options={"return_idle_loans": False})
    assert res.summary["n_loans"] == 4
    assert res.summary["n_loan_returns"] == 0
    assert res.summary["end_s"] == 503.0


# --------------------------------------------------------------- measures


def test_usage_one_job_on_two_servers_is_half() -> None:
    res = run([dict(job_id="a", submit_time_s=0, duration_s=1000, gpus=8)], "fifo",
              n_training_servers=2)
    assert res.summary["cluster_usage"] == 0.5
    assert res.summary["gpu_s_allocated"] == 8000.0


def test_late_first_arrival_idle_gap_and_single_job() -> None:
    rows = [
        dict(job_id="a", submit_time_s=3600, duration_s=1000, gpus=8),
        dict(job_id="b", submit_time_s=3600 + 10_000, duration_s=1000, gpus=8),
    ]
    res = run(rows, "aryl", n_training_servers=1)
    s = res.summary
    assert s["start_s"] == 3600.0
    assert s["end_s"] == 3600 + 11_000
    assert s["cluster_usage"] == pytest.approx(2000 / 11_000)
    assert res.timeseries["time_s"].iloc[0] == 3600.0
    assert res.timeseries["busy_gpus"].tolist()[:2] == [8, 8]
    single = run(rows[:1], "fifo", n_training_servers=1)
    assert single.summary["jct_s"]["mean"] == 1000.0
    assert single.summary["cluster_usage"] == 1.0


def test_header_only_trace(caplog: pytest.LogCaptureFixture) -> None:
    df = jobs_df([dict(job_id="a", submit_time_s=0, duration_s=1, gpus=1)]).iloc[:0]
    with caplog.at_level(logging.WARNING, logger="aryl.sim"):
        res = run(df, "aryl", n_training_servers=1)
    assert "no jobs" in caplog.text
    assert len(res.jobs) == 0
    assert res.summary["n_jobs"] == 0
    assert res.summary["jct_s"]["mean"] is None


def test_run_ends_at_last_finish_not_last_arrival() -> None:
    rows = [
        dict(job_id="long", submit_time_s=0, duration_s=5000, gpus=1),
        dict(job_id="late", submit_time_s=100, duration_s=10, gpus=1),
    ]
    res = run(rows, "fifo", n_training_servers=1)
    assert res.summary["end_s"] == 5000.0
    assert res.summary["n_finished"] == 2


def test_horizon_lists_unfinished_jobs() -> None:
    rows = [
        dict(job_id="a", submit_time_s=0, duration_s=100, gpus=8),
        dict(job_id="b", submit_time_s=0, duration_s=5000, gpus=8),
        dict(job_id="c", submit_time_s=0, duration_s=100, gpus=8),
    ]
    res = run(rows, "fifo", n_training_servers=1, horizon_s=1000.0)
    assert res.unfinished["job_id"].tolist() == ["b", "c"]
    assert res.summary["end_s"] == 1000.0
    assert res.summary["n_finished"] == 1
    assert row(res, "c")["wait_s"] == 1000.0


def test_preemption_loses_progress_since_checkpoint() -> None:
    # tiresias: a new job (level 0) preempts one past 1 GPU-hour (level 1)
    rows = [
        dict(job_id="old", submit_time_s=0, duration_s=5000, gpus=8),
        dict(job_id="new", submit_time_s=2000, duration_s=100, gpus=8),
    ]
    res = run(
        rows, "tiresias", n_training_servers=1, checkpoint_interval_s=1500.0, restart_cost_s=60.0
    )
    old = row(res, "old")
    assert old["n_preemptions"] == 1
    # preempted at 2000 with a checkpoint at 1500: 500 s lost; restarts at 2100 (+60 s)
    assert old["finish_s"] == 2100 + 60 + 3500
    assert row(res, "new")["first_start_s"] == 2000.0


def test_config_validation() -> None:
    with pytest.raises(InvalidInputError, match="backend"):
        SimConfig(backend="gpu")
    with pytest.raises(InvalidInputError, match="policy"):
        run([dict(job_id="a", submit_time_s=0, duration_s=1, gpus=1)], "no-such-policy")
    with pytest.raises(InvalidInputError, match="missing column"):
        simulate(pd.DataFrame({"job_id": ["a"]}), config=SimConfig(n_inference_servers=0))


def test_checker_catches_an_over_committed_server() -> None:
    from aryl.sim.check import Checker, InvariantError
    from aryl.sim.engine import Engine
    from aryl.sim.jobs import build_job_table

    table = build_job_table(jobs_df([dict(job_id="a", submit_time_s=0, duration_s=10, gpus=8)]),
                            gpus_per_server=8, default_alpha=0.05)
    eng = Engine(table, "fifo", SimConfig(n_training_servers=1, n_inference_servers=0), None)
    Checker(eng).after_pass()
    eng.state.free[0] = -1
    with pytest.raises(InvariantError, match="over-committed"):
        Checker(eng).after_pass()


def test_reclaim_waits_for_the_grace_period() -> None:
    rows = [
        dict(job_id="A", submit_time_s=0, duration_s=10_000, gpus=8),
        dict(job_id="B", submit_time_s=10, duration_s=1000, gpus=8),
    ]
    demand = InferenceDemand(np.array([0.0, 500.0]), np.array([0, 1]), n_servers=1)
    res = run(rows, "aryl", n_training_servers=1, n_inference_servers=1,
              loan_reserve_servers=0, inference=demand, reclaim_grace_s=120.0)
    ev = [(t, e) for t, e, _ in events_of(res, "B")]
    assert ev[2] == (620.0, "preempt")
    rec = res.events[res.events["event"] == "reclaim"]
    assert rec["time_s"].tolist() == [620.0]


@pytest.mark.parametrize("policy", ["aryl", "random", "fewest-jobs", "most-idle", "exact"])
def test_reclaim_policy_is_selectable(policy: str) -> None:
    rows = [
        dict(job_id=f"E{i}", submit_time_s=i, duration_s=3000, gpus=4, gpus_per_worker=1,
             min_workers=2, max_workers=8)
        for i in range(4)
    ]
    demand = InferenceDemand(np.array([0.0, 1000.0]), np.array([0, 2]), n_servers=2)
    res = run(rows, "aryl", n_training_servers=1, n_inference_servers=2,
              loan_reserve_servers=0, inference=demand, reclaim_policy=policy)
    assert res.summary["n_reclaims"] == 2
    assert res.summary["n_finished"] == 4
    assert res.summary["config"]["reclaim_policy"] == policy


def test_default_inference_profile_is_used() -> None:
    rows = [dict(job_id=f"j{i}", submit_time_s=600.0 * i, duration_s=3000, gpus=8)
            for i in range(40)]
    res = simulate(jobs_df(rows), policy="aryl",
                   config=SimConfig(n_training_servers=2, n_inference_servers=8, check=True))
    s = res.summary
    assert s["n_loans"] > 0
    assert 0 < s["inference_utilisation"] < s["inference_utilisation_with_loans"] <= 1


# --------------------------------------------------------------- voluntary loan return


def test_loaned_server_goes_back_when_its_job_ends() -> None:
    # A fills the only training server; B waits and runs on the loaned server
    # over [20, 50]; at 50 the server hosts nothing and goes back.  C (4 GPUs)
    # fits the training server, so nothing is borrowed for it.
    rows = [
        dict(job_id="A", submit_time_s=0, duration_s=100, gpus=8),
        dict(job_id="B", submit_time_s=20, duration_s=30, gpus=8),
        dict(job_id="C", submit_time_s=120, duration_s=10, gpus=4),
    ]
    demand = InferenceDemand(np.array([0.0]), np.array([0]), n_servers=1)
    res = run(rows, "aryl", n_training_servers=1, n_inference_servers=1,
              loan_reserve_servers=0, inference=demand, timeseries_step_s=10.0)
    assert events_of(res, "B") == [(20.0, "arrive", 0), (20.0, "start", 1), (50.0, "finish", 0)]
    ev = res.events[res.events["job_id"] == ""]
    assert list(zip(ev["time_s"], ev["event"], ev["workers"], strict=True)) == [
        (20.0, "loan", 1), (50.0, "loan_return", 1),
    ]
    s = res.summary
    assert (s["n_loans"], s["n_loan_returns"], s["n_reclaims"]) == (1, 1, 0)
    assert s["end_s"] == 130.0
    # allocated 8*100 + 8*30 + 4*10 = 1080; available 8*130 (training) + 8*30 (loan) = 1280
    assert s["gpu_s_allocated"] == 1080.0
    assert s["gpu_s_available"] == 1280.0
    assert s["cluster_usage"] == 1080.0 / 1280.0
    assert s["mean_loaned_servers"] == 30.0 / 130.0
    ts = res.timeseries
    assert ts["loaned_servers"].tolist() == [0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    # without the voluntary return the server is borrowed at t = 0 (A is queued
    # when the pass starts) and kept to the end (t = 130)
    res = simulate(jobs_df(rows), policy="aryl", inference=demand,
                   config=SimConfig(n_training_servers=1, n_inference_servers=1,
                                    loan_reserve_servers=0, check=True),
                   policy_options={"return_idle_loans": False})
    assert res.summary["n_loan_returns"] == 0
    assert res.summary["gpu_s_available"] == 8 * 130 + 8 * 130
    assert res.summary["cluster_usage"] == 1080.0 / 2080.0


def test_no_loan_when_nothing_waits_and_no_elastic_job_can_grow() -> None:
    # R (4 GPUs) and E (2..4 workers of 1 GPU, starts at its maximum) share the
    # training server; nothing ever waits and E never can grow: no loan at all.
    rows = [
        dict(job_id="R", submit_time_s=0, duration_s=100, gpus=4),
        dict(job_id="E", submit_time_s=0, duration_s=200, gpus=4, gpus_per_worker=1,
             min_workers=2, max_workers=4),
    ]
    demand = InferenceDemand(np.array([0.0]), np.array([0]), n_servers=2)
    res = run(rows, "aryl", n_training_servers=1, n_inference_servers=2,
              loan_reserve_servers=0, inference=demand)
    assert events_of(res, "E")[1] == (0.0, "start", 4)
    assert res.summary["n_loans"] == 0
    assert res.summary["n_loan_returns"] == 0
    assert res.summary["gpu_s_available"] == 8 * 200
    assert not (res.events["job_id"] == "").any()
    # the previous behaviour borrowed both servers at t = 0 (jobs were queued)
    res = simulate(jobs_df(rows), policy="aryl", inference=demand,
                   config=SimConfig(n_training_servers=1, n_inference_servers=2,
                                    loan_reserve_servers=0, check=True),
                   policy_options={"return_idle_loans": False})
    assert res.summary["n_loans"] == 2


def test_unchecked_jct_table_equals_the_kernel_builder() -> None:
    from aryl.elastic import jct_reduction_table
    from aryl.scheduling.kernels import _table_unchecked

    rng = np.random.default_rng(3)
    for n in (1, 7, 40):
        base = rng.integers(1, 5, n).astype(np.int64)
        mx = base + rng.integers(0, 9, n)
        cur = np.minimum(mx, base + rng.integers(0, 4, n))
        g = rng.integers(1, 9, n).astype(np.int64)
        rem = rng.uniform(0, 1e5, n)
        rem[0] = 0.0
        alpha = rng.uniform(0, 0.5, n)
        for pause in (0.0, 30.0):
            v0, w0 = jct_reduction_table(rem, cur, base, mx, g, alpha, pause)
            v1, w1 = _table_unchecked(rem, cur, base, mx, g, alpha, pause)
            np.testing.assert_array_equal(v0, v1)  # NaN where absent, bit-identical elsewhere
            np.testing.assert_array_equal(w0, w1)


def test_checker_catches_drift_of_the_state_bookkeeping(monkeypatch: pytest.MonkeyPatch) -> None:
    from aryl.scheduling.state import ClusterState
    from aryl.sim.check import InvariantError

    rows = [
        dict(job_id="E", submit_time_s=0, duration_s=5000, gpus=8, gpus_per_worker=1,
             min_workers=4, max_workers=16),
    ]
    demand = InferenceDemand(np.array([0.0, 500.0]), np.array([0, 1]), n_servers=1)
    # the Python engine: its state's bookkeeping is what is patched below
    kw = dict(n_training_servers=1, n_inference_servers=1, loan_reserve_servers=0,
              inference=demand, engine="python")
    run(rows, "aryl", **kw)  # consistent: passes
    monkeypatch.setattr(ClusterState, "_track_extras", lambda self, j: None)
    with pytest.raises(InvariantError, match="drifted"):
        run(rows, "aryl", **kw)
