"""The cluster state of the scheduling pass (``aryl.scheduling.state``) on hand-made cases.

* every refusal of :class:`SchedulerConfig`, :meth:`ClusterState.add_server`,
  :meth:`~ClusterState.add_job` and :meth:`~ClusterState.add_jobs`, with its
  whole message;
* the progress model (docs/model.md) through the mutators, with the arithmetic
  beside each value: a start (with and without the restart cost), periodic
  checkpoints, a resize (checkpoint and pause), a preemption (roll back to the
  checkpoint), a finish, attained GPU-seconds, queue age;
* the derived indexes: each mutator's result against
  :meth:`~ClusterState.rebuild_indexes`, and :meth:`~ClusterState.check_indexes`
  naming the index that drifted;
* the small views (loans, the reclaim deficit, GPU types, speeds).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from aryl.errors import InvalidInputError
from aryl.scheduling import ClusterState, SchedulerConfig
from aryl.scheduling.speed import SpeedModel
from aryl.scheduling.state import (
    DONE,
    IDLE,
    LOANED,
    PENDING,
    QUEUED,
    RUNNING,
    SERVING,
    TRAINING,
    split_placement,
    throughput_1,
)


def message(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(InvalidInputError) as info:
        fn(*args, **kwargs)
    return str(info.value)


# ------------------------------------------------------------------ refusals

@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"rescale_pause_s": -1.0},
         "config.rescale_pause_s: must be a number in [0, 1e+09], got -1.0"),
        ({"restart_cost_s": math.inf},
         "config.restart_cost_s: must be a number in [0, 1e+09], got inf"),
        ({"loan_cooldown_s": True},
         "config.loan_cooldown_s: must be a number in [0, 1e+09], got True"),
        ({"loan_cooldown_s": "1"},
         "config.loan_cooldown_s: must be a number in [0, 1e+09], got '1'"),
        ({"checkpoint_interval_s": math.nan},
         "config.checkpoint_interval_s: must be a number in [0, 1e+09], got nan"),
        ({"checkpoint_interval_s": 0.0}, "config.checkpoint_interval_s: must be > 0"),
        # above the bound every duration shares (1e308 made the JCT reductions inf)
        ({"rescale_pause_s": 1e308},
         "config.rescale_pause_s: must be a number in [0, 1e+09], got 1e+308"),
        ({"starvation_bound_s": 1.5e9},
         "config.starvation_bound_s: must be a number in [0, 1e+09] (or inf: no bound), "
         "got 1500000000.0"),
        ({"starvation_bound_s": -1.0},
         "config.starvation_bound_s: must be a number in [0, 1e+09] (or inf: no bound), got -1.0"),
        ({"starvation_bound_s": math.nan},
         "config.starvation_bound_s: must be a number in [0, 1e+09] (or inf: no bound), got nan"),
        ({"starvation_bound_s": False},
         "config.starvation_bound_s: must be a number in [0, 1e+09] (or inf: no bound), got False"),
        ({"starvation_bound_s": "1"},
         "config.starvation_bound_s: must be a number in [0, 1e+09] (or inf: no bound), got '1'"),
        ({"loan_reserve_servers": -1},
         "config.loan_reserve_servers: must be an integer in [0, 2147483647], got -1"),
        ({"loan_reserve_servers": 1.0},
         "config.loan_reserve_servers: must be an integer in [0, 2147483647], got 1.0"),
        ({"loan_reserve_servers": True},
         "config.loan_reserve_servers: must be an integer in [0, 2147483647], got True"),
        ({"seed": -2}, "config.seed: must be an integer in [0, 9223372036854775807], got -2"),
        ({"reclaim_policy": "best"},
         "config.reclaim_policy: unknown 'best'; choose from ['aryl', 'random', 'fewest-jobs', "
         "'most-idle', 'exact']"),
        ({"mix_gpu_types": 1}, "config.mix_gpu_types: must be true or false, got 1"),
        ({"backend": "gpu"}, "config.backend: must be 'native' or 'reference', got 'gpu'"),
    ],
)
def test_scheduler_config_refusals(kwargs: dict[str, Any], expected: str) -> None:
    assert message(SchedulerConfig, **kwargs) == expected


def test_scheduler_config_edges_are_accepted() -> None:
    cfg = SchedulerConfig(rescale_pause_s=0, restart_cost_s=0.0, loan_cooldown_s=0,
                          checkpoint_interval_s=1e-9, starvation_bound_s=math.inf,
                          loan_reserve_servers=0, seed=0, mix_gpu_types=True,
                          backend="reference", reclaim_policy="exact")
    assert cfg.starvation_bound_s == math.inf
    assert SchedulerConfig(starvation_bound_s=0).starvation_bound_s == 0
    top = SchedulerConfig(rescale_pause_s=1e9, restart_cost_s=1e9, loan_cooldown_s=1e9,
                          checkpoint_interval_s=1e9, starvation_bound_s=1e9)
    assert (top.rescale_pause_s, top.starvation_bound_s) == (1e9, 1e9)
    assert SchedulerConfig.field_names() == (
        "rescale_pause_s", "checkpoint_interval_s", "restart_cost_s", "loan_reserve_servers",
        "loan_cooldown_s", "starvation_bound_s", "reclaim_policy", "seed", "backend",
        "mix_gpu_types")
    assert cfg.to_dict()["backend"] == "reference"


def test_add_server_refusals() -> None:
    st = ClusterState()
    assert message(st.add_server, "x", role="storage", gpus=8) == (
        "servers[0] ('x').role: must be one of ['training', 'inference'], got 'storage'")
    assert message(st.add_server, "x", role="training", gpus=0) == (
        "servers[0] ('x').gpus: must be an integer in [1, 1048576], got 0")
    assert message(st.add_server, "x", role="training", gpus=8, status="idle") == (
        "servers[0] ('x').status: a training server has status 'training'")
    assert message(st.add_server, "x", role="inference", gpus=8, status="asleep") == (
        "servers[0] ('x').status: must be one of ['training', 'serving', 'idle', 'loaned'], "
        "got 'asleep'")
    assert message(st.add_server, "x", role="inference", gpus=8, status="training") == (
        "servers[0] ('x').status: an inference server is 'serving', 'idle' or 'loaned'")
    assert message(st.add_server, "x", role="inference", gpus=8, status=TRAINING) == (
        "servers[0] ('x').status: an inference server is 'serving', 'idle' or 'loaned'")
    assert st.n_servers == 0  # nothing was added by a refused call
    st.add_server("i", role="inference", gpus=8)
    assert message(st.add_server, "t", role="training", gpus=8) == (
        "servers[1] ('t'): training servers must come before every inference server")
    # the status constants are accepted as well as the names
    assert st.add_server("j", role="inference", gpus=4, status=LOANED) == 1
    assert st.server_status == [IDLE, LOANED]


def _state() -> ClusterState:
    st = ClusterState()
    st.add_server("t0", role="training", gpus=8)
    return st


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"gpus_per_worker": 0},
         "jobs[0] ('j').gpus_per_worker: must be an integer in [1, 1048576], got 0"),
        ({"ref_workers": 0},
         "jobs[0] ('j').ref_workers: must be an integer in [1, 2147483647], got 0"),
        ({"min_workers": 0, "elastic": True},
         "jobs[0] ('j').min_workers: must be an integer in [1, 2147483647], got 0"),
        ({"max_workers": 0, "min_workers": 1, "elastic": True},
         "jobs[0] ('j').max_workers: must be an integer in [1, 2147483647], got 0"),
        ({"min_workers": 3, "max_workers": 2, "elastic": True},
         "jobs[0] ('j'): max_workers 2 < min_workers 3"),
        ({"elastic": 1}, "jobs[0] ('j').elastic: must be true or false, got 1"),
        ({"min_workers": 1, "max_workers": 3},
         "jobs[0] ('j'): a rigid job needs min_workers == max_workers"),
        ({"alpha": -0.1}, "jobs[0] ('j').alpha: must be a finite number >= 0, got -0.1"),
        ({"alpha": 1.5}, "jobs[0] ('j').alpha: must be in [0, 1], got 1.5"),
        ({"remaining_s": -1.0},
         "jobs[0] ('j').remaining_s: must be a number in [0, 1e+12], got -1.0"),
        ({"remaining_s": 1e308},
         "jobs[0] ('j').remaining_s: must be a number in [0, 1e+12], got 1e+308"),
        ({"arrival_s": math.inf}, "jobs[0] ('j').arrival_s: must be a finite number"),
        ({"arrival_s": True}, "jobs[0] ('j').arrival_s: must be a finite number"),
        ({"arrival_s": "0"}, "jobs[0] ('j').arrival_s: must be a finite number"),
        ({"family": ""}, "jobs[0] ('j').family: must be a non-empty string or null"),
        ({"family": 3}, "jobs[0] ('j').family: must be a non-empty string or null"),
        ({"family": "bert"},
         "model family 'bert': the state has no speed model for families"),
    ],
)
def test_add_job_refusals(kwargs: dict[str, Any], expected: str) -> None:
    args: dict[str, Any] = dict(arrival_s=0.0, gpus_per_worker=1, ref_workers=2,
                                remaining_s=10.0)
    args.update(kwargs)
    st = _state()
    assert message(st.add_job, "j", **args) == expected


def test_a_refused_job_leaves_the_state_unchanged() -> None:
    st = _state()
    st.add_job("ok", arrival_s=0.0, gpus_per_worker=1, ref_workers=1, remaining_s=1.0)
    for bad in ({"family": ""}, {"family": "bert"}, {"alpha": 2.0}):
        with pytest.raises(InvalidInputError):
            st.add_job("x", arrival_s=0.0, gpus_per_worker=1, ref_workers=1,
                       remaining_s=1.0, **bad)
    assert st.n_jobs == 1
    for name in ("arrival_s", "gpus_per_worker", "min_workers", "max_workers", "ref_workers",
                 "elastic", "alpha", "family", "ref_throughput", "status", "remaining_s"):
        assert len(getattr(st, name)) == 1, name
    # the next job gets the next index, named so in its errors
    assert message(st.add_job, "y", arrival_s=0.0, gpus_per_worker=0, ref_workers=1,
                   remaining_s=1.0) == (
        "jobs[1] ('y').gpus_per_worker: must be an integer in [1, 1048576], got 0")


def test_add_jobs_names_a_bad_job_by_its_index_in_the_state() -> None:
    st = _state()
    st.add_job("first", arrival_s=0.0, gpus_per_worker=1, ref_workers=1, remaining_s=1.0)
    cols = dict(_GOOD)
    cols["alpha"] = [0.0, 0.5, 7.0]
    # the third job of the batch is the state's fourth: jobs[3]
    assert message(st.add_jobs, cols.pop("job_id"), **cols) == (
        "jobs[3] ('c').alpha: must be in [0, 1], got 7.0")
    cols = dict(_GOOD)
    cols["ref_workers"] = [2, 0, 4]
    assert message(st.add_jobs, cols.pop("job_id"), **cols) == (
        "jobs[2] ('b').ref_workers: must be an integer in [1, 2147483647]")
    assert st.n_jobs == 1


def test_add_job_edges_and_defaults() -> None:
    st = _state()
    j = st.add_job("j", arrival_s=3, gpus_per_worker=2, ref_workers=2, remaining_s=0,
                   alpha=1.0)
    k = st.add_job("k", arrival_s=-1.5, gpus_per_worker=1, ref_workers=1, remaining_s=5.0,
                   alpha=0.0, min_workers=1, max_workers=1, elastic=True)
    assert (j, k) == (0, 1)
    assert st.arrival_s == [3.0, -1.5]
    assert (st.min_workers[j], st.max_workers[j], st.elastic[j]) == (2, 2, False)
    assert st.status == [PENDING, PENDING]
    assert st.queued_since_s == [3.0, -1.5]  # the arrival until enqueued
    assert st.checkpoint_remaining_s == [0.0, 5.0]
    assert st.next_checkpoint_s == [math.inf, math.inf]
    # T(2) at alpha 1 = 2 / (1 + 1) = 1; T(1) = 1
    assert st.ref_throughput == [1.0, 1.0]
    assert st.workers == [0, 0]
    assert st.placement == [None, None]
    assert st.restarted == [False, False]


_GOOD = dict(job_id=["a", "b", "c"], arrival_s=[0.0, 1.0, 2.0], gpus_per_worker=[1, 2, 1],
             ref_workers=[2, 1, 4], remaining_s=[10.0, 20.0, 30.0], min_workers=[2, 1, 2],
             max_workers=[2, 1, 6], elastic=[False, False, True], alpha=[0.0, 0.5, 1.0])


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("gpus_per_worker", [1, 0, 1],
         "jobs[1] ('b').gpus_per_worker: must be an integer in [1, 1048576]"),
        ("gpus_per_worker", [1.0, 2.0, 1.0],
         "jobs[0] ('a').gpus_per_worker: must be an integer in [1, 1048576]"),
        ("ref_workers", [2, 1, -4],
         "jobs[2] ('c').ref_workers: must be an integer in [1, 2147483647]"),
        ("min_workers", [2, 0, 2],
         "jobs[1] ('b').min_workers: must be an integer in [1, 2147483647]"),
        ("max_workers", [2, 1, 0],
         "jobs[2] ('c').max_workers: must be an integer in [1, 2147483647]"),
        ("max_workers", [2, 1, 1], "jobs[2] ('c'): max_workers 1 < min_workers 2"),
        ("elastic", [False, False, False],
         "jobs[2] ('c'): a rigid job needs min_workers == max_workers"),
        ("alpha", [0.0, 1.01, 1.0], "jobs[1] ('b').alpha: must be in [0, 1], got 1.01"),
        ("alpha", [0.0, 0.5, -1.0], "jobs[2] ('c').alpha: must be a finite number >= 0, got -1.0"),
        ("alpha", [math.nan, 0.5, 1.0],
         "jobs[0] ('a').alpha: must be a finite number >= 0, got nan"),
        ("remaining_s", [10.0, -20.0, 30.0],
         "jobs[1] ('b').remaining_s: must be a number in [0, 1e+12], got -20.0"),
        ("remaining_s", [10.0, 20.0, math.inf],
         "jobs[2] ('c').remaining_s: must be a number in [0, 1e+12], got inf"),
        ("remaining_s", [10.0, 1e12 * (1 + 2**-52), 30.0],
         "jobs[1] ('b').remaining_s: must be a number in [0, 1e+12], got 1000000000000.0002"),
        ("arrival_s", [0.0, math.nan, 2.0], "jobs[1] ('b').arrival_s: must be a finite number"),
    ],
)
def test_add_jobs_refusals_name_the_first_bad_job(column: str, value: list[Any],
                                                  expected: str) -> None:
    st = _state()
    cols = dict(_GOOD)
    cols[column] = value
    assert message(st.add_jobs, cols.pop("job_id"), **cols) == expected


def test_add_jobs_equals_add_job_one_by_one() -> None:
    many = _state()
    r = many.add_jobs(**_GOOD)
    assert r == range(0, 3)
    one = _state()
    for i, jid in enumerate(_GOOD["job_id"]):
        one.add_job(jid, arrival_s=_GOOD["arrival_s"][i],
                    gpus_per_worker=_GOOD["gpus_per_worker"][i],
                    ref_workers=_GOOD["ref_workers"][i], remaining_s=_GOOD["remaining_s"][i],
                    min_workers=_GOOD["min_workers"][i], max_workers=_GOOD["max_workers"][i],
                    elastic=_GOOD["elastic"][i], alpha=_GOOD["alpha"][i])
    for name in ("job_id", "arrival_s", "gpus_per_worker", "min_workers", "max_workers",
                 "ref_workers", "elastic", "alpha", "family", "ref_throughput", "status",
                 "workers", "placement", "remaining_s", "progress_at_s", "speed",
                 "checkpoint_remaining_s", "next_checkpoint_s", "restarted", "queued_since_s",
                 "waited_s", "attained_gpu_s", "attained_at_s"):
        assert getattr(many, name) == getattr(one, name), name
    # T(ref) by hand: a: 2 / (1 + 0) = 2; b: 1; c: 4 / (1 + 1 * 3) = 1
    assert many.ref_throughput == [2.0, 1.0, 1.0]
    # a second batch continues the indexes
    assert many.add_jobs(["d"], arrival_s=[3.0], gpus_per_worker=[1], ref_workers=[1],
                         remaining_s=[1.0], min_workers=[1], max_workers=[1], elastic=[False],
                         alpha=[0.05]) == range(3, 4)
    assert many.add_jobs([], arrival_s=[], gpus_per_worker=[], ref_workers=[], remaining_s=[],
                         min_workers=[], max_workers=[], elastic=[], alpha=[]) == range(4, 4)


def test_static_arrays_follow_added_jobs() -> None:
    st = _state()
    st.add_jobs(**_GOOD)
    mn, mx, g, a = st.static_arrays()
    assert mn.dtype == np.int64
    assert mx.dtype == np.int64
    assert g.dtype == np.int64
    assert a.dtype == np.float64
    assert mn.tolist() == [2, 1, 2]
    assert mx.tolist() == [2, 1, 6]
    assert g.tolist() == [1, 2, 1]
    assert a.tolist() == [0.0, 0.5, 1.0]
    assert st.static_arrays()[0] is mn  # cached
    st.add_job("d", arrival_s=3.0, gpus_per_worker=4, ref_workers=1, remaining_s=1.0)
    assert st.static_arrays()[2].tolist() == [1, 2, 1, 4]  # rebuilt


# ------------------------------------------------------------------ progress model

def _one_job(**cfg: Any) -> tuple[ClusterState, int]:
    """One 8-GPU training server; job j: 2 workers of 2 GPUs (ref 2), 1,000 s of work,
    elastic 1..4, alpha 0.1, arrived at 0."""
    st = ClusterState(config=SchedulerConfig(**cfg))
    st.add_server("t0", role="training", gpus=8)
    j = st.add_job("j", arrival_s=0.0, gpus_per_worker=2, ref_workers=2, remaining_s=1000.0,
                   min_workers=1, max_workers=4, elastic=True, alpha=0.1)
    return st, j


def test_start_progress_checkpoints_and_finish() -> None:
    st, j = _one_job(checkpoint_interval_s=300.0)
    st.enqueue(j, 10.0)
    assert (st.status[j], list(st.queued)) == (QUEUED, [j])
    assert st.queue_age_s(j, 40.0) == 30.0
    w = st.start(j, {0: 2}, 40.0)
    assert w == 2
    assert st.status[j] == RUNNING
    assert list(st.running) == [j]
    assert not st.queued
    assert st.waited_s[j] == 30.0  # 40 - 10
    assert st.speed[j] == 1.0  # at its reference size
    assert st.progress_at_s[j] == 40.0  # never preempted: no restart cost
    assert st.next_checkpoint_s[j] == 340.0  # 40 + 300
    assert st.free == [4]
    assert st.busy == 4
    assert st.base_busy == 2
    # at t = 1,000: 960 s of progress; checkpoints at 340, 640, 940: the last one
    # holds 1000 - (940 - 40) = 100 s; the next is due at 1,240
    assert st.remaining_at(j, 1000.0) == 40.0
    assert st.remaining_work(j, 1000.0) == pytest.approx(40.0 * (2 / 1.1), rel=1e-15)
    assert st.attained_at(j, 1000.0) == 4 * 960.0
    st.advance(j, 1000.0)
    assert st.remaining_s[j] == 40.0
    assert st.checkpoint_remaining_s[j] == 100.0
    assert st.next_checkpoint_s[j] == 1240.0
    assert st.progress_at_s[j] == 1000.0
    st.advance(j, 999.0)  # the past: nothing changes
    assert (st.remaining_s[j], st.progress_at_s[j]) == (40.0, 1000.0)
    st.finish(j, 1040.0)
    assert st.status[j] == DONE
    assert st.remaining_s[j] == 0.0
    assert st.attained_gpu_s[j] == 4 * 1000.0  # 4 GPUs from 40 to 1,040
    assert st.free == [8]
    assert st.busy == 0
    assert st.base_busy == 0
    assert not st.running
    assert st.remaining_at(j, 2000.0) == 0.0


def test_preemption_rolls_back_and_the_restart_pays_its_cost() -> None:
    st, j = _one_job(checkpoint_interval_s=300.0, restart_cost_s=25.0)
    st.enqueue(j, 0.0)
    st.start(j, {0: 2}, 0.0)
    # preempted at 700: checkpoints at 300 and 600; rolled back to 1000 - 600 = 400 s
    st.preempt(j, 700.0)
    assert st.status[j] == QUEUED
    assert list(st.queued) == [j]
    assert not st.running
    assert st.remaining_s[j] == 400.0
    assert st.progress_at_s[j] == 700.0
    assert st.restarted[j] is True
    assert st.speed[j] == 0.0
    assert st.next_checkpoint_s[j] == math.inf
    assert st.attained_gpu_s[j] == 4 * 700.0
    assert st.queued_since_s[j] == 700.0
    assert st.free == [8]
    assert st.busy == 0
    assert st.base_busy == 0
    # the wait after a preemption adds to the earlier one: 0 + (800 - 700)
    assert st.queue_age_s(j, 800.0) == 100.0
    st.start(j, {0: 4}, 800.0)  # 4 workers: speed T(4) / T(2) = (4 / 1.3) / (2 / 1.1)
    assert st.waited_s[j] == 100.0
    assert st.progress_at_s[j] == 825.0  # 800 + the restart cost
    assert st.next_checkpoint_s[j] == 1125.0  # 825 + 300
    assert st.speed[j] == pytest.approx((4 / 1.3) / (2 / 1.1), rel=1e-15)
    assert st.remaining_at(j, 810.0) == 400.0  # paused until 825
    assert st.free == [0]
    assert st.busy == 8
    assert st.base_busy == 2
    assert st.ex_job == {j: {0: 3}}
    assert st.ex_srv == [6]
    assert j not in st.below  # at its maximum (4 workers)


def test_resize_checkpoints_and_pauses() -> None:
    st, j = _one_job(checkpoint_interval_s=300.0, rescale_pause_s=30.0)
    st.enqueue(j, 0.0)
    st.start(j, {0: 2}, 0.0)
    old = st.unplace_for_resize(j, 100.0)
    assert old == 2
    assert st.remaining_s[j] == 900.0
    assert st.workers[j] == 0
    assert st.free == [8]
    assert st.attained_gpu_s[j] == 400.0  # 4 GPUs x 100 s
    w = st.place_resized(j, {0: 1}, 100.0)
    assert w == 1
    assert st.progress_at_s[j] == 130.0  # the pause
    assert st.checkpoint_remaining_s[j] == 900.0
    assert st.next_checkpoint_s[j] == 430.0
    assert st.speed[j] == pytest.approx(1.0 / (2 / 1.1), rel=1e-15)  # T(1) / T(2)
    assert st.free == [6]
    assert st.busy == 2
    assert st.ex_job == {}
    assert j in st.below
    # a second resize inside the pause keeps the later of the two ends
    st.unplace_for_resize(j, 110.0)
    st.place_resized(j, {0: 3}, 110.0)
    assert st.progress_at_s[j] == 140.0  # max(130, 110 + 30)
    assert st.remaining_s[j] == 900.0  # no progress while paused
    assert st.ex_job == {j: {0: 2}}
    assert st.ex_srv == [4]
    assert j in st.below


def test_attained_service_and_remaining_work_of_several_jobs() -> None:
    st = ClusterState()
    st.add_server("t0", role="training", gpus=8)
    a = st.add_job("a", arrival_s=0.0, gpus_per_worker=1, ref_workers=2, remaining_s=100.0,
                   alpha=0.5)
    b = st.add_job("b", arrival_s=0.0, gpus_per_worker=1, ref_workers=1, remaining_s=50.0)
    st.enqueue(a, 0.0)
    st.enqueue(b, 0.0)
    st.start(a, {0: 2}, 10.0)
    st.now_s = 40.0
    # a ran 30 s at speed 1: 70 s left; work = 70 x T(2) = 70 x 2 / 1.5; b queued: 50 x 1
    assert st.remaining_work_many([a, b], 40.0) == [70.0 * (2 / 1.5), 50.0]
    assert st.remaining_work(a) == 70.0 * (2 / 1.5)  # at the state's now
    assert st.remaining_work_many([a], 500.0) == [0.0]  # never below 0
    assert st.attained_at(a) == 2 * 30.0
    assert st.attained_at(b) == 0.0
    st.close_attained(a, 40.0)
    assert (st.attained_gpu_s[a], st.attained_at_s[a]) == (60.0, 40.0)


def test_split_placement_takes_the_base_from_the_lowest_servers() -> None:
    assert split_placement({3: 2, 0: 1, 5: 4}, 4) == ({0: 1, 3: 2, 5: 1}, {5: 3})
    assert split_placement({1: 2}, 2) == ({1: 2}, {})
    assert split_placement({1: 2, 2: 1}, 0) == ({}, {1: 2, 2: 1})
    assert throughput_1(4, 0.25) == 4 / 1.75


# ------------------------------------------------------------------ loans and views

def _loan_state() -> ClusterState:
    st = ClusterState()
    st.add_server("t0", role="training", gpus=8)
    for i in range(3):
        st.add_server(f"i{i}", role="inference", gpus=4, status="idle")
    return st


def test_lend_give_back_and_serving() -> None:
    st = _loan_state()
    assert list(st.inference_servers()) == [1, 2, 3]
    assert st.not_loaned() == 3
    st.lend(3)
    st.lend(2)
    assert st.loaned_servers() == [2, 3]
    assert (st.n_loaned, st.loaned_gpus, st.not_loaned()) == (2, 8, 1)
    assert st.free == [8, 0, 4, 4]
    assert st.loaned_gpus_by_pool == [0, 8]
    assert message(st.lend, 3) == "servers[3] ('i2'): only an idle inference server can be lent"
    st.servers_needed = 3
    # 3 needed, 1 not on loan: 2 missing
    assert st.reclaim_deficit() == 2
    st.set_serving()
    assert st.server_status == [TRAINING, SERVING, LOANED, LOANED]
    j = st.add_job("j", arrival_s=0.0, gpus_per_worker=1, ref_workers=1, remaining_s=9.0)
    st.enqueue(j, 0.0)
    st.start(j, {2: 1}, 0.0)
    assert st.busy_loaned == 1
    assert st.busy_by_pool == [0, 1]
    assert message(st.give_back, 2, reclaimed=True, now=5.0) == (
        "servers[2] ('i1'): only an empty loaned server can be returned")
    assert message(st.give_back, 1, reclaimed=True, now=5.0) == (
        "servers[1] ('i0'): only an empty loaned server can be returned")
    st.give_back(3, reclaimed=True, now=5.0)
    assert st.server_reclaimed_s[3] == 5.0
    assert st.last_reclaim_s == 5.0
    assert (st.n_loaned, st.loaned_gpus, st.free[3]) == (1, 4, 0)
    st.servers_needed = 1
    st.set_serving()
    assert st.server_status == [TRAINING, SERVING, LOANED, IDLE]
    assert st.reclaim_deficit() == 0
    # a return that is not a reclaim leaves the reclaim times alone
    st.preempt(j, 7.0)
    st.give_back(2, reclaimed=False, now=8.0)
    assert st.server_reclaimed_s == [-math.inf, -math.inf, -math.inf, 5.0]
    assert st.last_reclaim_s == 5.0
    # an earlier reclaim time does not move the last one back
    st.lend(2)
    st.give_back(2, reclaimed=True, now=4.0)
    assert st.last_reclaim_s == 5.0
    st.check_indexes()


def test_add_server_counts_pools_types_and_loans() -> None:
    st = ClusterState()
    st.add_server("a", role="training", gpus=8, gpu_type="V100")
    st.add_server("b", role="training", gpus=4, gpu_type="A100", pool="big")
    st.add_server("c", role="inference", gpus=2, gpu_type="T4", status="loaned",
                  reclaimed_s=12.0)
    st.add_server("d", role="inference", gpus=2, gpu_type="V100", status="serving")
    assert st.training_servers == [0, 1]
    assert st.training_gpus == 12
    assert st.pool_names == ["training", "big", "inference"]
    assert st.server_pool_idx == [0, 1, 2, 2]
    assert st.gpu_types == ["V100", "A100", "T4"]
    assert st.servers_by_type == {"V100": [0, 3], "A100": [1], "T4": [2]}
    assert st.training_by_type == {"V100": [0], "A100": [1], "T4": []}
    assert st.free == [8, 4, 2, 0]
    assert (st.n_loaned, st.loaned_gpus, st.loaned_gpus_by_pool) == (1, 2, [0, 0, 2])
    assert st.last_reclaim_s == 12.0
    assert st.multi_type
    st.check_indexes()


def test_type_order_throughput_and_speed_on_several_types() -> None:
    st = ClusterState(speeds=SpeedModel("V100", factors={"T4": 0.5, "A100": 2.0}))
    st.add_server("v", role="training", gpus=8, gpu_type="V100")
    st.add_server("t", role="training", gpus=8, gpu_type="T4")
    st.add_server("a", role="inference", gpus=8, gpu_type="A100", status="loaned")
    j = st.add_job("j", arrival_s=0.0, gpus_per_worker=1, ref_workers=2, remaining_s=10.0,
                   min_workers=1, max_workers=4, elastic=True, alpha=0.0)
    # alpha 0: T(w) = w; factors: V100 1, T4 0.5, A100 2
    assert st.throughput_on(j, "T4", 3) == 1.5
    assert st.throughput_on(j, "A100", 0) == 0.0
    assert st.type_order(j, 2) == ["A100", "V100", "T4"]
    assert st.type_order(j, 2, ["T4", "V100"]) == ["V100", "T4"]
    # a placement over V100 and T4 runs at the slower T4's pace: 0.5 x 3 / T_ref(2) = 0.75
    assert st.speed_at(j, 3, {0: 2, 1: 1}) == 0.75
    assert st.speed_at(j, 2, {2: 2}) == 2.0
    assert message(st.speed_at, j, 2) == "speed_at: a placement is needed on a typed cluster"
    assert st.placement_type({1: 1, 0: 2}) == "T4"  # the type of its first server
    # the same ties on an untyped cluster: type order by first server
    un = ClusterState()
    un.add_server("x", role="training", gpus=8, gpu_type="B")
    un.add_server("y", role="training", gpus=8, gpu_type="A")
    k = un.add_job("k", arrival_s=0.0, gpus_per_worker=1, ref_workers=2, remaining_s=1.0,
                   alpha=0.2)
    assert un.type_order(k, 2) == ["B", "A"]
    assert un.speed_at(k, 2) == 1.0
    # 3 workers at alpha 0.2: T(3) / T(2) = (3 / 1.4) / (2 / 1.2)
    assert un.speed_at(k, 3) == (3 / 1.4) / (2 / 1.2)
    assert un.throughput_on(k, "A", 0) == 0.0
    assert un.throughput_on(k, "A", 3) == 3 / 1.4  # T(3) at alpha 0.2
    assert un.throughput_on(k, "B", 1) == 1.0


# ------------------------------------------------------------------ derived indexes

def _busy_state() -> ClusterState:
    """t0, t1 (8 GPUs), i0 loaned (8), i1 idle; a running elastic job with extras on the
    loan, a rigid one, a queued one; built through the mutators."""
    st = ClusterState(now_s=0.0)
    st.add_server("t0", role="training", gpus=8)
    st.add_server("t1", role="training", gpus=8)
    st.add_server("i0", role="inference", gpus=8)
    st.add_server("i1", role="inference", gpus=8)
    st.lend(2)
    e = st.add_job("e", arrival_s=0.0, gpus_per_worker=2, ref_workers=2, remaining_s=100.0,
                   min_workers=2, max_workers=6, elastic=True)
    r = st.add_job("r", arrival_s=0.0, gpus_per_worker=1, ref_workers=4, remaining_s=50.0)
    q = st.add_job("q", arrival_s=1.0, gpus_per_worker=1, ref_workers=8, remaining_s=70.0)
    for j in (e, r, q):
        st.enqueue(j, st.arrival_s[j])
    st.start(e, {0: 2, 2: 3}, 1.0)
    st.start(r, {1: 4}, 1.0)
    return st


def test_the_mutators_keep_every_index_equal_to_a_recomputation() -> None:
    st = _busy_state()
    # by hand: t0 8 - 4 = 4, t1 8 - 4 = 4, i0 8 - 6 = 2, i1 idle 0
    assert st.free == [4, 4, 2, 0]
    assert st.jobs_on == [{0: 2}, {1: 4}, {0: 3}, {}]
    assert st.busy == 14
    assert st.base_busy == 4 + 4
    assert st.busy_loaned == 6
    assert st.ex_job == {0: {2: 3}}
    assert st.ex_srv == [0, 0, 6, 0]
    assert st.below == {0: None}
    assert st.elastic_running == {0: None}
    assert st.busy_by_pool == [8, 6]
    st.check_indexes()
    snapshot = (list(st.free), [dict(d) for d in st.jobs_on], st.busy, st.base_busy,
                st.busy_loaned, list(st.ex_srv), dict(st.ex_job), dict(st.below))
    st.rebuild_indexes()
    assert snapshot == (st.free, st.jobs_on, st.busy, st.base_busy, st.busy_loaned,
                        st.ex_srv, st.ex_job, st.below)


@pytest.mark.parametrize(
    ("corrupt", "name"),
    [
        (lambda st: st.free.__setitem__(0, 5), "free GPUs per server"),
        (lambda st: st.jobs_on[0].__setitem__(1, 1), "jobs per server"),
        (lambda st: st.ex_srv.__setitem__(2, 4), "extra GPUs per server"),
        (lambda st: st.ex_job.__setitem__(0, {2: 2}), "extra workers per job"),
        (lambda st: st.below.clear(), "jobs below their maximum"),
        (lambda st: st.elastic_running.clear(), "running elastic jobs (start order)"),
        (lambda st: setattr(st, "busy", 13), "busy GPUs"),
        (lambda st: setattr(st, "base_busy", 9), "base-worker GPUs"),
        (lambda st: setattr(st, "n_loaned", 2), "loaned servers"),
        (lambda st: setattr(st, "busy_loaned", 5), "GPUs busy on loaned servers"),
        (lambda st: st.busy_by_pool.__setitem__(1, 7), "busy GPUs per pool"),
        (lambda st: st.loaned_gpus_by_pool.__setitem__(1, 16), "loaned GPUs per pool"),
        (lambda st: setattr(st, "loaned_gpus", 16), "loaned GPUs"),
        (lambda st: setattr(st, "last_reclaim_s", 3.0), "last reclaim time"),
    ],
)
def test_check_indexes_names_the_index_that_drifted(corrupt: Any, name: str) -> None:
    st = _busy_state()
    corrupt(st)
    with pytest.raises(AssertionError) as info:
        st.check_indexes()
    assert str(info.value) == f"{name} drifted"


def test_check_indexes_sees_a_drifted_queue_index() -> None:
    st = _busy_state()
    lst = st.sorted_queue("arrival", lambda s, j: s.arrival_s[j])
    assert lst == [(1.0, 2)]
    st.check_indexes()
    lst.append((5.0, 0))
    with pytest.raises(AssertionError) as info:
        st.check_indexes()
    assert str(info.value) == "queue index 'arrival' drifted"


def test_rebuild_refuses_inconsistent_placements() -> None:
    st = _busy_state()
    st.placement[1] = None
    assert message(st.rebuild_indexes) == "jobs[1] ('r'): running with no placement"
    st = _busy_state()
    st.workers[1] = 3
    assert message(st.rebuild_indexes) == "jobs[1] ('r'): workers 3 != placement 4"


def test_queue_indexes_follow_enqueue_and_start() -> None:
    st = _busy_state()
    def key(s: ClusterState, j: int) -> float:
        return -s.remaining_s[j]  # longest first

    assert st.sorted_queue("long", key) == [(-70.0, 2)]
    st.preempt(1, 11.0)  # r (50 s, 10 s done at speed 1, rolled back to its start: 50)
    assert st.sorted_queue("long", key) == [(-70.0, 2), (-50.0, 1)]
    st.start(2, {1: 4, 0: 4}, 12.0)
    assert st.sorted_queue("long", key) == [(-50.0, 1)]
    st.check_indexes()


def test_copy_is_independent() -> None:
    st = _busy_state()
    st.sorted_queue("arrival", lambda s, j: s.arrival_s[j])
    c = st.copy()
    c.preempt(0, 5.0)
    c.give_back(2, reclaimed=True, now=5.0)
    c.add_server("i2", role="inference", gpus=8)
    # the original is untouched
    assert st.jobs_on == [{0: 2}, {1: 4}, {0: 3}, {}]
    assert list(st.running) == [0, 1]
    assert list(st.queued) == [2]
    assert st.n_loaned == 1
    assert st.n_servers == 4
    assert st.servers_by_type == {"default": [0, 1, 2, 3]}
    assert st.qidx["arrival"][1] == [(1.0, 2)]
    st.check_indexes()
    c.check_indexes()
    assert c.qidx["arrival"][1] == [(0.0, 0), (1.0, 2)]
    assert c.servers_by_type == {"default": [0, 1, 2, 3, 4]}
    assert c.training_by_type == st.training_by_type == {"default": [0, 1]}
    c.training_by_type["default"].append(9)
    assert st.training_by_type == {"default": [0, 1]}


def test_job_index_maps_ids() -> None:
    st = _busy_state()
    assert st.job_index(["q", "e"]) == [2, 0]
    assert st.n_jobs == 3


# ------------------------------------------------------------------ speed model

def test_speed_model_refusals_and_description() -> None:
    assert message(SpeedModel, "V100", factors={"T4": 0.0}) == (
        "speed factors['T4']: must be a finite number > 0")
    assert message(SpeedModel, "V100", factors={"T4": math.inf}) == (
        "speed factors['T4']: must be a finite number > 0")
    assert message(SpeedModel, "V100", relative_speed_override={"T4": -1}) == (
        "speed relative_speed_override['T4']: must be a finite number > 0")
    assert message(SpeedModel, "V100", factors={"V100": 2.0}) == (
        "speed factors['V100']: the reference type's factor is 1")
    m = SpeedModel("V100", factors={"V100": 1, "T4": 0.5})  # the reference at 1: accepted
    assert m.factor("T4") == 0.5
    assert m.factor("A100") == 1.0  # types not listed run at factor 1
    assert not m.is_trivial
    assert SpeedModel("V100", factors={"T4": 1.0}).is_trivial
    assert m.to_dict() == {"reference_gpu_type": "V100", "factors": {"V100": 1.0, "T4": 0.5},
                           "table": None, "relative_speed_override": {}}
    # no table: a family cannot be looked up
    assert message(m.throughput, "bert", 0.1, "T4", 2, 1) == (
        "model family 'bert': no measured speed table given")


def test_parametric_throughput_by_hand() -> None:
    m = SpeedModel("V100", factors={"T4": 0.5})
    # T(3) at alpha 0.25 = 3 / 1.5 = 2; on T4 x 0.5
    assert m.throughput(None, 0.25, "V100", 3, 4) == 2.0
    assert m.throughput(None, 0.25, "T4", 3, 4) == 1.0
    assert m.throughput(None, 0.25, "T4", 0, 4) == 0.0
    assert m.throughput_row(None, 0.25, "V100", 0, 4, 2) == [0.0, 1.0, 2 / 1.25, 2.0]
    assert m.throughput_row(None, 0.25, "T4", 1, 3, 2) == [0.5, 0.5 * 2 / 1.25, 1.0]


def test_measured_throughput_is_relative_speed_times_scaling() -> None:
    from aryl.speeds import SpeedTable

    table = SpeedTable.bundled()
    fam = "imagenet"
    m = SpeedModel("V100", table=table, relative_speed_override={"A100": 3.0})
    rel_t4 = table.relative_speed(fam, "T4")
    # replicas = workers x GPUs per worker; 0 replicas: 0.  Counts up to 300 make the
    # model grow its look-up table past its first size
    for w, g in ((1, 1), (2, 2), (3, 8), (40, 2), (150, 2)):
        r = w * g
        assert m.throughput(fam, 0.7, "T4", w, g) == rel_t4 * table.scaling(fam, "T4", r)
        assert m.throughput(fam, 0.7, "A100", w, g) == 3.0 * table.scaling(fam, "A100", r)
    assert m.throughput(fam, 0.7, "T4", 0, 4) == 0.0
    row = m.throughput_row(fam, 0.1, "T4", 2, 5, 4)  # workers 2..6 of 4 GPUs
    assert row == [rel_t4 * table.scaling(fam, "T4", 4 * w) for w in range(2, 7)]
    fresh = SpeedModel("V100", table=table)
    big = fresh.throughput_row(fam, 0.1, "V100", 30, 10, 8)  # replicas 240 .. 312
    assert big == [table.scaling(fam, "V100", 8 * w) for w in range(30, 40)]
    assert fresh.throughput_row(fam, 0.1, "V100", 0, 2, 3) == [0.0, table.scaling(
        fam, "V100", 3)]
    assert fresh.to_dict()["table"] == "bundled"


def test_remaining_at_a_speed_other_than_one_and_its_floor() -> None:
    # 4 workers of 1 GPU, ref 2, alpha 0: speed T(4) / T(2) = 2 ref-s per s.  100 ref-s
    # at t = 10: at 30, 100 - 20 x 2 = 60; at 59.75, 0.5; at 60, 0 and never below
    st = ClusterState()
    st.add_server("t0", role="training", gpus=8)
    j = st.add_job("j", arrival_s=0.0, gpus_per_worker=1, ref_workers=2, remaining_s=100.0,
                   min_workers=1, max_workers=4, elastic=True, alpha=0.0)
    st.enqueue(j, 0.0)
    st.start(j, {0: 4}, 10.0)
    assert st.speed[j] == 2.0
    assert st.remaining_at(j, 10.0) == 100.0
    assert st.remaining_at(j, 30.0) == 60.0
    assert st.remaining_at(j, 59.75) == 0.5
    assert st.remaining_at(j, 60.0) == 0.0
    assert st.remaining_at(j, 500.0) == 0.0
    # work = ref-s x T(ref) = 0.5 x 2
    assert st.remaining_work(j, 59.75) == 1.0
    assert st.remaining_work_many([j], 59.75) == [1.0]
    assert st.remaining_work_many([j], 1e4) == [0.0]


def test_rebuild_of_a_state_without_servers() -> None:
    st = ClusterState()
    st.rebuild_indexes()
    assert st.last_reclaim_s == -math.inf
    assert (st.free, st.busy, st.n_loaned, st.loaned_gpus) == ([], 0, 0, 0)
    st.check_indexes()


def test_throughput_at_zero_workers_and_at_the_end_of_the_look_up_table() -> None:
    from aryl.speeds import SpeedTable

    m = SpeedModel("V100", factors={"T4": 0.5})
    # alpha 1: T(w) = w / w; 0 workers give 0 (not 0 / 0)
    assert m.throughput(None, 1.0, "T4", 0, 1) == 0.0
    assert m.throughput(None, 1.0, "T4", 3, 1) == 0.5
    table = SpeedTable.bundled()
    mm = SpeedModel("V100", table=table)
    assert mm.throughput("bert", 0.1, "V100", 1, 1) == table.scaling("bert", "V100", 1)
    # the first look-up table holds replicas 0 .. 64; 65 replicas is one past it
    assert mm.throughput("bert", 0.1, "V100", 65, 1) == table.scaling("bert", "V100", 65)
    assert mm.throughput("bert", 0.1, "V100", 0, 8) == 0.0


def test_a_job_of_a_model_family_runs_at_its_measured_speeds() -> None:
    from aryl.scheduling.kernels import throughput_rows
    from aryl.speeds import SpeedTable

    table = SpeedTable.bundled()
    st = ClusterState(speeds=SpeedModel("V100", table=table))
    st.add_server("v", role="training", gpus=8, gpu_type="V100")
    st.add_server("t", role="training", gpus=8, gpu_type="T4")
    j = st.add_job("j", arrival_s=0.0, gpus_per_worker=2, ref_workers=2, remaining_s=10.0,
                   min_workers=1, max_workers=3, elastic=True, alpha=0.3, family="bert")
    assert st.family == ["bert"]
    # the unit of work: 2 workers of 2 GPUs (4 replicas) on the reference type V100
    ref = table.scaling("bert", "V100", 4)
    assert st.ref_throughput[j] == ref
    # 3 workers (6 replicas) on T4: relative speed x scaling, over the reference
    t4 = table.relative_speed("bert", "T4") * table.scaling("bert", "T4", 6)
    assert st.speed_at(j, 3, {1: 3}) == t4 / ref
    rows = throughput_rows(st, [j], np.array([1]), np.array([3]), "T4")
    rel = table.relative_speed("bert", "T4")
    assert rows.tolist() == [[rel * table.scaling("bert", "T4", r) for r in (2, 4, 6)]]
