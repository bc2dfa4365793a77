"""Job-level elastic allocation: JCT table, solve() decisions, reasons, errors, CLI."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.elastic import (
    DecisionReason,
    ElasticJob,
    ElasticReply,
    ElasticRequest,
    jct_reduction_table,
    solve,
    throughput,
)
from aryl.errors import InvalidInputError

BACKENDS = ["native", "reference"]


def job(job_id: str, **kw: object) -> ElasticJob:
    base: dict[str, object] = dict(
        gpus_per_worker=1, current_workers=1, min_workers=1, max_workers=9,
        remaining_work=1e5, alpha=0.1,
    )
    base.update(kw)
    return ElasticJob(job_id=job_id, **base)  # type: ignore[arg-type]


def both(request: ElasticRequest) -> ElasticReply:
    native = solve(request)
    ref = solve(request, backend="reference")
    assert native == ref
    return native


# ------------------------------------------------------------------ table


def test_throughput_formula() -> None:
    t = throughput(np.array([1, 2, 4]), 0.5)
    np.testing.assert_allclose(t, [1.0, 2 / 1.5, 4 / 2.5])
    np.testing.assert_allclose(throughput(np.arange(1, 5), 0.0), [1, 2, 3, 4])


def test_jct_reduction_table_hand_computed() -> None:
    # job 0: R=120, b=1, c=2, m=3, g=2, alpha=0 (linear): J(0)=120+p, J(1)=60, J(2)=40+p
    # job 1: R=100, b=2, c=2, m=2 (rigid): no options
    values, weights = jct_reduction_table(
        remaining_work=[120.0, 100.0], current_workers=[2, 2], min_workers=[1, 2],
        max_workers=[3, 2], gpus_per_worker=[2, 4], alpha=[0.0, 0.3], rescale_pause_s=10.0,
    )
    assert values.shape == (2, 2)
    np.testing.assert_allclose(values[0], [130.0 - 60.0, 130.0 - 50.0])
    assert np.isnan(values[1]).all()
    assert weights.dtype == np.int64
    assert weights.tolist() == [[2, 4], [4, 8]]


def test_jct_reduction_table_amdahl() -> None:
    r, alpha = 1000.0, 0.25
    values, _ = jct_reduction_table([r], [3], [2], [5], [1], [alpha], 30.0)
    t = lambda w: w / (1 + alpha * (w - 1))  # noqa: E731
    j0 = r / t(2) + 30.0
    expected = [j0 - (r / t(3)), j0 - (r / t(4) + 30.0), j0 - (r / t(5) + 30.0)]
    np.testing.assert_allclose(values[0], expected)


def test_jct_reduction_table_validation() -> None:
    ok = dict(remaining_work=[1.0], current_workers=[1], min_workers=[1], max_workers=[2],
              gpus_per_worker=[1], alpha=[0.1], rescale_pause_s=0.0)
    jct_reduction_table(**ok)  # type: ignore[arg-type]
    bad = [
        ("remaining_work", [-1.0], ">= 0"), ("remaining_work", [np.inf], "finite"),
        ("min_workers", [0], "min_workers"), ("max_workers", [0], "max_workers"),
        ("gpus_per_worker", [0], "gpus_per_worker"), ("alpha", [-0.1], "alpha"),
        ("current_workers", [1.5], "integer"), ("min_workers", [1, 1], "length"),
        ("rescale_pause_s", -1.0, "rescale_pause_s"),
    ]
    for name, value, msg in bad:
        with pytest.raises(InvalidInputError, match=msg):
            jct_reduction_table(**{**ok, name: value})  # type: ignore[arg-type]


# ------------------------------------------------------------------ solve


def test_two_identical_jobs_share_evenly() -> None:
    reply = both(ElasticRequest([job("a"), job("b")], free_gpus=8))
    assert [d.target_workers for d in reply.decisions] == [5, 5]
    assert [d.reason for d in reply.decisions] == [DecisionReason.SCALED_OUT] * 2
    assert reply.used_gpus == 8
    assert reply.capacity_gpus == 8
    assert reply.total_value_s == pytest.approx(sum(d.jct_reduction_s for d in reply.decisions))


def test_tie_goes_to_the_earlier_job() -> None:
    # odd capacity: an even split is impossible, (4, 3) and (3, 4) tie; the first job wins
    reply = both(ElasticRequest([job("a"), job("b")], free_gpus=7))
    assert [d.extra_workers for d in reply.decisions] == [4, 3]
    reply = both(ElasticRequest([job("b"), job("a")], free_gpus=7))
    assert [(d.job_id, d.extra_workers) for d in reply.decisions] == [("b", 4), ("a", 3)]


def test_job_at_max_gets_nothing() -> None:
    jobs = [job("full", current_workers=4, min_workers=2, max_workers=4),
            job("rigid", current_workers=2, min_workers=2, max_workers=2),
            job("grow")]
    reply = both(ElasticRequest(jobs, free_gpus=3))
    d = {x.job_id: x for x in reply.decisions}
    assert d["full"].target_workers == 4
    assert d["full"].reason is DecisionReason.AT_MAX
    assert d["rigid"].target_workers == 2
    assert d["rigid"].reason is DecisionReason.AT_MAX
    assert d["rigid"].jct_reduction_s == 0.0
    assert d["grow"].target_workers == 4  # the 3 free GPUs
    assert reply.capacity_gpus == 3 + 2  # free + the current extras of "full"


def test_rescale_pause_prevents_churn() -> None:
    # running at 2 workers (1 extra); a third worker saves R/T(2) - R/T(3) seconds
    r, alpha = 60.0, 0.0  # linear: 30 s at 2 workers, 20 s at 3 -> saves 10 s
    stay = job("x", current_workers=2, min_workers=1, max_workers=3, remaining_work=r,
               alpha=alpha)
    reply = both(ElasticRequest([stay], free_gpus=5, rescale_pause_s=30.0))
    assert reply.decisions[0].target_workers == 2
    assert reply.decisions[0].reason is DecisionReason.NO_GAIN
    # without the pause (or a gain larger than it) the job grows
    reply = both(ElasticRequest([stay], free_gpus=5, rescale_pause_s=5.0))
    assert reply.decisions[0].target_workers == 3
    assert reply.decisions[0].reason is DecisionReason.SCALED_OUT


def test_scale_in_and_no_capacity() -> None:
    # "big" holds 3 extra GPUs but "small" gains much more from them
    big = job("big", current_workers=4, min_workers=1, max_workers=4, remaining_work=100.0,
              alpha=0.9)
    small = job("small", current_workers=1, min_workers=1, max_workers=4,
                remaining_work=1e6, alpha=0.0)
    reply = both(ElasticRequest([big, small], free_gpus=0, rescale_pause_s=0.0))
    d = {x.job_id: x for x in reply.decisions}
    assert d["big"].reason is DecisionReason.SCALED_IN
    assert d["big"].target_workers == 1
    assert d["small"].target_workers == 4
    # with one free GPU only, an unchanged job that would gain is NO_CAPACITY
    a = job("a", current_workers=2, min_workers=1, max_workers=4, alpha=0.0)
    b = job("b", current_workers=2, min_workers=1, max_workers=4, alpha=0.0)
    reply = both(ElasticRequest([a, b], free_gpus=1, rescale_pause_s=0.0))
    assert [x.target_workers for x in reply.decisions] == [3, 2]
    assert reply.decisions[1].reason is DecisionReason.NO_CAPACITY


def test_mixed_gpus_per_worker_matches_brute_force() -> None:
    import itertools

    jobs = [job("g1", gpus_per_worker=1, max_workers=8, alpha=0.3),
            job("g4", gpus_per_worker=4, max_workers=4, alpha=0.05, remaining_work=4e5),
            job("g2", gpus_per_worker=2, max_workers=6, alpha=0.1, remaining_work=2e5)]
    reply = both(ElasticRequest(jobs, free_gpus=13))

    # Oracle from the model alone: every job at 1 worker now, pause 30 s.  The JCT at
    # w workers is R (1 + a (w - 1)) / w, plus the pause when w != 1; the value of k
    # extra workers is J(1) - J(1 + k).  Enumerate every k vector within 13 GPUs.
    def jct(j: ElasticJob, w: int) -> float:
        assert j.alpha is not None
        return j.remaining_work * (1 + j.alpha * (w - 1)) / w + (30.0 if w != 1 else 0.0)

    best: tuple[float, int, tuple[int, ...]] | None = None
    for ks in itertools.product(*(range(j.max_workers) for j in jobs)):
        gpus = sum(k * j.gpus_per_worker for k, j in zip(ks, jobs, strict=True))
        if gpus > 13:
            continue
        value = sum(jct(j, 1) - jct(j, 1 + k) for k, j in zip(ks, jobs, strict=True))
        if best is None or value > best[0] + 1e-6:
            best = (value, gpus, ks)
    assert best is not None
    assert [d.extra_workers for d in reply.decisions] == list(best[2])
    assert reply.total_value_s == pytest.approx(best[0], rel=1e-12)
    assert reply.used_gpus == best[1]
    for d, j, k in zip(reply.decisions, jobs, best[2], strict=True):
        assert d.jct_reduction_s == pytest.approx(jct(j, 1) - jct(j, 1 + k), rel=1e-12)


def test_throughput_table_equals_alpha() -> None:
    sizes = np.arange(1, 7)
    table = tuple(float(x) for x in throughput(sizes, 0.2))
    a = job("a", max_workers=6, alpha=0.2)
    b = dataclasses.replace(a, alpha=None, throughput_table=table)
    ra = both(ElasticRequest([a, job("o", alpha=0.4)], free_gpus=6))
    rb = both(ElasticRequest([b, job("o", alpha=0.4)], free_gpus=6))
    assert [d.target_workers for d in ra.decisions] == [d.target_workers for d in rb.decisions]
    assert ra.total_value_s == pytest.approx(rb.total_value_s)


@pytest.mark.parametrize(("bad", "message"), [
    # before: these were answered (reason INFEASIBLE, extra_workers current - min:
    # -1 for "low") instead of refused; the state reader refuses the same sizes
    (job("low", current_workers=1, min_workers=2, max_workers=4),
     "job 'low': current_workers 1 outside [min_workers, max_workers] = [2, 4]"),
    (job("high", current_workers=5, min_workers=1, max_workers=4),
     "job 'high': current_workers 5 outside [min_workers, max_workers] = [1, 4]"),
    (job("inverted", current_workers=3, min_workers=3, max_workers=2),
     "job 'inverted': max_workers 2 < min_workers 3"),
    (job("inverted0", current_workers=0, min_workers=5, max_workers=2),
     "job 'inverted0': max_workers 2 < min_workers 5"),
])
def test_inconsistent_sizes_are_refused_naming_the_job(bad: ElasticJob, message: str) -> None:
    for backend in ("native", "reference"):
        with pytest.raises(InvalidInputError) as info:
            solve(ElasticRequest([job("ok"), bad], free_gpus=2), backend=backend)
        assert str(info.value) == message


def test_empty_request() -> None:
    reply = both(ElasticRequest([], free_gpus=10))
    assert reply.decisions == ()
    assert (reply.total_value_s, reply.used_gpus, reply.capacity_gpus) == (0.0, 0, 10)


@pytest.mark.parametrize(
    ("change", "msg"),
    [
        ({"gpus_per_worker": -1}, "gpus_per_worker"),
        ({"gpus_per_worker": 0}, "gpus_per_worker"),
        ({"current_workers": -1}, "current_workers"),
        ({"min_workers": 0}, "min_workers"),
        ({"max_workers": 2.5}, "max_workers"),
        ({"remaining_work": -5.0}, "remaining_work"),
        ({"remaining_work": float("nan")}, "remaining_work"),
        ({"alpha": None}, "exactly one"),
        ({"throughput_table": (1.0, 2.0)}, "exactly one"),
        ({"alpha": None, "throughput_table": (1.0, 2.0)}, "max_workers=9"),
        ({"alpha": None, "throughput_table": (0.0,) * 9}, "> 0"),
        ({"alpha": -0.5}, "alpha"),
    ],
)
def test_malformed_jobs_raise(change: dict[str, object], msg: str) -> None:
    bad = dataclasses.replace(job("x"), **change)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=msg):
        solve(ElasticRequest([bad], free_gpus=1))


def test_malformed_requests_raise() -> None:
    with pytest.raises(InvalidInputError, match="free_gpus"):
        solve(ElasticRequest([job("a")], free_gpus=-1))
    with pytest.raises(InvalidInputError, match="rescale_pause_s"):
        solve(ElasticRequest([job("a")], free_gpus=1, rescale_pause_s=-2.0))
    with pytest.raises(InvalidInputError, match="duplicate"):
        solve(ElasticRequest([job("a"), job("a")], free_gpus=1))


# ------------------------------------------------------------------ CLI


def test_cli_solve_csv(tmp_path: object) -> None:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "inst.csv"
    rows = ["job,option,gpus,value_s"] + [
        f"j{g},1,{g},{g}" for g in (5, 7, 12, 18)
    ]
    path.write_text("\n".join(rows) + "\n")
    runner = CliRunner()
    for backend in BACKENDS:
        result = runner.invoke(main, ["solve", str(path), "--capacity", "20",
                                      "--backend", backend])
        assert result.exit_code == 0, result.output
        assert "value 19" in result.output
        assert "used 19/20 GPUs" in result.output


def test_cli_solve_demo_and_errors(tmp_path: object) -> None:
    import pathlib
    import re

    from scipy.optimize import Bounds, LinearConstraint, milp

    from aryl.cli.solve import demo_instance

    runner = CliRunner()
    result = runner.invoke(main, ["solve", "--demo", "--jobs", "30", "--capacity", "40"])
    assert result.exit_code == 0, result.output
    # the printed rows add up to the printed totals ...
    rows = re.findall(r"^(job\d+)\s+\+(\d+)\s+(\d+)\s+(\S+)$", result.output, re.M)
    m = re.search(r"value ([\d.]+) s, used (\d+)/40 GPUs, (\d+)/30 jobs get an option",
                  result.output)
    assert m is not None, result.output
    assert int(m.group(3)) == len(rows) > 0
    assert int(m.group(2)) == sum(int(r[2]) for r in rows) <= 40
    assert float(m.group(1)) == pytest.approx(sum(float(r[3]) for r in rows), rel=1e-5)
    # ... and the value is the optimum of the same instance by scipy's MILP
    _, _, values, weights = demo_instance(30, 8, 0)
    ok = ~np.isnan(values) & (np.nan_to_num(values) > 0)
    idx = np.flatnonzero(ok.ravel())
    a = np.zeros((31, idx.size))
    a[idx // values.shape[1], np.arange(idx.size)] = 1.0
    a[30] = weights.ravel()[idx]
    res = milp(-values.ravel()[idx], constraints=LinearConstraint(a, -np.inf,
                                                                  np.append(np.ones(30), 40)),
               integrality=np.ones(idx.size), bounds=Bounds(0, 1), options={"mip_rel_gap": 0})
    assert res.status == 0
    assert float(m.group(1)) == pytest.approx(-res.fun, abs=1e-4)  # printed to 4 decimals
    path = pathlib.Path(str(tmp_path)) / "bad.csv"
    path.write_text("job,option,gpus,value_s\na,1,2,3.0\nb,1,-4,1.0\n")
    result = runner.invoke(main, ["solve", str(path), "--capacity", "5"])
    assert result.exit_code == 2
    assert f"Error: {path}, line 3, column 'gpus': gpus must be in [1, 2**61], got -4" \
        in result.output
    result = runner.invoke(main, ["solve", "--capacity", "5"])
    assert result.exit_code == 2
    assert "Error: give exactly one of FILE and --demo" in result.output


def test_huge_max_workers_does_not_allocate_the_range() -> None:
    # max_workers of 2**40 once made solve() allocate a (n_jobs, 2**40) table
    # (10**9 got the process OOM-killed); only options that fit the capacity matter.
    big = [job("a", max_workers=2**40, gpus_per_worker=8), job("b", max_workers=2**40)]
    small = [dataclasses.replace(j, max_workers=40) for j in big]
    for free in (0, 6, 30):
        got, want = both(ElasticRequest(big, free)), both(ElasticRequest(small, free))
        assert [(d.target_workers, d.reason) for d in got.decisions] == [
            (d.target_workers, d.reason) for d in want.decisions
        ]
        assert got.total_value_s == want.total_value_s
    # nothing fits job "a" (8 GPUs a worker) at free=6, yet more workers would help
    assert both(ElasticRequest(big, 6)).decisions[0].reason is DecisionReason.NO_CAPACITY
    # a throughput table that falls beyond the capacity: no gain there
    t = (1.0, 1.5, 1.2, 1.1, 1.0, 0.9)
    d = both(ElasticRequest([job("c", max_workers=6, alpha=None, throughput_table=t)], 1))
    assert (d.decisions[0].target_workers, d.decisions[0].reason) == (2, DecisionReason.SCALED_OUT)
    d = both(ElasticRequest([job("c", max_workers=6, alpha=None, throughput_table=t,
                                 current_workers=2)], 0))
    assert d.decisions[0].reason is DecisionReason.NO_GAIN
    # the public table builder refuses instead of allocating
    with pytest.raises(InvalidInputError, match="max_workers"):
        jct_reduction_table([1e4], [1], [1], [2**40], [1], [0.1], 0.0)


@pytest.mark.parametrize(
    ("build", "msg"),
    [
        (lambda: solve([job("a")]), "request must be an ElasticRequest"),  # type: ignore[arg-type]
        (lambda: solve(ElasticRequest(None, 1)), "jobs must be a sequence"),  # type: ignore[arg-type]
        (lambda: solve(ElasticRequest([job([1])], 1)), "job_id must be hashable"),  # type: ignore[arg-type]
        (lambda: solve(ElasticRequest(
            [job("a", max_workers=2, alpha=None, throughput_table=("x", "y"))], 1)),
         "throughput_table must be a sequence of numbers"),
        (lambda: solve(ElasticRequest([job("a", gpus_per_worker=2**62)], 1)), "2\\*\\*61"),
        (lambda: solve(ElasticRequest(
            [job("a", current_workers=2**60, max_workers=2**60, gpus_per_worker=8)], 1)),
         "free_gpus plus"),
        (lambda: jct_reduction_table([1.0, [2.0]], [1], [1], [3], [1], [0.1], 0.0),
         "remaining_work cannot be read"),
        (lambda: jct_reduction_table([1.0], [1], [1], np.array([3], dtype="m8[s]"), [1],
                                     [0.1], 0.0), "max_workers must be an integer"),
        (lambda: jct_reduction_table([1.0], [1], [1], [3], [1], [0.1], "x"),
         "rescale_pause_s must be a number"),
        (lambda: jct_reduction_table([1.0], [1], [1], [3], [2**62], [0.1], 0.0), "2\\*\\*61"),
    ],
)
def test_hostile_requests_raise_invalid_input(build: object, msg: str) -> None:
    with pytest.raises(InvalidInputError, match=msg):
        build()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        # pandas took a 5-field row under a 4-column header as index + shifted columns
        ("job,option,gpus,value_s\na,1,2,3,4\n", "line 2: expected 4 fields, got 5"),
        ("job,option,gpus,value_s\na,1,2\n", "line 2: expected 4 fields, got 3"),
        # a blank line is still a line of the file
        ("job,option,gpus,value_s\n\na,1,-2,3\n", "line 3, column 'gpus'"),
        ("job,option,gpus,value_s\na,1,99999999999999999999999,3\n", "line 2, column 'gpus'"),
        ("job,option,gpus,value_s\na,1,1_0,3\n", "line 2, column 'gpus'"),
        ("job,option,gpus,value_s\na,1,2,nan\n", "line 2, column 'value_s'"),
        ("job,option,gpus,value_s\na,,2,1\n", "line 2, column 'option'"),
        ("job,option,gpus,value_s,job\na,1,2,3,b\n", "line 1: duplicate column(s) ['job']"),
        ("", "line 1: empty file"),
    ],
)
def test_cli_solve_bad_csv_names_line_and_column(tmp_path: object, text: str,
                                                 where: str) -> None:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "bad.csv"
    path.write_text(text)
    result = CliRunner().invoke(main, ["solve", str(path), "--capacity", "4"])
    assert result.exit_code == 2, result.output
    assert f"bad.csv, {where}" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_cli_solve_csv_bom_and_column_order(tmp_path: object) -> None:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "inst.csv"
    path.write_bytes(b"\xef\xbb\xbfvalue_s,gpus, option,job,note\n3.5,2,x,a,hi\n\n1,1,y,a,\n")
    result = CliRunner().invoke(main, ["solve", str(path), "--capacity", "4"])
    assert result.exit_code == 0, result.output
    assert "value 3.5 s, used 2/4 GPUs, 1/1 jobs" in result.output


def test_jct_table_accepts_a_job_not_running_yet() -> None:
    # current 0 workers (not running): every size differs from today's, so every option
    # and the base pay the pause.  R = 120, b = 1, m = 2, alpha 0, pause 10:
    # J(0) = 120 + 10, J(1) = 60 + 10 -> value 60
    values, weights = jct_reduction_table([120.0], [0], [1], [2], [1], [0.0], 10.0)
    assert values.tolist() == [[60.0]]
    assert weights.tolist() == [[1]]
