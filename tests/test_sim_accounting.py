"""The simulator's measures on replays small enough to account for by hand.

One scenario with a loan, a reclaim, a preemption and a restart is replayed and
every number of its result is derived in the comments: per-job times, the
event log, GPU-seconds (all, on loans, per pool), usage, goodput, inference
utilisation, the counters and the time series.  Further cases: the statuses at
a horizon (unfinished, not arrived, infeasible, the wait of a job still
queued), the inference step series (``InferenceSchedule``, the adapter that
clips and shifts a demand), the engine's refusals and its stall diagnostics,
and the figures (``aryl.sim.plot``) read back from the matplotlib objects.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl.errors import InvalidInputError
from aryl.sim import SimConfig, SimResult, simulate
from aryl.sim.adapters import inference_schedule, load_inference_spec
from aryl.sim.engine import InferenceSchedule, scheduler_config
from aryl.traces.inference import InferenceDemand


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Canonical jobs; 1-GPU workers, rigid unless min/max workers are given."""
    out = []
    for r in rows:
        r = dict(r)
        r.setdefault("gpus_per_worker", 1)
        g = r["gpus_per_worker"]
        r.setdefault("min_workers", r["gpus"] // g)
        r.setdefault("max_workers", r["gpus"] // g)
        r.setdefault("alpha", 0.05)
        r["elastic"] = r["max_workers"] > r["min_workers"]
        out.append(r)
    return pd.DataFrame(out).astype({"submit_time_s": "float64", "duration_s": "float64",
                                     "gpus": "int64", "gpus_per_worker": "int64",
                                     "min_workers": "int64", "max_workers": "int64",
                                     "elastic": "bool", "alpha": "float64"})


# ------------------------------------------------------------------ the loan scenario
#
# 1 training server t0 and 2 inference servers i0, i1 (8 GPUs each); no reserve, no
# cool-down; inference demand 0 servers from t = 0, 2 from t = 100 (reclaim at once).
# A: 8 workers of 1 GPU, 200 s;  B: 8 workers of 1 GPU, 50 s; both submitted at 0.
#
# t = 0   SJF: B (50 s) before A.  B on t0; A fits no training server and takes the
#         offered i0 (best fit over i0, i1: tie, lower index): i0 is borrowed.
# t = 50  B finishes.  A keeps i0 (it still runs there).
# t = 100 demand 2 > 1 server not on loan: i0 is reclaimed at once; A (rigid) is
#         preempted, rolled back to its start checkpoint (200 s left, no periodic
#         checkpoint in 100 s) and requeued; in the same pass it restarts on t0 and
#         pays the 60 s restart cost: progress from 160, it finishes at 160 + 200 = 360.
# Passes: t = 0, 50, 100, 360.

_ROWS = [dict(job_id="A", submit_time_s=0, duration_s=200, gpus=8),
         dict(job_id="B", submit_time_s=0, duration_s=50, gpus=8)]


def loan_replay(**cfg: Any) -> SimResult:
    demand = InferenceDemand(times_s=np.array([0.0, 100.0]), servers_needed=np.array([0, 2]),
                             n_servers=2)
    config = SimConfig(n_training_servers=1, n_inference_servers=2, loan_reserve_servers=0,
                       loan_cooldown_s=0.0, timeseries_step_s=50.0, check=True, **cfg)
    return simulate(frame(_ROWS), policy="aryl", config=config, inference=demand)


def test_the_loan_scenario_per_job_and_event_log() -> None:
    res = loan_replay()
    jobs = res.jobs.set_index("job_id")
    assert jobs["first_start_s"].to_dict() == {"A": 0.0, "B": 0.0}
    assert jobs["finish_s"].to_dict() == {"A": 360.0, "B": 50.0}
    assert jobs["jct_s"].to_dict() == {"A": 360.0, "B": 50.0}
    assert jobs["queuing_delay_s"].to_dict() == {"A": 0.0, "B": 0.0}
    assert jobs["wait_s"].to_dict() == {"A": 0.0, "B": 0.0}  # A requeued and restarted at 100
    assert jobs["n_preemptions"].to_dict() == {"A": 1, "B": 0}
    assert jobs["n_scale_in"].sum() == 0
    assert jobs["n_scale_out"].sum() == 0
    assert jobs["n_moves"].sum() == 0
    # A: 8 GPUs x 100 s on i0 + 8 x 260 s on t0 = 800 + 2,080; B: 8 x 50
    assert jobs["gpu_s"].to_dict() == {"A": 2880.0, "B": 400.0}
    assert jobs["status"].tolist() == ["finished", "finished"]
    assert jobs["main_pool"].to_dict() == {"A": "training", "B": "training"}  # 2,080 > 800
    ev = list(zip(res.events["time_s"], res.events["job_id"], res.events["event"],
                  res.events["workers"], strict=True))
    # apply order: reclaim actions, reclaimed servers, borrowed, preemptions, resizes,
    # starts, returned; a loan/reclaim row carries the server index in ``workers``
    assert ev == [
        (0.0, "A", "arrive", 0), (0.0, "B", "arrive", 0),
        (0.0, "", "loan", 1), (0.0, "B", "start", 8), (0.0, "A", "start", 8),
        (50.0, "B", "finish", 0),
        (100.0, "A", "preempt", 0), (100.0, "", "reclaim", 1), (100.0, "A", "start", 8),
        (360.0, "A", "finish", 0),
    ]


def test_the_loan_scenario_summary() -> None:
    s = loan_replay().summary
    assert (s["start_s"], s["end_s"], s["makespan_s"]) == (0.0, 360.0, 360.0)
    assert (s["n_jobs"], s["n_finished"], s["n_unfinished"]) == (2, 2, 0)
    assert (s["n_infeasible"], s["n_not_arrived"]) == (0, 0)
    # JCTs 50 and 360: mean 205; p50 205; p95 50 + 0.95 x 310 = 344.5; p99 356.9
    assert s["jct_s"] == {"mean": 205.0, "p50": 205.0, "p95": pytest.approx(344.5),
                          "p99": pytest.approx(356.9), "max": 360.0}
    assert s["queuing_delay_s"] == {"mean": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0,
                                    "max": 0.0}
    assert s["share_jobs_waited"] == 0.0
    assert s["share_jobs_waited_total"] == 0.0
    # GPU-seconds: allocated 2,880 + 400 = 3,280, 800 of them on the loan (A on i0,
    # 0..100); available: t0 8 x 360 + i0 8 x 100 while on loan = 3,680
    assert s["gpu_s_allocated"] == 3280.0
    assert s["gpu_s_allocated_on_loans"] == 800.0
    assert s["gpu_s_available"] == 3680.0
    assert s["cluster_usage"] == 3280.0 / 3680.0
    assert s["training_usage_no_loans"] == (3280.0 - 800.0) / 2880.0
    assert s["loan_usage"] == 800.0 / (100.0 * 8)
    # useful work: (duration - remaining) x GPUs = 200 x 8 + 50 x 8 = 2,000
    assert s["useful_gpu_s"] == 2000.0
    assert s["goodput"] == 2000.0 / 3680.0
    # inference: 0 needed until 100, then 2 of 2 serving until 360: 2 x 260 = 520
    # server-seconds of 2 x 360; with loans + 100 (i0 on loan 0..100)
    assert s["inference_utilisation"] == 520.0 / 720.0
    assert s["inference_utilisation_with_loans"] == 620.0 / 720.0
    assert s["mean_loaned_servers"] == 100.0 / 360.0
    assert (s["n_loans"], s["n_reclaims"], s["n_loan_returns"]) == (1, 1, 0)
    assert (s["n_preemptions"], s["n_reclaim_preemptions"]) == (1, 1)
    assert (s["n_scale_in"], s["n_scale_out"], s["n_moves"]) == (0, 0, 0)
    assert s["n_decisions"] == 4
    assert s["policy"] == "aryl"
    assert s["seed"] == 0
    assert s["config"]["loan_reserve_servers"] == 0
    cl = s["cluster"]
    assert (cl["n_training_servers"], cl["n_inference_servers"]) == (1, 2)
    assert (cl["training_gpus"], cl["inference_gpus"]) == (8, 16)
    assert cl["speed_model"] is None
    assert cl["mix_gpu_types"] is False
    assert [p["name"] for p in cl["pools"]] == ["training", "inference"]


def test_the_loan_scenario_pools() -> None:
    pools = {p["pool"]: p for p in loan_replay().summary["pools"]}
    tr, inf = pools["training"], pools["inference"]
    assert (tr["role"], tr["gpu_type"], tr["n_servers"]) == ("training", "V100", 1)
    assert (inf["role"], inf["gpu_type"], inf["n_servers"]) == ("inference", "V100", 2)
    assert tr["gpu_s_available"] == 2880.0  # 8 x 360
    assert inf["gpu_s_available"] == 800.0  # i0 on loan 100 s
    assert tr["gpu_s_allocated"] == 2480.0  # A 2,080 + B 400
    assert inf["gpu_s_allocated"] == 800.0
    assert tr["usage"] == 2480.0 / 2880.0
    assert inf["usage"] == 1.0
    # A's 1,600 useful GPU-s split 2,080 : 800 between the pools; B's 400 all training
    assert tr["useful_gpu_s"] == pytest.approx(1600.0 * 2080.0 / 2880.0 + 400.0, rel=1e-15)
    assert inf["useful_gpu_s"] == pytest.approx(1600.0 * 800.0 / 2880.0, rel=1e-15)
    assert tr["goodput"] == pytest.approx(tr["useful_gpu_s"] / 2880.0, rel=1e-15)
    assert inf["goodput"] == pytest.approx(inf["useful_gpu_s"] / 800.0, rel=1e-15)
    assert (tr["n_jobs_main"], inf["n_jobs_main"]) == (2, 0)
    assert tr["jct_s"]["mean"] == 205.0
    assert inf["jct_s"] == {"mean": None, "p50": None, "p95": None, "p99": None, "max": None}


def test_the_loan_scenario_time_series() -> None:
    ts = loan_replay().timeseries
    assert ts["time_s"].tolist() == [0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0, 350.0]
    # after the pass at 0: both run (16 GPUs), i0 on loan; at 50 only A (on the loan);
    # from 100 A on t0, no loan, 2 servers needed
    assert ts["busy_gpus"].tolist() == [16, 8, 8, 8, 8, 8, 8, 8]
    assert ts["running_jobs"].tolist() == [2, 1, 1, 1, 1, 1, 1, 1]
    assert ts["loaned_servers"].tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert ts["queue_length"].tolist() == [0] * 8
    assert ts["inference_servers_needed"].tolist() == [0, 0, 2, 2, 2, 2, 2, 2]


def test_a_grace_period_delays_the_reclaim_and_serving_counts_what_is_left() -> None:
    # grace 40 s: demand rises at 100, the deadline is 140.  From 100 to 140 only
    # 1 server is not on loan: it serves 1 of the 2 needed.  A is preempted at 140,
    # restarts on t0 at 140 (+60 s restart cost): 200 s of work from 200, ends at 400.
    res = loan_replay(reclaim_grace_s=40.0)
    jobs = res.jobs.set_index("job_id")
    assert jobs["finish_s"].to_dict() == {"A": 400.0, "B": 50.0}
    s = res.summary
    # serving: 1 x 40 (100..140) + 2 x 260 (140..400) = 560 of 2 x 400
    assert s["inference_utilisation"] == 560.0 / 800.0
    # with loans: + i0 on loan 0..140
    assert s["inference_utilisation_with_loans"] == (560.0 + 140.0) / 800.0
    # A: 8 x 140 on i0 + 8 x 260 on t0; available 8 x 400 + 8 x 140
    assert s["gpu_s_allocated_on_loans"] == 1120.0
    assert s["gpu_s_available"] == 3200.0 + 1120.0
    assert s["n_decisions"] == 5  # 0, 50, 100 (demand), 140 (deadline), 400


def test_without_loans_nothing_is_lent_and_loan_usage_is_none() -> None:
    # fifo: A (row 0) first on t0 0..200, B 200..250; no loan, no reclaim
    demand = InferenceDemand(times_s=np.array([0.0, 100.0]), servers_needed=np.array([0, 2]),
                             n_servers=2)
    res = simulate(frame(_ROWS), policy="fifo", inference=demand,
                   config=SimConfig(n_training_servers=1, n_inference_servers=2, check=True))
    s = res.summary
    assert res.jobs.set_index("job_id")["finish_s"].to_dict() == {"A": 200.0, "B": 250.0}
    assert s["loan_usage"] is None
    assert s["gpu_s_available"] == 8 * 250.0
    assert s["cluster_usage"] == 1.0
    assert s["training_usage_no_loans"] == 1.0
    assert s["mean_loaned_servers"] == 0.0
    assert s["share_jobs_waited"] == 0.5  # B waited 200 s
    assert s["queuing_delay_s"]["mean"] == 100.0
    # 2 servers needed from 100 to 250 of 2 x 250
    assert s["inference_utilisation"] == 300.0 / 500.0
    assert s["inference_utilisation_with_loans"] == 300.0 / 500.0


# ------------------------------------------------------------------ horizon and statuses

def test_statuses_at_a_horizon() -> None:
    # One 8-GPU server, horizon 150.  A (8 GPUs, 100 s) 0..100; B (8 GPUs, 100 s, at 10)
    # 100..200: unfinished at 150 (ran 50 s); C (8 GPUs, at 20) queued: waited 130 s by
    # 150; D (16 GPUs) can never fit: infeasible at 30; E submitted at 200: not arrived.
    rows = [dict(job_id="A", submit_time_s=0, duration_s=100, gpus=8),
            dict(job_id="B", submit_time_s=10, duration_s=100, gpus=8),
            dict(job_id="C", submit_time_s=20, duration_s=100, gpus=8),
            dict(job_id="D", submit_time_s=30, duration_s=100, gpus=16),
            dict(job_id="E", submit_time_s=200, duration_s=100, gpus=8)]
    res = simulate(frame(rows), policy="fifo", inference=False, config=SimConfig(
        n_training_servers=1, n_inference_servers=0, horizon_s=150.0, check=True))
    jobs = res.jobs.set_index("job_id")
    assert jobs["status"].to_dict() == {"A": "finished", "B": "unfinished", "C": "unfinished",
                                        "D": "infeasible", "E": "not_arrived"}
    assert jobs.loc["B", "first_start_s"] == 100.0
    assert math.isnan(jobs.loc["B", "finish_s"])
    assert jobs.loc["B", "wait_s"] == 90.0  # 10 .. 100
    assert jobs.loc["C", "wait_s"] == 130.0  # still queued: 20 .. 150
    assert math.isnan(jobs.loc["C", "first_start_s"])
    assert jobs.loc["D", "wait_s"] == 0.0
    assert math.isnan(jobs.loc["E", "wait_s"])
    assert jobs["gpu_s"].to_dict() == {"A": 800.0, "B": 400.0, "C": 0.0, "D": 0.0, "E": 0.0}
    s = res.summary
    assert (s["n_finished"], s["n_unfinished"], s["n_infeasible"], s["n_not_arrived"]) == (
        1, 2, 1, 1)
    assert (s["end_s"], s["makespan_s"]) == (150.0, 150.0)
    assert s["gpu_s_allocated"] == 1200.0
    assert s["cluster_usage"] == 1200.0 / 1200.0
    # useful work: A 100 x 8, B 50 x 8 (its progress to the horizon)
    assert s["useful_gpu_s"] == 1200.0
    assert res.unfinished["job_id"].tolist() == ["B", "C"]
    assert res.not_arrived["job_id"].tolist() == ["E"]
    assert res.infeasible["job_id"].tolist() == ["D"]
    assert s["inference_utilisation"] is None  # no inference servers


def test_an_empty_trace_gives_empty_measures() -> None:
    res = simulate(frame([dict(job_id="A", submit_time_s=0, duration_s=1, gpus=1)]).iloc[:0],
                   policy="fifo", inference=False,
                   config=SimConfig(n_training_servers=1, n_inference_servers=0))
    s = res.summary
    assert s["n_jobs"] == 0
    assert s["jct_s"]["mean"] is None
    assert s["share_jobs_waited"] is None
    assert s["cluster_usage"] is None
    assert s["training_usage_no_loans"] is None
    assert s["mean_loaned_servers"] == 0.0
    assert res.timeseries["time_s"].tolist() == [0.0]
    assert list(res.events.columns) == ["time_s", "job_id", "event", "workers"]
    assert len(res.events) == 0
    assert res.timing["n_decisions"] == 0
    assert res.timing["scheduler_ms_per_decision"] == 0.0


# ------------------------------------------------------------------ inference series

def test_inference_schedule_steps_and_periods() -> None:
    once = InferenceSchedule(np.array([0.0, 10.0, 30.0]), np.array([1, 3, 2]), math.inf)
    assert [once.at(k) for k in range(4)] == [(0.0, 1), (10.0, 3), (30.0, 2), (math.inf, 2)]
    daily = InferenceSchedule(np.array([0.0, 10.0]), np.array([4, 5]), 100.0)
    # k counts across periods: step k of period c is at c x 100 + offset
    assert [daily.at(k) for k in range(5)] == [(0.0, 4), (10.0, 5), (100.0, 4), (110.0, 5),
                                               (200.0, 4)]


def test_a_demand_is_shifted_to_the_clock_start_and_clipped() -> None:
    d = InferenceDemand(times_s=np.array([100.0, 200.0, 300.0]),
                        servers_needed=np.array([5, 1, 9]), n_servers=9)
    # clock start 250: the step at 200 (1) holds from 250, then 300 (9, clipped to 4)
    s = inference_schedule(d, 4, 250.0)
    assert s.offsets_s == [0.0, 50.0]
    assert s.servers_needed == [1, 4]
    assert s.period_s == math.inf
    # clock start 200: the step at exactly 200 holds from 200
    s = inference_schedule(d, 4, 200.0)
    assert (s.offsets_s, s.servers_needed) == ([0.0, 100.0], [1, 4])
    # clock start before every step: 0 servers until the first
    s = inference_schedule(d, 4, 50.0)
    assert (s.offsets_s, s.servers_needed) == ([0.0, 50.0, 150.0, 250.0], [0, 4, 1, 4])


def test_a_demand_that_is_not_a_step_series_is_refused() -> None:
    bad = InferenceDemand.__new__(InferenceDemand)
    object.__setattr__(bad, "times_s", np.array([0.0, 10.0]))
    object.__setattr__(bad, "servers_needed", np.array([1]))
    with pytest.raises(InvalidInputError) as info:
        inference_schedule(bad, 2, 0.0)
    assert str(info.value) == (
        "inference: times_s and servers_needed must be equal-length 1-D")
    object.__setattr__(bad, "times_s", np.array([0.0, 0.0]))
    object.__setattr__(bad, "servers_needed", np.array([1, 2]))
    with pytest.raises(InvalidInputError) as info:
        inference_schedule(bad, 2, 0.0)
    assert str(info.value) == "inference: times_s must be strictly increasing"
    object.__setattr__(bad, "times_s", np.array([]))
    object.__setattr__(bad, "servers_needed", np.array([], dtype=np.int64))
    with pytest.raises(InvalidInputError):
        inference_schedule(bad, 2, 0.0)


def test_inference_specs() -> None:
    assert load_inference_spec("none", 4, 0.0, 10.0, 0) is None
    assert load_inference_spec("bundled", 0, 0.0, 10.0, 0) is None
    daily = load_inference_spec("bundled", 4, 0.0, 10.0, 0)
    assert daily is not None
    assert daily.period_s == 86400.0
    assert len(daily.offsets_s) == 48  # half-hour steps of one day
    assert daily.offsets_s[0] == 0.0
    assert daily.offsets_s[1] == 1800.0
    assert max(daily.servers_needed) <= 4
    # the bundled profile at 90 % of 4 servers at its daily peak: the peak is
    # round(0.9 x 4) = 4 at most, and a lower peak utilisation needs fewer servers
    low = load_inference_spec("bundled", 4, 0.0, 10.0, 0, peak_utilisation=0.25)
    assert low is not None
    assert max(low.servers_needed) <= max(daily.servers_needed)


# ------------------------------------------------------------------ the engine's refusals

def test_engine_refuses_a_start_after_the_first_arrival_and_a_horizon_before_it() -> None:
    rows = frame([dict(job_id="A", submit_time_s=100, duration_s=10, gpus=1)])
    with pytest.raises(InvalidInputError) as info:
        simulate(rows, policy="fifo", inference=False,
                 config=SimConfig(n_training_servers=1, n_inference_servers=0,
                                  start_time_s=150.0))
    assert str(info.value) == "start_time_s: must not be after the first arrival"
    with pytest.raises(InvalidInputError) as info:
        simulate(rows, policy="fifo", inference=False,
                 config=SimConfig(n_training_servers=1, n_inference_servers=0, horizon_s=50.0))
    assert str(info.value) == (
        "horizon_s: 50 s is before the clock start 100 s (start_time_s, by default the first "
        "arrival): nothing would be simulated")
    # an earlier clock start counts the idle time before the first arrival
    res = simulate(rows, policy="fifo", inference=False,
                   config=SimConfig(n_training_servers=1, n_inference_servers=0,
                                    start_time_s=60.0))
    s = res.summary
    assert (s["start_s"], s["end_s"], s["makespan_s"]) == (60.0, 110.0, 50.0)
    assert s["cluster_usage"] == 10.0 / (8 * 50.0)


def test_scheduler_config_copies_the_pass_knobs() -> None:
    cfg = SimConfig(rescale_pause_s=5, checkpoint_interval_s=7, restart_cost_s=11,
                    loan_reserve_servers=2, loan_cooldown_s=13, starvation_bound_s=17,
                    reclaim_policy="most-idle", seed=19, backend="reference",
                    mix_gpu_types=True)
    sc = scheduler_config(cfg)
    assert sc.to_dict() == {"rescale_pause_s": 5.0, "checkpoint_interval_s": 7.0,
                            "restart_cost_s": 11.0, "loan_reserve_servers": 2,
                            "loan_cooldown_s": 13.0, "starvation_bound_s": 17.0,
                            "reclaim_policy": "most-idle", "seed": 19, "backend": "reference",
                            "mix_gpu_types": True}


# ------------------------------------------------------------------ figures

def _figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             results: dict[str, SimResult]) -> dict[str, Any]:
    import aryl.sim.plot as plot

    figs: dict[str, Any] = {}

    def save(fig: Any, path: Path) -> Path:  # keep the figure, skip the PNG (slow)
        figs[path.name] = fig
        return path

    monkeypatch.setattr(plot, "_save", save)
    paths = plot.plot_results(results, tmp_path / "figs")
    assert paths == [tmp_path / "figs" / name for name in (
        "cdf_jct.png", "cdf_queuing_delay.png", "busy_gpus.png", "loaned_servers.png")]
    assert (tmp_path / "figs").is_dir()
    return figs


def test_the_figures_show_the_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    aryl = loan_replay()
    demand = InferenceDemand(times_s=np.array([0.0, 100.0]), servers_needed=np.array([0, 2]),
                             n_servers=2)
    fifo = simulate(frame(_ROWS), policy="fifo", inference=demand, config=SimConfig(
        n_training_servers=1, n_inference_servers=2, timeseries_step_s=50.0))
    figs = _figures(tmp_path, monkeypatch, {"aryl": aryl, "fifo": fifo})
    # JCT CDF: the sorted JCTs against i / n; log x axis
    ax = figs["cdf_jct.png"].axes[0]
    assert ax.get_xscale() == "log"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("JCT (s)", "fraction of finished jobs")
    assert ax.get_title() == "JCT (finish - arrival)"
    a_line, f_line = ax.get_lines()
    assert a_line.get_xdata().tolist() == [50.0, 360.0]
    assert a_line.get_ydata().tolist() == [0.5, 1.0]
    assert f_line.get_xdata().tolist() == [200.0, 250.0]  # fifo: A 0..200, B 200..250
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["aryl", "fifo"]
    # queuing delay CDF: starts at the share that waited 0 s (aryl 1.0; fifo 0.5)
    ax = figs["cdf_queuing_delay.png"].axes[0]
    assert ax.get_xscale() == "symlog"
    assert ax.get_xlim()[0] == 0.0
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "aryl (100.0% wait 0 s)", "fifo (50.0% wait 0 s)"]
    lines = ax.get_lines()
    steps = [ln for ln in lines if ln.get_drawstyle() == "steps-post"]
    assert steps[1].get_xdata().tolist() == [0.0, 0.0, 200.0]
    assert steps[1].get_ydata().tolist() == [0.5, 0.5, 1.0]
    dots = [ln for ln in lines if ln.get_marker() == "o"]
    assert [d.get_ydata().tolist() for d in dots] == [[1.0], [0.5]]
    # busy GPUs: each run's busy series, aryl's training + loaned capacity step, and the
    # training capacity (8 GPUs)
    ax = figs["busy_gpus.png"].axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["aryl: busy", "aryl: training + loaned GPUs", "fifo: busy",
                     "training GPUs (8)"]
    by_label = {ln.get_label(): ln for ln in ax.get_lines()}
    days = np.arange(8) * 50.0 / 86400.0
    assert np.allclose(by_label["aryl: busy"].get_xdata(), days)
    assert by_label["aryl: busy"].get_ydata().tolist() == [16, 8, 8, 8, 8, 8, 8, 8]
    # 8 training GPUs + 8 per loaned server
    assert by_label["aryl: training + loaned GPUs"].get_ydata().tolist() == [
        16.0, 16.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0]
    assert list(by_label["training GPUs (8)"].get_ydata()) == [8, 8]
    assert ax.get_xlabel() == "days since start"
    assert ax.get_ylabel() == "GPUs"
    # loaned servers: demand fill, aryl's loans (fifo never loans), the inference size
    fig = figs["loaned_servers.png"]
    top, zoom = fig.axes
    assert top.get_title() == "loaned inference servers and inference demand"
    assert zoom.get_title() == "zoom: days 0.0-3.0 (the 3 days with the most loans)"
    labels = [t.get_text() for t in top.get_legend().get_texts()]
    assert labels == ["inference demand (servers)", "aryl: loaned servers",
                      "inference servers (2)"]
    loans = next(ln for ln in top.get_lines() if ln.get_label() == "aryl: loaned servers")
    assert loans.get_ydata().tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert zoom.get_xlim() == (0.0, 3.0)
    assert zoom.get_xlabel() == "days since start"
    assert top.get_ylabel() == "servers"


def test_zoom_window_is_the_three_days_with_the_most_loans() -> None:
    from aryl.sim.plot import _loan_titles, _zoom_window

    def fake(loaned: list[int], policy: str = "aryl") -> SimResult:
        days = np.arange(len(loaned), dtype=np.float64)
        ts = pd.DataFrame({"time_s": days * 86400.0, "loaned_servers": loaned})
        return SimResult(jobs=pd.DataFrame(), summary={"policy": policy}, timeseries=ts)

    # loans per day 0 0 1 5 5 0 0 2: 3-day windows from day 2 (1+5+5 = 11) and day 3
    # (5+5+0 = 10): the window starts at day 2
    res = {"aryl": fake([0, 0, 1, 5, 5, 0, 0, 2])}
    assert _zoom_window(res) == (2.0, 5.0)
    # ties: the earliest window
    assert _zoom_window({"aryl": fake([3, 0, 0, 3, 0, 0])}) == (0.0, 3.0)
    # the best over several runs
    both = {"a": fake([0, 0, 0, 0, 1]), "b": fake([0, 9, 0, 0, 0])}
    assert _zoom_window(both) == (0.0, 3.0)  # b: day 0 window holds 9, the first of them
    assert _zoom_window({"a": fake([0, 0, 0, 0, 4, 0])})[0] == 2.0
    # nothing loaned anywhere: the loaning policy is named
    top, zoom = _loan_titles({"aryl": fake([0, 0])}, 0.0, 3.0)
    assert top == "loaned inference servers and inference demand"
    assert zoom == "zoom: days 0.0-3.0 (no server was loaned by aryl)"
    # two policies that never loan
    top, zoom = _loan_titles({"fifo": fake([0], "fifo"), "sjf": fake([0], "sjf")}, 1.0, 4.0)
    assert top == "inference demand (fifo, sjf never loan servers)"
    assert zoom == "zoom: days 1.0-4.0 (inference demand; fifo, sjf never loan)"
    # a name that is no policy is judged by its data
    top, _ = _loan_titles({"custom": fake([1], "custom")}, 0.0, 3.0)
    assert top == "loaned inference servers and inference demand"


# ------------------------------------------------------------------ the invariant checker

def _engine_after_first_pass() -> Any:
    """The engine of a small replay after its first pass (no checker attached).

    t0 (training), i0, i1 (inference, idle, no demand), 8 GPUs each; reserve 0.
    SJF at t = 0: B (50 s) on t0, A (200 s) on i0 (borrowed), C (300 s) on i1
    (borrowed); D (400 s, 4 workers of 2 GPUs) waits.
    Jobs in table order: A = 0, B = 1, C = 2, D = 3.
    """
    from aryl.sim.engine import Engine
    from aryl.sim.jobs import build_job_table

    rows = [*_ROWS, dict(job_id="C", submit_time_s=0, duration_s=300, gpus=8),
            dict(job_id="D", submit_time_s=0, duration_s=400, gpus=8, gpus_per_worker=2)]
    table = build_job_table(frame(rows), gpus_per_server=8, default_alpha=0.05)
    eng = Engine(table, "aryl", SimConfig(n_training_servers=1, n_inference_servers=2,
                                          loan_reserve_servers=0), None)
    for j in range(4):
        eng._arrive(j)
    eng.n_arrived = 4
    eng._pass()
    st = eng.state
    assert st.placement[:3] == [{1: 8}, {0: 8}, {2: 8}]
    assert list(st.queued) == [3]
    return eng


_AFTER_PASS = [
    (lambda e: e.state.status.__setitem__(0, 1), "job 0 in the running set but status 1"),
    (lambda e: e.state.placement.__setitem__(0, {}), "running job 0 has no placement"),
    (lambda e: e.state.workers.__setitem__(0, 7), "job 0: workers 7 != placement 8"),
    (lambda e: e.base_workers.__setitem__(0, 9), "job 0: 8 workers outside [9, 8]"),
    (lambda e: e.max_workers.__setitem__(0, 7), "job 0: 8 workers outside [8, 7]"),
    (lambda e: e.state.jobs_on[1].__setitem__(0, 3), "job 0: placement on server 1 inconsistent"),
    (lambda e: (e.state.placement.__setitem__(0, {1: 8, 0: 0}),
                e.state.jobs_on[0].__setitem__(0, 0)),
     "job 0: placement on server 0 inconsistent"),
    (lambda e: e.state.status.__setitem__(3, 2), "job 3 in the queue but status 2"),
    (lambda e: e.state.placement.__setitem__(3, {0: 1}), "job 3 in the queue but status 1"),
    (lambda e: e.state.free.__setitem__(0, -1), "server 0 over-committed (free -1)"),
    (lambda e: e.state.free.__setitem__(0, 1), "server 0: used 8 + free 1 != capacity 8"),
    (lambda e: e.state.free.__setitem__(2, 3), "server 2: used 8 + free 3 != capacity 8"),
    (lambda e: setattr(e.state, "busy_loaned", 3), "busy-on-loans counter 3 != placements 16"),
    (lambda e: setattr(e, "n_open", 5),
     "job states do not partition: 1 queued + 3 running + -1 closed != 4 arrived"),
    (lambda e: setattr(e, "n_arrived", 3),
     "job states do not partition: 1 queued + 3 running + 0 closed != 3 arrived"),
    (lambda e: setattr(e.state, "busy", 5), "busy counter 5 != placements 24"),
    (lambda e: setattr(e.state, "servers_needed", 1),
     "2 servers on loan while inference needs 1 of 2"),
    (lambda e: e.state.waited_s.__setitem__(3, -1.0), "job 3: negative queue age"),
    (lambda e: e.state.queued_since_s.__setitem__(3, 1.0), "job 3: negative queue age"),
    (lambda e: e.state.ex_srv.__setitem__(0, 2),
     "cluster state: extra GPUs per server drifted"),
    (lambda e: setattr(e, "reclaim_deadline_misses", 1),
     "a reclaim returned fewer servers than asked by the deadline"),
]


@pytest.mark.parametrize(("corrupt", "expected"), _AFTER_PASS,
                         ids=[m for _, m in _AFTER_PASS])
def test_the_checker_names_each_broken_invariant_after_a_pass(corrupt: Any,
                                                              expected: str) -> None:
    from aryl.sim.check import Checker, InvariantError

    eng = _engine_after_first_pass()
    Checker(eng).after_pass()  # consistent
    corrupt(eng)
    with pytest.raises(InvariantError) as info:
        Checker(eng).after_pass()
    assert str(info.value) == expected


def test_the_checker_sees_an_idle_loan_only_for_policies_that_return_them() -> None:
    from aryl.sim.check import Checker, InvariantError

    eng = _engine_after_first_pass()
    st = eng.state
    st.preempt(2, 0.0)  # C leaves i1: the loan is idle
    with pytest.raises(InvariantError) as info:
        Checker(eng).after_pass()
    assert str(info.value) == "loaned server 2 idle after a pass"
    eng.policy = make_keep_policy()
    Checker(eng).after_pass()  # keeping idle loans is this policy's choice


def make_keep_policy() -> Any:
    from aryl.scheduling import make_policy

    return make_policy("aryl", {"return_idle_loans": False})


def _finished_engine(horizon: float | None = None) -> Any:
    from aryl.sim.engine import Engine
    from aryl.sim.jobs import build_job_table

    rows = [*_ROWS, dict(job_id="C", submit_time_s=10, duration_s=100, gpus=8),
            dict(job_id="L", submit_time_s=500, duration_s=10, gpus=8)]
    table = build_job_table(frame(rows), gpus_per_server=8, default_alpha=0.05)
    eng = Engine(table, "fifo", SimConfig(n_training_servers=1, n_inference_servers=0,
                                          horizon_s=horizon), None)
    eng.run()
    return eng


def test_the_checker_names_each_broken_invariant_at_the_end() -> None:
    from aryl.sim.check import Checker, InvariantError

    # fifo on one server: A 0..200, B 200..250, C (at 10) 250..350, L (at 500) 500..510
    cases: list[tuple[Any, str]] = [
        (lambda e: setattr(e, "now", -1.0), "clock -1.0 before its start 0.0"),
        (lambda e: e.events.append((510.0, 0, "finish", 0)), "job 0 finished 2 times"),
        (lambda e: e.finish_t.__setitem__(1, math.nan), "job 1 done with times 200.0, nan "
                                                         "(arrival 0.0)"),
        (lambda e: e.first_start.__setitem__(2, 5.0), "job 2 done with times 5.0, 350.0 "
                                                       "(arrival 10.0)"),
        (lambda e: e.finish_t.__setitem__(2, 249.0), "job 2 done with times 250.0, 249.0 "
                                                      "(arrival 10.0)"),
        # a finish in the log of a job that is not done
        (lambda e: e.state.status.__setitem__(3, 1), "job 3 finished 1 times"),
        # without the event log, the state alone
        (lambda e: (setattr(e, "events", None), e.state.status.__setitem__(3, 0)),
         "job 3 never arrived (arrival 500.0, end 510.0)"),
        (lambda e: (setattr(e, "events", None), e.state.status.__setitem__(3, 1)),
         "job 3 never finished"),
        (lambda e: (setattr(e, "events", None), e.state.status.__setitem__(3, 9)),
         "job 3 in unknown state 9"),
        (lambda e: e.state.waited_s.__setitem__(0, -1.0), "job 0: negative wait or GPU-seconds"),
        (lambda e: e.state.attained_gpu_s.__setitem__(0, -1.0),
         "job 0: negative wait or GPU-seconds"),
        # 8 GPUs x (200 + 50 + 100 + 10) s = 2,880 GPU-s
        (lambda e: setattr(e, "busy_int", 1.0),
         "GPU-seconds of jobs 2880.0 != busy integral 1.0"),
    ]
    for corrupt, expected in cases:
        eng = _finished_engine()
        Checker(eng).at_end()
        corrupt(eng)
        with pytest.raises(InvariantError) as info:
            Checker(eng).at_end()
        assert str(info.value) == expected
    # with a horizon at 300: C runs (250..), L is not arrived
    eng = _finished_engine(horizon=300.0)
    Checker(eng).at_end()
    eng.now = 301.0
    with pytest.raises(InvariantError) as info:
        Checker(eng).at_end()
    assert str(info.value) == "clock 301.0 past the horizon 300.0"
    eng = _finished_engine(horizon=300.0)
    del eng.state.running[2]
    with pytest.raises(InvariantError) as info:
        Checker(eng).at_end()
    assert str(info.value) == "job 2 in state 2 inconsistent at the end"
    eng = _finished_engine(horizon=300.0)
    eng.state.queued[3] = None
    with pytest.raises(InvariantError) as info:
        Checker(eng).at_end()
    assert str(info.value) == "0 jobs queued but the queue holds 1"
    eng = _finished_engine(horizon=300.0)
    eng.n_arrived = 4  # L (pending) counted as arrived
    with pytest.raises(InvariantError) as info:
        Checker(eng).at_end()
    assert str(info.value) == "job 3 never arrived (arrival 500.0, end 300.0)"
    eng = _finished_engine(horizon=300.0)
    eng.state.status[3] = 1  # L queued before its arrival at 500
    eng.state.queued[3] = None
    with pytest.raises(InvariantError) as info:
        Checker(eng).at_end()
    assert str(info.value) == "job 3 in state 1 inconsistent at the end"


def _horizon_replay() -> SimResult:
    """The horizon case of test_statuses_at_a_horizon (A done, B C unfinished, D
    infeasible, E not arrived; end 150)."""
    rows = [dict(job_id="A", submit_time_s=0, duration_s=100, gpus=8),
            dict(job_id="B", submit_time_s=10, duration_s=100, gpus=8),
            dict(job_id="C", submit_time_s=20, duration_s=100, gpus=8),
            dict(job_id="D", submit_time_s=30, duration_s=100, gpus=16),
            dict(job_id="E", submit_time_s=200, duration_s=100, gpus=8)]
    return simulate(frame(rows), policy="fifo", inference=False, config=SimConfig(
        n_training_servers=1, n_inference_servers=0, horizon_s=150.0))


def _set_job(col: str, job: str, value: Any) -> Any:
    def edit(r: SimResult) -> None:
        r.jobs.loc[r.jobs["job_id"] == job, col] = value
    return edit


def _set_summary(*path: Any) -> Any:
    *keys, value = path

    def edit(r: SimResult) -> None:
        d: Any = r.summary
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return edit


# (which replay, corruption, message); loan replay: A (0..360, 2,880 GPU-s), B (0..50)
_RESULT_CASES = [
    ("loan", _set_summary("loan_usage", 1.0 + 2e-9), "summary loan_usage = 1.000000002 outside "
                                                     "[0, 1]"),
    ("loan", _set_summary("share_jobs_waited", -0.5),
     "summary share_jobs_waited = -0.5 outside [0, 1]"),
    ("loan", _set_summary("n_moves", -1), "summary n_moves = -1 negative"),
    ("loan", _set_summary("n_decisions", -2), "summary n_decisions = -2 negative"),
    ("loan", _set_summary("end_s", -1.0), "run ends at -1.0 before it starts at 0.0"),
    ("loan", _set_summary("makespan_s", -1.0), "run ends at 360.0 before it starts at 0.0"),
    ("loan", _set_summary("wait_s", "p95", -3.0), "summary wait_s.p95 = -3.0 negative"),
    ("loan", _set_summary("queuing_delay_s", "max", -1.0),
     "summary queuing_delay_s.max = -1.0 negative"),
    ("loan", _set_summary("mean_loaned_servers", -0.1), "summary mean_loaned_servers = -0.1 "
                                                        "negative"),
    ("loan", _set_summary("useful_gpu_s", -1.0), "summary useful_gpu_s = -1.0 negative"),
    ("loan", _set_summary("goodput", -0.25), "summary goodput = -0.25 negative"),
    ("loan", _set_summary("pools", 1, "gpu_s_allocated", 0.0),
     "GPU-seconds per pool 2480.0 != allocated 3280.0"),
    ("loan", _set_summary("pools", 0, "usage", 1.5), "pool training usage = 1.5 outside [0, 1]"),
    ("loan", _set_summary("gpu_s_available", 3000.0), "allocated 3280.0 GPU-s > available "
                                                      "3000.0"),
    ("loan", _set_summary("gpu_s_allocated_on_loans", 3300.0),
     "GPU-seconds on loaned servers exceed the total"),
    ("loan", _set_summary("n_jobs", 3), "jobs do not add up to n_jobs"),
    ("loan", _set_summary("n_finished", 1), "summary n_finished = 1 but 2 jobs"),
    ("loan", _set_job("first_start_s", "B", -1.0),
     "job B (finished): not submit <= first start <= finish <= end"),
    ("loan", _set_job("finish_s", "A", 361.0),
     "job A (finished): not submit <= first start <= finish <= end"),
    ("loan", _set_job("queuing_delay_s", "B", -1.0),
     "job B (finished): negative queuing delay or wait, or one above the JCT"),
    ("loan", _set_job("wait_s", "B", 51.0),
     "job B (finished): negative queuing delay or wait, or one above the JCT"),
    ("loan", _set_job("gpu_s", "B", -400.0), "job B (finished): negative GPU-seconds"),
    # B at most 8 GPUs x 360 s since its arrival
    ("loan", _set_job("gpu_s", "B", 2881.0),
     "job B (finished): more GPU-seconds than its maximum size allows"),
    ("loan", _set_job("gpu_s", "B", 401.0), "GPU-seconds of jobs 3281.0 != allocated 3280.0"),
    ("loan", _set_job("n_scale_out", "A", 1), "summary n_scale_out != the sum over jobs"),
    ("loan", _set_summary("n_reclaim_preemptions", 2),
     "more reclaim preemptions than preemptions"),
    # the counters against the event log (A: one preempt event at 100, no scale-out)
    ("loan", lambda r: (_set_job("n_scale_out", "A", 1)(r), _set_summary("n_scale_out", 1)(r)),
     "job A: n_scale_out = 1 but 0 scale_out events in the log"),
    ("loan", lambda r: setattr(r, "events", r.events[r.events["event"] != "preempt"]),
     "job A: n_preemptions = 1 but 0 preempt events in the log"),
    ("loan", lambda r: (_set_job("n_moves", "B", 2)(r), _set_summary("n_moves", 2)(r)),
     "job B: n_moves = 2 but 0 move events in the log"),
    ("loan", _set_summary("mean_loaned_servers", 2.5),
     "mean loaned servers above the inference cluster"),
    ("loan", lambda r: r.timeseries.__setitem__("time_s", r.timeseries["time_s"][::-1].values),
     "time series not ascending within [start, end]"),
    ("loan", lambda r: r.timeseries.__setitem__("time_s", r.timeseries["time_s"] + 20.0),
     "time series not ascending within [start, end]"),
    ("loan", lambda r: r.timeseries.__setitem__("running_jobs", -r.timeseries["running_jobs"]),
     "time series running_jobs negative"),
    ("loan", lambda r: r.timeseries.__setitem__("loaned_servers", 3),
     "time series: more loaned or needed servers than exist"),
    ("loan", lambda r: r.timeseries.__setitem__("inference_servers_needed", 3),
     "time series: more loaned or needed servers than exist"),
    # 8 training GPUs + 8 per loaned server: 16 busy GPUs with no loan is too many
    ("loan", lambda r: r.timeseries.__setitem__("loaned_servers", 0),
     "time series: busy GPUs above training + loaned GPUs"),
    ("loan", lambda r: r.timeseries.__setitem__("queue_length", 1),
     "time series: more running and queued jobs than jobs"),
    # horizon replay: B, C unfinished; D infeasible; E not arrived; end 150
    ("horizon", _set_job("finish_s", "B", 140.0),
     "job B (unfinished): unfinished but not arrived by the end, finished, or a wait out of "
     "[0, end - arrival]"),
    ("horizon", _set_job("wait_s", "C", 131.0),
     "job C (unfinished): unfinished but not arrived by the end, finished, or a wait out of "
     "[0, end - arrival]"),
    ("horizon", _set_job("first_start_s", "B", 5.0), "job B (unfinished): started before its "
                                                     "arrival"),
    ("horizon", _set_job("wait_s", "E", 0.0),
     "job E (not_arrived): not arrived but with a start, wait, JCT or GPU-seconds, or arrived "
     "by the end"),
    ("horizon", _set_job("n_preemptions", "E", 1),
     "job E (not_arrived): not arrived but with a start, wait, JCT or GPU-seconds, or arrived "
     "by the end"),
    ("horizon", _set_job("first_start_s", "D", 40.0), "job D (infeasible): infeasible but "
                                                      "started"),
]


@pytest.mark.parametrize(("which", "corrupt", "expected"), _RESULT_CASES,
                         ids=[f"{w}-{i}" for i, (w, _, _) in enumerate(_RESULT_CASES)])
def test_check_result_names_each_broken_rule(which: str, corrupt: Any, expected: str) -> None:
    from aryl.sim.check import InvariantError, check_result

    res = loan_replay() if which == "loan" else _horizon_replay()
    check_result(res)  # consistent
    corrupt(res)
    with pytest.raises(InvariantError) as info:
        check_result(res)
    assert str(info.value) == expected


# ------------------------------------------------------------------ engine details

def test_infeasible_jobs_are_summarised_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    # 2 training servers of 8 GPUs: 17..24 GPUs (3 workers of 8) can never fit
    rows = [dict(job_id=f"big{i}", submit_time_s=i, duration_s=10, gpus=24,
                 gpus_per_worker=8) for i in range(7)]
    rows.append(dict(job_id="ok", submit_time_s=0, duration_s=10, gpus=8))
    calls: list[tuple[int, int, float]] = []
    with caplog.at_level(logging.WARNING, logger="aryl.sim.engine"):
        res = simulate(frame(rows), policy="fifo", inference=False,
                       progress=lambda done, n, t: calls.append((done, n, t)),
                       config=SimConfig(n_training_servers=2, n_inference_servers=0))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "7 job(s) can never fit the training cluster (2 servers x 8 GPUs); reported as "
        "infeasible (status 'infeasible' in the jobs table), e.g. big0, big1, big2, big3, big4"]
    assert res.summary["n_infeasible"] == 7
    # the progress callback gets (jobs done, jobs, clock) at the end: "ok" ends at 10;
    # infeasible jobs count as done
    assert calls[-1] == (8, 8, 10.0)


def test_demand_values_are_clipped_to_the_inference_cluster() -> None:
    # 3 inference servers; the series asks for -2, then 5, then 1 servers
    sched = InferenceSchedule(np.array([0.0, 10.0, 20.0]), np.array([-2, 5, 1]), math.inf)
    rows = [dict(job_id="a", submit_time_s=0, duration_s=30, gpus=8)]
    res = simulate(frame(rows), policy="fifo", inference=sched, config=SimConfig(
        n_training_servers=1, n_inference_servers=3, timeseries_step_s=10.0))
    assert res.timeseries["inference_servers_needed"].tolist() == [0, 3, 1, 1]
    # serving: 0 x 10 + 3 x 10 + 1 x 10 of 3 x 30 server-seconds
    assert res.summary["inference_utilisation"] == 40.0 / 90.0


def test_a_job_fits_if_one_gpu_type_can_hold_it() -> None:
    from aryl.cluster import ClusterSpec

    spec = ClusterSpec.from_dict({"pools": [
        {"name": "a", "role": "training", "n_servers": 2, "gpus_per_server": 8,
         "gpu_type": "V100"},
        {"name": "b", "role": "training", "n_servers": 1, "gpus_per_server": 8,
         "gpu_type": "A100"},
    ]})
    from aryl.sim.engine import Engine
    from aryl.sim.jobs import build_job_table

    table = build_job_table(frame([dict(job_id="a", submit_time_s=0, duration_s=1, gpus=8)]),
                            gpus_per_server=8, default_alpha=0.05)
    for mix, expected in ((False, (True, True, False)), (True, (True, True, True))):
        cfg = SimConfig(n_training_servers=3, n_inference_servers=0, mix_gpu_types=mix,
                        speed_model="parametric")
        eng = Engine(table, "fifo", cfg, None, cluster=spec)
        # 16 GPUs fit the two V100 servers; 24 GPUs only all three together (types mixed);
        # 3 workers of 5 GPUs: one per server, 3 servers
        assert (eng.fits_ever(16, 1), eng.fits_ever(2, 8), eng.fits_ever(24, 1)) == expected
        assert eng.fits_ever(3, 5) is mix
        assert eng.fits_ever(2, 5) is True
