"""aryl.reclaim under hypothesis: plan invariants, native == reference, exact is optimal."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from aryl.reclaiming import RECLAIM_POLICIES, ActionKind, ReclaimPlan, ReclaimRequest, reclaim


def random_request(seed: int, *, max_servers: int = 7, max_jobs: int = 10) -> ReclaimRequest:
    """Small random instance: 4/8-GPU servers, jobs spanning up to 3 servers, some elastic,
    some non-preemptible, some with workers outside the loaned servers, GPU types."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, max_servers + 1))
    ids = rng.choice(100, size=m, replace=False)
    gpus = rng.choice([4, 8], size=m)
    free = gpus.copy()
    jobs, placements = [], []
    for j in range(int(rng.integers(0, max_jobs + 1))):
        g = int(rng.choice([1, 2]))
        placed = 0
        for s in rng.choice(m, size=int(rng.integers(1, min(m, 3) + 1)), replace=False):
            if free[s] >= g:
                w = int(rng.integers(1, min(free[s] // g, 4) + 1))
                free[s] -= w * g
                placements.append((100 + j, int(ids[s]), w))
                placed += w
        total = max(placed + int(rng.integers(0, 4)), 1)
        elastic = bool(rng.random() < 0.5)
        base = int(rng.integers(1, total + 1)) if elastic else total
        jobs.append((100 + j, total, g, base, elastic, bool(rng.random() < 0.85)))
    typed = bool(rng.random() < 0.3)
    types = rng.choice(["A100", "T4"], size=m)
    return ReclaimRequest.from_records(
        servers=[(int(i), int(c), str(t)) if typed else (int(i), int(c))
                 for i, c, t in zip(ids, gpus, types, strict=True)],
        jobs=jobs,
        placements=placements,
        n_servers=int(rng.integers(0, m + 2)),
        gpu_type="A100" if typed and rng.random() < 0.7 else None,
    )


def _loads(req: ReclaimRequest) -> dict[tuple[int, int], int]:
    """(job id, server id) -> workers."""
    return {
        (int(req.job_id[j]), int(s)): int(w)
        for j, s, w in zip(req.placement_job, req.placement_server, req.placement_workers,
                           strict=True)
    }


def check_plan(req: ReclaimRequest, plan: ReclaimPlan) -> None:
    """Invariants every policy's plan must satisfy, computed from the request alone."""
    loads = _loads(req)
    total = dict(zip(req.job_id.tolist(), req.job_workers.tolist(), strict=True))
    base = dict(zip(req.job_id.tolist(), req.job_min_workers.tolist(), strict=True))
    elastic = dict(zip(req.job_id.tolist(), req.job_elastic.tolist(), strict=True))
    preemptible = dict(zip(req.job_id.tolist(), req.job_preemptible.tolist(), strict=True))
    shed = {j: total[j] - base[j] if elastic[j] else 0 for j in total}
    returned = plan.servers.tolist()
    allowed = {
        int(s) for i, s in enumerate(req.server_id)
        if req.gpu_type is None or req.server_gpu_type[i] == req.gpu_type  # type: ignore[index]
    }
    # Count and membership.
    assert len(returned) == len(set(returned))
    assert len(returned) + plan.shortfall == req.n_servers
    assert set(returned) <= allowed
    assert plan.server_costs.shape == plan.servers.shape
    assert (plan.server_costs >= 0).all()
    # Jobs: touched exactly if they have workers on a returned server; preempted iff
    # those workers exceed what they can shed (whatever the order servers are taken in).
    x: dict[int, int] = {}
    for (j, s), w in loads.items():
        if s in returned:
            x[j] = x.get(j, 0) + w
    preempted = plan.preempted_jobs.tolist()
    scaled = dict(zip(plan.scaled_jobs.tolist(), plan.scaled_new_workers.tolist(), strict=True))
    assert len(preempted) == len(set(preempted))
    assert set(preempted).isdisjoint(scaled)
    assert set(preempted) | set(scaled) == set(x)
    for j, xj in x.items():
        if xj > shed[j]:
            assert j in preempted
            assert preemptible[j]
        else:
            assert scaled[j] == total[j] - xj >= base[j]
    # Actions agree with the lists.
    acts = plan.actions
    assert [a.server_id for a in acts if a.kind == ActionKind.RETURN] == returned
    assert [a.job_id for a in acts if a.kind == ActionKind.PREEMPT] == preempted
    assert {a.job_id for a in acts if a.kind == ActionKind.SCALE_IN} >= set(scaled)
    # Exactly min(n, eligible) servers when eligibility cannot change (every
    # non-preemptible job has nothing to shed, so it blocks its servers for good).
    if all(shed[j] == 0 for j in total if not preemptible[j]):
        blocked = {s for (j, s) in loads if not preemptible[j]}
        assert len(returned) == min(req.n_servers, len(allowed - blocked))
    # Shortfall only when every remaining server of the right type is blocked by a
    # non-preemptible job that cannot shed its workers there any more.
    if plan.shortfall:
        final = {j: scaled.get(j, total[j]) for j in total}
        budget = {j: final[j] - base[j] if elastic[j] else 0 for j in total}
        for s in allowed - set(returned):
            assert any(
                sid == s and not preemptible[j] and w > budget[j]
                for (j, sid), w in loads.items()
            ), f"server {s} was eligible but not returned"


def _static_cost(req: ReclaimRequest) -> dict[int, tuple[int, int, int, int]]:
    """Independent cost key of every eligible server before anything is taken."""
    loads = _loads(req)
    jobs = {int(j): i for i, j in enumerate(req.job_id)}
    keys = {}
    for i, s in enumerate(req.server_id.tolist()):
        if req.gpu_type is not None and req.server_gpu_type[i] != req.gpu_type:  # type: ignore[index]
            continue
        cost, touched, busy, ok = 0.0, 0, 0, True
        for (j, sid), w in loads.items():
            if sid != s:
                continue
            k = jobs[j]
            shed = req.job_workers[k] - req.job_min_workers[k] if req.job_elastic[k] else 0
            touched += 1
            busy += w * int(req.job_gpus_per_worker[k])
            if w > shed:
                ok = ok and bool(req.job_preemptible[k])
                cost += w / int(req.job_workers[k])
        if ok:
            keys[s] = (round(cost * 1e9), touched, busy, s)
    return keys


def _equal(a: ReclaimPlan, b: ReclaimPlan) -> None:
    for name in ("servers", "server_costs", "preempted_jobs", "scaled_jobs",
                 "scaled_new_workers", "action_server", "action_job", "action_kind",
                 "action_reason", "action_workers"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.shortfall == b.shortfall


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_greedy_invariants_and_native_equals_reference(seed: int) -> None:
    req = random_request(seed)
    native = reclaim(req)
    check_plan(req, native)
    _equal(native, reclaim(req, backend="reference"))
    keys = _static_cost(req)
    if native.servers.size:
        assert int(native.servers[0]) == min(keys, key=keys.__getitem__)
        first = keys[int(native.servers[0])]
        assert round(float(native.server_costs[0]) * 1e9) == first[0]


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_every_policy_keeps_the_invariants_and_exact_is_best(seed: int) -> None:
    req = random_request(seed, max_servers=6, max_jobs=8)
    plans = {p: reclaim(req, policy=p, seed=seed) for p in RECLAIM_POLICIES}
    for plan in plans.values():
        check_plan(req, plan)
    exact = plans["exact"]
    for name, plan in plans.items():
        assert exact.n_returned >= plan.n_returned, name
        if exact.n_returned == plan.n_returned:
            assert exact.n_preemptions <= plan.n_preemptions, name
    # Independent brute force over server sets of the size exact returned.
    assert exact.n_preemptions == _brute_force_min_preemptions(req, exact.n_returned)


def _brute_force_min_preemptions(req: ReclaimRequest, k: int) -> int:
    loads = _loads(req)
    idx = {int(j): i for i, j in enumerate(req.job_id)}
    servers = [
        int(s) for i, s in enumerate(req.server_id)
        if req.gpu_type is None or req.server_gpu_type[i] == req.gpu_type  # type: ignore[index]
    ]
    best = None
    for subset in itertools.combinations(servers, k):
        x: dict[int, int] = {}
        for (j, s), w in loads.items():
            if s in subset:
                x[j] = x.get(j, 0) + w
        pre, ok = 0, True
        for j, xj in x.items():
            i = idx[j]
            shed = req.job_workers[i] - req.job_min_workers[i] if req.job_elastic[i] else 0
            if xj > shed:
                pre += 1
                ok = ok and bool(req.job_preemptible[i])
        if ok and (best is None or pre < best):
            best = pre
    assert best is not None
    return best


class ChainedReclaims(RuleBasedStateMachine):
    """Reclaim again and again from what the previous plan left, native and reference
    in lockstep; every plan keeps the invariants and the cluster only shrinks."""

    def __init__(self) -> None:
        super().__init__()
        self.req = random_request(0)

    @initialize(seed=st.integers(0, 2**32 - 1))
    def start(self, seed: int) -> None:
        self.req = random_request(seed, max_servers=10, max_jobs=16)

    @rule(n=st.integers(0, 3), policy=st.sampled_from(sorted(RECLAIM_POLICIES)))
    def reclaim_some(self, n: int, policy: str) -> None:
        req = self.req.replace(n_servers=n)
        plan = reclaim(req, policy=policy, seed=n)
        check_plan(req, plan)
        if policy == "aryl":
            _equal(plan, reclaim(req, backend="reference"))
        before = (req.server_id.size, req.job_id.size)
        self.req = plan.apply_to(req)
        assert self.req.server_id.size == before[0] - plan.n_returned
        assert self.req.job_id.size == before[1] - plan.n_preemptions
        assert not np.isin(plan.servers, self.req.server_id).any()

    @invariant()
    def loads_fit(self) -> None:
        placed = np.bincount(self.req.placement_job, weights=self.req.placement_workers,
                             minlength=self.req.job_id.size)
        assert (placed <= self.req.job_workers).all()
        assert (self.req.job_workers >= self.req.job_min_workers).all()


ChainedReclaims.TestCase.settings = settings(
    max_examples=40, stateful_step_count=8, deadline=None
)
test_chained_reclaims = ChainedReclaims.TestCase
