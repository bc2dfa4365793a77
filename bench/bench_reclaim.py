"""Benchmarks of aryl.reclaim: the C++ greedy vs its Python twin, and greedy vs exact quality.

Run: ``python -m pytest bench/bench_reclaim.py --benchmark-only``.  Compare the
medians within a group (same run, same machine); absolute times on a shared
2-core machine are noisy.  The quality benchmark stores its statistics in
``extra_info`` (``--benchmark-json``) and logs them.

Instance (seeded): 5,000 loaned servers x 8 GPUs, 20,000 jobs of 1-32 GPUs
(spanning servers when larger than what is left on one), 40% elastic with base
half their workers, 2% non-preemptible; small jobs live wholly on loaned servers,
jobs of 8+ GPUs a quarter of their workers; return 1,000 servers.
"""

from __future__ import annotations

import functools
import logging

import numpy as np
import pytest

from aryl._core import _reclaim
from aryl.reclaiming import ReclaimRequest, reclaim

logger = logging.getLogger(__name__)

N_SERVERS, GPUS, N_JOBS, N_RETURN = 5_000, 8, 20_000, 1_000


@functools.cache
def big_request(seed: int = 0) -> ReclaimRequest:
    """The 5,000 x 8 instance described in the module docstring."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 4, 8, 16, 32], size=N_JOBS, p=[0.5, 0.25, 0.13, 0.08, 0.03, 0.01])
    gpw = np.where((sizes >= 4) & (rng.random(N_JOBS) < 0.3), 2, 1)
    workers = sizes // gpw
    loaned = np.where(sizes >= 8, np.maximum(workers // 4, 1), workers)
    elastic = rng.random(N_JOBS) < 0.4
    base = np.where(elastic, np.maximum(workers // 2, 1), workers)
    preemptible = rng.random(N_JOBS) >= 0.02
    pj: list[int] = []
    ps: list[int] = []
    pw: list[int] = []
    server, free = 0, GPUS
    for j in rng.permutation(N_JOBS).tolist():
        left, g = int(loaned[j]), int(gpw[j])
        if rng.random() < 0.03 and server < N_SERVERS - 1:  # leave a gap now and then
            server, free = server + 1, GPUS
        while left and server < N_SERVERS:
            take = min(left, free // g)
            if take:
                pj.append(j)
                ps.append(server)
                pw.append(take)
                left -= take
                free -= take * g
            if left or free == 0:
                server, free = server + 1, GPUS
        # Workers that did not fit on loaned servers run in the training cluster.
    ids = rng.permutation(N_SERVERS).astype(np.int64) * 7 + 3  # ids unrelated to order
    return ReclaimRequest(
        server_id=ids,
        server_gpus=np.full(N_SERVERS, GPUS, dtype=np.int64),
        placement_job=np.asarray(pj, dtype=np.int64),
        placement_server=ids[np.asarray(ps, dtype=np.int64)],
        placement_workers=np.asarray(pw, dtype=np.int64),
        job_id=np.arange(N_JOBS, dtype=np.int64) + 1_000_000,
        job_workers=workers.astype(np.int64),
        job_gpus_per_worker=gpw.astype(np.int64),
        job_min_workers=base.astype(np.int64),
        job_elastic=elastic,
        job_preemptible=preemptible,
        n_servers=N_RETURN,
    )


def _fields(req: ReclaimRequest) -> dict[str, object]:
    names = ("server_id", "server_gpus", "placement_job", "placement_server",
             "placement_workers", "job_id", "job_workers", "job_gpus_per_worker",
             "job_min_workers", "job_elastic", "job_preemptible", "n_servers")
    return {k: getattr(req, k) for k in names}


@pytest.mark.benchmark(group="reclaim 5000x8 return 1000")
def test_native_reclaim(benchmark) -> None:  # type: ignore[no-untyped-def]
    """``reclaim(request)`` on a validated request: kernel + plan assembly."""
    req = big_request()
    plan = benchmark(reclaim, req)
    assert plan.n_returned == N_RETURN
    assert plan.shortfall == 0


@pytest.mark.benchmark(group="reclaim 5000x8 return 1000")
def test_native_with_validation(benchmark) -> None:  # type: ignore[no-untyped-def]
    """Building (validating) the request from arrays, then ``reclaim``."""
    fields = _fields(big_request())

    def run() -> int:
        return reclaim(ReclaimRequest(**fields)).n_returned  # type: ignore[arg-type]

    assert benchmark(run) == N_RETURN


@pytest.mark.benchmark(group="reclaim 5000x8 return 1000")
def test_native_kernel_only(benchmark) -> None:  # type: ignore[no-untyped-def]
    """The pybind11 call alone (index arrays in, index arrays out)."""
    req = big_request()
    args = (req.server_id, req.server_gpus, req._server_allowed, req.placement_job,
            req._placement_server_index, req.placement_workers, req.job_workers,
            req.job_gpus_per_worker, req.job_min_workers, req.job_elastic.astype(np.int64),
            req.job_preemptible.astype(np.int64), req.n_servers)
    out = benchmark(_reclaim.reclaim_greedy, *args)
    assert out[0].size == N_RETURN


@pytest.mark.benchmark(group="reclaim 5000x8 return 1000")
def test_reference_reclaim(benchmark) -> None:  # type: ignore[no-untyped-def]
    """The pure-Python twin on the same request; must give the same plan."""
    req = big_request()
    plan = benchmark.pedantic(reclaim, args=(req,), kwargs={"backend": "reference"},
                              rounds=5, iterations=1)
    native = reclaim(req)
    np.testing.assert_array_equal(plan.servers, native.servers)
    np.testing.assert_array_equal(plan.preempted_jobs, native.preempted_jobs)
    np.testing.assert_array_equal(plan.server_costs, native.server_costs)


def small_request(rng: np.random.Generator) -> ReclaimRequest:
    """A random small instance (4-8 servers, up to 12 jobs) for greedy vs exact."""
    m = int(rng.integers(4, 9))
    free = np.full(m, 8)
    jobs, placements = [], []
    for j in range(int(rng.integers(2, 13))):
        g = int(rng.choice([1, 2]))
        placed = 0
        for s in rng.choice(m, size=int(rng.integers(1, min(m, 4) + 1)), replace=False):
            if free[s] >= g:
                w = int(rng.integers(1, min(free[s] // g, 4) + 1))
                free[s] -= w * g
                placements.append((j, int(s), w))
                placed += w
        total = max(placed + int(rng.integers(0, 5)), 1)
        elastic = bool(rng.random() < 0.4)
        base = max(total // 2, 1) if elastic else total
        jobs.append((j, total, g, base, elastic, bool(rng.random() < 0.95)))
    return ReclaimRequest.from_records(
        servers=[(s, 8) for s in range(m)], jobs=jobs, placements=placements,
        n_servers=int(rng.integers(1, m)),
    )


def greedy_vs_exact(n_instances: int, seed: int = 0) -> dict[str, float]:
    """Excess preemptions of the greedy (and baselines) over the exact optimum."""
    rng = np.random.default_rng(seed)
    excess: dict[str, list[int]] = {p: [] for p in ("aryl", "fewest-jobs", "most-idle", "random")}
    fewer_returned = 0
    for _ in range(n_instances):
        req = small_request(rng)
        exact = reclaim(req, policy="exact")
        for policy, values in excess.items():
            plan = reclaim(req, policy=policy, seed=int(rng.integers(2**31)))
            if plan.n_returned < exact.n_returned:
                fewer_returned += policy == "aryl"
                continue
            values.append(plan.n_preemptions - exact.n_preemptions)
    stats: dict[str, float] = {"instances": n_instances, "aryl_fewer_returned": fewer_returned}
    for policy, values in excess.items():
        arr = np.asarray(values)
        stats[f"{policy}_mean_excess"] = float(arr.mean())
        stats[f"{policy}_worst_excess"] = int(arr.max())
        stats[f"{policy}_share_optimal"] = float((arr == 0).mean())
    return stats


@pytest.mark.benchmark(group="reclaim quality")
def test_greedy_vs_exact(benchmark, request) -> None:  # type: ignore[no-untyped-def]
    """Mean and worst excess preemptions over the exact optimum on small instances."""
    disabled = request.config.getoption("benchmark_disable", False)
    n = 200 if disabled else 3_000
    stats = benchmark.pedantic(greedy_vs_exact, args=(n,), rounds=1, iterations=1)
    benchmark.extra_info.update(stats)
    logger.info("greedy vs exact: %s", stats)
    assert stats["aryl_worst_excess"] >= 0
    assert stats["aryl_mean_excess"] <= stats["random_mean_excess"]
