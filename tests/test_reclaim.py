"""aryl.reclaim: hand scenarios, tie rules, validation, policies (native and reference)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from aryl._core import _reclaim
from aryl.errors import InvalidInputError
from aryl.reclaiming import (
    EXACT_MAX_SUBSETS,
    RECLAIM_POLICIES,
    ActionKind,
    ReclaimAction,
    ReclaimReason,
    ReclaimRequest,
    reclaim,
)

BACKENDS = ["native", "reference"]


def _scenario_a(order: tuple[int, int, int] = (0, 1, 2), n: int = 1) -> ReclaimRequest:
    """Server 1: four 2-GPU jobs; server 2: one 1-GPU job; server 3: one 8-GPU job."""
    servers = [(1, 8), (2, 8), (3, 8)]
    return ReclaimRequest.from_records(
        servers=[servers[i] for i in order],
        jobs=[(10, 1, 2), (11, 1, 2), (12, 1, 2), (13, 1, 2), (20, 1, 1), (30, 1, 8)],
        placements=[(10, 1, 1), (11, 1, 1), (12, 1, 1), (13, 1, 1), (20, 2, 1), (30, 3, 1)],
        n_servers=n,
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_a_single_small_job_goes_first(backend: str, order: tuple[int, int, int]) -> None:
    plan = reclaim(_scenario_a(order), backend=backend)
    # Costs: server 1 = 4 x 1.0, server 2 = 1.0, server 3 = 1.0; tie 2 vs 3 on one job
    # each, broken by busy GPUs (1 < 8).
    assert plan.servers.tolist() == [2]
    assert plan.server_costs.tolist() == [1.0]
    assert plan.preempted_jobs.tolist() == [20]
    assert plan.n_preemptions == 1
    assert plan.scaled_jobs.size == 0
    assert plan.shortfall == 0
    assert plan.actions == (
        ReclaimAction(2, None, ActionKind.RETURN, 0, ReclaimReason.SELECTED),
        ReclaimAction(2, 20, ActionKind.PREEMPT, 1, ReclaimReason.RIGID_JOB),
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_all_three_in_cost_order(backend: str) -> None:
    plan = reclaim(_scenario_a(n=3), backend=backend)
    assert plan.servers.tolist() == [2, 3, 1]
    assert plan.server_costs.tolist() == [1.0, 1.0, 4.0]
    assert plan.preempted_jobs.tolist() == [20, 30, 10, 11, 12, 13]


@pytest.mark.parametrize("backend", BACKENDS)
def test_equal_cost_equal_jobs_equal_gpus_lower_id(backend: str) -> None:
    req = ReclaimRequest.from_records(
        servers=[(9, 8), (4, 8), (7, 8)],
        jobs=[(1, 2), (2, 2), (3, 2)],
        placements=[(1, 9, 2), (2, 4, 2), (3, 7, 2)],
        n_servers=2,
    )
    plan = reclaim(req, backend=backend)
    assert plan.servers.tolist() == [4, 7]


@pytest.mark.parametrize("backend", BACKENDS)
def test_equal_cost_fewer_jobs_touched_wins(backend: str) -> None:
    # Server 1: halves of two 2-worker jobs (0.5 + 0.5 = 1, two jobs);
    # server 2: one whole 1-worker job (1, one job).
    req = ReclaimRequest.from_records(
        servers=[(1, 8), (2, 8)],
        jobs=[(10, 2), (11, 2), (20, 1)],
        placements=[(10, 1, 1), (11, 1, 1), (20, 2, 1)],
        n_servers=1,
    )
    plan = reclaim(req, backend=backend)
    assert plan.servers.tolist() == [2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_costs_compare_after_rounding(backend: str) -> None:
    # Server 7: 1/10 + 2/10 = 0.30000000000000004 in floats; server 3: 3/20 + 3/20 = 0.3.
    # Rounded to 1e-9 they tie, as do the job counts (2 and 2), so fewer busy GPUs
    # (3 < 6) decides: server 7, although its id is higher and its float sum larger.
    req = ReclaimRequest.from_records(
        servers=[(3, 8), (7, 8)],
        jobs=[(1, 10), (2, 10), (3, 20), (4, 20)],
        placements=[(1, 7, 1), (2, 7, 2), (3, 3, 3), (4, 3, 3)],
        n_servers=1,
    )
    plan = reclaim(req, backend=backend)
    assert 1 / 10 + 2 / 10 > 3 / 20 + 3 / 20
    assert plan.servers.tolist() == [7]


def _scenario_b(n: int = 3) -> ReclaimRequest:
    """A rigid 24-GPU job over servers 1-3; rigid 8-GPU jobs alone on servers 4 and 5."""
    return ReclaimRequest.from_records(
        servers=[(5, 8), (4, 8), (3, 8), (2, 8), (1, 8)],
        jobs=[(100, 3, 8), (200, 1, 8), (300, 1, 8)],
        placements=[(100, 1, 1), (100, 2, 1), (100, 3, 1), (200, 4, 1), (300, 5, 1)],
        n_servers=n,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_b_spanning_job_servers_go_together(backend: str) -> None:
    plan = reclaim(_scenario_b(), backend=backend)
    assert plan.servers.tolist() == [1, 2, 3]
    np.testing.assert_allclose(plan.server_costs, [1 / 3, 0.0, 0.0])
    assert plan.preempted_jobs.tolist() == [100]
    assert [a.reason for a in plan.actions] == [
        ReclaimReason.SELECTED, ReclaimReason.RIGID_JOB,
        ReclaimReason.IDLE_SERVER, ReclaimReason.IDLE_SERVER,
    ]
    # The preemption removes the job's 3 workers everywhere.
    assert plan.actions[1].workers_removed == 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("base", "preempted", "scaled"), [(8, [], [(7, 8)]), (12, [7], [])])
def test_c_elastic_job_shrinks_or_dies(
    backend: str, base: int, preempted: list[int], scaled: list[tuple[int, int]]
) -> None:
    # 16 workers, 8 of them on the loaned server (the rest in the training cluster).
    req = ReclaimRequest.from_records(
        servers=[(1, 8)],
        jobs=[{"id": 7, "workers": 16, "min_workers": base, "elastic": True}],
        placements=[(7, 1, 8)],
        n_servers=1,
    )
    plan = reclaim(req, backend=backend)
    assert plan.preempted_jobs.tolist() == preempted
    got = zip(plan.scaled_jobs.tolist(), plan.scaled_new_workers.tolist(), strict=True)
    assert list(got) == scaled
    assert plan.server_costs.tolist() == ([0.0] if base == 8 else [0.5])
    kinds = [a.kind for a in plan.actions if a.job_id is not None]
    assert kinds == ([ActionKind.SCALE_IN] if base == 8 else [ActionKind.PREEMPT])
    reasons = [a.reason for a in plan.actions if a.job_id is not None]
    assert reasons == ([ReclaimReason.ELASTIC_SHED] if base == 8 else [ReclaimReason.BELOW_BASE])


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_shed_budget_raises_costs(backend: str) -> None:
    # Elastic job 16 workers, base 8, 4 workers on each of servers 1-3: the first two
    # shed (budget 8 -> 4 -> 0), then server 3 would preempt it (cost 4/8 = 0.5).
    # Server 4 holds a rigid job alone (cost 1).
    records = {
        "servers": [(1, 8), (2, 8), (3, 8), (4, 8)],
        "jobs": [(7, 16, 1, 8, True), (8, 1, 8)],
        "placements": [(7, 1, 4), (7, 2, 4), (7, 3, 4), (8, 4, 1)],
    }
    plan = reclaim(ReclaimRequest.from_records(**records, n_servers=3), backend=backend)
    assert plan.servers.tolist() == [1, 2, 3]
    assert plan.server_costs.tolist() == [0.0, 0.0, 0.5]
    assert plan.preempted_jobs.tolist() == [7]
    assert plan.scaled_jobs.size == 0  # scaled in twice, then preempted
    assert [a.kind for a in plan.actions if a.job_id == 7] == [
        ActionKind.SCALE_IN, ActionKind.SCALE_IN, ActionKind.PREEMPT,
    ]
    plan2 = reclaim(ReclaimRequest.from_records(**records, n_servers=2), backend=backend)
    assert plan2.preempted_jobs.size == 0
    assert plan2.scaled_jobs.tolist() == [7]
    assert plan2.scaled_new_workers.tolist() == [8]


def _scenario_d(n: int) -> ReclaimRequest:
    # Server 1 is idle but of the wrong GPU type; server 2 holds a non-preemptible rigid
    # job on 1 of its 10 workers (cost 0.1, the cheapest busy one); servers 3 and 4
    # hold rigid jobs alone (cost 1).
    return ReclaimRequest.from_records(
        servers=[(1, 8, "T4"), (2, 8, "A100"), (3, 8, "A100"), (4, 8, "A100")],
        jobs=[(20, 10, 1, 10, False, False), (30, 1, 8), (40, 2, 4)],
        placements=[(20, 2, 1), (30, 3, 1), (40, 4, 2)],
        n_servers=n,
        gpu_type="A100",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_d_ineligible_cheapest_is_skipped(backend: str) -> None:
    plan = reclaim(_scenario_d(1), backend=backend)
    assert plan.servers.tolist() == [3]  # 3 and 4 tie at cost 1 and 1 job, 8 GPUs: lower id
    assert plan.shortfall == 0
    plan = reclaim(_scenario_d(4), backend=backend)
    assert plan.servers.tolist() == [3, 4]
    assert plan.shortfall == 2
    assert sorted(plan.preempted_jobs.tolist()) == [30, 40]


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_preemptible_elastic_job_budget_limits_returns(backend: str) -> None:
    # A non-preemptible elastic job can shed 4 workers: either server, not both.
    req = ReclaimRequest.from_records(
        servers=[(1, 8), (2, 8)],
        jobs=[{"id": 5, "workers": 12, "min_workers": 8, "elastic": True, "preemptible": False}],
        placements=[(5, 1, 4), (5, 2, 4)],
        n_servers=2,
    )
    plan = reclaim(req, backend=backend)
    assert plan.servers.tolist() == [1]
    assert plan.shortfall == 1
    assert plan.scaled_jobs.tolist() == [5]
    assert plan.scaled_new_workers.tolist() == [8]
    assert plan.preempted_jobs.size == 0


@pytest.mark.parametrize("policy", sorted(RECLAIM_POLICIES))
def test_empty_and_zero_requests(policy: str) -> None:
    empty = ReclaimRequest.from_records(servers=[], jobs=[], placements=[], n_servers=3)
    plan = reclaim(empty, policy=policy)
    assert plan.servers.size == 0
    assert plan.shortfall == 3
    assert plan.actions == ()
    zero = _scenario_a(n=0)
    plan = reclaim(zero, policy=policy)
    assert plan.servers.size == 0
    assert plan.shortfall == 0


def test_idle_server_costs_zero_and_goes_first() -> None:
    req = ReclaimRequest.from_records(
        servers=[(1, 8), (2, 8)], jobs=[(10, 1)], placements=[(10, 1, 1)], n_servers=1
    )
    plan = reclaim(req)
    assert plan.servers.tolist() == [2]
    assert plan.server_costs.tolist() == [0.0]
    assert plan.actions == (
        ReclaimAction(2, None, ActionKind.RETURN, 0, ReclaimReason.IDLE_SERVER),
    )


# -------------------------------------------------------------------------------------
# Comparison policies
# -------------------------------------------------------------------------------------
def test_exact_and_greedy_agree_on_a_spanning_job() -> None:
    req = ReclaimRequest.from_records(
        servers=[(1, 8), (2, 8), (3, 8)],
        jobs=[(1, 2), (2, 2), (3, 3)],
        # server 1: halves of jobs 1 and 2 (cost 1.0, 2 jobs)
        # server 2: one third of job 3 (cost 1/3), server 3: two thirds of job 3 (2/3)
        placements=[(1, 1, 1), (2, 1, 1), (3, 2, 1), (3, 3, 2)],
        n_servers=2,
    )
    greedy = reclaim(req)
    exact = reclaim(req, policy="exact")
    assert greedy.servers.tolist() == [2, 3]
    assert exact.servers.tolist() == [2, 3]
    assert greedy.n_preemptions == exact.n_preemptions == 1


def test_exact_finds_optimum_greedy_misses() -> None:
    # Server 1: 1 worker of rigid 10-worker job A (cost 0.1).  Servers 2 and 3 each hold
    # 5 workers of rigid 10-worker job B (0.5 each).  n = 2: greedy takes 1 (0.1,
    # preempting A), then 2 (0.5, preempting B): 2 preemptions.  Exact takes 2 and 3:
    # 1 preemption.
    req = ReclaimRequest.from_records(
        servers=[(1, 8), (2, 8), (3, 8)],
        jobs=[(1, 10), (2, 10)],
        placements=[(1, 1, 1), (2, 2, 5), (2, 3, 5)],
        n_servers=2,
    )
    greedy = reclaim(req)
    exact = reclaim(req, policy="exact")
    assert greedy.servers.tolist() == [1, 2]
    assert greedy.n_preemptions == 2
    assert exact.servers.tolist() == [2, 3]
    assert exact.server_costs.tolist() == [0.5, 0.0]
    assert exact.n_preemptions == 1


def test_exact_maximises_returned_servers_under_non_preemptible_budget() -> None:
    # Non-preemptible elastic job 9 can shed 4: server 1 holds 4 of its workers, servers
    # 2 and 3 two each, next to a worker of a very elastic job 8.  All cost 0; greedy
    # takes 1 (one job touched, not two), after which 2 and 3 are ineligible.  Exact
    # returns {2, 3}.
    req = ReclaimRequest.from_records(
        servers=[(1, 8), (2, 8), (3, 8)],
        jobs=[
            {"id": 9, "workers": 16, "min_workers": 12, "elastic": True, "preemptible": False},
            {"id": 8, "workers": 10, "min_workers": 1, "elastic": True},
        ],
        placements=[(9, 1, 4), (9, 2, 2), (9, 3, 2), (8, 2, 1), (8, 3, 1)],
        n_servers=2,
    )
    greedy = reclaim(req)
    exact = reclaim(req, policy="exact")
    assert greedy.servers.tolist() == [1]
    assert greedy.shortfall == 1
    assert exact.servers.tolist() == [2, 3]
    assert exact.shortfall == 0
    assert exact.scaled_jobs.tolist() == [9, 8]
    assert exact.scaled_new_workers.tolist() == [12, 8]


def test_exact_refuses_large_requests() -> None:
    n_servers = 40
    req = ReclaimRequest.from_records(
        servers=[(i, 8) for i in range(n_servers)], jobs=[], placements=[], n_servers=20
    )
    with pytest.raises(InvalidInputError, match="n_servers: policy='exact'"):
        reclaim(req, policy="exact")
    assert EXACT_MAX_SUBSETS < 137846528820  # C(40, 20)


def test_fewest_jobs_and_most_idle_orders() -> None:
    req = ReclaimRequest.from_records(
        servers=[(1, 8), (2, 8), (3, 8)],
        # server 1: one 6-GPU job (2 idle); server 2: two 1-GPU jobs (6 idle);
        # server 3: one 1-GPU job that is half of a 2-worker job (7 idle, cost 0.5)
        jobs=[(10, 1, 6), (20, 1), (21, 1), (30, 2)],
        placements=[(10, 1, 1), (20, 2, 1), (21, 2, 1), (30, 3, 1)],
        n_servers=1,
    )
    assert reclaim(req, policy="fewest-jobs").servers.tolist() == [3]  # 1 job, 1 busy GPU
    assert reclaim(req, policy="most-idle").servers.tolist() == [3]
    req2 = req.replace(placement_job=np.array([0, 1, 2]), placement_server=np.array([1, 2, 2]),
                       placement_workers=np.array([1, 1, 1]))
    assert reclaim(req2, policy="fewest-jobs").servers.tolist() == [3]  # idle server
    req3 = req2.replace(n_servers=2)
    assert reclaim(req3, policy="fewest-jobs").servers.tolist() == [3, 1]
    assert reclaim(req3, policy="most-idle").servers.tolist() == [3, 2]


def test_random_is_seeded() -> None:
    req = ReclaimRequest.from_records(
        servers=[(i, 8) for i in range(20)], jobs=[], placements=[], n_servers=5
    )
    a = reclaim(req, policy="random", seed=1).servers.tolist()
    assert a == reclaim(req, policy="random", seed=1).servers.tolist()
    others = {tuple(reclaim(req, policy="random", seed=s).servers.tolist()) for s in range(2, 6)}
    assert len(others | {tuple(a)}) > 1
    assert len(set(a)) == 5


# -------------------------------------------------------------------------------------
# Validation
# -------------------------------------------------------------------------------------
def _base_fields() -> dict[str, object]:
    return {
        "server_id": np.array([1, 2]),
        "server_gpus": np.array([8, 8]),
        "placement_job": np.array([0, 1]),
        "placement_server": np.array([1, 2]),
        "placement_workers": np.array([2, 1]),
        "job_id": np.array([10, 11]),
        "job_workers": np.array([4, 1]),
        "job_gpus_per_worker": np.array([1, 8]),
        "job_min_workers": np.array([2, 1]),
        "job_elastic": np.array([True, False]),
        "job_preemptible": np.array([True, True]),
        "n_servers": 1,
    }


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"server_id": np.array([1, 1])}, "server_id"),
        ({"server_id": np.array([1.0, 2.0])}, "server_id"),
        ({"server_id": np.array([[1, 2]])}, "server_id"),
        ({"server_id": np.array([10**15, 10**15])}, "server_id"),
        ({"server_id": np.array([-(10**15), 10**15]),
          "placement_server": np.array([10**15, 3])}, "placement_server"),
        ({"placement_server": np.array([1, -(2**63)])}, "placement_server"),
        ({"server_gpus": np.array([8])}, "server_gpus"),
        ({"server_gpus": np.array([8, 0])}, "server_gpus"),
        ({"placement_server": np.array([1, 3])}, "placement_server"),
        ({"placement_server": np.array([1, 1]), "placement_job": np.array([0, 0])},
         "placement_server"),
        ({"placement_job": np.array([0, 2])}, "placement_job"),
        ({"placement_workers": np.array([0, 1])}, "placement_workers"),
        ({"placement_workers": np.array([5, 1])}, "placement_workers"),
        ({"job_gpus_per_worker": np.array([5, 8])}, "placement_workers"),
        ({"job_id": np.array([10, 10])}, "job_id"),
        ({"job_workers": np.array([0, 1])}, "job_workers"),
        ({"job_min_workers": np.array([5, 1])}, "job_min_workers"),
        ({"job_min_workers": np.array([0, 1])}, "job_min_workers"),
        ({"job_elastic": np.array([2, 0])}, "job_elastic"),
        ({"job_preemptible": np.array(["yes", "no"])}, "job_preemptible"),
        ({"n_servers": -1}, "n_servers"),
        ({"n_servers": 1.5}, "n_servers"),
        ({"n_servers": 2**63}, "n_servers"),
        ({"gpu_type": "A100"}, "gpu_type"),
        ({"server_gpu_type": ["A100"]}, "server_gpu_type"),
        ({"server_gpu_type": ["A100", 3]}, "server_gpu_type"),
    ],
)
def test_invalid_requests_name_the_field(change: dict[str, object], field: str) -> None:
    fields = {**_base_fields(), **change}
    with pytest.raises(InvalidInputError, match=rf"^{field}: "):
        ReclaimRequest(**fields)  # type: ignore[arg-type]


def test_valid_base_request_and_int_bools() -> None:
    req = ReclaimRequest(**{**_base_fields(), "job_elastic": np.array([1, 0])})  # type: ignore[arg-type]
    assert req.job_elastic.dtype == np.bool_
    plan = reclaim(req)
    assert plan.servers.tolist() == [1]  # job 10 sheds 2 of its 4 workers (base 2): cost 0
    assert plan.scaled_new_workers.tolist() == [2]


def test_reclaim_argument_errors() -> None:
    req = _scenario_a()
    with pytest.raises(InvalidInputError, match=r"^policy: "):
        reclaim(req, policy="cheapest")
    with pytest.raises(InvalidInputError, match=r"^backend: "):
        reclaim(req, backend="gpu")
    with pytest.raises(InvalidInputError, match=r"^seed: "):
        reclaim(req, seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"^request: "):
        reclaim({"n_servers": 1})  # type: ignore[arg-type]


def test_from_records_errors() -> None:
    with pytest.raises(InvalidInputError, match=r"^placements\[0\]: unknown job id 99"):
        ReclaimRequest.from_records(servers=[(1, 8)], jobs=[(1, 1)], placements=[(99, 1, 1)],
                                    n_servers=1)
    with pytest.raises(InvalidInputError, match=r"^jobs\[0\]: unknown key"):
        ReclaimRequest.from_records(servers=[(1, 8)], jobs=[{"id": 1, "wrkers": 1}],
                                    placements=[], n_servers=1)
    with pytest.raises(InvalidInputError, match=r"^servers\[0\]: missing field"):
        ReclaimRequest.from_records(servers=[(1,)], jobs=[], placements=[], n_servers=1)


def test_unchecked_fast_path_matches() -> None:
    req = _scenario_b()
    fast = ReclaimRequest._unchecked(**{k: getattr(req, k) for k in _base_fields()})
    a, b = reclaim(req), reclaim(fast)
    assert a.servers.tolist() == b.servers.tolist()
    assert a.actions == b.actions


def test_kernel_bounds_checks_indices() -> None:
    z = np.zeros(1, np.int64)
    with pytest.raises(IndexError, match="placement_server"):
        _reclaim.reclaim_greedy(z, z + 8, z + 1, z, z + 5, z + 1, z + 1, z + 1, z + 1, z, z + 1, 1)
    with pytest.raises(ValueError, match="expected a 1-D array of length 2"):
        _reclaim.reclaim_greedy(z, z, z, z, z, z, np.zeros(2, np.int64), z, z, z, z, 1)


def test_plan_to_frame() -> None:
    frame = reclaim(_scenario_b()).to_frame()
    assert frame["kind"].tolist() == ["RETURN", "PREEMPT", "RETURN", "RETURN"]
    assert frame["job_id"].isna().tolist() == [True, False, True, True]
    assert int(frame["job_id"].iloc[1]) == 100


@pytest.mark.parametrize("ids", [[5, 3, 4], [10**15, -7, 2**40]], ids=["dense", "sparse"])
def test_server_ids_map_to_the_right_servers(ids: list[int]) -> None:
    # The 1-GPU job sits on the server listed second, whatever its id.
    req = ReclaimRequest.from_records(
        servers=[(i, 8) for i in ids], jobs=[(1, 1, 1), (2, 1, 8), (3, 1, 4)],
        placements=[(2, ids[0], 1), (1, ids[1], 1), (3, ids[2], 1)], n_servers=1,
    )
    assert reclaim(req).servers.tolist() == [ids[1]]
    assert reclaim(req, backend="reference").servers.tolist() == [ids[1]]
    assert reclaim(ReclaimRequest._unchecked(**{
        k: getattr(req, k) for k in _base_fields()})).servers.tolist() == [ids[1]]


def test_threads_share_the_kernel() -> None:
    # The kernel runs with the GIL released; concurrent calls must not interfere.
    from concurrent.futures import ThreadPoolExecutor

    reqs = [_scenario_a(n=k % 4) for k in range(16)] + [_scenario_b(k % 6) for k in range(16)]
    expected = [reclaim(r, backend="reference").servers.tolist() for r in reqs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda r: reclaim(r).servers.tolist(), reqs))
    assert got == expected


def test_huge_n_servers_reports_shortfall() -> None:
    plan = reclaim(_scenario_b(n=10**12))
    assert plan.n_returned == 5
    assert plan.shortfall == 10**12 - 5


@pytest.mark.parametrize(
    ("change", "field"),
    [
        # workers * gpus_per_worker wrapped int64 and passed the busy-GPU check; the
        # C++ kernel (int64) and the twin (Python ints) then chose different servers
        ({"job_gpus_per_worker": np.array([1, 2**62]), "job_workers": np.array([4, 4]),
          "placement_workers": np.array([2, 4]), "job_min_workers": np.array([2, 4])},
         "placement_workers"),
        ({"server_gpus": np.array([2**60, 8])}, "server_gpus"),
        ({"server_id": [1, [2]]}, "server_id"),  # ragged: a bare numpy ValueError
    ],
)
def test_overflowing_or_ragged_requests_name_the_field(change: dict[str, object],
                                                       field: str) -> None:
    fields = {**_base_fields(), **change}
    with pytest.raises(InvalidInputError, match=rf"^{field}: "):
        ReclaimRequest(**fields)  # type: ignore[arg-type]


def test_request_is_a_frozen_copy() -> None:
    fields = _base_fields()
    ro = np.array([1, 2])
    ro.setflags(write=False)
    req = ReclaimRequest(**{**fields, "server_id": ro})  # type: ignore[arg-type]
    before = reclaim(req)
    # the caller's arrays stay writable and changing them does not change the request
    ids = fields["server_gpus"]
    assert isinstance(ids, np.ndarray)
    req2 = ReclaimRequest(**fields)  # type: ignore[arg-type]
    ids[0] = 1
    assert req2.server_gpus.tolist() == [8, 8]
    # the request's own arrays cannot be edited after validation (duplicate ids ...)
    with pytest.raises(ValueError, match="read-only"):
        req.server_id[0] = 2
    assert reclaim(req).servers.tolist() == before.servers.tolist()


def test_from_records_does_not_coerce() -> None:
    # 8.5 GPUs became 8 and elastic="no" became True (a non-empty string) before
    cases: list[tuple[dict[str, object], str]] = [
        ({"servers": [(1, 8.5)]}, "server_gpus"),
        ({"servers": [("a", 8)]}, "server_id"),
        ({"servers": [(2**70, 8)]}, "server_id"),
        ({"jobs": [(7, 2, 1, 1, "no")]}, "job_elastic"),
        ({"jobs": [([7], 2)]}, "jobs"),
        ({"servers": [5]}, r"servers\[0\]"),
    ]
    for change, field in cases:
        kw: dict[str, object] = {"servers": [(1, 8)], "jobs": [(7, 2)], "placements": [],
                                 "n_servers": 1, **change}
        with pytest.raises(InvalidInputError, match=rf"^{field}: "):
            ReclaimRequest.from_records(**kw)  # type: ignore[arg-type]


def test_more_argument_errors() -> None:
    req = _scenario_a()
    with pytest.raises(InvalidInputError, match=r"^policy: "):
        reclaim(req, policy=["aryl"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"^seed: "):
        reclaim(req, policy="random", seed=-1)
    with pytest.raises(InvalidInputError, match=r"^replace: unknown field"):
        req.replace(n_server=2)


def test_exact_memory_scales_with_placements_not_servers_times_jobs() -> None:
    # policy="exact" built a dense (servers x jobs) table and gathered it per chunk of
    # subsets: ~2 GB for the 5,000-server benchmark request with n_servers=1.
    import tracemalloc

    m, per = 1000, 8
    n_jobs = m * per
    req = ReclaimRequest(
        server_id=np.arange(m), server_gpus=np.full(m, 8),
        placement_job=np.arange(n_jobs), placement_server=np.repeat(np.arange(m), per),
        placement_workers=np.ones(n_jobs, dtype=np.int64),
        job_id=np.arange(n_jobs), job_workers=np.full(n_jobs, 2),
        job_gpus_per_worker=np.ones(n_jobs, dtype=np.int64),
        job_min_workers=np.where(np.arange(n_jobs) % 8 == 0, 1, 2),
        job_elastic=np.ones(n_jobs, dtype=bool), job_preemptible=np.ones(n_jobs, dtype=bool),
        n_servers=1,
    )
    tracemalloc.start()
    try:
        plan = reclaim(req, policy="exact")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # every server holds one job that can shed (index % 8 == 0) and 7 that cannot
    assert plan.servers.tolist() == [0]
    assert plan.n_preemptions == 7
    assert peak < 40_000_000
