"""Benchmarks of the elastic-allocation MCKP (pytest-benchmark).

Run: ``python -m pytest bench/bench_mckp.py --benchmark-only`` (add
``--benchmark-group-by=group``).  CI smoke: ``--benchmark-disable`` (each case once,
~10 s in total).  ``ARYL_BENCH_FULL=1`` adds the slow comparison cases (reference
twin at L, scipy MILP at M).

Instances (seeded): jobs with 1, 2, 4 or 8 GPUs per worker; option ``k`` = ``k``
extra workers.  Value curves:

* ``concave``    — Amdahl-like JCT reductions (``jct_reduction_table``, 30 s pause);
* ``nonconcave`` — cumulative sums of squared random increments (convex-ish, with
  plateaus), so greedy on marginal gains is not exact;
* ``correlated`` — strongly correlated: random weights, ``value = weight + 10``
  (the classic hard MCKP family: every option has nearly the same reduced cost).

Sizes: S 100x8 C=800, M 1,000x16 C=4,000, L 5,000x16 C=16,000, XL 5,000x64 C=20,000.
The kernel's diagnostics (core size, DP kind, sparse states) go to ``extra_info``.

Baseline ``test_numpy_dense_dp_concave`` (M, L): the textbook dense dynamic programme
over capacity, vectorised with numpy (value only, one rolling row — a lower bound on
the cost of any dense DP, which must also keep its choices).  Its ``extra_info``
holds ``native_ms`` (best of 100 native solves of the same instance, timed in the same
test) and ``ratio`` = best baseline round / ``native_ms``: the "x a numpy dense DP"
figure (minima: the least disturbed timings on a shared machine).
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from aryl.elastic import _mckp_stats, _quantize, jct_reduction_table, solve_mckp

SIZES: dict[str, tuple[int, int, int]] = {
    "S": (100, 8, 800),
    "M": (1_000, 16, 4_000),
    "L": (5_000, 16, 16_000),
    "XL": (5_000, 64, 20_000),
}
FULL = os.environ.get("ARYL_BENCH_FULL", "") not in ("", "0")

Instance = tuple[NDArray[np.float64], NDArray[np.int64], int]


@functools.cache
def instance(kind: str, size: str, seed: int = 0) -> Instance:
    n, k, cap = SIZES[size]
    rng = np.random.default_rng([seed, n, k, len(kind)])
    g = rng.choice(np.array([1, 2, 4, 8]), size=n)
    if kind == "concave":
        values, weights = jct_reduction_table(
            remaining_work=rng.uniform(1e3, 1e5, size=n),
            current_workers=rng.integers(1, 3, size=n),
            min_workers=np.ones(n, dtype=np.int64),
            max_workers=np.full(n, k + 1, dtype=np.int64),
            gpus_per_worker=g,
            alpha=rng.uniform(0.02, 0.4, size=n),
            rescale_pause_s=30.0,
        )
    elif kind == "nonconcave":
        weights = (np.arange(1, k + 1)[None, :] * g[:, None]).astype(np.int64)
        values = np.cumsum(rng.uniform(0.0, 10.0, size=(n, k)) ** 2, axis=1)
    elif kind == "correlated":
        weights = np.sort(rng.integers(1, 8 * k, size=(n, k)), axis=1).astype(np.int64)
        values = weights + 10.0
    else:  # pragma: no cover
        raise ValueError(kind)
    return np.ascontiguousarray(values), np.ascontiguousarray(weights), cap


def _run(benchmark: Any, kind: str, size: str, backend: str = "native") -> None:
    values, weights, cap = instance(kind, size)
    if backend == "native":
        benchmark.extra_info.update(_mckp_stats(values, weights, cap))
    result = benchmark(solve_mckp, values, weights, cap, backend=backend)
    assert result.used_gpus <= cap
    benchmark.extra_info["value"] = result.value


@pytest.mark.benchmark(group="mckp-concave")
@pytest.mark.parametrize("size", ["S", "M", "L", "XL"])
def test_native_concave(benchmark: Any, size: str) -> None:
    _run(benchmark, "concave", size)


@pytest.mark.benchmark(group="mckp-nonconcave")
@pytest.mark.parametrize("size", ["S", "M", "L", "XL"])
def test_native_nonconcave(benchmark: Any, size: str) -> None:
    _run(benchmark, "nonconcave", size)


@pytest.mark.benchmark(group="mckp-correlated")
@pytest.mark.parametrize("size", ["S", "M", "L"])
def test_native_correlated(benchmark: Any, size: str) -> None:
    _run(benchmark, "correlated", size)


@pytest.mark.benchmark(group="mckp-concave")
@pytest.mark.parametrize("size", ["S", "M", pytest.param("L", marks=pytest.mark.skipif(
    not FULL, reason="reference at L needs a 640 MB table; set ARYL_BENCH_FULL=1"))])
def test_reference_concave(benchmark: Any, size: str) -> None:
    values, weights, cap = instance("concave", size)
    result = benchmark(solve_mckp, values, weights, cap, backend="reference",
                       max_table_bytes=1 << 30)
    assert result.choice.tolist() == solve_mckp(values, weights, cap).choice.tolist()


@pytest.mark.benchmark(group="mckp-nonconcave")
@pytest.mark.parametrize("size", ["S"])
def test_reference_nonconcave(benchmark: Any, size: str) -> None:
    _run(benchmark, "nonconcave", size, backend="reference")


@pytest.mark.benchmark(group="mckp-correlated")
@pytest.mark.parametrize("size", ["S"])
def test_reference_correlated(benchmark: Any, size: str) -> None:
    _run(benchmark, "correlated", size, backend="reference")


def _milp(values: NDArray[np.float64], weights: NDArray[np.int64], cap: int) -> float:
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array, vstack

    n, k = values.shape
    idx = np.flatnonzero((np.nan_to_num(values, nan=0.0) > 0).ravel())
    rows = idx // k
    one_per_job = coo_array((np.ones(idx.size), (rows, np.arange(idx.size))), shape=(n, idx.size))
    knap = coo_array(weights.ravel()[idx].astype(np.float64)[None, :])
    res = milp(
        -values.ravel()[idx],
        constraints=LinearConstraint(vstack([one_per_job, knap]).tocsr(), -np.inf,
                                     np.append(np.ones(n), cap)),
        integrality=np.ones(idx.size),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0},
    )
    return float(-res.fun)


@pytest.mark.benchmark(group="mckp-concave")
@pytest.mark.parametrize("size", ["S", pytest.param("M", marks=pytest.mark.skipif(
    not FULL, reason="MILP at M is slow; set ARYL_BENCH_FULL=1"))])
def test_milp_concave(benchmark: Any, size: str) -> None:
    values, weights, cap = instance("concave", size)
    value = benchmark(_milp, values, weights, cap)
    assert value == pytest.approx(solve_mckp(values, weights, cap).value, rel=1e-7)


def numpy_dense_dp(values: NDArray[np.float64], weights: NDArray[np.int64], cap: int) -> int:
    """Optimal quantised value by the dense DP ``f[c]`` = best value within ``c`` GPUs.

    O(N * cap) numpy work in one rolling row (two vector operations per option); the
    value only, no choice table.  Same quantised values as the kernel.
    """
    q = _quantize(values)
    f = np.zeros(cap + 1, dtype=np.int64)
    shifted = np.empty(cap + 1, dtype=np.int64)
    for i in range(q.shape[0]):
        g = f.copy()
        for k in range(q.shape[1]):
            qk, wk = q[i, k], int(weights[i, k])
            if qk <= 0 or wk > cap:
                continue
            s = shifted[: cap + 1 - wk]
            np.add(f[: cap + 1 - wk], qk, out=s)
            np.maximum(g[wk:], s, out=g[wk:])
        f = g
    return int(f[-1])


@pytest.mark.benchmark(group="mckp-concave")
@pytest.mark.parametrize("size", ["M", "L"])
def test_numpy_dense_dp_concave(benchmark: Any, size: str) -> None:
    values, weights, cap = instance("concave", size)
    native_s = []
    for _ in range(100):
        t0 = time.perf_counter()
        solve_mckp(values, weights, cap)
        native_s.append(time.perf_counter() - t0)
    opt = benchmark.pedantic(numpy_dense_dp, args=(values, weights, cap), rounds=3,
                             iterations=1)
    assert opt == _mckp_stats(values, weights, cap)["opt"]
    native_ms = min(native_s) * 1e3
    benchmark.extra_info["native_ms"] = native_ms
    if benchmark.stats is not None:  # None with --benchmark-disable
        benchmark.extra_info["ratio"] = benchmark.stats.stats.min * 1e3 / native_ms
