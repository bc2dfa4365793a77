"""The numbers of the experiment report (``aryl.experiment``), on hand-made runs.

Each table is built from a ``runs`` frame whose numbers are chosen by hand, so the
expected ratios and gains are plain arithmetic (exact in binary floating point
where possible): a sign or direction error in the report (e.g. the usage gain
inverted, fifo / aryl swapped) changes a value asserted here.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aryl.experiment import (
    PAPER_FIGURES,
    _fmt,
    ablation_table,
    headline_table,
    markdown_table,
    render_markdown,
    sensitivity_table,
)
from aryl.sweep import execute_run, parse_spec, plan_sweep


def _replay(trace: Path, policy: str, n_train: int, n_inf: int) -> tuple[dict, pd.DataFrame,
                                                                       pd.DataFrame]:
    """One sweep run of ``policy`` on ``trace`` (no elastic jobs): its row, jobs, time series."""
    plan = plan_sweep(parse_spec({"grid": {"trace": str(trace), "policy": policy,
                                           "elastic_fraction": 0.0,
                                           "n_training_servers": n_train,
                                           "n_inference_servers": n_inf}}))
    (run,) = plan.runs
    out = execute_run(run, plan.traces[run.trace_id])
    row = pd.read_parquet(io.BytesIO(out.row)).iloc[0].to_dict()
    return (row, pd.read_parquet(io.BytesIO(out.jobs)),
            pd.read_parquet(io.BytesIO(out.timeseries)))

_COLS = dict(
    n_jobs=100, n_training_servers=4, n_inference_servers=2, elastic_fraction=0.5,
    peak_utilisation=0.9, reclaim_policy="aryl", n_scale_in=0, n_scale_out=0, n_loans=0,
    n_reclaims=0, mean_loaned_servers=0.0, sweep="", value=math.nan,
)


def _run(section: str, trace: str, policy: str, qd: float, jct: float, usage: float,
         **kw: object) -> dict[str, object]:
    r: dict[str, object] = dict(_COLS)
    r.update(section=section, trace=trace, policy=policy, variant=policy,
             mean_queuing_delay_s=qd, p95_queuing_delay_s=2 * qd, mean_jct_s=jct,
             p95_jct_s=2 * jct, cluster_usage=usage, combined_usage=usage / 2,
             goodput=usage, gpu_s_allocated=1000.0, preemptions_per_1000_jobs=0.0)
    r.update(kw)
    return r


def _runs() -> pd.DataFrame:
    return pd.DataFrame([
        # main trace: fifo qd 3,000 s, JCT 9,000 s, usage 0.5; aryl 1,500 / 6,000 / 0.625
        _run("headline", "t1", "fifo", 3000.0, 9000.0, 0.5),
        _run("headline", "t1", "aryl", 1500.0, 6000.0, 0.625, preemptions_per_1000_jobs=12.5,
             n_scale_in=3, n_scale_out=7, n_loans=5, n_reclaims=2),
        # a second trace where aryl *lowers* usage: 0.75 -> 0.6 is a gain of -0.2
        _run("headline", "t2", "fifo", 800.0, 2000.0, 0.75, n_training_servers=9),
        _run("headline", "t2", "aryl", 1000.0, 2500.0, 0.6, n_training_servers=9),
        _run("ablation", "t1", "sjf", 2000.0, 8000.0, 0.5),
        _run("ablation", "t1", "aryl", 1200.0, 4500.0, 0.7, reclaim_policy="random",
             sweep="reclaim_policy"),
        _run("sensitivity", "t1", "aryl", 600.0, 4000.0, 0.8, sweep="rescale_pause_s",
             value=0.0),
        _run("sensitivity", "t1", "fifo", 6000.0, 12000.0, 0.9, sweep="training_servers_x",
             value=0.75, n_training_servers=3),
        _run("sensitivity", "t1", "aryl", 2000.0, 8000.0, 0.95, sweep="training_servers_x",
             value=0.75, n_training_servers=3, mean_loaned_servers=1.5),
    ])


def test_headline_gains_and_ratios_have_the_papers_direction() -> None:
    h = headline_table(_runs())
    assert h["trace"].tolist() == ["t1", "t2", "paper [Aryl]"]
    t1, t2, paper = (h.iloc[i] for i in range(3))
    # fifo / aryl for delays: 3000 / 1500 = 2, 9000 / 6000 = 1.5
    assert t1["qd ratio"] == 2.0
    assert t1["JCT ratio"] == 1.5
    # aryl / fifo - 1 for usage: 0.625 / 0.5 - 1 = +0.25 (higher usage is a gain)
    assert t1["usage gain"] == 0.25
    assert t1["all-GPU usage gain"] == 0.25  # (0.3125 / 0.25) - 1
    assert (t1["fifo qd"], t1["aryl qd"], t1["fifo p95 qd"], t1["aryl p95 qd"]) == (
        3000.0, 1500.0, 6000.0, 3000.0)
    assert (t1["fifo JCT"], t1["aryl JCT"], t1["fifo p95 JCT"], t1["aryl p95 JCT"]) == (
        9000.0, 6000.0, 18000.0, 12000.0)
    assert (t1["fifo usage"], t1["aryl usage"]) == (0.5, 0.625)
    assert t1["preempt/1k jobs"] == 12.5
    assert t1["jobs"] == 100
    assert t1["servers"] == "4+2"
    # t2: aryl is worse: ratios below 1, usage gain negative: 0.6 / 0.75 - 1 = -0.2
    assert t2["qd ratio"] == 0.8
    assert t2["JCT ratio"] == 0.8
    assert t2["usage gain"] == pytest.approx(-0.2, abs=1e-15)
    assert t2["servers"] == "9+2"
    # the paper's row: 1.53x delay, 1.50x JCT, +26.9% usage (arXiv version)
    assert (paper["qd ratio"], paper["JCT ratio"], paper["usage gain"]) == (1.53, 1.50, 0.269)
    assert PAPER_FIGURES["usage_gain"] == 0.269


def test_ratio_is_missing_not_infinite_when_aryl_has_no_delay() -> None:
    runs = _runs()
    runs.loc[1, "mean_queuing_delay_s"] = 0.0
    runs.loc[1, "cluster_usage"] = None
    h = headline_table(runs)
    # _ratio gives None; the table column holds it as NaN (printed "–")
    assert pd.isna(h.iloc[0]["qd ratio"])
    assert pd.isna(h.iloc[0]["usage gain"])
    assert h.iloc[0]["JCT ratio"] == 1.5


def test_ablation_table_labels_and_ratios() -> None:
    a = ablation_table(_runs())
    assert a["policy"].tolist() == ["fifo", "aryl", "sjf", "aryl (reclaim random)"]
    assert a["reclaim"].tolist() == ["–", "aryl", "–", "random"]
    # fifo / each: 3000 / [3000, 1500, 2000, 1200]
    assert a["qd ratio"].tolist() == [1.0, 2.0, 1.5, 2.5]
    assert a["JCT ratio"].tolist() == [1.0, 1.5, 9000 / 8000, 2.0]
    assert a["usage"].tolist() == [0.5, 0.625, 0.5, 0.7]
    assert a["p95 qd"].tolist() == [6000.0, 3000.0, 4000.0, 2400.0]
    assert a["p95 JCT"].tolist() == [18000.0, 12000.0, 16000.0, 9000.0]
    assert a.iloc[1][["scale-ins", "scale-outs", "loans", "reclaims", "preempt/1k jobs"]].tolist() \
        == [3, 7, 5, 2, 12.5]


def test_sensitivity_table_uses_each_clusters_own_fifo() -> None:
    s = sensitivity_table(_runs())
    assert s["sweep"].tolist() == ["rescale_pause_s", "rescale_pause_s",
                                   "training_servers_x", "training_servers_x"]
    # rescale pause: the swept run (0 s) against the headline fifo, then the headline
    # aryl run at the default pause (30 s)
    assert s["value"].tolist() == [0.0, 30.0, 0.75, 1.0]
    assert s["default"].tolist() == [False, True, False, True]
    assert s["qd ratio"].tolist() == [3000 / 600, 2.0, 6000 / 2000, 2.0]
    assert s["JCT ratio"].tolist() == [9000 / 4000, 1.5, 12000 / 8000, 1.5]
    assert s["servers"].tolist() == ["4+2", "4+2", "3+2", "4+2"]
    assert s["aryl qd"].tolist() == [600.0, 1500.0, 2000.0, 1500.0]
    assert s["usage"].tolist() == [0.8, 0.625, 0.95, 0.625]
    assert s["mean loaned"].tolist() == [0.0, 0.0, 1.5, 0.0]


def test_number_format() -> None:
    assert [_fmt(x) for x in (None, math.nan, math.inf, True, False, 0, 0.0, 1234, 12345.6,
                              99.994, 1.0, 0.12345, -250.4, "x")] == [
        "–", "–", "–", "yes", "", "0", "0", "1,234", "12,346", "99.99", "1.00", "0.123",
        "-250", "x"]
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, None]})
    assert markdown_table(df) == "| a | b |\n|---|---|\n| 1 | 0.500 |\n| 2 | – |"


def test_a_sweep_run_measures_a_hand_computed_replay(tmp_path: Path) -> None:
    # One training server, no inference servers.  a (8 GPUs, 100 s) and b (8 GPUs,
    # 300 s) at t=0, c (4 GPUs, 200 s) at t=50.
    #   fifo: a 0..100, b 100..400, c 400..600 (strict order; c cannot pass b).
    #     delays 0, 100, 350: mean 150, p95 = 100 + 0.9 * 250 = 325 (linear)
    #     JCT 100, 400, 550: mean 350, p95 = 400 + 0.9 * 150 = 535
    #   aryl (sjf base phase, rigid jobs): a 0..100, c 100..300 (200 < 300), b 300..600
    #     delays 0, 300, 50: mean 350/3, p95 = 50 + 0.9 * 250 = 275
    #     JCT 100, 600, 250: mean 950/3, p95 = 250 + 0.9 * 350 = 565
    # GPU-seconds 800 + 2,400 + 800 = 4,000 of 8 x 600 = 4,800 available: usage 5/6 for
    # both (and the all-GPU usage too: no inference cluster).
    path = tmp_path / "tiny.csv"
    pd.DataFrame({"job_id": ["a", "b", "c"], "submit_time_s": [0.0, 0.0, 50.0],
                  "duration_s": [100.0, 300.0, 200.0], "gpus": [8, 8, 4]}).to_csv(path,
                                                                               index=False)
    want = {
        "fifo": (150.0, 325.0, 350.0, 535.0),
        "aryl": (350 / 3, 275.0, 950 / 3, 565.0),
    }
    for policy, (qd, p95qd, jct, p95jct) in want.items():
        r, jobs, ts = _replay(path, policy, 1, 0)
        assert r["mean_queuing_delay_s"] == pytest.approx(qd, rel=1e-12)
        assert r["p95_queuing_delay_s"] == pytest.approx(p95qd, rel=1e-12)
        assert r["mean_jct_s"] == pytest.approx(jct, rel=1e-12)
        assert r["p95_jct_s"] == pytest.approx(p95jct, rel=1e-12)
        assert r["mean_wait_s"] == pytest.approx(qd, rel=1e-12)
        assert r["cluster_usage"] == pytest.approx(5 / 6, rel=1e-12)
        assert r["combined_usage"] == pytest.approx(5 / 6, rel=1e-12)
        assert (r["n_jobs"], r["n_finished"], r["n_preemptions"], r["n_loans"]) == (3, 3, 0, 0)
        assert r["preemptions_per_1000_jobs"] == 0.0
        assert (r["trace"], r["policy"], r["variant"]) == ("tiny", policy, policy)
        assert (r["n_training_servers"], r["n_inference_servers"]) == (1, 0)
        assert r["mean_loaned_servers"] == 0.0
        assert math.isnan(r["inference_utilisation_with_loans"])  # no inference servers
        np.testing.assert_array_equal(np.sort(jobs["jct_s"]),
                                      [100.0, 400.0, 550.0] if policy == "fifo"
                                      else [100.0, 250.0, 600.0])
        assert ts["busy_gpus"].iloc[0] == 8


def test_a_sweep_run_all_gpu_usage_counts_serving_inference(tmp_path: Path) -> None:
    # fifo with 1 training + 2 inference servers: no loans, so the all-GPU usage is
    # (training GPU-s + serving GPU-s) / (3 servers x 8 GPUs x span); serving GPU-s =
    # inference utilisation x span x 2 x 8.  One job: 8 GPUs for 1,000 s.
    path = tmp_path / "one.csv"
    pd.DataFrame({"job_id": ["a"], "submit_time_s": [0.0], "duration_s": [1000.0],
                  "gpus": [8]}).to_csv(path, index=False)
    r, _, _ = _replay(path, "fifo", 1, 2)
    from aryl.sim.adapters import default_inference

    sched = default_inference(2, 0, peak_utilisation=0.9)
    assert sched is not None
    # servers needed over [0, 1000): the bundled profile's first steps
    t = [*sched.offsets_s, math.inf]
    serving_s = sum(v * max(0.0, min(t[i + 1], 1000.0) - t[i])
                    for i, v in enumerate(sched.servers_needed) if t[i] < 1000.0)
    assert r["cluster_usage"] == 1.0
    assert r["combined_usage"] == pytest.approx((8000 + 8 * serving_s) / (24 * 1000), rel=1e-12)
    assert r["inference_utilisation_with_loans"] == pytest.approx(serving_s / 2000, rel=1e-12)


def test_quick_plan_is_the_documented_plan() -> None:
    from aryl.sweep import bundled_spec, load_spec

    plan = plan_sweep(load_spec(bundled_spec("paper-quick")))
    runs = {r.key: r for r in plan.runs}
    entries = [(dict(e.tags), runs[e.key]) for e in plan.entries]
    # every entry twice, seeds 0 and 1 (the seed varies fastest)
    assert [r.seed for _, r in entries] == [0, 1] * (len(entries) // 2)
    shown = ("reclaim_policy", "checkpoint_interval_s", "rescale_pause_s", "restart_cost_s",
             "starvation_bound_s", "cluster", "loaned_gpu_speed")
    got = [(t["section"], t.get("sweep", ""), r.policy, r.variant, r.elastic_fraction,
            r.elastic_worker_gpus, r.peak_utilisation,
            {k: v for k, v in r.config if k in shown},
            dict(r.config)["n_training_servers"], dict(r.config)["n_inference_servers"])
           for t, r in entries if r.seed == 0]
    # itp-c10 is sized 4 + 4 (4 = MIN_INFERENCE_SERVERS > round(4 * 16/46))
    n, m = 4, 4
    d = {"reclaim_policy": "aryl", "checkpoint_interval_s": 1800.0, "rescale_pause_s": 30.0,
         "restart_cost_s": 60.0, "starvation_bound_s": 14400.0, "cluster": None,
         "loaned_gpu_speed": None}
    costly = {**d, "restart_cost_s": 600.0, "checkpoint_interval_s": 7200.0}
    lyra = {**d, "cluster": "lyra"}
    # lyra gives its own counts: SimConfig's defaults stand in for them
    ln, lm = 46, 16
    assert got == [
        ("headline", "", "fifo", "fifo", 0.5, "one", 0.9, d, n, m),
        ("headline", "", "fifo-backfill", "fifo-backfill", 0.5, "one", 0.9, d, n, m),
        ("headline", "", "aryl", "aryl", 0.5, "one", 0.9, d, n, m),
        ("ablation", "", "aryl-no-loan", "aryl-no-loan", 0.5, "one", 0.9, d, n, m),
        ("ablation", "", "aryl-no-elastic", "aryl-no-elastic", 0.5, "one", 0.9, d, n, m),
        ("ablation", "", "sjf", "sjf", 0.5, "one", 0.9, d, n, m),
        ("ablation", "", "tiresias", "tiresias", 0.5, "one", 0.9, d, n, m),
        ("ablation", "", "elastic-greedy", "elastic-greedy", 0.5, "one", 0.9, d, n, m),
        ("ablation", "", "sjf", "sjf", 0.5, "one", 0.9, {**d, "starvation_bound_s": 1e9}, n,
         m),
        ("ablation", "", "aryl", "aryl keep-idle-loans", 0.5, "one", 0.9, d, n, m),
        ("ablation", "", "aryl", "aryl", 0.5, "one", 0.9, {**d, "reclaim_policy": "random"},
         n, m),
        ("sensitivity", "elastic_fraction", "aryl", "aryl", 0.0, "one", 0.9, d, n, m),
        # inference ratio 0.25: max(1, round(4 * 0.25)) = 1 inference server
        ("sensitivity", "inference_ratio", "aryl", "aryl", 0.5, "one", 0.9, d, n, 1),
        ("sensitivity", "peak_utilisation", "aryl", "aryl", 0.5, "one", 0.5, d, n, m),
        ("sensitivity", "checkpoint_interval_s", "aryl", "aryl", 0.5, "one", 0.9,
         {**d, "checkpoint_interval_s": 600.0}, n, m),
        ("sensitivity", "rescale_pause_s", "aryl", "aryl", 0.5, "one", 0.9,
         {**d, "rescale_pause_s": 0.0}, n, m),
        # load: round(4 * 0.75) = 3 training servers, fifo as its own baseline
        ("sensitivity", "training_servers_x", "fifo", "fifo", 0.5, "one", 0.9, d, 3, m),
        ("sensitivity", "training_servers_x", "aryl", "aryl", 0.5, "one", 0.9, d, 3, m),
        # multi-GPU elastic workers
        ("knapsack", "", "fifo", "fifo", 0.5, "split", 0.9, d, n, m),
        ("knapsack", "", "aryl", "aryl", 0.5, "split", 0.9, d, n, m),
        ("knapsack", "", "aryl-no-loan", "aryl-no-loan", 0.5, "split", 0.9, d, n, m),
        ("knapsack", "", "elastic-greedy", "elastic-greedy", 0.5, "split", 0.9, d, n, m),
        # reclaim choice: the default cell, then 4 inference servers (ratio 1) and costly
        # preemptions
        ("reclaim", "", "aryl", "aryl", 0.5, "one", 0.9, d, n, m),
        ("reclaim", "", "aryl", "aryl", 0.5, "one", 0.9, {**d, "reclaim_policy": "random"},
         n, m),
        ("reclaim", "", "aryl", "aryl", 0.5, "one", 0.9, costly, n, 4),
        ("reclaim", "", "aryl", "aryl", 0.5, "one", 0.9,
         {**costly, "reclaim_policy": "random"}, n, 4),
        ("hetero", "", "fifo", "fifo", 0.5, "one", 0.9, lyra, ln, lm),
        ("hetero", "", "aryl-no-loan", "aryl-no-loan", 0.5, "one", 0.9, lyra, ln, lm),
        ("hetero", "", "aryl", "aryl", 0.5, "one", 0.9, lyra, ln, lm),
        ("hetero", "loaned_gpu_speed", "aryl", "aryl", 0.5, "one", 0.9,
         {**lyra, "loaned_gpu_speed": 0.4}, ln, lm),
    ]
    labels = [r.label for t, r in entries if r.seed == 0]
    assert labels[12] == "itp-c10 aryl inference_ratio=0.25 seed=0"
    assert labels[9] == "itp-c10 aryl keep-idle-loans seed=0"
    assert labels[19] == "itp-c10 aryl elastic_worker_gpus=split seed=0"
    # the default reclaim cell is the headline and ablation runs: the same keys
    keys = [e.key for e in plan.entries if e.key in runs and runs[e.key].seed == 0]
    assert keys[22] == keys[2]
    assert keys[23] == keys[10]


def test_results_markdown_carries_the_table_values() -> None:
    runs = _runs()
    tables = {"headline": headline_table(runs), "ablations": ablation_table(runs),
              "sensitivity": sensitivity_table(runs),
              "reclaim": pd.DataFrame([{"instances": 3, "mean excess": 0.25}])}
    md = render_markdown(tables, ["a.png"], quick=True)
    assert "Generated by `aryl experiment paper --quick`" in md
    assert "| t1 | 100 | 4+2 | 3,000 | 1,500 | 2.00 |" in md
    # aryl usage, usage gain, all-GPU usage gain; fifo and aryl goodput, goodput gain
    # (0.625 / 0.5 - 1), GPU-seconds ratio (1,000 / 1,000); preemptions
    assert "| 0.625 | 0.250 | 0.250 | 0.500 | 0.625 | 0.250 | 1.00 | 12.50 |" in md
    assert "| t2 | 100 | 9+2 | 800 | 1,000 | 0.800 |" in md
    assert "| aryl (reclaim random) | random | 1,200 |" in md
    assert "| 3 | 0.250 |" in md  # an int stays an int in an all-numeric table
    assert "![a.png](a.png)" in md
    full = render_markdown(tables, [], quick=False)
    # the page names the command that made it: no Philly row, so no --philly
    assert "Generated by `aryl experiment paper`;" in full
    assert "--philly" not in full


def test_a_sweep_run_flattens_its_pools(tmp_path: Path) -> None:
    # One training server (8 GPUs), one inference server; fifo never loans.  One job of
    # 8 GPUs for 1,000 s: the training pool is busy all the time (usage = goodput = 1),
    # the inference pool is never on loan (its usage and goodput are undefined: NaN),
    # and the job's main pool is the training pool (its JCT: 1,000 s).
    path = tmp_path / "one.csv"
    pd.DataFrame({"job_id": ["a"], "submit_time_s": [0.0], "duration_s": [1000.0],
                  "gpus": [8]}).to_csv(path, index=False)
    r, _, _ = _replay(path, "fifo", 1, 1)
    assert r["pool_training_usage"] == 1.0
    assert r["pool_training_goodput"] == 1.0
    assert r["pool_training_gpu_s_available"] == 8000.0
    assert r["pool_training_useful_gpu_s"] == 8000.0
    assert r["pool_training_jobs"] == 1
    assert r["pool_training_mean_jct_s"] == 1000.0
    assert r["pool_inference_n_servers"] == 1
    assert r["pool_inference_gpu_s_available"] == 0.0
    assert math.isnan(r["pool_inference_usage"])
    assert math.isnan(r["pool_inference_goodput"])
    assert r["pool_inference_jobs"] == 0


def test_a_sweep_run_on_a_cluster_spec_uses_its_servers(tmp_path: Path) -> None:
    # fifo on the lyra preset with parametric speeds (every type as fast as a V100): pools
    # v100 (30 x 8 = 240 GPUs), a100 (12 x 8 = 96), t4 (32 x 4 = 128 inference GPUs).
    # One job of 8 GPUs for 1,000 s runs on one training pool: that pool's usage is
    # 8,000 / (its GPUs x 1,000), the other's 0.  The inference demand is the bundled
    # profile scaled to lyra's 32 inference servers (not SimConfig's 16), and the all-GPU
    # usage counts lyra's GPUs: (8,000 + 4 x serving server-seconds) / ((336 + 128) x 1,000).
    path = tmp_path / "one.csv"
    pd.DataFrame({"job_id": ["a"], "submit_time_s": [0.0], "duration_s": [1000.0],
                  "gpus": [8]}).to_csv(path, index=False)
    plan = plan_sweep(parse_spec({"grid": {"trace": str(path), "policy": "fifo",
                                           "cluster": "lyra", "speed_model": "parametric",
                                           "n_training_servers": "auto",
                                           "n_inference_servers": "auto"}}))
    (run,) = plan.runs
    r = pd.read_parquet(io.BytesIO(execute_run(run, plan.traces[run.trace_id]).row)) \
        .iloc[0].to_dict()
    from aryl.sim.adapters import default_inference

    sched = default_inference(32, 0, peak_utilisation=0.9)
    assert sched is not None
    t = [*sched.offsets_s, math.inf]
    serving_s = sum(v * max(0.0, min(t[i + 1], 1000.0) - t[i])
                    for i, v in enumerate(sched.servers_needed) if t[i] < 1000.0)
    assert r["inference_utilisation_with_loans"] == pytest.approx(serving_s / 32000, rel=1e-12)
    assert r["combined_usage"] == pytest.approx((8000 + 4 * serving_s) / 464000, rel=1e-12)
    assert (r["pool_v100_n_servers"], r["pool_a100_n_servers"], r["pool_t4_n_servers"]) == (
        30, 12, 32)
    used = "v100" if r["pool_v100_jobs"] == 1 else "a100"
    other = "a100" if used == "v100" else "v100"
    assert r[f"pool_{used}_jobs"] + r[f"pool_{other}_jobs"] == 1
    assert r[f"pool_{used}_usage"] == pytest.approx(
        8000 / (1000 * r[f"pool_{used}_n_servers"] * 8), rel=1e-12)
    assert r[f"pool_{other}_usage"] == 0.0
    assert r["cluster_usage"] == pytest.approx(8000 / 336000, rel=1e-12)
    assert math.isnan(r["pool_t4_usage"])
