"""Multi-GPU elastic workers (`elastic_worker_gpus = "split"`): the documented rule by
hand and by brute force, the synthesis around it, its knobs (InputOptions, sweep key)
and a hand-computed replay where the worker size changes the JCT."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aryl.errors import InvalidInputError
from aryl.traces import Trace, load_trace, synthesize_elastic
from aryl.traces.elastic import ELASTIC_WORKER_GPUS, elastic_gpus_per_worker


def test_split_rule_hand_computed() -> None:
    gpus = np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64], dtype=np.int64)
    # 8-GPU servers: the largest of 8, 4, 2 dividing G with at least two workers, else 1
    #   1, 2, 3 -> 1 (2 would be one worker of 2; 3 is odd); 4 -> 2 x 2; 6 -> 3 x 2;
    #   8 -> 2 x 4; 12 -> 3 x 4; 16 -> 2 x 8; 24 -> 3 x 8; 32 -> 4 x 8; 64 -> 8 x 8
    np.testing.assert_array_equal(elastic_gpus_per_worker(gpus, "split"),
                                  [1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 8])
    # 4-GPU servers: no worker of 8; 8 -> 2 x 4, 16 -> 4 x 4
    np.testing.assert_array_equal(elastic_gpus_per_worker(gpus, "split", 4),
                                  [1, 1, 1, 2, 2, 4, 4, 4, 4, 4, 4])
    # the default rule: one GPU per worker whatever the size
    np.testing.assert_array_equal(elastic_gpus_per_worker(gpus, "one"), np.ones(11))
    assert ELASTIC_WORKER_GPUS == ("one", "split")


@pytest.mark.parametrize("gpus_per_server", [1, 2, 3, 4, 6, 8, 16])
def test_split_rule_against_brute_force(gpus_per_server: int) -> None:
    gpus = np.arange(1, 129, dtype=np.int64)
    got = elastic_gpus_per_worker(gpus, "split", gpus_per_server)
    for g, w in zip(gpus.tolist(), got.tolist(), strict=True):
        fits = [d for d in (2, 4, 8) if d <= gpus_per_server and g % d == 0 and g // d >= 2]
        assert w == (max(fits) if fits else 1), (g, gpus_per_server)


def _trace(gpus: list[int]) -> Trace:
    n = len(gpus)
    return Trace(jobs=pd.DataFrame({
        "job_id": [f"j{i}" for i in range(n)], "submit_time_s": np.arange(n, dtype=float),
        "duration_s": np.full(n, 100.0), "gpus": np.asarray(gpus, dtype=np.int64)}), meta={})


def test_split_synthesis_hand_computed() -> None:
    t = _trace([1, 2, 4, 8, 12, 16, 32])
    one = synthesize_elastic(t, elastic_fraction=1.0, seed=3).jobs
    split = synthesize_elastic(t, elastic_fraction=1.0, seed=3, elastic_worker_gpus="split").jobs
    # W = G // g workers; min = max(1, (W + 1) // 2), max = 2 W:
    #   G  g  W  min max   GPU range      one-GPU rule's range
    #   1  1  1   1   2    [1, 2]         [1, 2]
    #   2  1  2   1   4    [1, 4]         [1, 4]
    #   4  2  2   1   4    [2, 8]         [2, 8]
    #   8  4  2   1   4    [4, 16]        [4, 16]
    #  12  4  3   2   6    [8, 24]        [6, 24]   (W odd: the minimum rounds up a worker)
    #  16  8  2   1   4    [8, 32]        [8, 32]
    #  32  8  4   2   8    [16, 64]       [16, 64]
    assert split["gpus_per_worker"].tolist() == [1, 1, 2, 4, 4, 8, 8]
    assert split["min_workers"].tolist() == [1, 1, 1, 1, 2, 1, 2]
    assert split["max_workers"].tolist() == [2, 4, 4, 4, 6, 4, 8]
    assert one["gpus_per_worker"].tolist() == [1] * 7
    assert one["min_workers"].tolist() == [1, 1, 2, 4, 6, 8, 16]
    assert one["max_workers"].tolist() == [2, 4, 8, 16, 24, 32, 64]
    # the worker rule changes nothing else: same alphas, same elastic flags
    np.testing.assert_array_equal(one["alpha"], split["alpha"])
    np.testing.assert_array_equal(one["elastic"], split["elastic"])
    meta = synthesize_elastic(t, elastic_fraction=1.0, elastic_worker_gpus="split") \
        .meta["elastic_synthesis"]
    assert meta["elastic_worker_gpus"] == "split"
    assert "largest of 8, 4, 2" in meta["elastic_rule"]


def test_split_leaves_rigid_jobs_and_the_elastic_draw_alone() -> None:
    tr = load_trace("itp-c10")
    one = synthesize_elastic(tr, elastic_fraction=0.5, seed=7).jobs
    split = synthesize_elastic(tr, elastic_fraction=0.5, seed=7, elastic_worker_gpus="split").jobs
    np.testing.assert_array_equal(one["elastic"], split["elastic"])
    rigid = ~one["elastic"].to_numpy()
    for col in ("gpus_per_worker", "min_workers", "max_workers", "alpha"):
        np.testing.assert_array_equal(one.loc[rigid, col], split.loc[rigid, col])
    # every elastic job's traced size is a whole number of its workers
    e = split[split["elastic"]]
    assert (e["gpus"] % e["gpus_per_worker"] == 0).all()
    assert ((e["gpus"] // e["gpus_per_worker"]) * 2 == e["max_workers"]).all()


def test_unknown_rule_is_an_error_naming_the_option() -> None:
    with pytest.raises(InvalidInputError, match="elastic_worker_gpus"):
        synthesize_elastic(_trace([4]), elastic_worker_gpus="two")
    with pytest.raises(InvalidInputError, match="elastic_worker_gpus"):
        elastic_gpus_per_worker(np.array([4]), "halves")
    from aryl.cli.config import InputOptions

    with pytest.raises(InvalidInputError, match="elastic_worker_gpus"):
        InputOptions(elastic_worker_gpus="2")
    assert InputOptions().elastic_worker_gpus == "one"


def test_split_workers_change_a_hand_computed_replay(tmp_path: Path) -> None:
    # One 7-GPU training server, no inference; one elastic job of 4 traced GPUs, 1,000 s,
    # alpha = 0 (linear scaling).  Work = D x T(traced workers) worker-seconds.
    #   one:   g = 1, 4 workers traced -> work 4,000; base 2, max 8; 7 GPUs -> 7 workers:
    #          JCT = 4000 / 7; usage 1 (7 of 7 GPUs), goodput 4,000 / (7 x 4000/7) = 1
    #   split: g = 2 (7-GPU servers: no 4-GPU worker leaves two workers), 2 workers traced
    #          -> work 2,000; base 1, max 4; 7 GPUs hold 3 workers -> JCT = 2000 / 3;
    #          usage 6/7; goodput 4,000 GPU-s / (7 x 2000/3) = 6/7
    from aryl.sweep import execute_run, parse_spec, plan_sweep

    path = tmp_path / "one.csv"
    pd.DataFrame({"job_id": ["a"], "submit_time_s": [0.0], "duration_s": [1000.0],
                  "gpus": [4]}).to_csv(path, index=False)
    tr = load_trace(str(path))
    from aryl.sim import SimConfig, simulate

    cfg = SimConfig(n_training_servers=1, n_inference_servers=0, gpus_per_server=7)
    want = {"one": (4000 / 7, 1.0), "split": (2000 / 3, 6 / 7)}
    for rule, (jct, usage) in want.items():
        t = synthesize_elastic(tr, elastic_fraction=1.0, alpha_low=0.0, alpha_high=0.0,
                               gpus_per_server=7, elastic_worker_gpus=rule)
        r = simulate(t, policy="aryl-no-loan", config=cfg, inference=False)
        assert r.jobs["jct_s"].iloc[0] == pytest.approx(jct, rel=1e-12)
        assert r.summary["cluster_usage"] == pytest.approx(usage, rel=1e-12)
        assert r.summary["goodput"] == pytest.approx(usage, rel=1e-12)
    # the sweep key reaches the replay: elastic_fraction 1, seed 0 (alpha drawn, so only
    # the worker size is checked, from the per-job table the run returns)
    spec = parse_spec({"grid": {"trace": str(path), "policy": "aryl-no-loan",
                                "elastic_fraction": 1.0, "n_training_servers": 1,
                                "n_inference_servers": 0, "gpus_per_server": 7,
                                "elastic_worker_gpus": ["one", "split"]}})
    plan = plan_sweep(spec)
    got = {}
    for run in plan.runs:
        out = execute_run(run, plan.traces[run.trace_id])
        row = pd.read_parquet(io.BytesIO(out.row)).iloc[0]
        jobs = pd.read_parquet(io.BytesIO(out.jobs))
        got[row["elastic_worker_gpus"]] = int(jobs["gpus_per_worker"].iloc[0])
    assert got == {"one": 1, "split": 2}


def test_replay_command_takes_the_option() -> None:
    import json

    from click.testing import CliRunner

    from aryl.cli import main

    args = ["replay", "--trace", "itp-c10", "--policy", "fifo", "--training-servers", "4",
            "--inference-servers", "0", "--json"]
    res = CliRunner().invoke(main, [*args, "--set", "elastic_worker_gpus=split"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["trace"]["elastic_synthesis"]["elastic_worker_gpus"] == "split"
    bad = CliRunner().invoke(main, [*args, "--set", "elastic_worker_gpus=four"])
    assert bad.exit_code != 0
    assert "elastic_worker_gpus" in bad.output
