"""Every refusal of ``aryl.elastic`` with its whole message (both MCKP backends).

:func:`solve_mckp`, :func:`jct_reduction_table` and :func:`solve` name the
argument, the field, the cell or the job of bad input; here each message is
compared in full.  Also the reasons of :func:`solve` for jobs that keep their
size, on hand-computed tables.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from aryl.elastic import (
    DecisionReason,
    ElasticJob,
    ElasticRequest,
    jct_reduction_table,
    solve,
    solve_mckp,
)
from aryl.errors import InvalidInputError

BACKENDS = ["native", "reference"]


def refusal(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(InvalidInputError) as info:
        fn(*args, **kwargs)
    return str(info.value)


V = np.array([[1.0, 2.0], [3.0, np.nan]])
W = np.array([[1, 2], [1, 2]])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((np.array([1.0, 2.0]), np.array([1, 2]), 3), {},
         "values must be 2-D (n_jobs, n_options), got shape (2,)"),
        ((V, W[:, :1], 3), {}, "weights must have the shape of values (2, 2), got shape (2, 1)"),
        ((V.astype(str), W, 3), {}, "values must be a float array, got dtype <U32"),
        ((V, W.astype(float), 3), {},
         "weights must be an integer array within int64, got dtype float64"),
        ((V, W.astype(bool), 3), {},
         "weights must be an integer array within int64, got dtype bool"),
        ((V, np.array([[1, 2], [1, 2**64 - 1]], dtype=np.uint64), 3), {},
         "weights must be an integer array within int64, got dtype uint64"),
        ((V, W, 3.0), {}, "capacity must be an integer, got float"),
        ((V, W, True), {}, "capacity must be an integer, got bool"),
        ((V, W, -1), {}, "capacity must be >= 0, got -1"),
        ((V, W, 2**61 + 1), {}, "capacity 2305843009213693953 is too large (limit 2**61)"),
        ((V, W, 3), {"max_table_bytes": 1.5}, "max_table_bytes must be an integer, got float"),
        ((V, W, 3), {"max_table_bytes": -1}, "max_table_bytes must be >= 0, got -1"),
        ((np.array([[1.0, np.inf]]), np.array([[1, 1]]), 3), {},
         "values must be finite or NaN (absent option); found inf at values[0, 1]"),
        ((np.array([[1.0, 2.0], [-np.inf, 1.0]]), np.array([[0, 1], [1, 1]]), 3), {},
         "values must be finite or NaN (absent option); found -inf at values[1, 0]"),
        ((np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1, 2], [1, 0]]), 3), {},
         "weights must be >= 1 GPU for every present (non-NaN) option; weights[1, 1] = 0"),
        ((np.array([[1.0, np.nan]]), np.array([[-3, -3]]), 3), {},
         "weights must be >= 1 GPU for every present (non-NaN) option; weights[0, 0] = -3"),
        ((np.array([[1e308], [1e308]]), np.array([[1], [1]]), 2), {},
         "values too large: the chosen options' total overflows float64 (scale them down)"),
    ],
)
def test_solve_mckp_refusals(backend: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                             expected: str) -> None:
    assert refusal(solve_mckp, *args, backend=backend, **kwargs) == expected


def test_solve_mckp_unreadable_input_and_backend() -> None:
    assert refusal(solve_mckp, [[1.0], [2.0, 3.0]], W, 1).startswith(
        "values cannot be read as an array: ")
    assert refusal(solve_mckp, V, [[1], [2, 3]], 1).startswith(
        "weights cannot be read as an array: ")
    assert refusal(solve_mckp, V, W, 1, backend="gpu") == (
        "backend must be 'native' or 'reference', got 'gpu'")
    # the entries are checked without validate too
    assert refusal(solve_mckp, np.array([[np.inf]]), np.array([[1]]), 1, validate=False) == (
        "values must be finite or NaN (absent option); found inf at values[0, 0]")
    # an integer value array is read as float; a capacity as a numpy integer
    res = solve_mckp(np.array([[3, 5]]), np.array([[1, 2]]), np.int64(2))
    assert (res.choice.tolist(), res.value, res.used_gpus) == ([1], 5.0, 2)
    res = solve_mckp(np.zeros((0, 2)), np.zeros((0, 2), dtype=np.int64), 0)
    assert (res.choice.tolist(), res.value, res.used_gpus) == ([], 0.0, 0)


def _table_args(**change: Any) -> dict[str, Any]:
    args: dict[str, Any] = dict(remaining_work=[10.0], current_workers=[1], min_workers=[1],
                                max_workers=[3], gpus_per_worker=[1], alpha=[0.1],
                                rescale_pause_s=0.0)
    args.update(change)
    return args


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"remaining_work": [[10.0]]}, "remaining_work must be 1-D, got shape (1, 1)"),
        ({"remaining_work": ["a"]}, "remaining_work must be a numeric array, got dtype <U1"),
        ({"remaining_work": [math.nan]}, "remaining_work must be finite"),
        ({"remaining_work": [-1.0]}, "remaining_work must be >= 0"),
        ({"current_workers": [1, 2]}, "current_workers must have length 1, got 2"),
        ({"current_workers": [1.0]},
         "current_workers must be an integer array within int64, got dtype float64"),
        ({"current_workers": [-1]}, "current_workers must be >= 0"),
        ({"min_workers": [0]}, "min_workers must be >= 1"),
        ({"max_workers": [0]}, "max_workers must be >= min_workers"),
        ({"min_workers": [2], "max_workers": [1], "current_workers": [2]},
         "max_workers must be >= min_workers"),
        ({"gpus_per_worker": [0]}, "gpus_per_worker must be >= 1"),
        ({"alpha": [-0.5]}, "alpha must be >= 0"),
        ({"alpha": [math.inf]}, "alpha must be finite"),
        ({"rescale_pause_s": "x"}, "rescale_pause_s must be a number, got 'x'"),
        ({"rescale_pause_s": None}, "rescale_pause_s must be a number, got None"),
        ({"rescale_pause_s": -1}, "rescale_pause_s must be finite and >= 0, got -1.0"),
        ({"rescale_pause_s": math.inf}, "rescale_pause_s must be finite and >= 0, got inf"),
        ({"gpus_per_worker": [2**61], "max_workers": [3]},
         "gpus_per_worker * (max_workers - min_workers) must be <= 2**61 (int64 weights)"),
        # 1 job x (2**30 - 1) options: 2**30 x 16 bytes
        ({"max_workers": [2**30]},
         "max_workers: a table of 1 jobs x 1073741823 extra-worker options needs 17179869184 "
         "bytes, above max_table_bytes=100000000"),
    ],
)
def test_jct_table_refusals(change: dict[str, Any], expected: str) -> None:
    assert refusal(jct_reduction_table, **_table_args(**change)) == expected


def test_jct_table_edges() -> None:
    # a table exactly at the byte limit is built: 1 job x 2 options = 3 x 16 = 48 bytes
    values, weights = jct_reduction_table(**_table_args(), max_table_bytes=48)
    assert values.shape == (1, 2)
    assert refusal(jct_reduction_table, **_table_args(), max_table_bytes=47) == (
        "max_workers: a table of 1 jobs x 2 extra-worker options needs 48 bytes, above "
        "max_table_bytes=47")
    # no jobs: an empty table
    values, weights = jct_reduction_table([], [], [], [], [], [], 5.0)
    assert values.shape == (0, 0)
    assert weights.shape == (0, 0)
    # zero work: every option is worth 0 (no time left at any size), pause aside:
    # current 1 = base: options k >= 1 pay the pause 5 -> -5
    values, _ = jct_reduction_table([0.0], [1], [1], [3], [1], [0.1], 5.0)
    assert values.tolist() == [[-5.0, -5.0]]
    # 2**61 exactly is accepted: 1 extra worker of 2**61 GPUs
    _, weights = jct_reduction_table([1.0], [1], [1], [2], [2**61], [0.0], 0.0)
    assert weights.tolist() == [[2**61]]


def ej(job_id: Any = "a", **kw: Any) -> ElasticJob:
    base: dict[str, Any] = dict(gpus_per_worker=1, current_workers=1, min_workers=1,
                                max_workers=4, remaining_work=100.0, alpha=0.0)
    base.update(kw)
    return ElasticJob(job_id=job_id, **base)


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ([ej()], "request must be an ElasticRequest, got list"),
        (ElasticRequest(5, 1), "jobs must be a sequence of ElasticJob, got int"),  # type: ignore[arg-type]
        (ElasticRequest([ej()], -1), "free_gpus must be an integer >= 0, got -1"),
        (ElasticRequest([ej()], 1.0), "free_gpus must be an integer >= 0, got 1.0"),  # type: ignore[arg-type]
        (ElasticRequest([ej()], True), "free_gpus must be an integer >= 0, got True"),
        (ElasticRequest([ej()], 1, -0.5), "rescale_pause_s must be finite and >= 0, got -0.5"),
        (ElasticRequest([ej()], 1, math.nan), "rescale_pause_s must be finite and >= 0, got nan"),
        (ElasticRequest([ej()], 1, True), "rescale_pause_s must be finite and >= 0, got True"),
        (ElasticRequest([ej(), "b"], 1), "jobs[1] must be an ElasticJob, got str"),  # type: ignore[list-item]
        (ElasticRequest([ej([1])], 1),
         "jobs[0]: job_id must be hashable (str or int), got [1]"),
        (ElasticRequest([ej(7), ej(7)], 1), "duplicate job_id 7"),
        (ElasticRequest([ej(gpus_per_worker=1.0)], 1),
         "job 'a': gpus_per_worker must be an integer, got 1.0"),
        (ElasticRequest([ej(gpus_per_worker=True)], 1),
         "job 'a': gpus_per_worker must be an integer, got True"),
        (ElasticRequest([ej(gpus_per_worker=0)], 1),
         "job 'a': gpus_per_worker must be in [1, 2**61], got 0"),
        (ElasticRequest([ej(current_workers=-1)], 1),
         "job 'a': current_workers must be in [0, 2**61], got -1"),
        (ElasticRequest([ej(min_workers=0)], 1),
         "job 'a': min_workers must be in [1, 2**61], got 0"),
        (ElasticRequest([ej(max_workers=2**61 + 1)], 1),
         "job 'a': max_workers must be in [1, 2**61], got 2305843009213693953"),
        (ElasticRequest([ej(remaining_work=-1.0)], 1),
         "job 'a': remaining_work must be finite and >= 0, got -1.0"),
        (ElasticRequest([ej(remaining_work="9")], 1),
         "job 'a': remaining_work must be finite and >= 0, got '9'"),
        (ElasticRequest([ej(alpha=math.inf)], 1),
         "job 'a': alpha must be finite and >= 0, got inf"),
        (ElasticRequest([ej(alpha=None)], 1),
         "job 'a': give exactly one of alpha and throughput_table"),
        (ElasticRequest([ej(throughput_table=(1.0,) * 4)], 1),
         "job 'a': give exactly one of alpha and throughput_table"),
        (ElasticRequest([ej(alpha=None, throughput_table=(1.0, "x", 2.0, 3.0))], 1),
         "job 'a': throughput_table must be a sequence of numbers"),
        (ElasticRequest([ej(alpha=None, throughput_table=(1.0, 2.0))], 1),
         "job 'a': throughput_table must have max_workers=4 entries (for 1..max_workers "
         "workers), got shape (2,)"),
        (ElasticRequest([ej(alpha=None, throughput_table=(1.0, 2.0, 0.0, 3.0))], 1),
         "job 'a': throughput_table entries must be finite and > 0"),
        (ElasticRequest([ej(alpha=None, throughput_table=(1.0, 2.0, math.inf, 3.0))], 1),
         "job 'a': throughput_table entries must be finite and > 0"),
        # capacity: 2**61 free + 1 extra worker of 1 GPU
        (ElasticRequest([ej(current_workers=2)], 2**61),
         "free_gpus plus the GPUs of current extra workers is 2305843009213693953, above 2**61"),
        # 100,000,000 bytes / 16 = 6,250,000 cells: 1 job x 6,250,000 options does not fit
        (ElasticRequest([ej(max_workers=10**7)], 6_250_000),
         "free_gpus: a table of 1 jobs x 6250000 extra-worker options exceeds 100000000 bytes"),
    ],
)
def test_solve_refusals(request_: Any, expected: str) -> None:
    assert refusal(solve, request_) == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_reasons_of_jobs_that_keep_their_size(backend: str) -> None:
    # linear speed-up (alpha 0), R = 100 single-worker s, pause 30 s.
    # a: at base 1 (current 1), 4 free GPUs: J(0) = 100, J(k) = 100 / (1 + k) + 30:
    #    k = 3: 25 + 30 = 55, value 45 -> scaled out to 4 workers.
    # b: current 4 = its max (min 1): its 3 extra GPUs count in the capacity (4 + 3 = 7)
    #    and it keeps them: J(3) = 25 with no pause against J(0) = 100 + 30; AT_MAX.
    reply = solve(ElasticRequest([ej("a"), ej("b", current_workers=4)], 4, 30.0),
                  backend=backend)
    a, b = reply.decisions
    assert (a.target_workers, a.extra_workers, a.reason) == (4, 3, DecisionReason.SCALED_OUT)
    assert a.jct_reduction_s == 100.0 - 55.0
    assert (b.target_workers, b.reason) == (4, DecisionReason.AT_MAX)
    # b alone keeps J(3) = 25 vs J(0) = 100 + 30: value 105
    assert b.jct_reduction_s == 130.0 - 25.0
    assert reply.capacity_gpus == 4 + 3
    assert reply.used_gpus == 6
    assert reply.total_value_s == 45.0 + 105.0
    # no work left, current 2 (base 1): J(k) is only the pause of a size other than 2:
    # J(0) = 30, J(1) = 0, J(2) = J(3) = 30; staying at 2 is worth 30 and nothing larger
    # is worth more: NO_GAIN, unchanged at 2
    reply = solve(ElasticRequest([ej("c", current_workers=2, remaining_work=0.0)], 2, 30.0),
                  backend=backend)
    (c,) = reply.decisions
    assert (c.target_workers, c.reason, c.jct_reduction_s) == (2, DecisionReason.NO_GAIN, 30.0)
    # 0 free GPUs and at base: a larger size would help but nothing fits: NO_CAPACITY
    reply = solve(ElasticRequest([ej("d")], 0, 30.0), backend=backend)
    assert reply.decisions[0].reason is DecisionReason.NO_CAPACITY
    assert reply.decisions[0].jct_reduction_s == 0.0
    # ... unless the pause eats the gain: R = 20: J(0) = 20, J(3) = 5 + 30 = 35: NO_GAIN
    reply = solve(ElasticRequest([ej("e", remaining_work=20.0)], 0, 30.0), backend=backend)
    assert reply.decisions[0].reason is DecisionReason.NO_GAIN
    # a job with a table: T = (1, 1.5, 1.5, 1.5): 1 free GPU: J(0) = 100, J(1) = 66.7 + p
    t = (1.0, 1.5, 1.5, 1.5)
    reply = solve(ElasticRequest([ej("f", alpha=None, throughput_table=t)], 0, 0.0),
                  backend=backend)
    assert reply.decisions[0].reason is DecisionReason.NO_CAPACITY
    reply = solve(ElasticRequest([ej("f", alpha=None, throughput_table=t, current_workers=2)],
                                 0, 0.0), backend=backend)
    # at 2 workers nothing larger is faster (1.5 throughout): NO_GAIN
    assert reply.decisions[0].reason is DecisionReason.NO_GAIN


@pytest.mark.parametrize("backend", BACKENDS)
def test_scale_in(backend: str) -> None:
    # b holds 3 extra workers (current 4), a is at base; 0 free GPUs: capacity 3.
    # a: R = 1,000, b: R = 10 (almost done).  Giving the 3 GPUs to a: J_a(0) = 1000,
    # J_a(3) = 250 + 30: value 720; b keeping them: J_b(0) = 10 + 30 (a change), J_b(3) =
    # 2.5: value 37.5.  a gets them; b is scaled in to its base 1.
    reply = solve(ElasticRequest([ej("a", remaining_work=1000.0),
                                  ej("b", current_workers=4, remaining_work=10.0)], 0, 30.0),
                  backend=backend)
    a, b = reply.decisions
    assert (a.target_workers, a.reason, a.jct_reduction_s) == (4, DecisionReason.SCALED_OUT,
                                                               720.0)
    assert (b.target_workers, b.extra_workers, b.reason, b.jct_reduction_s) == (
        1, 0, DecisionReason.SCALED_IN, 0.0)
    assert reply.capacity_gpus == 3
    assert dataclasses.asdict(reply)["used_gpus"] == 3
    # x: current 5 > max 4 is refused (it was answered "infeasible" with 4 extra workers)
    with pytest.raises(InvalidInputError, match=r"^job 'x': current_workers 5 outside "
                                                r"\[min_workers, max_workers\] = \[1, 4\]$"):
        solve(ElasticRequest([ej("a"), ej("x", current_workers=5)], 0, 30.0), backend=backend)
