"""Benchmarks of one ``aryl.schedule`` call on a large cluster state (pytest-benchmark).

State (seeded), a busy cluster one pass after 50 jobs finished: 5,000 servers of
8 GPUs (4,000 training, 1,000 inference of which 300 on loan and 20 idle), 20,000
jobs (half elastic, 1/2/4/8 GPUs per worker), placed in arrival order by best fit
until the training and loaned servers are full (about 4,800 running), the rest
queued.
Cases, group ``schedule``:

* ``warm``  — repeated calls on one state (its queue index built once, as a
  cluster manager or the simulator keeping its state between passes has it);
* ``cold``  — a fresh copy of the state each call (the queue index is rebuilt);
* ``json``  — ``aryl plan``'s path: the state document parsed, then the pass.

The elastic phase runs on every call (no capacity memo).  Target (issue
"aryl.schedule"): a call under 50 ms.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np
import pytest

from aryl.scheduling import ClusterState, SchedulerConfig, schedule
from aryl.scheduling.jsonio import state_from_json, state_to_json
from aryl.scheduling.placement import bf_place

N_TRAIN, N_INF, N_LOANED, N_IDLE, N_JOBS, N_FINISHED = 4000, 1000, 300, 20, 20_000, 50


@functools.cache
def big_state(seed: int = 0) -> ClusterState:
    rng = np.random.default_rng(seed)
    st = ClusterState(now_s=1e6, config=SchedulerConfig(loan_reserve_servers=10))
    for i in range(N_TRAIN):
        st.add_server(f"t{i}", role="training", gpus=8)
    for i in range(N_INF):
        status = 3 if i >= N_INF - N_LOANED else (2 if i >= N_INF - N_LOANED - N_IDLE else 1)
        st.add_server(f"i{i}", role="inference", gpus=8, status=status)
    st.servers_needed = N_INF - N_LOANED - N_IDLE
    st.rebuild_indexes()
    free = list(st.free)
    groups = [st.training_servers, st.loaned_servers()]
    g_choices = np.array([1, 2, 4, 8])
    for k in range(N_JOBS):
        g = int(rng.choice(g_choices))
        ref = int(rng.integers(1, 5))
        elastic = bool(rng.random() < 0.5)
        mn = max(1, ref // 2) if elastic else ref
        mx = 2 * ref if elastic else ref
        j = st.add_job(f"j{k}", arrival_s=float(k), gpus_per_worker=g, ref_workers=ref,
                       remaining_s=float(rng.uniform(100, 1e5)), min_workers=mn,
                       max_workers=mx, elastic=elastic, alpha=float(rng.uniform(0, 0.3)))
        place = bf_place(free, groups, mn, g)  # elastic jobs at their base
        if place is None:
            st.enqueue(j, float(k))
        else:
            st.status[j] = 1
            st.queued[j] = None
            st.start(j, place, float(k))
    running = list(st.running)
    for i in rng.choice(len(running), N_FINISHED, replace=False).tolist():
        st.finish(running[i], st.now_s)
    return st


def test_the_state_is_large_and_busy() -> None:
    st = big_state()
    assert st.n_servers == 5000
    assert st.n_jobs == 20_000
    # 4,300 servers x 8 GPUs = 34,400 GPUs; a job's base is ~7 GPUs on average (g in
    # {1, 2, 4, 8}: 3.75; half elastic at ref // 2 workers, ref in 1..4): ~4,900 fit
    assert len(st.running) > 4_000
    assert len(st.queued) > 14_000
    assert sum(st.free[s] for s in st.training_servers) < 0.02 * 8 * N_TRAIN


@pytest.mark.benchmark(group="schedule")
def test_schedule_warm(benchmark: Any) -> None:
    st = big_state()
    schedule(st)  # builds the queue index once
    plan = benchmark(schedule, st)
    assert plan.now_s == st.now_s


@pytest.mark.benchmark(group="schedule")
def test_schedule_cold(benchmark: Any) -> None:
    base = big_state()

    def fresh() -> tuple[tuple[ClusterState], dict[str, Any]]:
        c = base.copy()
        c.qidx = {}
        return (c,), {}

    benchmark.pedantic(schedule, setup=fresh, rounds=5, iterations=1)


@pytest.mark.benchmark(group="schedule")
def test_schedule_from_json(benchmark: Any) -> None:
    text = json.dumps(state_to_json(big_state()))

    def run() -> Any:
        return schedule(state_from_json(text))

    benchmark.pedantic(run, rounds=3, iterations=1)
