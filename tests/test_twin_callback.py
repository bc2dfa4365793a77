"""The registered policies' Python twins through the policy callback (aryl.scheduling.twin).

A twin run inside the compiled event loop, on the ClusterState mirror the
adapter keeps from ``PassView.changes``, must reproduce the Python engine's
replay of the same twin exactly: every per-job column (float64 bit patterns),
the event log and the summary's measures; on loans and reclaims (with and
without a grace period, other reclaim policies, kept idle loans), elastic jobs
(MCKP scale-outs, scale-ins and moves), tight clusters, the heterogeneous
``lyra`` cluster, and for the simple twins (fifo, sjf, fifo-backfill) too.  The
Python engine's replay is the reference (and equals the compiled policy,
tests/test_native_aryl_replays.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import pytest

import aryl
from aryl.errors import InvalidInputError
from aryl.scheduling import ClusterState, schedule
from aryl.scheduling.jsonio import plan_to_json, state_from_json
from aryl.scheduling.registry import is_policy_name, load_policy_class, twin_policies
from aryl.scheduling.twin import TWINS, ArylTwin, TwinPolicy, twin_class, twin_policy
from aryl.sim import SimConfig, simulate
from aryl.traces import load_trace, synthesize_elastic
from replay_identity import elastic_slice, same_frame, scrub


def _scrub_twin(v: Any) -> Any:
    # wall-clock timings, the engine and the policy's name differ by design
    return scrub(v, ("engine", "policy"))


def _compare(trace: Any, name: str, cfg: SimConfig, opts: dict[str, Any] | None = None,
             pol: TwinPolicy | None = None) -> Any:
    py = simulate(trace, policy=name, config=dataclasses.replace(cfg, engine="python"),
                  policy_options=opts)
    tw = simulate(trace, policy=pol if pol is not None else twin_policy(name, opts),
                  config=dataclasses.replace(cfg, engine="native"))
    assert tw.summary["policy"] == f"{name}-twin"
    same_frame(tw.jobs, py.jobs)
    assert (py.events is None) == (tw.events is None)
    if py.events is not None:
        same_frame(tw.events, py.events)
    assert _scrub_twin(tw.summary) == _scrub_twin(py.summary)
    return tw


SMALL = SimConfig(n_training_servers=8, n_inference_servers=4, loan_reserve_servers=0,
                  check=True)
TIGHT = SimConfig(n_training_servers=3, n_inference_servers=2, loan_reserve_servers=0,
                  gpus_per_server=8, check=True)
TWIN_NAMES = sorted(t.twin for t in TWINS.values())


def test_every_registered_policy_but_tiresias_has_a_twin() -> None:
    from aryl.scheduling.registry import POLICIES
    from aryl.scheduling.twin import _STATE_POLICIES

    assert _STATE_POLICIES == POLICIES  # the twin module's own list is the registry's
    assert TWIN_NAMES == ["aryl", "aryl-no-elastic", "aryl-no-loan", "elastic-greedy",
                          "fifo", "fifo-backfill", "sjf"]
    with pytest.raises(InvalidInputError, match="timed rule"):
        twin_class("tiresias")


@pytest.mark.parametrize("name", TWIN_NAMES)
@pytest.mark.parametrize("cfg", [SMALL, TIGHT], ids=["8+4", "3+2"])
def test_the_twin_through_the_callback_replays_as_the_python_engine(
        name: str, cfg: SimConfig) -> None:
    tw = _compare(elastic_slice("itp-c01", 600, 0), name, cfg)
    assert tw.summary["n_finished"] > 0


@pytest.mark.parametrize(("label", "cfg", "opts"), [
    ("grace", dataclasses.replace(SMALL, reclaim_grace_s=600.0, seed=3), None),
    ("reclaim-random", dataclasses.replace(SMALL, reclaim_policy="random", seed=5), None),
    ("reclaim-fewest", dataclasses.replace(SMALL, reclaim_policy="fewest-jobs"), None),
    ("keep-idle-loans", SMALL, {"return_idle_loans": False}),
    ("no-pause", dataclasses.replace(SMALL, rescale_pause_s=0.0, restart_cost_s=0.0), None),
    ("starvation", SMALL, {"starvation_bound_s": 600.0}),
])
def test_loans_reclaims_and_elastic_jobs_replay_as_the_python_engine(
        label: str, cfg: SimConfig, opts: dict[str, Any] | None) -> None:
    tw = _compare(elastic_slice("itp-c01", 600, 1), "aryl", cfg, opts)
    s = tw.summary
    # the scenarios exercise what the mirror must follow
    assert s["n_loans"] > 0
    assert s["n_scale_out"] > 0


def test_a_replay_with_reclaim_preemptions_replays_as_the_python_engine() -> None:
    tr = synthesize_elastic(load_trace("itp-c07"), elastic_fraction=0.5, seed=0)
    tr = tr.replace(jobs=tr.jobs.iloc[:2500].reset_index(drop=True))
    tw = _compare(tr, "aryl", SimConfig(n_training_servers=20, n_inference_servers=8))
    s = tw.summary
    assert s["n_reclaims"] > 0
    assert s["n_reclaim_preemptions"] > 0
    assert s["n_scale_in"] > 0


@pytest.mark.parametrize("name", ["aryl", "aryl-no-elastic", "fifo"])
@pytest.mark.parametrize(("speed", "loaned"), [("parametric", 0.5), ("measured", None)])
def test_heterogeneous_replays_as_the_python_engine(
        name: str, speed: str, loaned: float | None) -> None:
    cfg = SimConfig(cluster="lyra", speed_model=speed, loaned_gpu_speed=loaned, check=True)
    _compare(elastic_slice("itp-c06", 500, 2), name, cfg)


def test_a_horizon_replays_as_the_python_engine() -> None:
    tr = elastic_slice("itp-c06", 400, 1)
    horizon = float(tr.jobs["submit_time_s"].iloc[0] + 3 * 86400.0)
    _compare(tr, "aryl", dataclasses.replace(TIGHT, horizon_s=horizon))


class ViewTwin(ArylTwin):  # type: ignore[misc, valid-type]
    """The aryl twin through the public path: decide(view) reading view.changes."""

    direct: ClassVar[bool] = False


def test_the_view_path_reads_changes_and_decides_the_same() -> None:
    _compare(elastic_slice("itp-c01", 400, 4), "aryl", SMALL, pol=ViewTwin())


def test_an_instance_replays_twice_the_same() -> None:
    pol = ArylTwin()
    tr = elastic_slice("itp-c01", 300, 5)
    a = simulate(tr, policy=pol, config=SMALL)
    b = simulate(tr, policy=pol, config=SMALL)
    same_frame(a.jobs, b.jobs)


def test_one_pass_through_schedule_equals_the_python_pass() -> None:
    doc = {
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
            {"id": "C", "arrival_s": 0.0, "gpus_per_worker": 1, "ref_workers": 2,
             "min_workers": 1, "max_workers": 4, "elastic": True, "status": "queued",
             "remaining_s": 20.0},
        ],
    }
    st = state_from_json(doc)
    ref = plan_to_json(schedule(st, policy="aryl", backend="reference"), st)
    got = plan_to_json(schedule(st, policy=ArylTwin()), st)
    # the twin's starts and resizes carry the callback's reason; a plan of a policy
    # through the callback keeps the state's elastic memo (the twin's is its mirror's)
    for key in ("start", "resize", "preempt"):
        for e in ref[key]:
            e["reason"] = "policy_decision"
    assert got.pop("elastic_memo") == {"free_gpus": -1, "loaned_servers": -1}
    ref.pop("elastic_memo")
    assert got == ref
    assert ref["start"]


def test_apply_changes_keeps_the_indexes() -> None:
    # a mirror kept by apply_changes has the indexes a rebuild computes
    tr = elastic_slice("itp-c01", 300, 6)
    seen: list[ClusterState] = []

    class Checked(ArylTwin):  # type: ignore[misc, valid-type]
        def decide_values(self, *a: Any) -> Any:
            out = super().decide_values(*a)
            st = self._mirror
            assert st is not None
            st.check_indexes()
            seen.append(st)
            return out

    simulate(tr, policy=Checked(), config=SMALL)
    assert seen


def test_twins_are_named_policies() -> None:
    assert set(twin_policies()) == {f"{n}-twin" for n in TWIN_NAMES}
    assert is_policy_name("aryl-twin")
    assert load_policy_class("aryl-twin") is ArylTwin
    assert load_policy_class("aryl.scheduling.twin:SjfTwin") is TWINS["sjf-twin"]
    tr = elastic_slice("itp-c01", 200, 7)
    by_name = simulate(tr, policy="sjf-twin", config=SMALL)
    assert by_name.summary["policy"] == "sjf-twin"
    with pytest.raises(InvalidInputError, match="unknown option"):
        twin_policy("aryl", {"no_such_option": 1})
    with pytest.raises(InvalidInputError, match="engine"):
        simulate(tr, policy="aryl-twin", config=dataclasses.replace(SMALL, engine="python"))
    assert isinstance(ArylTwin(), aryl.Policy)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [SimConfig(), SimConfig(cluster="lyra")], ids=["46+16", "lyra"])
def test_the_full_itp_c07_replay_of_the_aryl_twin_is_the_python_engines(cfg: SimConfig) -> None:
    # the whole trace, half elastic: thousands of MCKP passes, loans, returns and
    # (on the default cluster) reclaims with preemptions
    trace = synthesize_elastic(load_trace("itp-c07"), elastic_fraction=0.5, seed=0)
    tw = _compare(trace, "aryl", cfg)
    assert tw.summary["n_scale_out"] > 1000
    assert tw.summary["n_loans"] > 0
