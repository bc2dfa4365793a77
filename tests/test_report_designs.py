"""The evaluation's added tables (baselines, goodput, knapsack, reclaim choice,
heterogeneous GPUs, loaned speed) on hand-made runs of two seeds.

The numbers are chosen so that each expected value is plain arithmetic, and so that the
mean of per-seed ratios differs from the ratio of means: a table that pairs the wrong
runs, averages the wrong way or swaps a ratio changes a value asserted here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl.experiment import (
    _fmt,
    ablation_table,
    baselines_table,
    headline_table,
    hetero_pools_table,
    hetero_table,
    knapsack_table,
    loaned_speed_table,
    markdown_table,
    reclaim_choice_table,
    render_markdown,
    sensitivity_table,
)

# Student-t quantile t(0.975, df=1): the 95% half-width of two values a, b is
# T975_DF1 * |a - b| / 2 (s = |a - b| / sqrt(2), divided by sqrt(2) again)
T975_DF1 = 12.706204736174707


def half2(a: float, b: float) -> float:
    return T975_DF1 * abs(a - b) / 2


_PARAMS: dict[str, Any] = dict(
    trace="t1", elastic_fraction=0.5, elastic_worker_gpus="one", peak_utilisation=0.9,
    reclaim_policy="aryl", n_training_servers=4, n_inference_servers=2,
    inference_ratio=math.nan, restart_cost_s=60.0, checkpoint_interval_s=1800.0,
    starvation_bound_s=14400.0, cluster=None, loaned_gpu_speed=math.nan,
)
_MEASURES: dict[str, Any] = dict(
    n_jobs=100, p95_queuing_delay_s=0.0, p95_jct_s=0.0, combined_usage=0.5,
    preemptions_per_1000_jobs=0.0, n_preemptions=0, n_scale_in=0, n_scale_out=0, n_loans=0,
    n_reclaims=0, mean_loaned_servers=0.0, gpu_s_allocated=1000.0, cluster_usage=0.5,
    goodput=0.5,
)


def _runs(section: str, policy: str, per_seed: dict[str, tuple[float, float]],
          sweep: str = "", value: float = math.nan, **params: Any) -> list[dict[str, Any]]:
    """Two runs (seeds 0 and 1) of one scenario; ``per_seed`` maps measures to their values.

    The key is the scenario's parameters and the seed, so a scenario named by two
    sections has one key, as in a sweep.
    """
    p = {**_PARAMS, "policy": policy, "variant": params.pop("variant", policy), **params}
    out = []
    for seed in (0, 1):
        row = {"section": section, "sweep": sweep, "value": value, **p, **_MEASURES,
               "seed": seed}
        row.update({k: v[seed] for k, v in per_seed.items()})
        row["key"] = repr(sorted((k, str(v)) for k, v in p.items())) + f"/{seed}"
        out.append(row)
    return out


def _frame() -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    # main trace: fifo (seed-independent), fifo-backfill, aryl
    rows += _runs("headline", "fifo", {"mean_queuing_delay_s": (3000.0, 3000.0),
                                       "mean_jct_s": (9000.0, 9000.0)})
    rows += _runs("headline", "fifo-backfill", {"mean_queuing_delay_s": (1000.0, 1000.0),
                                                "mean_jct_s": (8000.0, 8000.0),
                                                "cluster_usage": (0.6, 0.6)})
    rows += _runs("headline", "aryl", {"mean_queuing_delay_s": (500.0, 250.0),
                                       "mean_jct_s": (6000.0, 4000.0),
                                       "cluster_usage": (0.6, 0.7), "goodput": (0.55, 0.6),
                                       "gpu_s_allocated": (1200.0, 1250.0),
                                       "n_preemptions": (10, 20)})
    # ablations: sjf with and without its starvation bound, the no-loan ablation, the greedy
    rows += _runs("ablation", "sjf", {"mean_queuing_delay_s": (2000.0, 2000.0),
                                      "mean_jct_s": (8000.0, 8000.0)})
    rows += _runs("ablation", "sjf", {"mean_queuing_delay_s": (1500.0, 1500.0),
                                      "mean_jct_s": (7500.0, 7500.0)},
                  starvation_bound_s=1e9)
    rows += _runs("ablation", "aryl-no-loan", {"mean_queuing_delay_s": (1000.0, 500.0),
                                               "mean_jct_s": (7000.0, 5000.0)})
    rows += _runs("ablation", "elastic-greedy", {"mean_queuing_delay_s": (1000.0, 1000.0),
                                                 "mean_jct_s": (7000.0, 6000.0)})
    # sensitivity: one point with its goodput
    rows += _runs("sensitivity", "aryl", {"mean_queuing_delay_s": (600.0, 600.0),
                                          "mean_jct_s": (5000.0, 5000.0),
                                          "goodput": (0.25, 0.75)},
                  sweep="rescale_pause_s", value=0.0, rescale_pause_s=0.0)
    # knapsack: split workers, half elastic
    split = dict(elastic_worker_gpus="split")
    rows += _runs("knapsack", "fifo", {"mean_queuing_delay_s": (3000.0, 3000.0),
                                       "mean_jct_s": (9000.0, 9000.0)}, **split)
    rows += _runs("knapsack", "aryl", {"mean_queuing_delay_s": (400.0, 200.0),
                                       "mean_jct_s": (4500.0, 3000.0)}, **split)
    rows += _runs("knapsack", "aryl-no-loan", {"mean_queuing_delay_s": (800.0, 1000.0),
                                               "mean_jct_s": (4000.0, 5000.0)}, **split)
    rows += _runs("knapsack", "elastic-greedy", {"mean_queuing_delay_s": (1000.0, 1000.0),
                                                 "mean_jct_s": (5000.0, 5000.0)}, **split)
    # reclaim: the default cell (the headline aryl again, and random), and a costly cell
    # with a larger inference cluster
    rows += _runs("reclaim", "aryl", {"mean_queuing_delay_s": (500.0, 250.0),
                                      "mean_jct_s": (6000.0, 4000.0),
                                      "cluster_usage": (0.6, 0.7), "goodput": (0.55, 0.6),
                                      "gpu_s_allocated": (1200.0, 1250.0),
                                      "n_preemptions": (10, 20)})
    rows += _runs("reclaim", "aryl", {"mean_queuing_delay_s": (500.0, 500.0),
                                      "mean_jct_s": (6600.0, 4000.0),
                                      "n_preemptions": (15, 50)}, reclaim_policy="random")
    costly = dict(inference_ratio=1.0, n_inference_servers=4, restart_cost_s=600.0,
                  checkpoint_interval_s=7200.0)
    rows += _runs("reclaim", "aryl", {"mean_queuing_delay_s": (100.0, 100.0),
                                      "mean_jct_s": (5000.0, 5000.0),
                                      "n_preemptions": (40, 40)}, **costly)
    rows += _runs("reclaim", "aryl", {"mean_queuing_delay_s": (200.0, 100.0),
                                      "mean_jct_s": (5500.0, 5000.0),
                                      "n_preemptions": (60, 100)},
                  reclaim_policy="most-idle", **costly)
    # heterogeneous: lyra, with per-pool measures, and one loaned speed
    lyra = dict(cluster="lyra", n_training_servers=46, n_inference_servers=16)

    def pools(v100: tuple[float, float], t4_alloc: tuple[float, float],
              t4_avail: tuple[float, float]) -> dict[str, tuple[float, float]]:
        return {"pool_v100_usage": v100, "pool_v100_goodput": (0.5, 0.5),
                "pool_v100_jobs": (60, 70), "pool_v100_mean_jct_s": (100.0, 200.0),
                "pool_a100_usage": (0.8, 0.8), "pool_a100_goodput": (1.1, 1.2),
                "pool_a100_jobs": (40, 30), "pool_a100_mean_jct_s": (50.0, 50.0),
                "pool_t4_gpu_s_allocated": t4_alloc, "pool_t4_gpu_s_available": t4_avail,
                "pool_t4_useful_gpu_s": tuple(x / 2 for x in t4_alloc),
                "pool_t4_usage": tuple(a / b if b else math.nan
                                       for a, b in zip(t4_alloc, t4_avail, strict=True)),
                "pool_t4_goodput": tuple(a / 2 / b if b else math.nan
                                         for a, b in zip(t4_alloc, t4_avail, strict=True)),
                "pool_t4_jobs": (0, 0), "pool_t4_mean_jct_s": (math.nan, math.nan)}

    rows += _runs("hetero", "fifo", {"mean_queuing_delay_s": (2000.0, 4000.0),
                                     "mean_jct_s": (8000.0, 8000.0),
                                     **pools((0.6, 0.6), (0.0, 0.0), (0.0, 0.0))}, **lyra)
    rows += _runs("hetero", "aryl-no-loan", {"mean_queuing_delay_s": (1000.0, 1000.0),
                                             "mean_jct_s": (6000.0, 6000.0),
                                             **pools((0.7, 0.7), (0.0, 0.0), (0.0, 0.0))},
                  **lyra)
    rows += _runs("hetero", "aryl", {"mean_queuing_delay_s": (500.0, 2000.0),
                                     "mean_jct_s": (5000.0, 6000.0),
                                     "mean_loaned_servers": (0.5, 1.5),
                                     **pools((0.7, 0.8), (300.0, 0.0), (600.0, 0.0))},
                  **lyra)
    rows += _runs("hetero", "aryl", {"mean_queuing_delay_s": (250.0, 500.0),
                                     "mean_jct_s": (4000.0, 4800.0),
                                     **pools((0.7, 0.8), (300.0, 100.0), (400.0, 400.0))},
                  sweep="loaned_gpu_speed", value=0.5, loaned_gpu_speed=0.5, **lyra)
    return pd.DataFrame(rows)


def test_headline_reports_goodput_beside_usage() -> None:
    row = headline_table(_frame()).iloc[0]
    # aryl goodput 0.55, 0.6 over fifo's 0.5: gains 0.1 and 0.2, mean 0.15
    assert row["fifo goodput"] == 0.5
    assert row["aryl goodput"] == pytest.approx(0.575, rel=1e-15)
    assert row["aryl goodput ±"] == pytest.approx(half2(0.55, 0.6), rel=1e-12)
    assert row["goodput gain"] == pytest.approx(0.15, rel=1e-12)
    assert row["goodput gain ±"] == pytest.approx(half2(0.1, 0.2), rel=1e-9)
    # GPU-seconds allocated, aryl over fifo: 1.2 and 1.25
    assert row["aryl GPU-s / fifo's"] == pytest.approx(1.225, rel=1e-15)
    # usage gains: 0.6 / 0.5 - 1 = 0.2 and 0.7 / 0.5 - 1 = 0.4
    assert row["usage gain"] == pytest.approx(0.3, rel=1e-12)


def test_baselines_pair_aryl_with_both_fifos() -> None:
    b = baselines_table(_frame())
    assert b["trace"].tolist() == ["t1"]
    row = b.iloc[0]
    # qd: fifo / aryl = 3000/500, 3000/250 = 6, 12 -> 9 (the ratio of means would be 8)
    assert row["fifo/aryl qd"] == 9.0
    assert row["fifo/aryl qd ±"] == pytest.approx(half2(6, 12), rel=1e-12)
    # backfill / aryl = 1000/500, 1000/250 = 2, 4 -> 3; fifo / backfill = 3 both seeds
    assert row["backfill/aryl qd"] == 3.0
    assert row["fifo/backfill qd"] == 3.0
    assert row["fifo/backfill qd ±"] == 0.0
    # JCT: fifo / aryl = 1.5, 2.25 -> 1.875; backfill / aryl = 4/3, 2 -> 5/3
    assert row["fifo/aryl JCT"] == 1.875
    assert row["backfill/aryl JCT"] == pytest.approx(5 / 3, rel=1e-15)
    assert (row["fifo qd"], row["backfill qd"], row["aryl qd"]) == (3000.0, 1000.0, 375.0)
    assert (row["backfill goodput"], row["aryl goodput"]) == (0.5, 0.575)
    assert row["backfill usage"] == 0.6
    assert row["aryl usage"] == pytest.approx(0.65, rel=1e-15)


def test_ablations_label_sjf_without_its_bound_and_read_against_backfill() -> None:
    a = ablation_table(_frame()).set_index("policy")
    assert list(a.index) == ["fifo", "fifo-backfill", "aryl", "sjf",
                             "sjf (no starvation bound)", "aryl-no-loan", "elastic-greedy"]
    # fifo / sjf: 3000 / 2000 = 1.5 with the bound, 3000 / 1500 = 2 without
    assert a.loc["sjf", "qd ratio"] == 1.5
    assert a.loc["sjf (no starvation bound)", "qd ratio"] == 2.0
    # fifo-backfill / this: 1000 / 1500, and for aryl 1000/500, 1000/250 -> 3
    assert a.loc["sjf (no starvation bound)", "backfill/this qd"] == pytest.approx(2 / 3)
    assert a.loc["aryl", "backfill/this qd"] == 3.0
    assert a.loc["aryl", "backfill/this JCT"] == pytest.approx(5 / 3, rel=1e-15)
    assert a.loc["aryl", "goodput"] == pytest.approx(0.575, rel=1e-15)
    assert a.loc["fifo", "goodput"] == 0.5


def test_sensitivity_reports_goodput() -> None:
    s = sensitivity_table(_frame())
    swept = s[~s["default"]].iloc[0]
    assert swept["goodput"] == 0.5  # (0.25 + 0.75) / 2
    assert swept["goodput ±"] == pytest.approx(half2(0.25, 0.75), rel=1e-12)


def test_knapsack_pairs_each_solver_with_the_greedy_of_its_cell() -> None:
    k = knapsack_table(_frame())
    assert list(zip(k["workers"], k["policy"], strict=True)) == [
        ("one", "fifo"), ("one", "aryl"), ("one", "aryl-no-loan"), ("one", "elastic-greedy"),
        ("split", "fifo"), ("split", "aryl"), ("split", "aryl-no-loan"),
        ("split", "elastic-greedy")]
    assert k["elastic"].tolist() == [0.5] * 8
    one = k[k["workers"] == "one"].set_index("policy")
    split = k[k["workers"] == "split"].set_index("policy")
    # one-GPU workers: greedy / no-loan JCT = 7000/7000, 6000/5000 -> 1.1
    assert one.loc["aryl-no-loan", "greedy/this JCT"] == pytest.approx(1.1, rel=1e-15)
    assert one.loc["elastic-greedy", "greedy/this JCT"] == 1.0
    # split: greedy / no-loan JCT = 5000/4000, 5000/5000 -> 1.125; qd 1000/800, 1 -> 1.125
    assert split.loc["aryl-no-loan", "greedy/this JCT"] == 1.125
    assert split.loc["aryl-no-loan", "greedy/this qd"] == 1.125
    # split aryl against split fifo: 9000/4500, 9000/3000 -> 2.5
    assert split.loc["aryl", "JCT ratio"] == 2.5
    assert split.loc["aryl", "greedy/this JCT"] == pytest.approx((5000 / 4500 + 5000 / 3000) / 2)
    # fifo does not scale: no solver to compare
    assert math.isnan(split.loc["fifo", "greedy/this JCT"])
    assert split.loc["fifo", "JCT ratio"] == 1.0


def test_reclaim_choice_compares_within_each_cell() -> None:
    r = reclaim_choice_table(_frame())
    assert list(zip(r["servers"], r["restart (s)"], r["reclaim"], strict=True)) == [
        ("4+2", 60.0, "aryl"), ("4+2", 60.0, "random"),
        ("4+4", 600.0, "aryl"), ("4+4", 600.0, "most-idle")]
    assert r["checkpoint (s)"].tolist() == [1800.0, 1800.0, 7200.0, 7200.0]
    rows = r.set_index(["servers", "reclaim"])
    # default cell: random preempts 15/10, 50/20 -> 2 times as many jobs
    assert rows.loc[("4+2", "random"), "preempt vs aryl"] == 2.0
    assert rows.loc[("4+2", "random"), "preempt vs aryl ±"] == pytest.approx(half2(1.5, 2.5))
    assert rows.loc[("4+2", "random"), "JCT vs aryl"] == pytest.approx((1.1 + 1.0) / 2)
    assert rows.loc[("4+2", "random"), "qd vs aryl"] == 1.5  # 500/500, 500/250
    assert rows.loc[("4+2", "aryl"), "preempt vs aryl"] == 1.0
    # costly cell: most-idle 60/40, 100/40 -> 2; qd 2, 1 -> 1.5; JCT 1.1, 1 -> 1.05
    assert rows.loc[("4+4", "most-idle"), "preempt vs aryl"] == 2.0
    assert rows.loc[("4+4", "most-idle"), "qd vs aryl"] == 1.5
    assert rows.loc[("4+4", "most-idle"), "JCT vs aryl"] == pytest.approx(1.05)
    # per 1,000 of the 100 jobs is the runs' own measure (hand-made here: 0)
    assert rows.loc[("4+4", "most-idle"), "preempt/1k jobs"] == 0.0


def test_hetero_rows_take_ratios_within_each_cluster() -> None:
    h = hetero_table(_frame())
    assert list(zip(h["cluster"], h["policy"], strict=True)) == [
        ("default", "fifo"), ("default", "aryl-no-loan"), ("default", "aryl"),
        ("lyra", "fifo"), ("lyra", "aryl-no-loan"), ("lyra", "aryl")]
    rows = h.set_index(["cluster", "policy"])
    # lyra: fifo / aryl qd = 2000/500, 4000/2000 = 4, 2 -> 3; no-loan / aryl 2, 0.5 -> 1.25
    assert rows.loc[("lyra", "aryl"), "qd ratio"] == 3.0
    assert rows.loc[("lyra", "aryl"), "no-loan/this qd"] == 1.25
    assert rows.loc[("lyra", "aryl"), "JCT ratio"] == pytest.approx((1.6 + 8000 / 6000) / 2)
    assert rows.loc[("lyra", "aryl"), "mean loaned"] == 1.0
    # default cluster: the headline runs; fifo / aryl JCT = 1.5, 2.25
    assert rows.loc[("default", "aryl"), "JCT ratio"] == 1.875
    assert rows.loc[("default", "aryl"), "no-loan/this JCT"] == pytest.approx((7 / 6 + 5 / 4) / 2)
    assert math.isnan(rows.loc[("lyra", "fifo"), "no-loan/this qd"])


def test_hetero_pools_follow_the_cluster_spec() -> None:
    p = hetero_pools_table(_frame())
    assert list(zip(p["policy"], p["pool"], strict=True)) == [
        (pol, pool) for pol in ("fifo", "aryl-no-loan", "aryl") for pool in ("v100", "a100",
                                                                             "t4")]
    # lyra: 30 x 8 V100, 12 x 8 A100, 32 x 4 T4
    assert p["GPUs"].tolist()[:3] == [240, 96, 128]
    assert p["GPU"].tolist()[:3] == ["V100", "A100", "T4"]
    assert p["role"].tolist()[:3] == ["training", "training", "inference"]
    rows = p.set_index(["policy", "pool"])
    assert rows.loc[("aryl", "v100"), "usage"] == pytest.approx(0.75)
    assert rows.loc[("aryl", "a100"), "goodput"] == pytest.approx(1.15)
    assert rows.loc[("aryl", "v100"), "jobs"] == 65.0
    assert rows.loc[("aryl", "v100"), "JCT"] == 150.0
    # aryl's T4 pool was on loan in seed 0 only (300 of 600 GPU-s: usage 0.5)
    assert rows.loc[("aryl", "t4"), "usage"] == 0.5
    assert math.isnan(rows.loc[("fifo", "t4"), "usage"])


def test_loaned_speed_rows_pair_with_the_clusters_baselines() -> None:
    s = loaned_speed_table(_frame())
    assert s["measured"].tolist() == [False, True]
    speed, measured = s.iloc[0], s.iloc[1]
    assert speed["loaned speed"] == 0.5
    assert math.isnan(measured["loaned speed"])
    # fifo / aryl qd = 2000/250, 4000/500 = 8, 8; no-loan / aryl = 4, 2 -> 3
    assert speed["fifo/aryl qd"] == 8.0
    assert speed["no-loan/aryl qd"] == 3.0
    assert speed["no-loan/aryl JCT"] == pytest.approx((1.5 + 1.25) / 2)
    # the loaned pool over its loaned GPU-seconds: 300/400, 100/400; goodput half of it
    assert speed["loaned usage"] == 0.5
    assert speed["loaned goodput"] == 0.25
    # the measured row: seed 1 never loaned -> only seed 0 counts (300 / 600)
    assert measured["loaned usage"] == 0.5
    assert math.isnan(measured["loaned usage ±"])
    assert measured["no-loan/aryl qd"] == 1.25


def test_results_page_carries_every_new_table() -> None:
    runs = _frame()
    tables = {"headline": headline_table(runs), "ablations": ablation_table(runs),
              "sensitivity": sensitivity_table(runs),
              "reclaim": pd.DataFrame([{"instances": 3, "mean excess": 0.25}]),
              "baselines": baselines_table(runs), "knapsack": knapsack_table(runs),
              "reclaim_choice": reclaim_choice_table(runs), "hetero": hetero_table(runs),
              "hetero_pools": hetero_pools_table(runs),
              "loaned_speed": loaned_speed_table(runs), "runs": runs}
    md = render_markdown(tables, [], quick=True)
    for name, df in tables.items():
        if name != "runs":
            assert markdown_table(df) in md, name
    assert "Usage is not goodput" in md
    assert f"| {_fmt(9.0)} ± {_fmt(half2(6, 12))} |" in md  # fifo/aryl qd of t1
    # a spec without the designed sections renders without them
    bare = {k: tables[k] for k in ("headline", "ablations", "sensitivity", "reclaim")}
    md2 = render_markdown(bare, [], quick=True)
    assert "## Heterogeneous GPUs" not in md2
    assert "knapsack" not in md2
    empty = runs[runs["section"].isin(["headline", "ablation"])]
    for fn in (knapsack_table, reclaim_choice_table, hetero_table, hetero_pools_table,
               loaned_speed_table):
        assert fn(empty).empty, fn.__name__
    assert np.isfinite(baselines_table(empty).iloc[0]["fifo/aryl qd"])


def test_runs_csv_names_a_trace_file_by_its_name_only() -> None:
    from aryl.experiment import public_runs

    runs = pd.DataFrame({"trace_source": ["itp-c07", "/home/me/data/philly.csv", None]})
    got = public_runs(runs)["trace_source"]
    assert got.tolist()[:2] == ["itp-c07", "philly.csv"]
    assert pd.isna(got.iloc[2])
    assert runs["trace_source"].iloc[1] == "/home/me/data/philly.csv"  # a copy is changed


@pytest.mark.parametrize("policy", ["fifo", "aryl-no-loan"])
def test_non_loaning_policies_ignore_the_loaned_gpu_speed(policy: str) -> None:
    # the loaned-speed table pairs every speed with one set of fifo and aryl-no-loan runs:
    # that holds because they never place a worker on an inference server, so the speed
    # given to those servers cannot change their replay (per-job tables identical)
    from aryl.sim import SimConfig, simulate
    from aryl.traces import load_trace, synthesize_elastic

    tr = load_trace("itp-c07")
    tr = synthesize_elastic(tr.replace(jobs=tr.jobs.iloc[:1500].reset_index(drop=True)), seed=1)
    res = [simulate(tr, policy=policy, inference=False,
                    config=SimConfig(cluster="lyra", loaned_gpu_speed=v, record_events=False))
           for v in (None, 0.2, 1.0)]
    for r in res[1:]:
        pd.testing.assert_frame_equal(r.jobs, res[0].jobs)
    assert res[0].summary["n_loans"] == 0
    assert res[0].summary["n_finished"] == 1500
