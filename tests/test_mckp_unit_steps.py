"""The MCKP step shortcut (``mckp::solve_values_unit_steps``): kernel vs its Python twin,
its answers vs the exact solvers, and the cases where it must refuse."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from aryl._core import _mckp
from aryl._reference import mckp as ref
from aryl.elastic import _quantize, solve_mckp
from test_mckp import brute_force, milp_value


def kernel(
    values: NDArray[np.float64],
    weights: NDArray[np.int64],
    capacity: int,
    tops: NDArray[np.int64] | None = None,
    steps_g: NDArray[np.int64] | None = None,
) -> list[int] | None:
    """The compiled shortcut: its choice, or None when it refuses."""
    v = np.ascontiguousarray(values, dtype=np.float64)
    w = np.ascontiguousarray(weights, dtype=np.int64)
    choice = np.full(v.shape[0], -7, dtype=np.int64)
    if not _mckp.solve_values_unit_steps(v, w, capacity, choice, tops, steps_g):
        return None
    return choice.tolist()


def twin(
    values: NDArray[np.float64],
    weights: NDArray[np.int64],
    capacity: int,
    tops: NDArray[np.int64] | None = None,
    steps_g: NDArray[np.int64] | None = None,
) -> list[int] | None:
    res = ref.solve_unit_steps(_quantize(values), weights, capacity, tops=tops, steps_g=steps_g)
    return None if res is None else res.tolist()


def solver(values: NDArray[np.float64], weights: NDArray[np.int64], capacity: int) -> list[int]:
    """The generic exact solver's answer (native)."""
    return solve_mckp(values, weights, capacity).choice.tolist()


def steps_weights(g: NDArray[np.int64], k: int) -> NDArray[np.int64]:
    return (np.arange(1, k + 1, dtype=np.int64)[None, :] * g[:, None]).astype(np.int64)


def aryl_table(
    rng: np.random.Generator, n: int, k: int, g: NDArray[np.int64] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
    """An extra-worker table as the Aryl pass builds it (kernels._table): JCT reduction of
    c extra workers, a rescale pause for every change of a job's current size (so a job
    already holding extras has a bump there), ``+ p`` for jobs whose own pause is 0
    (which can leave their first options <= 0), NaN past each job's maximum.
    Returns values, weights (c * g) and each row's number of leading columns."""
    rem = rng.uniform(50.0, 1e5, size=n)
    base = rng.integers(1, 4, size=n)
    cur = base + rng.integers(0, k + 1, size=n)
    alpha = rng.uniform(0.02, 0.5, size=n)
    p = float(rng.uniform(0.0, 300.0))
    pause = np.where(rng.random(n) < 0.3, 0.0, p)
    workers = base[:, None] + np.arange(0, k + 1)[None, :]
    tput = workers / (1.0 + alpha[:, None] * (workers - 1.0))
    jct = rem[:, None] / tput + p * (workers != cur[:, None])
    values = jct[:, :1] - jct[:, 1:] + np.where(pause == 0.0, p, 0.0)[:, None]
    tops = rng.integers(0, k + 1, size=n).astype(np.int64)
    values[np.arange(k)[None, :] >= tops[:, None]] = np.nan
    if g is None:
        g = np.ones(n, dtype=np.int64)
    return values, steps_weights(g, k), tops


# ------------------------------------------------------------------ random instances


@st.composite
def instances(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(0, 25))
    k = draw(st.integers(0, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    kind = draw(st.sampled_from(["aryl", "concave_int", "int", "float"]))
    g_mode = draw(st.sampled_from(["one", "one", "mixed", "big"]))
    perturb = draw(st.booleans()) and draw(st.booleans())  # a quarter: one weight off
    rng = np.random.default_rng(seed)
    g0 = int(rng.integers(1, 4))
    g = np.full(n, g0, dtype=np.int64)
    if g_mode == "mixed":
        g = rng.integers(1, 3, size=n).astype(np.int64)
    capacity = int(rng.integers(0, max(2, n * k * g0 // 2 + 2)))
    if g_mode == "big" and n:  # some jobs too big for any option to fit
        g[rng.random(n) < 0.3] = capacity + 1
    if kind == "aryl":
        values, weights, tops = aryl_table(rng, n, k, g)
    else:
        if kind == "concave_int":  # small non-increasing increments: exact ties abound
            inc = -np.sort(-rng.integers(-1, 6, size=(n, k)), axis=1)
            values = np.cumsum(inc, axis=1).astype(np.float64)
        elif kind == "int":
            values = rng.integers(-2, 12, size=(n, k)).astype(np.float64)
        else:
            values = rng.uniform(-1.0, 10.0, size=(n, k))
        values[rng.random((n, k)) < 0.1] = np.nan
        weights = steps_weights(g, k)
        tops = np.full(n, k, dtype=np.int64)
    if perturb and n and k:
        i, j = int(rng.integers(n)), int(rng.integers(k))
        weights[i, j] += 1
    return values, weights, capacity, tops, g, perturb


@settings(max_examples=400, deadline=None)
@given(inst=instances())
def test_kernel_matches_twin_and_solver(inst: tuple) -> None:
    values, weights, capacity, tops, g, perturb = inst
    got = kernel(values, weights, capacity)
    assert got == twin(values, weights, capacity)
    # told which columns to read (the rest is NaN) and, with step weights, the g's
    assert kernel(values, weights, capacity, tops=tops) == got
    assert twin(values, weights, capacity, tops=tops) == got
    if not perturb:
        assert kernel(values, weights, capacity, tops=tops, steps_g=g) == got
        assert twin(values, weights, capacity, tops=tops, steps_g=g) == got
    if got is not None:
        assert got == solver(values, weights, capacity)
        if values.shape[0] <= 10 and capacity <= 60:
            assert got == solve_mckp(values, weights, capacity, backend="reference").choice.tolist()


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_tiny_instances_against_brute_force(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 5))
    k = data.draw(st.integers(1, 4))
    capacity = data.draw(st.integers(0, 12))
    vals = data.draw(
        st.lists(st.one_of(st.integers(-3, 12).map(float), st.just(np.nan)),
                 min_size=n * k, max_size=n * k)
    )
    g = np.full(n, data.draw(st.integers(1, 2)), dtype=np.int64)
    values = np.array(vals, dtype=np.float64).reshape(n, k)
    weights = steps_weights(g, k)
    got = kernel(values, weights, capacity)
    assert got == twin(values, weights, capacity)
    if got is not None:
        assert got == brute_force(values, weights, capacity)


@pytest.mark.parametrize("seed", range(8))
def test_aryl_tables_mostly_apply_and_are_optimal(seed: int) -> None:
    rng = np.random.default_rng(seed)
    applied = 0
    for _ in range(6):
        n, k = 60, 12
        values, weights, tops = aryl_table(rng, n, k)
        capacity = int(rng.integers(20, 200))
        got = kernel(values, weights, capacity, tops=tops, steps_g=np.ones(n, dtype=np.int64))
        assert got == kernel(values, weights, capacity)
        assert got == twin(values, weights, capacity)
        if got is None:
            continue
        applied += 1
        assert got == solver(values, weights, capacity)
        choice = np.array(got)
        rows = np.flatnonzero(choice >= 0)
        assert weights[rows, choice[rows]].sum() <= capacity
        value = float(values[rows, choice[rows]].sum())
        assert value == pytest.approx(milp_value(values, weights, capacity), rel=1e-9)
    assert applied >= 3  # the shortcut is for these tables: it must answer most


def test_refusals_and_answers_both_occur() -> None:
    # the random instances above exercise both outcomes (else they prove little), and
    # answers for tables the plain greedy (concave rows only) would not take
    rng = np.random.default_rng(2)
    outcomes = {"applied": 0, "refused": 0, "not_concave_applied": 0}
    for _ in range(300):
        n, k = int(rng.integers(2, 30)), int(rng.integers(2, 10))
        values, weights, tops = aryl_table(rng, n, k)
        capacity = int(rng.integers(1, max(2, int(tops.sum()))))
        got = kernel(values, weights, capacity)
        assert got == twin(values, weights, capacity)
        if got is None:
            outcomes["refused"] += 1
            continue
        outcomes["applied"] += 1
        assert got == solver(values, weights, capacity)
        q = _quantize(values)
        for i in range(n):
            inc = np.diff(q[i, : tops[i]], prepend=0)
            if (inc <= 0).any() or (np.diff(inc) > 0).any():  # a bump, a fall, q <= 0
                outcomes["not_concave_applied"] += 1
                break
    assert outcomes["applied"] > 200
    assert outcomes["refused"] > 4
    assert outcomes["not_concave_applied"] > 50


# ------------------------------------------------------------------ named cases


def test_tie_at_the_cut_refuses() -> None:
    # one step of room, two equal first steps: the tie rule would have to choose
    values = np.array([[10.0, 15.0], [10.0, 15.0]])
    weights = steps_weights(np.array([1, 1]), 2)
    assert kernel(values, weights, 1) is None
    assert twin(values, weights, 1) is None
    assert solver(values, weights, 1) == [0, -1]
    # two steps: 10, 10 taken, the 5s left: a clean cut
    assert kernel(values, weights, 2) == [0, 0] == solver(values, weights, 2)
    # three steps: 10, 10 and one of the equal 5s: a tie again
    assert kernel(values, weights, 3) is None
    assert solver(values, weights, 3) == [1, 0]


def test_bump_answered_when_the_cut_is_clean_refused_when_it_splits() -> None:
    # job 0 has its bump at option 1: hull origin -> (2, 10), two steps of 5; job 1: 6
    values = np.array([[1.0, 10.0], [6.0, np.nan]])
    weights = steps_weights(np.array([1, 1]), 2)
    # one GPU: job 0's option 1 does not fit, its hull is option 0 alone (a step of 1)
    assert kernel(values, weights, 1) == [-1, 0] == solver(values, weights, 1)
    # two: the cut splits job 0's segment (6, 5 | 5): refuse
    assert kernel(values, weights, 2) is None
    assert twin(values, weights, 2) is None
    assert solver(values, weights, 2) == [1, -1]
    # three: everything fits
    assert kernel(values, weights, 3) == [1, 0] == solver(values, weights, 3)
    # with a job 2 of one step of 4, three GPUs cut cleanly (6, 5, 5 | 4)
    values = np.array([[1.0, 10.0], [6.0, np.nan], [4.0, np.nan]])
    weights = steps_weights(np.array([1, 1, 1]), 2)
    assert kernel(values, weights, 3) == [1, 0, -1] == solver(values, weights, 3)
    assert twin(values, weights, 3) == [1, 0, -1]


def test_absent_first_options() -> None:
    # job 0 started now: its first option is lowered below 0 by the pause; its hull
    # goes straight from the origin to option 2 (three steps of 7/3); job 1: 5, then 1
    values = np.array([[-2.0, 3.0, 7.0], [5.0, 6.0, np.nan]])
    weights = steps_weights(np.array([1, 1]), 3)
    assert kernel(values, weights, 4) == [2, 0] == solver(values, weights, 4)
    assert twin(values, weights, 4) == [2, 0]
    # three steps would split job 0's segment (5, 7/3, 7/3 | 7/3)
    assert kernel(values, weights, 3) is None
    assert solver(values, weights, 3) == [1, 0]


def test_mixed_g_refuses_unless_the_other_g_cannot_fit() -> None:
    values = np.array([[5.0, 8.0], [6.0, np.nan]])
    weights = np.array([[1, 2], [2, 4]], dtype=np.int64)  # g = 1 and g = 2
    assert kernel(values, weights, 3) is None
    assert twin(values, weights, 3) is None
    assert solver(values, weights, 3) == [0, 0]
    # job 1's g = 4 > capacity: no usable option, so one g among the usable ones
    weights = np.array([[1, 2], [4, 8]], dtype=np.int64)
    assert kernel(values, weights, 3) == [1, -1] == solver(values, weights, 3)


def test_weights_not_in_steps_refuse() -> None:
    values = np.array([[5.0, 8.0], [4.0, 6.0]])
    weights = np.array([[1, 3], [1, 2]], dtype=np.int64)  # job 0's option 1 is not 2 * 1
    assert kernel(values, weights, 3) is None
    assert twin(values, weights, 3) is None
    # the weight of a NaN or non-positive option is not looked at
    values[0, 1] = np.nan
    assert kernel(values, weights, 2) == [0, 0] == solver(values, weights, 2)
    values[0, 1] = -1.0
    assert kernel(values, weights, 2) == [0, 0] == solver(values, weights, 2)


def test_steps_g_and_tops_are_taken_on_trust() -> None:
    values = np.array([[5.0, 8.0]])
    weights = np.array([[1, 1]], dtype=np.int64)  # not steps: the checked entry refuses
    assert kernel(values, weights, 1) is None
    # told that they are steps of 1, the kernel does not read them: option 1 weighs 2
    assert kernel(values, weights, 1, steps_g=np.array([1])) == [0]
    assert twin(values, weights, 1, steps_g=np.array([1])) == [0]
    # told that only column 0 is present
    weights = np.array([[1, 2]], dtype=np.int64)
    assert kernel(values, weights, 2) == [1]
    assert kernel(values, weights, 2, tops=np.array([1])) == [0]
    assert twin(values, weights, 2, tops=np.array([1])) == [0]
    # a promise of g < 1 for a row with columns to read is broken: refuse
    assert kernel(values, weights, 2, steps_g=np.array([0])) is None
    assert twin(values, weights, 2, steps_g=np.array([0])) is None
    # ... but not for a row with none
    assert kernel(values, weights, 2, tops=np.array([0]), steps_g=np.array([0])) == [-1]


def test_everything_fits_takes_the_lightest_best_option() -> None:
    values = np.array([[5.0, 8.0, 8.0, 7.0], [2.0, np.nan, np.nan, np.nan]])
    weights = steps_weights(np.array([1, 1]), 4)
    assert kernel(values, weights, 10) == [1, 0] == solver(values, weights, 10)
    assert twin(values, weights, 10) == [1, 0]


def test_nothing_usable() -> None:
    weights = steps_weights(np.array([4, 4]), 2)
    values = np.array([[5.0, 9.0], [3.0, np.nan]])
    assert kernel(values, weights, 3) == [-1, -1] == solver(values, weights, 3)  # g > C
    assert kernel(values, weights, 0) == [-1, -1]
    values = np.array([[-1.0, np.nan], [0.0, -3.0]])
    assert kernel(values, weights, 20) == [-1, -1] == solver(values, weights, 20)
    assert kernel(np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64), 5) == []
    assert kernel(np.zeros((2, 0)), np.zeros((2, 0), dtype=np.int64), 5) == [-1, -1]


def test_quantised_ties_are_ties() -> None:
    # increments that differ by less than the value grid's quantum are equal steps
    values = np.array([[1.0], [1.0 + 2.0**-45]])
    weights = steps_weights(np.array([1, 1]), 1)
    assert kernel(values, weights, 1) is None
    assert solver(values, weights, 1) == [0, -1]
    values = np.array([[1.0], [1.0 + 2.0**-30]])  # a whole quantum apart: job 1 wins
    assert kernel(values, weights, 1) == [-1, 0] == solver(values, weights, 1)


@pytest.mark.parametrize("scale", [1e-300, 1e-3, 1.0, 1e12, 1e300])
def test_scales(scale: float) -> None:
    rng = np.random.default_rng(3)
    values, weights, tops = aryl_table(rng, 30, 6)
    values = values / np.nanmax(values) * scale
    for capacity in (5, 17, 40):
        got = kernel(values, weights, capacity, tops=tops, steps_g=np.ones(30, dtype=np.int64))
        assert got == twin(values, weights, capacity)
        if got is not None:
            assert got == solver(values, weights, capacity)


def test_inf_and_bad_weights_raise() -> None:
    weights = np.array([[1, 2]], dtype=np.int64)
    with pytest.raises(ValueError, match="inf"):
        kernel(np.array([[1.0, np.inf]]), weights, 3)
    with pytest.raises(ValueError, match="weights"):
        kernel(np.array([[1.0, 2.0]]), np.array([[1, 0]], dtype=np.int64), 3)


# ------------------------------------------------------------------ the stream

ANSWERED, REFUSED, GUESS_WRONG = 0, 1, 2


def stream(
    values: NDArray[np.float64],
    capacity: int,
    tops: NDArray[np.int64],
    steps_g: NDArray[np.int64],
    guess: float,
) -> tuple[int, list[int]]:
    """The shortcut fed row by row (``mckp::UnitStepStream``, one g for every row):
    (result, choice)."""
    v = np.ascontiguousarray(values, dtype=np.float64)
    choice = np.full(v.shape[0], -7, dtype=np.int64)
    assert len(set(steps_g.tolist())) <= 1
    g = int(steps_g[0]) if len(steps_g) else 1
    res = _mckp.unit_steps_stream(v, capacity, choice, np.ascontiguousarray(tops), g, guess)
    return res, choice.tolist()


def other_exponent(vmax: float) -> float:
    """A value whose frexp exponent differs from vmax's."""
    return vmax * 2.0 if vmax < 1e300 else vmax / 2.0


@settings(max_examples=400, deadline=None)
@given(inst=instances())
def test_stream_answers_as_the_kernel_with_the_right_guess(inst: tuple) -> None:
    values, weights, capacity, tops, g, perturb = inst
    if perturb or not values.size or not np.nanmax(values, initial=-1.0) > 0.0:
        return
    if len(set(g.tolist())) > 1:  # the stream takes one g for all rows
        return
    vmax = float(np.nanmax(values))
    got = kernel(values, weights, capacity, tops=tops, steps_g=g)
    res, choice = stream(values, capacity, tops, g, vmax)
    if capacity < g[0]:  # nothing fits: the stream is off (the caller asks the kernel)
        assert res == GUESS_WRONG
    elif got is not None:
        assert res == ANSWERED
        assert choice == got
    elif res == ANSWERED:  # a split segment, which the kernel refuses: the solver's choice
        assert choice == solver(values, weights, capacity)
    else:
        assert res == REFUSED
    # a wrong guess, or none, is never taken for the grid
    assert stream(values, capacity, tops, g, other_exponent(vmax))[0] == GUESS_WRONG
    assert stream(values, capacity, tops, g, 0.0)[0] == GUESS_WRONG
    # a guess of the same exponent is the same grid
    res2, choice2 = stream(values, capacity, tops, g, np.ldexp(0.5, np.frexp(vmax)[1]))
    assert res2 == res
    if res == ANSWERED:
        assert choice2 == choice


@pytest.mark.parametrize("seed", range(6))
def test_stream_on_aryl_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(8):
        n, k = int(rng.integers(1, 70)), int(rng.integers(1, 13))
        values, weights, tops = aryl_table(rng, n, k)
        if not np.nanmax(values, initial=-1.0) > 0.0:
            continue
        capacity = int(rng.integers(1, max(2, int(tops.sum()))))
        g = np.ones(n, dtype=np.int64)
        got = kernel(values, weights, capacity, tops=tops, steps_g=g)
        res, choice = stream(values, capacity, tops, g, float(np.nanmax(values)))
        assert res == ANSWERED or (res == REFUSED and got is None)
        if res == ANSWERED:
            assert choice == solver(values, weights, capacity)
            if got is not None:
                assert choice == got


@pytest.mark.parametrize("scale", [1e-300, 1e-3, 1.0, 1e12, 1e300])
def test_stream_scales(scale: float) -> None:
    # a value off the guessed grid (a wrong guess) must neither be taken nor overflow
    # the histogram: the largest value's exponent decides, and is checked
    rng = np.random.default_rng(5)
    values, weights, tops = aryl_table(rng, 30, 6)
    values = values / np.nanmax(values) * scale
    g = np.ones(30, dtype=np.int64)
    for capacity in (5, 17, 40):
        got = kernel(values, weights, capacity, tops=tops, steps_g=g)
        res, choice = stream(values, capacity, tops, g, scale)
        if 40 - np.frexp(scale)[1] > 1000:  # a grid of two scaling steps: not streamed
            assert res == GUESS_WRONG
        else:
            assert res == ANSWERED or (res == REFUSED and got is None)
        if res == ANSWERED:
            assert choice == (got if got is not None else solver(values, weights, capacity))
        for guess in (scale * 1e-200, scale * 1e-9, scale / 3.0, scale * 3.0, scale * 1e9):
            if 0.0 < guess < np.inf and np.frexp(guess)[1] != np.frexp(scale)[1]:
                assert stream(values, capacity, tops, g, guess)[0] == GUESS_WRONG


def test_stream_refusals_are_the_kernels() -> None:
    g = np.array([1, 1])
    tops = np.array([2, 2])
    values = np.array([[10.0, 15.0], [10.0, 15.0]])  # a tie at the cut
    assert stream(values, 1, tops, g, 15.0)[0] == REFUSED
    assert kernel(values, steps_weights(g, 2), 1) is None
    assert stream(values, 2, tops, g, 15.0) == (ANSWERED, [0, 0])
    # g < 1, or nothing fits: the stream is off
    assert stream(values, 2, tops, np.array([0, 0]), 15.0)[0] == GUESS_WRONG
    assert stream(values, 1, tops, np.array([2, 2]), 15.0)[0] == GUESS_WRONG
    # everything fits; nothing usable
    assert stream(values, 9, tops, g, 15.0) == (ANSWERED, [1, 1])
    values = np.array([[-1.0, 0.0], [3.0, np.nan]])
    assert stream(values, 9, np.array([2, 0]), g, 3.0) == (ANSWERED, [-1, -1])


def test_stream_answers_split_segments() -> None:
    # the kernel's refusals where the cut splits one job's hull segment (see
    # test_bump_answered_when_the_cut_is_clean_refused_when_it_splits and
    # test_absent_first_options): the stream answers them as the solver does
    g, tops = np.array([1, 1]), np.array([2, 1])
    values = np.array([[1.0, 10.0], [6.0, np.nan]])
    weights = steps_weights(g, 2)
    assert kernel(values, weights, 2) is None
    assert stream(values, 2, tops, g, 10.0) == (ANSWERED, [1, -1])
    assert solver(values, weights, 2) == [1, -1]
    values = np.array([[-2.0, 3.0, 7.0], [5.0, 6.0, np.nan]])
    weights = steps_weights(g, 3)
    assert kernel(values, weights, 3) is None
    assert stream(values, 3, np.array([3, 2]), g, 7.0) == (ANSWERED, [1, 0])
    assert solver(values, weights, 3) == [1, 0]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_stream_split_answers_against_brute_force(data: st.DataObject) -> None:
    # small instances with long segments (values on a few lines through the origin)
    # and ties: every answer, the split ones included, is the exact optimum the
    # solver's tie rule picks
    n = data.draw(st.integers(1, 5))
    k = data.draw(st.integers(1, 5))
    g0 = data.draw(st.integers(1, 2))
    rows = []
    for _ in range(n):
        slope = data.draw(st.sampled_from([1.0, 2.0, 3.0, 1.5]))
        row = [slope * (c + 1) + data.draw(st.sampled_from([0.0, 0.0, -1.0, 1.0, -0.5]))
               for c in range(k)]
        rows.append([x if data.draw(st.integers(0, 9)) else np.nan for x in row])
    values = np.array(rows, dtype=np.float64)
    if not np.nanmax(values, initial=-1.0) > 0.0:
        return
    capacity = data.draw(st.integers(g0, n * k * g0))
    g = np.full(n, g0, dtype=np.int64)
    weights = steps_weights(g, k)
    res, choice = stream(values, capacity, np.full(n, k, dtype=np.int64), g,
                         float(np.nanmax(values)))
    got = kernel(values, weights, capacity)
    assert res in (ANSWERED, REFUSED)
    if res == ANSWERED:
        assert choice == solver(values, weights, capacity) == brute_force(values, weights, capacity)
    else:
        assert got is None


def test_stream_answers_most_refusals_of_aryl_tables() -> None:
    # aryl tables (a bump at today's size, long segments from it) where the kernel
    # refuses: the stream answers them, the solver's choice
    rng = np.random.default_rng(11)
    refused = answered = 0
    for _ in range(1200):
        n, k = int(rng.integers(2, 40)), int(rng.integers(2, 10))
        values, weights, tops = aryl_table(rng, n, k)
        if not np.nanmax(values, initial=-1.0) > 0.0:
            continue
        capacity = int(rng.integers(1, max(2, int(tops.sum()))))
        if kernel(values, weights, capacity) is not None:
            continue
        refused += 1
        g = np.ones(n, dtype=np.int64)
        res, choice = stream(values, capacity, tops, g, float(np.nanmax(values)))
        if res == ANSWERED:
            answered += 1
            assert choice == solver(values, weights, capacity)
    assert refused > 25
    assert answered > refused * 0.8
