"""The compiled ``aryl`` family pass against the Python pass, plan for plan.

``sched_aryl.hpp`` (C++) is a port of ``aryl.scheduling.aryl`` (Python, the
reference twin).  On random cluster states — one to three GPU types with
parametric or measured speeds, mixing allowed or not, training and inference
servers serving / idle / on loan, rigid and elastic jobs queued or running
(some with extra workers, some paused, some restarted), a reclaim due or not,
any elastic memo — ``aryl.schedule(backend="native")`` must return exactly the
plan of ``backend="reference"``: the same starts, resizes, preemptions, loans,
returns and reclaim actions, in the same order, with the same reasons and the
same placements in the same insertion order, the same elastic memo and repair
count (or the same error).
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aryl.scheduling import ClusterState, SchedulePlan, SchedulerConfig, schedule
from aryl.scheduling.native import ARYL_NATIVE
from aryl.scheduling.speed import SpeedModel
from aryl.scheduling.state import QUEUED, RUNNING
from aryl.speeds import SpeedTable

ARYL_FAMILY = ("aryl", "aryl-no-loan", "aryl-no-elastic", "elastic-greedy")

pytestmark = pytest.mark.skipif(not ARYL_NATIVE, reason="built without the aryl pass")


def random_state(rng: random.Random) -> ClusterState:
    """A cluster state between two passes (any reachable combination of the fields a
    pass reads; placements respect every server's capacity)."""
    now = 1000.0
    mode = rng.choice(["homogeneous", "homogeneous", "parametric", "measured"])
    speeds = None
    families: list[str | None] = [None]
    if mode == "measured":
        table = SpeedTable.bundled()
        types = rng.sample(["V100", "T4", "A100"], rng.randint(1, 3))
        speeds = SpeedModel(reference_gpu_type="V100", table=table)
        families = [None, *rng.sample(list(table.families), 2)]
    elif mode == "parametric":
        types = ["A", "B", "C"][: rng.randint(2, 3)]
        speeds = SpeedModel(reference_gpu_type="A", factors={
            t: rng.choice([0.25, 0.5, 1.0, 2.0]) for t in types[1:]})
    else:
        types = ["A", "B"][: rng.randint(1, 2)]
    cfg = SchedulerConfig(
        rescale_pause_s=rng.choice([0.0, 30.0, 7.5]),
        restart_cost_s=rng.choice([0.0, 60.0]),
        loan_reserve_servers=rng.choice([0, 1]),
        loan_cooldown_s=rng.choice([0.0, 600.0]),
        starvation_bound_s=rng.choice([math.inf, 300.0, 4 * 3600.0]),
        mix_gpu_types=rng.random() < 0.2,
    )
    cs = ClusterState(now_s=now, config=cfg, speeds=speeds)
    for i in range(rng.randint(1, 5)):
        cs.add_server(f"t{i}", role="training", gpus=rng.choice([4, 8, 8]),
                      gpu_type=rng.choice(types))
    n_inf = rng.randint(0, 5)
    for i in range(n_inf):
        cs.add_server(f"i{i}", role="inference", gpus=8, gpu_type=rng.choice(types),
                      status=rng.choice(["serving", "idle", "idle", "loaned", "loaned"]),
                      reclaimed_s=rng.choice([-math.inf, -math.inf, now - 100.0]))
    free = list(cs.free)
    usable = [s for s in range(cs.n_servers) if cs.server_status[s] in (0, 3)]
    for k in range(rng.randint(0, 12)):
        g = rng.choice([1, 1, 2, 4, 8])
        elastic = rng.random() < 0.6
        ref = rng.randint(1, 4)
        mn, mx = (rng.randint(1, ref), ref + rng.randint(0, 4)) if elastic else (ref, ref)
        arr = rng.uniform(0.0, now)
        rem = rng.choice([0.0, rng.uniform(1.0, 5e4), rng.uniform(1.0, 500.0)])
        j = cs.add_job(f"j{k}", arrival_s=arr, gpus_per_worker=g, ref_workers=ref, remaining_s=rem,
                       min_workers=mn, max_workers=mx, elastic=elastic,
                       alpha=rng.choice([0.0, 0.05, rng.uniform(0.0, 1.0)]),
                       family=rng.choice(families))
        cs.queued_since_s[j] = rng.uniform(arr, now)
        cs.waited_s[j] = rng.choice([0.0, rng.uniform(0.0, 500.0)])
        cs.restarted[j] = rng.random() < 0.2
        cs.attained_gpu_s[j] = rng.uniform(0.0, 1e5)
        place: dict[int, int] | None = None
        if rng.random() < 0.6:  # try to run it on random servers with room
            srv = list(usable)
            rng.shuffle(srv)
            if len(types) > 1 and not cfg.mix_gpu_types and rng.random() < 0.8:
                t = rng.choice(types)
                srv = [s for s in srv if cs.server_gpu_type[s] == t]
            left = rng.randint(mn, mx)
            p: dict[int, int] = {}
            for s in srv:
                take = min(free[s] // g, left, rng.randint(1, left))
                if take > 0:
                    p[s] = take
                    left -= take
                if not left:
                    break
            if not left:
                place = p
                for s, c in p.items():
                    free[s] -= c * g
        if place is None:
            cs.status[j] = QUEUED
            cs.queued[j] = None
            continue
        cs.status[j] = RUNNING
        cs.running[j] = None
        cs.placement[j] = place
        cs.workers[j] = sum(place.values())
        cs.speed[j] = cs.speed_at(j, cs.workers[j], place)
        cs.progress_at_s[j] = rng.choice([now, now - 200.0, now + 20.0])  # + paused
        cs.attained_at_s[j] = now - 100.0
        cs.next_checkpoint_s[j] = rng.choice([math.inf, now - 50.0, now + 500.0])
    cs.rebuild_indexes()
    below = list(cs.below)  # any order in which the jobs went below their maximum
    rng.shuffle(below)
    cs.below = {j: None for j in below}
    cs.servers_needed = rng.randint(0, n_inf)
    cs.reclaim_deadline_s = rng.choice([math.inf, now, now - 5.0, now + 100.0])
    if rng.random() < 0.5:
        cs.elastic_memo = (rng.randint(-1, 20), rng.randint(-1, 4))
    if rng.random() < 0.5:  # per-rise reclaim requests, some due, some pending
        cs.reclaim_requests = sorted(
            (rng.choice([now - 5.0, now, now + 100.0, now + 400.0]), rng.randint(1, 2))
            for _ in range(rng.randint(1, 3)))
    return cs


def plan_tuple(plan: SchedulePlan) -> tuple[Any, ...]:
    """Every field of a plan; placements as (server, workers) lists in insertion order."""
    def pl(p: dict[int, int] | None) -> list[tuple[int, int]] | None:
        return None if p is None else list(p.items())

    return (
        plan.now_s,
        [(j, pl(p), int(r)) for j, p, r in plan.reclaim_actions],
        list(plan.reclaimed_servers), plan.reclaim_shortfall,
        [(s, int(r)) for s, r in plan.borrowed_servers],
        [(j, int(r)) for j, r in plan.preemptions],
        [(j, pl(p), int(r)) for j, p, r in plan.resizes],
        [(j, pl(p), int(r)) for j, p, r in plan.starts],
        [(s, int(r)) for s, r in plan.returned_servers],
        tuple(plan.elastic_memo), plan.n_extra_repairs, plan.next_wakeup_s,
    )


def outcome(cs: ClusterState, policy: str, backend: str, options: dict[str, Any] | None) -> Any:
    try:
        return plan_tuple(schedule(cs, policy=policy, options=options, backend=backend))
    except Exception as exc:  # the same error either way
        return ("error", type(exc).__name__)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), policy=st.sampled_from(ARYL_FAMILY),
       options=st.sampled_from([None, {"return_idle_loans": False},
                                {"starvation_bound_s": 0.0}]))
def test_native_pass_gives_the_python_plan(
    rng: random.Random, policy: str, options: dict[str, Any] | None
) -> None:
    cs = random_state(rng)
    if options and "starvation_bound_s" in options and policy == "aryl-no-elastic":
        options = dict(options, return_idle_loans=rng.random() < 0.5)
    want = outcome(cs, policy, "reference", options)
    got = outcome(cs, policy, "native", options)
    assert got == want


def test_random_states_reach_every_branch_of_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator is worth its name: over 200 states and the four policies the
    Python pass takes every branch the differential test is meant to cover."""
    from aryl.scheduling import aryl as A

    seen: set[str] = set()
    orig_phase = A.ArylPass.elastic_phase
    orig_gate = A.ArylPass.loan_worth_it
    orig_run = A.ArylPass.run

    def phase(self: Any, d: Any, free: Any, *a: Any, **kw: Any) -> bool:
        ok = orig_phase(self, d, free, *a, **kw)
        typed = kw.get("gpu_type") is not None
        seen.add(f"phase typed={typed} fast={kw.get('unconstrained_only', False)} ok={ok}")
        return ok

    def gate(self: Any, *a: Any) -> bool:
        ok = orig_gate(self, *a)
        seen.add(f"loan gate {ok}")
        return ok

    def run(self: Any, d: Any) -> None:
        orig_run(self, d)
        seen.update(k for k, v in (("displaced", self.displaced), ("repair", d.n_extra_repairs),
                                   ("resize", d.resizes), ("reclaim", d.reclaim_actions))
                    if v)

    monkeypatch.setattr(A.ArylPass, "elastic_phase", phase)
    monkeypatch.setattr(A.ArylPass, "loan_worth_it", gate)
    monkeypatch.setattr(A.ArylPass, "run", run)
    for seed in range(200):
        for policy in ARYL_FAMILY:
            plan = schedule(random_state(random.Random(seed)), policy=policy, backend="reference")
            if plan.borrowed_servers:
                seen.add("borrow")
    assert seen >= {
        "phase typed=False fast=False ok=True", "phase typed=False fast=True ok=True",
        "phase typed=True fast=False ok=True", "phase typed=True fast=True ok=True",
        "phase typed=True fast=True ok=False", "loan gate True", "loan gate False",
        "displaced", "repair", "resize", "reclaim", "borrow",
    }
