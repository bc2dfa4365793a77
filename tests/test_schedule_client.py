"""A cluster manager that is not the simulator drives ``aryl.schedule`` and gets the
simulator's numbers exactly; its states and plans round-trip through JSON.

The manager below keeps its own :class:`aryl.ClusterState`, built with the public
constructors only: it adds jobs as they arrive, finishes them when their work is
done, follows an inference-demand step series, calls :func:`aryl.schedule` once
per instant with something new, and applies each plan.  Its event loop is its
own (same documented order: finishes, demand changes, arrivals, then one pass).
On a 500-job slice of itp-c07 (half the jobs elastic) on a small cluster with
loans and reclaims, every job's first start and finish equal the simulator's
to the last bit.  At every pass the state and the plan also go through their
JSON documents (and are checked against the published JSON Schemas), and the
plan computed from the reloaded state equals the original one.
"""

from __future__ import annotations

import heapq
import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import aryl
from aryl.scheduling import ClusterState, SchedulerConfig, schedule
from aryl.scheduling.jsonio import plan_to_json, state_from_json, state_to_json
from aryl.scheduling.schema import plan_schema, state_schema
from aryl.traces import load_trace, synthesize_elastic
from aryl.traces.inference import InferenceDemand

N_TRAIN, N_INF, S = 4, 3, 8


@pytest.fixture(scope="module")
def jobs() -> pd.DataFrame:
    tr = load_trace("itp-c07")
    tr = tr.replace(jobs=tr.jobs.iloc[2000:2500].reset_index(drop=True))
    return synthesize_elastic(tr, elastic_fraction=0.5, seed=4).jobs


@pytest.fixture(scope="module")
def demand(jobs: pd.DataFrame) -> InferenceDemand:
    """Inference servers needed: a seeded step every 30 minutes over the slice's span."""
    t0 = float(jobs["submit_time_s"].iloc[0])
    span = float(jobs["submit_time_s"].iloc[-1] - t0) + 40 * 86400.0
    times = t0 + np.arange(0.0, span, 1800.0)
    rng = np.random.default_rng(11)
    return InferenceDemand(times, rng.integers(0, N_INF + 1, times.size), n_servers=N_INF)


class Manager:
    """A minimal cluster manager around aryl.schedule (no simulator code)."""

    def __init__(self, jobs: pd.DataFrame, demand: InferenceDemand, policy: str,
                 check_json: bool) -> None:
        self.policy = policy
        self.check_json = check_json
        self.st = ClusterState(config=SchedulerConfig(loan_reserve_servers=0))
        for i in range(N_TRAIN):
            self.st.add_server(f"train-{i}", role="training", gpus=S)
        for i in range(N_INF):
            self.st.add_server(f"infer-{i}", role="inference", gpus=S, status="serving")
        self.jobs = jobs.to_dict("records")
        self.demand = list(zip(demand.times_s.tolist(), demand.servers_needed.tolist(),
                               strict=True))
        self.finish_heap: list[tuple[float, int, int]] = []  # (time, seq, job)
        self.live: dict[int, int] = {}  # job -> seq of its live finish entry
        self.seq = 0
        self.first_start: dict[str, float] = {}
        self.finish: dict[str, float] = {}
        self.n_passes = 0
        self.n_reclaims = 0

    def _expect_finish(self, j: int) -> None:
        st = self.st
        t = st.progress_at_s[j] + st.remaining_s[j] / st.speed[j]
        self.seq += 1
        self.live[j] = self.seq
        heapq.heappush(self.finish_heap, (t, self.seq, j))

    def _arrive(self, row: dict[str, Any], now: float) -> None:
        st = self.st
        g = int(row["gpus_per_worker"])
        ref = int(row["gpus"]) // g
        elastic = bool(row["elastic"])
        base = int(row["min_workers"]) if elastic else ref
        j = st.add_job(
            str(row["job_id"]), arrival_s=float(row["submit_time_s"]), gpus_per_worker=g,
            ref_workers=ref, remaining_s=float(row["duration_s"]),
            min_workers=int(row["min_workers"]), max_workers=int(row["max_workers"]),
            elastic=elastic, alpha=float(row["alpha"]),
        )
        if g > S or base * g > N_TRAIN * S:
            st.status[j] = 4  # can never fit: never queued (as documented)
            return
        st.enqueue(j, now)

    def _pass(self, now: float) -> None:
        st = self.st
        st.now_s = now
        plan = schedule(st, policy=self.policy)
        self.n_passes += 1
        self.n_reclaims += len(plan.reclaimed_servers)
        if self.check_json:
            self._check_json(plan)
        plan.apply(st, inplace=True)
        st.reclaim_deadline_s = math.inf
        for j, _, _ in plan.starts:
            self.first_start.setdefault(st.job_id[j], now)
        # a preempted job's finish is void; a started or resized job's finish moves
        for j, _ in plan.preemptions:
            self.live.pop(j, None)
        for j, place, _ in plan.reclaim_actions:
            if place is None:
                self.live.pop(j, None)
            elif j in st.running:
                self._expect_finish(j)
        for j, _, _ in plan.resizes:
            self._expect_finish(j)
        for j, _, _ in plan.starts:
            self._expect_finish(j)

    def _check_json(self, plan: aryl.SchedulePlan) -> None:
        doc = state_to_json(self.st)
        text = json.dumps(doc)
        again = state_from_json(text)
        assert json.dumps(state_to_json(again)) == text
        p_doc = plan_to_json(plan, self.st)
        if self.n_passes % 10 == 1:  # the schema check is slow in pure Python
            _STATE_VALIDATOR.validate(doc)
            _PLAN_VALIDATOR.validate(p_doc)
        p2 = plan_to_json(schedule(again, policy=self.policy), again)
        assert p2 == p_doc

    def run(self) -> None:
        st = self.st
        arrivals = self.jobs
        a = 0
        d = 0
        deadline_due = False
        now = -math.inf
        while a < len(arrivals) or self.finish_heap or st.queued:
            t = min(
                self.finish_heap[0][0] if self.finish_heap else math.inf,
                float(arrivals[a]["submit_time_s"]) if a < len(arrivals) else math.inf,
                self.demand[d][0] if d < len(self.demand) else math.inf,
            )
            if t == math.inf:
                raise AssertionError("stalled")
            if a == 0 and now == -math.inf:
                t = float(arrivals[0]["submit_time_s"])  # the clock starts at the first arrival
            now = t
            changed = False
            while self.finish_heap and self.finish_heap[0][0] <= now:
                _, seq, j = heapq.heappop(self.finish_heap)
                if self.live.get(j) != seq:
                    continue
                del self.live[j]
                st.advance(j, now)
                st.finish(j, now)
                self.finish[st.job_id[j]] = now
                changed = True
            while d < len(self.demand) and self.demand[d][0] <= now:
                st.servers_needed = int(self.demand[d][1])
                d += 1
                if st.servers_needed > st.not_loaned():
                    deadline_due = True  # grace period 0: due now
                st.set_serving()
                changed = True
            while a < len(arrivals) and float(arrivals[a]["submit_time_s"]) <= now:
                self._arrive(arrivals[a], now)
                a += 1
                changed = True
            if changed:
                st.reclaim_deadline_s = now if deadline_due else math.inf
                deadline_due = False
                self._pass(now)
            if a >= len(arrivals) and not self.finish_heap and not st.queued:
                break


@pytest.mark.parametrize(("policy", "check_json"), [("aryl", False), ("fifo", False)])
def test_a_client_reproduces_the_simulator_exactly(
    jobs: pd.DataFrame, demand: InferenceDemand, policy: str, check_json: bool
) -> None:
    mgr = Manager(jobs, demand, policy, check_json)
    mgr.run()
    res = aryl.simulate(jobs, policy=policy, inference=demand, config=aryl.SimConfig(
        n_training_servers=N_TRAIN, n_inference_servers=N_INF, loan_reserve_servers=0))
    done = res.jobs[res.jobs["status"] == "finished"]
    assert len(done) == len(mgr.finish) > 400
    got_start = np.array([mgr.first_start[x] for x in done["job_id"]])
    got_finish = np.array([mgr.finish[x] for x in done["job_id"]])
    np.testing.assert_array_equal(got_start, done["first_start_s"].to_numpy())
    np.testing.assert_array_equal(got_finish, done["finish_s"].to_numpy())
    if policy == "aryl":  # the slice exercises loans, reclaims and elastic resizes
        assert res.summary["n_loans"] > 0
        assert res.summary["n_reclaims"] == mgr.n_reclaims > 0
        assert res.summary["n_scale_out"] > 0


_STATE_VALIDATOR: Any = None
_PLAN_VALIDATOR: Any = None


def test_states_and_plans_round_trip_through_json(
    jobs: pd.DataFrame, demand: InferenceDemand
) -> None:
    js = pytest.importorskip("jsonschema")
    global _STATE_VALIDATOR, _PLAN_VALIDATOR
    _STATE_VALIDATOR = js.Draft202012Validator(state_schema())
    _PLAN_VALIDATOR = js.Draft202012Validator(plan_schema())
    mgr = Manager(jobs.iloc[:150].reset_index(drop=True), demand, "aryl", check_json=True)
    mgr.run()
    assert mgr.n_passes > 100
    assert mgr.n_reclaims > 0
