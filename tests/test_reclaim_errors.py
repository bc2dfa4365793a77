"""Every refusal of ``aryl.reclaiming`` with its whole message, and the plan's helpers.

The request is validated field by field (name, what is wrong, the first bad
index); :func:`reclaim` checks its arguments; :meth:`ReclaimRequest.from_records`
its records; :meth:`ReclaimPlan.apply_to` that a plan belongs to the request.
Small hand-made requests; the expected plans are derived in the comments.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aryl.errors import InvalidInputError
from aryl.reclaiming import ActionKind, ReclaimReason, ReclaimRequest, reclaim


def base() -> dict[str, Any]:
    """Servers 1, 2 (8 GPUs); job 10 (4 workers of 1 GPU, base 2, elastic) with 2 workers
    on server 1; job 11 (1 worker of 8 GPUs, rigid) on server 2."""
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


def refused(**change: Any) -> str:
    with pytest.raises(InvalidInputError) as info:
        ReclaimRequest(**{**base(), **change})
    return str(info.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"server_id": np.array([[1, 2]])}, "server_id: expected a 1-D array, got shape (1, 2)"),
        ({"server_id": np.array([1.0, 2.0])}, "server_id: expected integers, got dtype float64"),
        ({"server_id": np.array([1, 2**64 - 1], dtype=np.uint64)},
         "server_id: value does not fit in int64"),
        ({"server_id": [1, [2]]}, None),  # ragged: "server_id: cannot be read as an array: ..."
        ({"job_elastic": np.array([[True, False]])},
         "job_elastic: expected a 1-D array, got shape (1, 2)"),
        ({"job_elastic": np.array([2, 0])}, "job_elastic: expected booleans, got dtype int64"),
        ({"job_preemptible": np.array([0.0, 1.0])},
         "job_preemptible: expected booleans, got dtype float64"),
        ({"n_servers": 1.0}, "n_servers: expected an int, got float"),
        ({"n_servers": True}, "n_servers: expected an int, got bool"),
        ({"n_servers": -1}, "n_servers: must be in [0, 2**63), got -1"),
        ({"n_servers": 2**63}, "n_servers: must be in [0, 2**63), got 9223372036854775808"),
        ({"server_gpus": np.array([8])}, "server_gpus: length 1 differs from server_id (2)"),
        ({"placement_server": np.array([1])},
         "placement_server: length 1 differs from placement_job (2)"),
        ({"placement_workers": np.array([1, 1, 1])},
         "placement_workers: length 3 differs from placement_job (2)"),
        ({"job_workers": np.array([4])}, "job_workers: length 1 differs from job_id (2)"),
        ({"job_gpus_per_worker": np.array([1])},
         "job_gpus_per_worker: length 1 differs from job_id (2)"),
        ({"job_min_workers": np.array([2])}, "job_min_workers: length 1 differs from job_id (2)"),
        ({"job_elastic": np.array([True])}, "job_elastic: length 1 differs from job_id (2)"),
        ({"job_preemptible": np.array([True])},
         "job_preemptible: length 1 differs from job_id (2)"),
        ({"server_id": np.array([2, 2])},
         "server_id: duplicate id (first offending entry at index 1)"),
        # the first entry that repeats an earlier id, on the table path (dense ids) and the
        # sorted path (ids spread over more than 16 per id + 4096)
        ({"server_id": np.array([5, 3, 5, 3]), "server_gpus": np.array([8] * 4),
          "placement_server": np.array([5, 3])},
         "server_id: duplicate id (first offending entry at index 2)"),
        ({"server_id": np.array([10**15, -7, 10**15, -7]), "server_gpus": np.array([8] * 4),
          "placement_server": np.array([-7, -7]), "placement_job": np.array([0, 1])},
         "server_id: duplicate id (first offending entry at index 2)"),
        ({"server_gpus": np.array([8, 0])}, "server_gpus: must be >= 1 (first offending entry "
                                            "at index 1)"),
        ({"job_id": np.array([11, 11])}, "job_id: duplicate id (first offending entry at index 1)"),
        ({"job_workers": np.array([4, 0])}, "job_workers: must be >= 1 (first offending entry at "
                                            "index 1)"),
        ({"job_gpus_per_worker": np.array([0, 8])},
         "job_gpus_per_worker: must be >= 1 (first offending entry at index 0)"),
        ({"job_min_workers": np.array([2, 0])},
         "job_min_workers: must be >= 1 (first offending entry at index 1)"),
        ({"job_min_workers": np.array([5, 1])},
         "job_min_workers: must be <= job_workers (first offending entry at index 0)"),
        ({"placement_job": np.array([0, 2])},
         "placement_job: index out of range [0, 2) (first offending entry at index 1)"),
        ({"placement_job": np.array([-1, 1])},
         "placement_job: index out of range [0, 2) (first offending entry at index 0)"),
        ({"placement_workers": np.array([2, 0])},
         "placement_workers: must be >= 1 (first offending entry at index 1)"),
        ({"placement_server": np.array([1, 3])},
         "placement_server: unknown server id (not in server_id) (first offending entry at "
         "index 1)"),
        ({"placement_server": np.array([0, 2])},
         "placement_server: unknown server id (not in server_id) (first offending entry at "
         "index 0)"),
        ({"placement_job": np.array([0, 0]), "placement_server": np.array([1, 1])},
         "placement_server: duplicate (job, server) placement; merge the workers into one entry"),
        ({"placement_workers": np.array([5, 1])},
         "placement_workers: a job's workers on loaned servers exceed job_workers (job index) "
         "(first offending entry at index 0)"),
        ({"server_gpus": np.array([8, 2**53])},
         "server_gpus: must be <= 2**52 (first offending entry at index 1)"),
        ({"job_gpus_per_worker": np.array([5, 8])},
         "placement_workers: busy GPUs exceed server_gpus (placement index) (first offending "
         "entry at index 0)"),
        # two jobs of 5 GPUs on one 8-GPU server: each fits, together 10 > 8
        ({"placement_server": np.array([1, 1]), "job_gpus_per_worker": np.array([1, 5]),
          "placement_workers": np.array([4, 1]), "job_min_workers": np.array([2, 1])},
         "placement_workers: busy GPUs exceed server_gpus (server index) (first offending "
         "entry at index 0)"),
        ({"gpu_type": "A100"}, "gpu_type: a GPU type filter needs server_gpu_type"),
        ({"gpu_type": 3, "server_gpu_type": ["a", "b"]}, "gpu_type: expected a str or None"),
        ({"server_gpu_type": ["A100"]}, "server_gpu_type: expected 2 entries, one per server"),
        ({"server_gpu_type": ["A100", 3]}, "server_gpu_type: expected a 1-D sequence of str"),
        ({"server_gpu_type": np.array(["a", "b", "c"])},
         "server_gpu_type: expected 2 entries, one per server"),
    ],
)
def test_every_refusal_names_the_field(change: dict[str, Any], expected: str | None) -> None:
    got = refused(**change)
    if expected is None:
        assert got.startswith("server_id: cannot be read as an array: ")
    else:
        assert got == expected


def test_the_edges_are_accepted() -> None:
    # booleans as 0/1 integers; empty arrays; a server exactly full; base = workers
    req = ReclaimRequest(**{**base(), "job_elastic": np.array([1, 0]),
                            "job_preemptible": np.array([1, 1], dtype=np.uint8),
                            "placement_workers": np.array([4, 1]),
                            "job_min_workers": np.array([4, 1]),
                            "server_gpus": np.array([4, 2**52]), "n_servers": 0})
    assert req.job_elastic.tolist() == [True, False]
    assert req.job_preemptible.dtype == np.bool_
    empty = ReclaimRequest(server_id=[], server_gpus=[], placement_job=[],
                           placement_server=[], placement_workers=[], job_id=[],
                           job_workers=[], job_gpus_per_worker=[], job_min_workers=[],
                           job_elastic=[], job_preemptible=[], n_servers=3)
    plan = reclaim(empty)
    assert plan.servers.tolist() == []
    assert plan.shortfall == 3
    typed = ReclaimRequest(**{**base(), "server_gpu_type": np.array(["x", "y"]),
                              "gpu_type": "y"})
    # only server 2 may go: job 11 (rigid, its only worker there) is preempted
    plan = reclaim(typed)
    assert plan.servers.tolist() == [2]
    assert plan.preempted_jobs.tolist() == [11]


def test_reclaim_argument_refusals() -> None:
    req = ReclaimRequest(**base())

    def msg(**kw: Any) -> str:
        with pytest.raises(InvalidInputError) as info:
            reclaim(req, **kw)
        return str(info.value)

    known = "['aryl', 'exact', 'fewest-jobs', 'most-idle', 'random']"
    assert msg(policy="cheap") == f"policy: unknown 'cheap'; known: {known}"
    assert msg(policy=["aryl"]) == f"policy: unknown ['aryl']; known: {known}"
    assert msg(backend="gpu") == "backend: unknown 'gpu'; known: ['native', 'reference']"
    assert msg(seed=1.5) == "seed: expected an int, got float"
    assert msg(seed=True) == "seed: expected an int, got bool"
    assert msg(policy="random", seed=-1) == "seed: must be >= 0 for policy='random', got -1"
    assert reclaim(req, policy="aryl", seed=-1).servers.tolist() == [1]  # seed unused there
    with pytest.raises(InvalidInputError) as info:
        reclaim({"n_servers": 1})  # type: ignore[arg-type]
    assert str(info.value) == "request: expected a ReclaimRequest, got dict"


def test_from_records_refusals() -> None:
    def msg(**kw: Any) -> str:
        args: dict[str, Any] = {"servers": [(1, 8)], "jobs": [(7, 2)], "placements": [],
                                "n_servers": 1, **kw}
        with pytest.raises(InvalidInputError) as info:
            ReclaimRequest.from_records(**args)
        return str(info.value)

    assert msg(servers=[{"id": 1, "gpu": 8}]) == "servers[0]: unknown key(s) ['gpu']"
    assert msg(servers=[(1,)]) == "servers[0]: missing field(s) ['gpus']"
    assert msg(servers=[{"id": 1}]) == "servers[0]: missing field(s) ['gpus']"
    assert msg(servers=[(1, 8, "A", 4)]) == "servers[0]: expected at most 3 fields"
    assert msg(servers=[5]) == "servers[0]: expected a tuple or a mapping, got int"
    assert msg(jobs=[(7,)]) == "jobs[0]: missing field(s) ['workers']"
    assert msg(jobs=[([7], 2)]) == "jobs: each id must be an integer"
    assert msg(placements=[(8, 1, 1)]) == "placements[0]: unknown job id 8"
    assert msg(placements=[{"job": 7, "server": 1}]) == (
        "placements[0]: missing field(s) ['workers']")
    assert msg(servers=[(1, 8, "A"), (2, 8)]) == (
        "servers: gpu_type given for some servers but not all")


def test_from_records_defaults() -> None:
    req = ReclaimRequest.from_records(
        servers=[(1, 8, "A"), {"id": 2, "gpus": 4, "gpu_type": "B"}],
        jobs=[(7, 2), {"id": 9, "workers": 3, "gpus_per_worker": 2, "min_workers": 1,
                        "elastic": True, "preemptible": False}],
        placements=[(7, 1, 2), {"job": 9, "server": 2, "workers": 2}], n_servers=1,
        gpu_type="B")
    assert req.job_gpus_per_worker.tolist() == [1, 2]
    assert req.job_min_workers.tolist() == [2, 1]  # defaults to the job's workers
    assert req.job_elastic.tolist() == [False, True]
    assert req.job_preemptible.tolist() == [True, False]
    assert list(req.server_gpu_type) == ["A", "B"]
    assert req.gpu_type == "B"
    assert req.placement_job.tolist() == [0, 1]  # job ids mapped to positions
    # only server 2 (type B) may go: job 9 has 2 of its 3 workers there and base 1:
    # 3 - 2 = 1 >= 1, so it sheds them (scaled in to 1 worker), nothing is preempted
    plan = reclaim(req)
    assert plan.servers.tolist() == [2]
    assert plan.scaled_jobs.tolist() == [9]
    assert plan.scaled_new_workers.tolist() == [1]
    assert plan.preempted_jobs.tolist() == []
    assert [(a.server_id, a.job_id, a.kind, a.workers_removed, a.reason)
            for a in plan.actions] == [
        (2, None, ActionKind.RETURN, 0, ReclaimReason.SELECTED),
        (2, 9, ActionKind.SCALE_IN, 2, ReclaimReason.ELASTIC_SHED)]


def test_replace_and_apply_to() -> None:
    req = ReclaimRequest(**base())
    assert req.replace(n_servers=2).n_servers == 2
    with pytest.raises(InvalidInputError) as info:
        req.replace(n_server=2)
    assert str(info.value) == "replace: unknown field(s) ['n_server']"
    plan = reclaim(req.replace(n_servers=2))
    # server 1 first (job 10 sheds its 2 workers there: 4 -> 2 = base, cost 0), then
    # server 2 (job 11 preempted)
    assert plan.servers.tolist() == [1, 2]
    assert plan.preempted_jobs.tolist() == [11]
    assert plan.scaled_jobs.tolist() == [10]
    assert plan.scaled_new_workers.tolist() == [2]
    left = plan.apply_to(req)
    assert left.server_id.tolist() == []
    assert left.job_id.tolist() == [10]
    assert left.job_workers.tolist() == [2]
    assert left.placement_job.tolist() == []
    one = reclaim(req)
    left = one.apply_to(req)
    assert left.server_id.tolist() == [2]
    assert left.job_id.tolist() == [10, 11]
    assert left.job_workers.tolist() == [2, 1]
    assert left.placement_job.tolist() == [1]
    assert left.placement_server.tolist() == [2]
    other = ReclaimRequest(**{**base(), "server_id": np.array([5, 6]),
                              "placement_server": np.array([5, 6])})
    with pytest.raises(InvalidInputError) as info:
        one.apply_to(other)
    assert str(info.value) == "plan.servers: server not in the request"
    other = ReclaimRequest(**{**base(), "job_id": np.array([20, 21])})
    with pytest.raises(InvalidInputError) as info:
        reclaim(req.replace(n_servers=2)).apply_to(other)
    assert str(info.value) == "plan.preempted_jobs: job not in the request"
    with pytest.raises(InvalidInputError) as info:
        one.apply_to(other)
    assert str(info.value) == "plan.scaled_jobs: job not in the request"
    assert one.n_returned == 1
    assert one.n_preemptions == 0
