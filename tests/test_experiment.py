"""`aryl experiment paper`: the command runs on a small preset, and the numbers it
writes to results.md are the ones in its tables, recomputed from its raw runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.errors import InvalidInputError
from aryl.experiment import _fmt, size_cluster


def test_size_cluster_hand_computed() -> None:
    # three 8-GPU jobs of 1,000 s at t=0 under strict fifo: 1 server -> delays 0, 1000,
    # 2000 (mean 1000); 2 servers -> 0, 0, 1000 (mean 333); 3 servers -> mean 0.
    jobs = pd.DataFrame(
        {
            "job_id": ["a", "b", "c"],
            "submit_time_s": [0.0, 0.0, 0.0],
            "duration_s": [1000.0, 1000.0, 1000.0],
            "gpus": [8, 8, 8],
        }
    )
    assert size_cluster(jobs, target_queuing_delay_s=500.0) == (1, 4)
    assert size_cluster(jobs, target_queuing_delay_s=300.0)[0] == 2
    assert size_cluster(jobs, target_queuing_delay_s=1.0)[0] == 2
    assert size_cluster(jobs, target_queuing_delay_s=300.0, inference_ratio=4.0) == (2, 8)
    # never below the largest job; when nothing queues that much, the smallest cluster
    assert size_cluster(jobs, target_queuing_delay_s=1e9)[0] == 1
    big = jobs.assign(gpus=[64, 8, 8])
    assert size_cluster(big, target_queuing_delay_s=1e9)[0] == 8
    with pytest.raises(InvalidInputError, match="target_queuing_delay_s"):
        size_cluster(jobs, target_queuing_delay_s=0.0)
    with pytest.raises(InvalidInputError, match="empty"):
        size_cluster(jobs.iloc[:0])


def test_default_preset_sizes_to_the_simulator_default() -> None:
    from aryl.sim.config import DEFAULT_INFERENCE_SERVERS, DEFAULT_TRAINING_SERVERS
    from aryl.traces import load_trace

    assert size_cluster(load_trace("itp-c07").jobs) == (
        DEFAULT_TRAINING_SERVERS,
        DEFAULT_INFERENCE_SERVERS,
    )


@pytest.fixture
def quick_run(quick_experiment: tuple[Path, str]) -> tuple[Path, str]:
    # the session's one quick run (tests/conftest.py), shared with test_printed_vs_data.py
    return quick_experiment


def test_quick_run_writes_every_artefact(quick_run: tuple[Path, str]) -> None:
    out, _ = quick_run
    for name in ("runs.csv", "headline.csv", "ablations.csv", "sensitivity.csv", "reclaim.csv",
                 "baselines.csv", "knapsack.csv", "reclaim_choice.csv", "hetero.csv",
                 "hetero_pools.csv", "loaned_speed.csv", "results.md", "manifest.json",
                 "cdf_delay_jct.png", "sensitivity.png", "loaned_speed.png"):
        assert (out / name).stat().st_size > 0, name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["quick"] is True
    assert manifest["seeds"] == [0, 1]
    assert not list(out.glob("*.tmp*")), "a temporary file was left behind"
    # the sweep's dataset (a hidden sibling) and the staging folder are gone
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]


# Student-t quantile t(0.975, df=1) from printed tables (the quick spec has 2 seeds)
T975_DF1 = 12.706204736174707


def _mean_half(x: list[float]) -> tuple[float, float]:
    a = np.asarray(x, dtype=float)
    return float(a.mean()), T975_DF1 * float(a.std(ddof=1)) / math.sqrt(a.size)


def test_headline_ratios_recomputed_from_runs(quick_run: tuple[Path, str]) -> None:
    out, printed = quick_run
    runs = pd.read_csv(out / "runs.csv")
    head = pd.read_csv(out / "headline.csv")
    h = runs[runs["section"] == "headline"]
    fifo = h[h["policy"] == "fifo"].set_index("seed").sort_index()
    aryl = h[h["policy"] == "aryl"].set_index("seed").sort_index()
    assert list(fifo.index) == list(aryl.index) == [0, 1]
    row = head[head["trace"] == "itp-c10"].iloc[0]
    # ratios are averaged per seed (fifo_s / aryl_s), with a Student-t interval
    qd = list(fifo["mean_queuing_delay_s"] / aryl["mean_queuing_delay_s"])
    jct = list(fifo["mean_jct_s"] / aryl["mean_jct_s"])
    gain = list(aryl["cluster_usage"] / fifo["cluster_usage"] - 1.0)
    for col, values in (("qd ratio", qd), ("JCT ratio", jct), ("usage gain", gain)):
        mean, half = _mean_half(values)
        assert row[col] == pytest.approx(mean, rel=1e-12), col
        assert row[f"{col} ±"] == pytest.approx(half, rel=1e-9), col
    gain = list(aryl["combined_usage"] / fifo["combined_usage"] - 1.0)
    assert row["all-GPU usage gain"] == pytest.approx(float(np.mean(gain)), rel=1e-12)
    # every other column of the row: the mean over seeds (and its interval) of the raw runs
    for col, src, pol in (("fifo qd", "mean_queuing_delay_s", fifo),
                          ("aryl qd", "mean_queuing_delay_s", aryl),
                          ("aryl JCT", "mean_jct_s", aryl),
                          ("fifo p95 JCT", "p95_jct_s", fifo), ("aryl p95 JCT", "p95_jct_s", aryl),
                          ("fifo usage", "cluster_usage", fifo),
                          ("aryl usage", "cluster_usage", aryl),
                          ("preempt/1k jobs", "preemptions_per_1000_jobs", aryl)):
        mean, half = _mean_half(list(pol[src]))
        assert row[col] == pytest.approx(mean, rel=1e-12), col
        assert row[f"{col} ±"] == pytest.approx(half, rel=1e-9, abs=1e-9), col
    assert row["jobs"] == 260
    assert row["servers"] == f"{aryl['n_training_servers'].iloc[0]}+" \
                             f"{aryl['n_inference_servers'].iloc[0]}"
    # fifo is the paper's baseline: JCT = queuing delay + traced duration exactly, so
    # its mean JCT exceeds its mean queuing delay by the trace's mean duration (each seed).
    from aryl.traces import load_trace

    mean_duration = float(load_trace("itp-c10").jobs["duration_s"].mean())
    for s in (0, 1):
        f = fifo.loc[s]
        assert f["mean_jct_s"] - f["mean_queuing_delay_s"] == pytest.approx(mean_duration)
    # the paper's row is there, with its own figures
    paper = head[head["trace"].str.startswith("paper")].iloc[0]
    assert paper["qd ratio"] == 1.53
    assert paper["JCT ratio"] == 1.50
    # results.md and the terminal carry the very numbers of the table, as "mean ± half"
    md = (out / "results.md").read_text()
    cell = f"{_fmt(float(row['qd ratio']))} ± {_fmt(float(row['qd ratio ±']))}"
    assert f"| {cell} |" in md
    assert _fmt(float(row["JCT ratio"])) in md
    assert cell in printed


def _brute_force_preemptions(req: object, servers: tuple[int, ...]) -> int:
    """Jobs preempted when ``servers`` (positions) go back: a job is preempted iff its
    workers there exceed what it can shed (elastic: total - base; rigid: nothing)."""
    r: Any = req
    sid = [int(x) for x in np.asarray(r.server_id)[list(servers)]]
    lost = np.zeros(len(r.job_id), dtype=np.int64)
    for j, s, w in zip(r.placement_job, r.placement_server, r.placement_workers, strict=True):
        if int(s) in sid:
            lost[j] += w
    shed = np.where(r.job_elastic, np.asarray(r.job_workers) - np.asarray(r.job_min_workers), 0)
    return int((lost > shed).sum())


def test_reclaim_quality_rows_match_an_independent_optimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import itertools

    import aryl.reclaiming as rc
    from aryl.experiment import reclaim_quality

    real = rc.reclaim
    calls: list[tuple[object, str, object]] = []

    def spy(req: object, **kw: Any) -> object:
        plan = real(req, **kw)  # type: ignore[arg-type]
        if "seed" not in kw:  # the study's own calls (the replay passes seed and backend)
            calls.append((req, kw["policy"], plan))
        return plan

    monkeypatch.setattr(rc, "reclaim", spy)
    rq = reclaim_quality(source="itp-c10", n_instances=25, n_training_servers=4,
                         n_inference_servers=4)
    assert len(rq) == 25
    assert [p for _, p, _ in calls] == ["aryl", "exact"] * 25
    for k in range(25):
        (req, _, greedy), (_, _, exact) = calls[2 * k], calls[2 * k + 1]
        r: Any = req
        n = min(r.n_servers, len(r.server_id))
        best = min(_brute_force_preemptions(req, c)
                   for c in itertools.combinations(range(len(r.server_id)), n))
        pos = {int(s): i for i, s in enumerate(r.server_id)}
        chosen = tuple(pos[int(s)] for s in greedy.servers)  # type: ignore[attr-defined]
        row = rq.iloc[k]
        assert row["exact_preemptions"] == best == len(exact.preempted_jobs)  # type: ignore[attr-defined]
        assert row["greedy_preemptions"] == _brute_force_preemptions(req, chosen)
        assert row["excess"] == row["greedy_preemptions"] - best >= 0
        assert row["n_return"] == r.n_servers
        assert row["n_servers"] == len(r.server_id) <= 8
        assert row["n_jobs"] == len(np.unique(r.placement_job))


def test_reclaim_summary_aggregates_the_study(quick_run: tuple[Path, str]) -> None:
    from aryl.experiment import reclaim_quality

    out, _ = quick_run
    got = pd.read_csv(out / "reclaim.csv").iloc[0]
    runs = pd.read_csv(out / "runs.csv")
    main = runs[runs["section"] == "headline"].iloc[0]
    rq = reclaim_quality(source="itp-c10", n_instances=40,
                         n_training_servers=int(main["n_training_servers"]),
                         n_inference_servers=int(main["n_inference_servers"]))
    assert got["instances"] == 40
    assert got["mean greedy preemptions"] == pytest.approx(rq["greedy_preemptions"].mean())
    assert got["mean exact preemptions"] == pytest.approx(rq["exact_preemptions"].mean())
    assert got["mean excess"] == pytest.approx(rq["excess"].mean())
    assert got["max excess"] == rq["excess"].max()
    assert got["share optimal"] == pytest.approx((rq["excess"] == 0).mean())


def test_sensitivity_load_sweep_has_its_own_fifo(quick_run: tuple[Path, str]) -> None:
    out, _ = quick_run
    runs = pd.read_csv(out / "runs.csv")
    sens = pd.read_csv(out / "sensitivity.csv")
    load = sens[(sens["sweep"] == "training_servers_x") & ~sens["default"]].iloc[0]
    r = runs[(runs["sweep"] == "training_servers_x") & np.isclose(runs["value"], load["value"])]
    fifo = r[r["policy"] == "fifo"].set_index("seed").sort_index()
    aryl = r[r["policy"] == "aryl"].set_index("seed").sort_index()
    assert (fifo["n_training_servers"] == aryl["n_training_servers"]).all()
    # per seed fifo / aryl; a seed where aryl has no delay has no ratio (left out)
    ratios = [f / a for f, a in zip(fifo["mean_queuing_delay_s"], aryl["mean_queuing_delay_s"],
                                    strict=True) if a > 0]
    if ratios:
        assert load["qd ratio"] == pytest.approx(float(np.mean(ratios)), rel=1e-12)
    else:  # no ratio to a zero delay: the table leaves the cell empty, not infinite
        assert np.isnan(load["qd ratio"])
    jct = list(fifo["mean_jct_s"] / aryl["mean_jct_s"])
    assert load["JCT ratio"] == pytest.approx(float(np.mean(jct)), rel=1e-12)
    assert load["servers"] == f"{aryl['n_training_servers'].iloc[0]}+" \
                              f"{aryl['n_inference_servers'].iloc[0]}"


def test_each_sweep_passes_through_the_headline_run(quick_run: tuple[Path, str]) -> None:
    out, _ = quick_run
    runs = pd.read_csv(out / "runs.csv")
    sens = pd.read_csv(out / "sensitivity.csv")
    head = runs[(runs["section"] == "headline") & (runs["policy"] == "aryl")]
    defaults = sens[sens["default"]]
    assert set(defaults["sweep"]) == set(sens["sweep"])
    assert np.allclose(defaults["aryl qd"], head["mean_queuing_delay_s"].mean(), rtol=1e-12)
    ef = defaults[defaults["sweep"] == "elastic_fraction"].iloc[0]
    assert ef["value"] == 0.5


def _by_seed(runs: pd.DataFrame, **params: object) -> pd.DataFrame:
    """The runs with these parameter values (NaN for a missing one), one per seed."""
    sel = np.ones(len(runs), dtype=bool)
    for k, v in params.items():
        col = runs[k]
        sel &= col.isna().to_numpy() if v is None else (col == v).to_numpy()
    return runs[sel].drop_duplicates("key").set_index("seed").sort_index()


def _check(cell: float, half: float, values: list[float]) -> None:
    mean, h = _mean_half(values)
    assert cell == pytest.approx(mean, rel=1e-12)
    assert half == pytest.approx(h, rel=1e-9, abs=1e-12)


def test_added_tables_recomputed_from_runs(quick_run: tuple[Path, str]) -> None:
    out, printed = quick_run
    runs = pd.read_csv(out / "runs.csv")
    default = dict(cluster=None, elastic_worker_gpus="one", restart_cost_s=60.0,
                   starvation_bound_s=14400.0, loaned_gpu_speed=None, reclaim_policy="aryl",
                   variant=None)
    default.pop("variant")
    fifo = _by_seed(runs, policy="fifo", section="headline", **default)
    back = _by_seed(runs, policy="fifo-backfill", section="headline", **default)
    aryl = _by_seed(runs, policy="aryl", section="headline", **default)
    assert list(fifo.index) == list(back.index) == list(aryl.index) == [0, 1]
    # goodput in the headline: aryl / fifo - 1 per seed
    head = pd.read_csv(out / "headline.csv").iloc[0]
    _check(head["goodput gain"], head["goodput gain ±"],
           list(aryl["goodput"] / fifo["goodput"] - 1))
    _check(head["aryl GPU-s / fifo's"], head["aryl GPU-s / fifo's ±"],
           list(aryl["gpu_s_allocated"] / fifo["gpu_s_allocated"]))
    # fifo-backfill is a baseline beside strict fifo
    b = pd.read_csv(out / "baselines.csv").iloc[0]
    _check(b["backfill/aryl JCT"], b["backfill/aryl JCT ±"],
           list(back["mean_jct_s"] / aryl["mean_jct_s"]))
    _check(b["fifo/backfill qd"], b["fifo/backfill qd ±"],
           list(fifo["mean_queuing_delay_s"] / back["mean_queuing_delay_s"]))
    # knapsack: split workers, aryl-no-loan against elastic-greedy per seed
    knap = pd.read_csv(out / "knapsack.csv")
    row = knap[(knap["workers"] == "split") & (knap["policy"] == "aryl-no-loan")].iloc[0]
    kn = {k: v for k, v in default.items() if k != "elastic_worker_gpus"}
    noloan = _by_seed(runs, policy="aryl-no-loan", elastic_worker_gpus="split", **kn)
    greedy = _by_seed(runs, policy="elastic-greedy", elastic_worker_gpus="split", **kn)
    _check(row["greedy/this JCT"], row["greedy/this JCT ±"],
           list(greedy["mean_jct_s"] / noloan["mean_jct_s"]))
    assert (noloan["elastic_worker_gpus"] == "split").all()
    # reclaim choice, costly cell: random's JCT over the cost greedy's
    rc = pd.read_csv(out / "reclaim_choice.csv")
    row = rc[(rc["restart (s)"] == 600.0) & (rc["reclaim"] == "random")].iloc[0]
    cost = {k: v for k, v in default.items() if k not in ("restart_cost_s", "reclaim_policy")}
    rnd = _by_seed(runs, policy="aryl", reclaim_policy="random", restart_cost_s=600.0, **cost)
    grd = _by_seed(runs, policy="aryl", reclaim_policy="aryl", restart_cost_s=600.0, **cost)
    _check(row["JCT vs aryl"], row["JCT vs aryl ±"], list(rnd["mean_jct_s"] / grd["mean_jct_s"]))
    assert (rnd["checkpoint_interval_s"] == 7200.0).all()
    # heterogeneous: lyra's own fifo, per-pool usage, the loaned speed row
    het = {k: v for k, v in default.items() if k != "cluster"}
    lf = _by_seed(runs, policy="fifo", cluster="lyra", **het)
    la = _by_seed(runs, policy="aryl", cluster="lyra", **het)
    h = pd.read_csv(out / "hetero.csv")
    row = h[(h["cluster"] == "lyra") & (h["policy"] == "aryl")].iloc[0]
    _check(row["JCT ratio"], row["JCT ratio ±"], list(lf["mean_jct_s"] / la["mean_jct_s"]))
    pools = pd.read_csv(out / "hetero_pools.csv")
    row = pools[(pools["policy"] == "aryl") & (pools["pool"] == "a100")].iloc[0]
    _check(row["usage"], row["usage ±"], list(la["pool_a100_usage"]))
    assert row["GPUs"] == 96
    sp = pd.read_csv(out / "loaned_speed.csv")
    row = sp[sp["loaned speed"] == 0.4].iloc[0]
    ls = {k: v for k, v in het.items() if k != "loaned_gpu_speed"}
    a4 = _by_seed(runs, policy="aryl", cluster="lyra", loaned_gpu_speed=0.4, **ls)
    _check(row["fifo/aryl JCT"], row["fifo/aryl JCT ±"], list(lf["mean_jct_s"] / a4["mean_jct_s"]))
    # results.md and the terminal carry these tables
    md = (out / "results.md").read_text()
    from aryl.experiment import markdown_table

    for name in ("baselines", "knapsack", "reclaim_choice", "hetero", "hetero_pools",
                 "loaned_speed"):
        table = pd.read_csv(out / f"{name}.csv", keep_default_na=False, na_values=[""])
        assert markdown_table(table) in md, name
    assert "Multi-GPU elastic workers: exact MCKP vs greedy" in printed
    # a trace read from a file would be named by its file name in runs.csv, never its path
    assert not runs["trace_source"].astype(str).str.contains("/").any()


def test_bad_philly_table_names_the_row_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "philly.csv"
    bad.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                   "2017-10-09 07:01:55,-5,1,66.0,x\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["experiment", "paper", "--quick", "--philly", str(bad),
                                       "--out", str(out)])
    assert result.exit_code == 2
    assert "line 2, column 'duration': duration is negative" in result.output
    assert not out.exists()


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["experiment", "paper", "--philly", str(tmp_path / "no.csv")])
    assert result.exit_code == 2
    assert "does not exist" in result.output
    result = CliRunner().invoke(main, ["experiment", "paper", "-j", "0"])
    assert result.exit_code == 2
