"""Whole replays of the ``aryl`` family: the native engine equals the Python engine.

The native engine (C++ event loop + the C++ pass of ``sched_aryl.hpp``) must
reproduce the Python engine (the reference twin) exactly: every per-job column
(float64 bit patterns), the event log and the summary's measures, on loans,
reclaims with and without a grace period, every reclaim policy, kept idle loans,
a horizon, tight clusters, and heterogeneous clusters (parametric speeds with a
slow or a fast loaned GPU, measured per-family speeds), with the invariant
checker on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import pytest

from aryl.scheduling.native import ARYL_NATIVE
from aryl.sim import SimConfig, simulate
from aryl.sim.native import uses_native
from aryl.traces import load_trace, synthesize_elastic
from replay_identity import elastic_slice, same_frame, scrub

pytestmark = pytest.mark.skipif(not ARYL_NATIVE, reason="built without the aryl pass")

ARYL_FAMILY = ("aryl", "aryl-no-loan", "aryl-no-elastic", "elastic-greedy")
def _compare(trace: Any, policy: str, cfg: SimConfig, opts: dict[str, Any] | None) -> None:
    native = dataclasses.replace(cfg, engine="native")
    assert uses_native(native, policy)  # no silent fallback to the Python engine
    py = simulate(trace, policy=policy, config=dataclasses.replace(cfg, engine="python"),
                  policy_options=opts)
    nat = simulate(trace, policy=policy, config=native, policy_options=opts)
    same_frame(nat.jobs, py.jobs)
    assert (py.events is None) == (nat.events is None)
    if py.events is not None:
        same_frame(nat.events, py.events)
    assert scrub(nat.summary) == scrub(py.summary)


SMALL = SimConfig(n_training_servers=8, n_inference_servers=4, loan_reserve_servers=0,
                  check=True)
TIGHT = SimConfig(n_training_servers=3, n_inference_servers=2, loan_reserve_servers=0,
                  gpus_per_server=8, check=True)


@pytest.mark.parametrize("policy", ARYL_FAMILY)
@pytest.mark.parametrize("cfg", [SMALL, TIGHT], ids=["8+4", "3+2"])
def test_replays_are_identical(policy: str, cfg: SimConfig) -> None:
    _compare(elastic_slice("itp-c01", 600, 0), policy, cfg, None)


@pytest.mark.parametrize(("name", "cfg", "opts"), [
    ("grace", dataclasses.replace(SMALL, reclaim_grace_s=600.0, seed=3), None),
    ("reclaim-random", dataclasses.replace(SMALL, reclaim_policy="random", seed=5), None),
    ("reclaim-fewest", dataclasses.replace(SMALL, reclaim_policy="fewest-jobs"), None),
    ("reclaim-most-idle", dataclasses.replace(SMALL, reclaim_policy="most-idle"), None),
    ("keep-idle-loans", SMALL, {"return_idle_loans": False}),
    ("no-pause", dataclasses.replace(SMALL, rescale_pause_s=0.0, restart_cost_s=0.0), None),
    ("starvation", SMALL, {"starvation_bound_s": 600.0}),
])
def test_replays_with_loans_and_reclaims_are_identical(
    name: str, cfg: SimConfig, opts: dict[str, Any] | None
) -> None:
    _compare(elastic_slice("itp-c01", 600, 1), "aryl", cfg, opts)


def test_recycled_job_records_get_their_own_throughputs() -> None:
    # The native pass keeps an elastic job's throughputs T(base + c) with its job
    # record (JobRecords::throughput_row), and the engine hands a finished job's
    # record slot to the next job started: jobs of other alphas and base sizes, a
    # few at a time on a small cluster, must each get the table of their own curve.
    alphas = [0.0, 0.03, 0.2, 0.6, 1.0, 0.11]
    jobs = pd.DataFrame({
        "job_id": [f"j{k}" for k in range(72)],
        "submit_time_s": [600.0 * (k // 3) for k in range(72)],
        "duration_s": [900.0 + 173.0 * (k % 7) for k in range(72)],
        "gpus": [1 + k % 4 for k in range(72)],
        "gpus_per_worker": [1] * 72,
        "min_workers": [1 + k % 4 for k in range(72)],
        "max_workers": [2 + k % 4 + k % 5 for k in range(72)],
        "elastic": [True] * 72,
        "alpha": [alphas[k % 6] for k in range(72)],
        "tenant": ["t"] * 72,
    })
    cfg = SimConfig(n_training_servers=2, n_inference_servers=1, loan_reserve_servers=0,
                    gpus_per_server=8, check=True)
    nat = simulate(jobs, policy="aryl", config=dataclasses.replace(cfg, engine="native"))
    assert nat.summary["n_scale_out"] > 20
    assert nat.summary["n_scale_in"] > 5
    _compare(jobs, "aryl", cfg, None)


def test_a_replay_to_a_horizon_is_identical() -> None:
    tr = elastic_slice("itp-c06", 400, 1)
    horizon = float(tr.jobs["submit_time_s"].iloc[0] + 3 * 86400.0)
    _compare(tr, "aryl", dataclasses.replace(TIGHT, horizon_s=horizon), None)


@pytest.mark.parametrize("policy", ARYL_FAMILY)
@pytest.mark.parametrize(("speed", "loaned"), [("parametric", 0.5), ("parametric", 2.0),
                                               ("measured", None)])
def test_heterogeneous_replays_are_identical(
    policy: str, speed: str, loaned: float | None
) -> None:
    cfg = SimConfig(cluster="lyra", speed_model=speed, loaned_gpu_speed=loaned, check=True)
    _compare(elastic_slice("itp-c06", 500, 2), policy, cfg, None)


def test_a_mixed_type_replay_is_identical() -> None:
    cfg = SimConfig(cluster="lyra", speed_model="parametric", loaned_gpu_speed=0.5,
                    mix_gpu_types=True, check=True)
    _compare(elastic_slice("itp-c06", 500, 3), "aryl", cfg, None)



def _full_itp_c07() -> Any:
    return synthesize_elastic(load_trace("itp-c07"), elastic_fraction=0.5, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize(("cfg", "policy", "reclaims"), [
    (SimConfig(), "aryl", True),
    (SimConfig(cluster="lyra"), "aryl", False),
    (SimConfig(n_training_servers=30, n_inference_servers=10), "aryl", True),
    (SimConfig(), "elastic-greedy", False),
], ids=["46+16-aryl", "lyra-aryl", "30+10-aryl", "46+16-elastic-greedy"])
def test_full_itp_c07_replays_are_identical(cfg: SimConfig, policy: str, reclaims: bool) -> None:
    # The whole trace, half elastic (seed 0), the bundled inference profile: thousands
    # of elastic passes (MCKP solves, extras kept, moved and repaired), loans, returns
    # and, where the inference demand rises over the loans, reclaims with preemptions;
    # every per-job column and event as the Python engine has them.
    trace = _full_itp_c07()
    nat = simulate(trace, policy=policy, config=cfg)
    assert nat.summary["n_scale_out"] > 1000
    if policy == "aryl":
        assert nat.summary["n_loans"] > 0
    if reclaims:
        assert nat.summary["n_reclaims"] > 0
        assert nat.summary["n_reclaim_preemptions"] > 0
    _compare(trace, policy, cfg, None)
