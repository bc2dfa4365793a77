"""The C++ building blocks of the ``aryl`` pass against their Python twins, bit for bit.

``sched_aryl.hpp`` ports the JCT-reduction tables of ``aryl.scheduling.kernels``
(numpy), the solver glue (``solve_extras``: MCKP, greedy, the unconstrained
choice, caps), ``ArylPass.slot_caps`` and the extra-worker placement
(``place_extras`` with ``keep`` / ``keep_exact``, ``fill_extras``, a resize's
placement).  Each is called through a test hook of ``aryl._core._sched`` on
random inputs and must return exactly what the Python function returns: the same
float64 bit patterns (NaN where NaN), the same integers, the same placements in
the same insertion order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl._core import _sched as native
from aryl.scheduling.aryl import ArylPass
from aryl.scheduling.kernels import _table, extras_table_from_throughput, solve_extras
from aryl.scheduling.placement import bf_place
from aryl.scheduling.state import split_placement

I64 = np.int64


def same_floats(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, NaN at the same cells and the same bit pattern everywhere else."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    na, nb = np.isnan(a), np.isnan(b)
    if not np.array_equal(na, nb):
        return False
    return bool(np.array_equal(a[~na].view(I64), b[~nb].view(I64)))


@st.composite
def job_rows(draw: st.DrawFn, n_max: int = 6) -> dict[str, np.ndarray]:
    """Candidates of one elastic phase: the running ones first, then jobs starting now."""
    n = draw(st.integers(0, n_max))
    n_run = draw(st.integers(0, n))
    base = np.array([draw(st.integers(1, 4)) for _ in range(n)], dtype=I64)
    mx = base + np.array([draw(st.integers(1, 5)) for _ in range(n)], dtype=I64)
    cur = np.array([draw(st.integers(int(base[i]), int(mx[i]))) if i < n_run else int(base[i])
                    for i in range(n)], dtype=I64)
    rem = np.array([draw(st.one_of(st.just(0.0), st.floats(1e-3, 1e7))) for _ in range(n)])
    alpha = np.array([draw(st.one_of(st.just(0.0), st.floats(0.0, 1.0))) for _ in range(n)])
    g = np.array([draw(st.sampled_from([1, 2, 4, 8])) for _ in range(n)], dtype=I64)
    p = draw(st.sampled_from([0.0, 30.0, 7.25]))
    pause = np.zeros(n)
    pause[:n_run] = p
    return dict(rem=rem, cur=cur, base=base, mx=mx, g=g, alpha=alpha, pause=pause)


@settings(max_examples=300, deadline=None)
@given(r=job_rows())
def test_extras_table_is_the_numpy_table(r: dict[str, np.ndarray]) -> None:
    v_py, w_py = _table(r["rem"], r["cur"], r["base"], r["mx"], r["g"], r["alpha"], r["pause"])
    v_c, w_c = native._aryl_extras_table(r["rem"], r["cur"], r["base"], r["mx"], r["g"],
                                         r["alpha"], r["pause"])
    assert same_floats(v_c, v_py)
    assert np.array_equal(w_c, w_py)
    assert w_c.shape == w_py.shape


def draw_throughputs(r: dict[str, np.ndarray], data: Any) -> np.ndarray:
    """Throughputs on base + c workers, c = 0..max - base, drawn per row; NaN past a
    row's maximum."""
    n = len(r["rem"])
    extra = r["mx"] - r["base"]
    n_cols = int(extra.max()) + 1 if n else 1
    tput = np.full((n, n_cols), np.nan)
    for i in range(n):
        tput[i, : extra[i] + 1] = [data.draw(st.floats(0.05, 64.0)) for _ in range(extra[i] + 1)]
    return tput


@settings(max_examples=300, deadline=None)
@given(r=job_rows(), data=st.data())
def test_table_from_throughput_is_the_numpy_table(r: dict[str, np.ndarray], data: Any) -> None:
    tput = draw_throughputs(r, data)
    v_py, w_py = extras_table_from_throughput(r["rem"], r["cur"], r["base"], r["mx"], r["g"],
                                              tput, r["pause"])
    v_c, w_c = native._aryl_extras_table_from_throughput(
        r["rem"], r["cur"], r["base"], r["mx"], r["g"], tput, r["pause"])
    assert same_floats(v_c, v_py)
    assert np.array_equal(w_c, w_py)
    assert w_c.shape == w_py.shape


def fed_rounds(r: dict[str, np.ndarray], tput: np.ndarray, capacity: int) -> None:
    """The table built feeding the MCKP step shortcut (three rounds: the first teaches
    it the grid), solved each time: the Python choice every round; the table written
    afterwards is the numpy table."""
    v_py, w_py = extras_table_from_throughput(r["rem"], r["cur"], r["base"], r["mx"], r["g"],
                                              tput, r["pause"])
    py = solve_extras(v_py, w_py, capacity, backend="native")
    choices, (v_c, w_c) = native._aryl_fed_solve_extras(
        r["rem"], r["cur"], r["base"], r["mx"], r["g"], tput, r["pause"], capacity, 3)
    assert [list(c) for c in choices] == [py.tolist()] * 3
    assert same_floats(v_c, v_py)
    assert np.array_equal(w_c, w_py)


@settings(max_examples=300, deadline=None)
@given(r=job_rows(n_max=10), capacity=st.integers(0, 40), data=st.data())
def test_fed_table_solves_like_python(r: dict[str, np.ndarray], capacity: int,
                                      data: Any) -> None:
    tput = draw_throughputs(r, data)
    fed_rounds(r, tput, capacity)


@pytest.mark.parametrize("seed", range(10))
def test_fed_table_solves_aryl_phases_like_python(seed: int) -> None:
    # phases as the itp-c07 replay has them: ~60 jobs, up to 12 extra workers, most
    # at their base (some holding extras, some starting now), 1-GPU workers
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 80))
    n_run = int(rng.integers(n // 2, n + 1))
    base = rng.integers(1, 5, size=n).astype(I64)
    mx = base + rng.integers(1, 13, size=n).astype(I64)
    cur = base.copy()
    held = rng.random(n) < 0.3
    cur[:n_run][held[:n_run]] += rng.integers(0, 4, size=int(held[:n_run].sum()))
    cur = np.minimum(cur, mx)
    rem = rng.uniform(10.0, 1e6, size=n)
    rem[rng.random(n) < 0.05] = 0.0
    alpha = rng.uniform(0.0, 0.3, size=n)
    pause = np.zeros(n)
    pause[:n_run] = 30.0
    extra = mx - base
    workers = base[:, None] + np.arange(int(extra.max()) + 1)[None, :]
    tput = workers / (1.0 + alpha[:, None] * (workers - 1.0))
    tput[np.arange(tput.shape[1])[None, :] > extra[:, None]] = np.nan
    r = dict(rem=rem, cur=cur, base=base, mx=mx, g=np.ones(n, dtype=I64), alpha=alpha,
             pause=pause)
    for capacity in (1, 7, int(extra.sum()) // 3, int(extra.sum()) // 2, int(extra.sum())):
        fed_rounds(r, tput, capacity)


@st.composite
def tables(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random table: values with NaN (absent), <= 0, ties; weights k * g; caps."""
    n = draw(st.integers(0, 7))
    k = draw(st.integers(0, 5))
    cell = st.one_of(st.just(np.nan), st.sampled_from([-3.0, 0.0, 1.0, 2.0, 4.0]),
                     st.floats(-10.0, 100.0))
    values = np.array([[draw(cell) for _ in range(k)] for _ in range(n)],
                      dtype=np.float64).reshape(n, k)
    g = np.array([draw(st.sampled_from([1, 2, 4])) for _ in range(n)], dtype=I64)
    weights = np.arange(1, k + 1, dtype=I64)[None, :] * g[:, None]
    caps = np.array([draw(st.integers(0, k)) for _ in range(n)], dtype=I64)
    return values, weights.reshape(n, k), caps


@settings(max_examples=400, deadline=None)
@given(t=tables(), capacity=st.integers(0, 40), solver=st.sampled_from(["mckp", "greedy"]),
       unconstrained=st.booleans(), use_caps=st.booleans())
def test_solve_extras_gives_the_python_choice(
    t: tuple[np.ndarray, np.ndarray, np.ndarray], capacity: int, solver: str,
    unconstrained: bool, use_caps: bool,
) -> None:
    values, weights, caps = t
    before = values.copy()
    py = solve_extras(values, weights, capacity, backend="native", solver=solver,
                      unconstrained_only=unconstrained, max_extra=caps if use_caps else None)
    c = native._aryl_solve_extras(values, weights, capacity, solver, unconstrained,
                                  caps if use_caps else None)
    assert same_floats(values, before)  # the table is not modified
    if py is None:
        assert c is None
    else:
        assert c is not None
        assert c.tolist() == py.tolist()


@settings(max_examples=200, deadline=None)
@given(free=st.lists(st.integers(0, 16), max_size=8),
       jobs=st.lists(st.tuples(st.sampled_from([1, 2, 3, 4, 8]), st.integers(0, 6)), max_size=6))
def test_slot_caps(free: list[int], jobs: list[tuple[int, int]]) -> None:
    g = np.array([x for x, _ in jobs], dtype=I64)
    max_extra = np.array([m for _, m in jobs], dtype=I64)
    py = ArylPass.slot_caps(free, g, max_extra)
    assert native._aryl_slot_caps(free, g.tolist(), max_extra.tolist()) == py.tolist()


@st.composite
def extras_scenario(draw: st.DrawFn) -> dict[str, Any]:
    """Servers in up to three groups, candidates (running ones with extras, then new ones),
    the free GPUs without the extras, and a choice ``k`` of extra workers."""
    n_srv = draw(st.integers(1, 6))
    servers = list(range(n_srv))
    cut = sorted(draw(st.lists(st.integers(0, n_srv), min_size=2, max_size=2)))
    parts = [servers[: cut[0]], servers[cut[0]: cut[1]], servers[cut[1]:]]
    order = draw(st.permutations([0, 1, 2]))
    groups = [parts[i] for i in order if parts[i]]
    n = draw(st.integers(1, 5))
    n_run = draw(st.integers(0, n))
    cand = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n, unique=True))
    g = [draw(st.sampled_from([1, 2, 4])) for _ in range(n)]
    free_wo = [draw(st.integers(0, 8)) for _ in range(n_srv)]
    extras_now: dict[int, dict[int, int]] = {}
    ext = [0] * n
    for i in range(n_run):
        srv = sorted(draw(st.sets(st.sampled_from(servers), max_size=3)))
        place = {s: draw(st.integers(1, 3)) for s in srv}
        if place:
            extras_now[cand[i]] = place
            ext[i] = sum(place.values())
    free = list(free_wo)
    for i in range(n_run):
        for s, c in extras_now.get(cand[i], {}).items():
            free[s] += c * g[i]
    max_extra = [ext[i] + draw(st.integers(0, 4)) for i in range(n)]
    k = [draw(st.integers(0, max_extra[i])) for i in range(n)]
    return dict(groups=groups, cand=cand, g=g, n_run=n_run, free_wo=free_wo, free=free,
                extras_now=extras_now, ext=ext, k=k, max_extra=max_extra)


def py_pass(groups: list[list[int]]) -> ArylPass:
    p = ArylPass.__new__(ArylPass)
    p.groups_extra = groups
    return p


def py_placed(placed: tuple[dict[int, dict[int, int]], list[int], dict[int, int]]) -> Any:
    new_extra, touched, short = placed
    return ({j: list(e.items()) for j, e in new_extra.items() if e}, list(touched),
            list(short.items()))


def c_placed(placed: tuple[dict[int, list[tuple[int, int]]], list[int], list[tuple[int, int]]],
             ) -> Any:
    new_extra, touched, short = placed
    return ({j: [tuple(x) for x in e] for j, e in new_extra.items()}, list(touched),
            [tuple(x) for x in short])


@settings(max_examples=800, deadline=None)
@given(
    free=st.lists(st.integers(0, 9), min_size=1, max_size=9),
    workers=st.integers(0, 12),
    g=st.sampled_from([1, 1, 2, 3, 4]),
    data=st.data(),
)
def test_bf_place_places_like_python(free: list[int], workers: int, g: int, data: Any) -> None:
    """bf_place (one walk over the groups, giving back when the slots are too few)
    against placement.bf_place: the same placement in the same order, the same free
    GPUs after (untouched when it does not fit); ``slots``: the caller's count."""
    n_srv = len(free)
    cut = sorted(data.draw(st.lists(st.integers(0, n_srv), min_size=2, max_size=2)))
    parts = [list(range(n_srv))[a:b] for a, b in ((0, cut[0]), (cut[0], cut[1]), (cut[1], n_srv))]
    order = data.draw(st.permutations([0, 1, 2]))
    groups = [parts[i] for i in order if parts[i]]
    slots = sum(free[s] // g for grp in groups for s in grp) if data.draw(st.booleans()) else -1
    free_py = list(free)
    py = bf_place(free_py, groups, workers, g)
    place_c, free_c = native._aryl_bf_place(list(free), groups, workers, g, slots)
    assert free_c == free_py
    assert (None if place_c is None else [tuple(e) for e in place_c]) == (
        None if py is None else list(py.items()))


@settings(max_examples=500, deadline=None)
@given(
    place=st.dictionaries(st.one_of(st.integers(0, 70), st.integers(0, 300)),
                          st.integers(1, 8), max_size=9),
    ex=st.dictionaries(st.integers(0, 80), st.integers(1, 4), max_size=5),
    data=st.data(),
)
def test_resize_placement_is_pythons(place: dict[int, int], ex: dict[int, int],
                                     data: Any) -> None:
    """elastic_phase's resize placement: the base part of ``place`` (split_placement,
    ascending servers), then the new extras added, in Python's dict order; with
    placements in ascending order, within 64 servers and spread wider."""
    if data.draw(st.booleans()):
        place = dict(sorted(place.items()))
    base = data.draw(st.integers(0, sum(place.values())))
    b0, _ = split_placement(place, base)
    newp = dict(b0)
    for s, c in ex.items():
        newp[s] = newp.get(s, 0) + c
    out, workers = native._aryl_resize_placement(list(place.items()), base, list(ex.items()))
    assert [tuple(e) for e in out] == list(newp.items())
    assert workers == sum(newp.values())


def assert_places_like_python(sc: dict[str, Any], free: list[int],
                               free_wo: list[int] | None, *,
                               native_free_wo: list[int] | None = None,
                               **native_kw: Any) -> None:
    """place_extras on ``free`` (and ``free_wo`` as free_wo_extras) in both passes: the
    same free GPUs after, the same extras per job in the same order, the same touched
    and short.  ``native_free_wo`` (instead of ``free_wo``) and ``native_kw``
    (extras_bound, short_pos) go to the compiled side only: hints that must not change
    the result."""
    cand, g, ext, k = sc["cand"], sc["g"], sc["ext"], sc["k"]
    free_py = list(free)
    placed_py = py_pass(sc["groups"]).place_extras(
        free_py, None if free_wo is None else list(free_wo), cand, sc["extras_now"],
        np.array(k, dtype=I64), np.array(ext, dtype=I64), np.array(cand, dtype=I64),
        np.array(g, dtype=I64), sc["n_run"])
    wo_c = free_wo if native_free_wo is None else native_free_wo
    free_c, placed_c = native._aryl_place_extras(
        list(free), wo_c, cand, sc["extras_now"], k, ext, g, sc["n_run"], sc["groups"],
        **native_kw)
    assert free_c == free_py
    assert c_placed(placed_c) == py_placed(placed_py)


@settings(max_examples=500, deadline=None)
@given(sc=extras_scenario(), exact=st.booleans())
def test_place_extras_places_like_python(sc: dict[str, Any], exact: bool) -> None:
    """Same free GPUs after, same extras per job in the same order, same touched and short."""
    free_wo = sc["free_wo"] if exact else None
    assert_places_like_python(sc, sc["free"], free_wo)


@settings(max_examples=500, deadline=None)
@given(sc=extras_scenario(), data=st.data())
def test_keep_with_competing_extras_places_like_python(sc: dict[str, Any], data: Any) -> None:
    """The keep pass (no ``free_wo_extras``) on free GPUs that need not hold every extra:
    the jobs' extras compete for some servers, so the visiting order matters there."""
    free = [data.draw(st.integers(0, 8)) for _ in sc["free"]]
    assert_places_like_python(sc, free, None)


@settings(max_examples=500, deadline=None)
@given(sc=extras_scenario(), data=st.data())
def test_keep_with_a_bound_places_like_python(sc: dict[str, Any], data: Any) -> None:
    """The keep pass told a bound on the extras' GPUs per server (``extras_bound``, as
    the pass passes the GPUs of every extra worker): it sums the demand only where
    free is below the bound, and places as Python still."""
    cand, g = sc["cand"], sc["g"]
    free = [data.draw(st.integers(0, 8)) for _ in sc["free"]]
    bound = [0] * len(free)
    for i, j in enumerate(cand):
        for s, c in sc["extras_now"].get(j, {}).items():
            bound[s] += c * g[i]
    bound = [b + data.draw(st.sampled_from([0, 0, 1, 4])) for b in bound]
    assert_places_like_python(sc, free, None, extras_bound=bound)


@settings(max_examples=500, deadline=None)
@given(sc=extras_scenario(), data=st.data())
def test_keep_from_free_short_of_the_extras_places_like_python(sc: dict[str, Any],
                                                              data: Any) -> None:
    """The keep pass as the pass runs it after phase 1 took extras' GPUs: free less
    every extra (free_wo_extras, below 0 where free is short of the extras there) and
    the positions with an extra on such a server (short_pos, maybe more): the result
    of Python's keep (no free_wo_extras) on that free."""
    cand, g = sc["cand"], sc["g"]
    free = [data.draw(st.integers(0, 8)) for _ in sc["free"]]
    wo = list(free)
    for i, j in enumerate(cand):
        for s, c in sc["extras_now"].get(j, {}).items():
            wo[s] -= c * g[i]
    short_pos = [i for i, j in enumerate(cand)
                 if any(wo[s] < 0 for s in sc["extras_now"].get(j, {}))
                 or (i < sc["n_run"] and data.draw(st.booleans()))]
    assert_places_like_python(sc, free, None, native_free_wo=wo, short_pos=short_pos)


@settings(max_examples=300, deadline=None)
@given(sc=extras_scenario(), exact=st.booleans(), data=st.data())
def test_fill_extras_fills_like_python(sc: dict[str, Any], exact: bool, data: Any) -> None:
    """place_extras then the fill rounds: same k, free GPUs and placement."""
    cand, g, ext, k, mx = sc["cand"], sc["g"], sc["ext"], sc["k"], sc["max_extra"]
    n = len(cand)
    width = max(mx) if n else 0
    cell = st.one_of(st.just(np.nan), st.floats(-5.0, 50.0), st.sampled_from([1.0, 2.0]))
    values = np.array([[data.draw(cell) if c < mx[i] else np.nan for c in range(width)]
                       for i in range(n)], dtype=np.float64).reshape(n, width)
    weights = np.arange(1, width + 1, dtype=I64)[None, :] * np.array(g, dtype=I64)[:, None]
    free_wo = sc["free_wo"] if exact else None
    p = py_pass(sc["groups"])
    args = (sc["extras_now"],)
    ka, exa, ca, ga = (np.array(x, dtype=I64) for x in (k, ext, cand, g))
    free = list(sc["free"])
    free0 = list(free)
    placed = p.place_extras(free, free_wo, cand, *args, ka, exa, ca, ga, sc["n_run"])
    k_py, placed_py = ArylPass.fill_extras(
        values, ka, np.array(mx, dtype=I64), g, free, free0, placed,
        lambda kv: p.place_extras(free, free_wo, cand, *args, kv, exa, ca, ga, sc["n_run"]))
    k_c, free_c, placed_c = native._aryl_fill_extras(
        values, weights.reshape(n, width), k, mx, list(sc["free"]), free_wo, cand,
        sc["extras_now"], ext, g, sc["n_run"], sc["groups"])
    assert list(k_c) == k_py.tolist()
    assert free_c == free
    assert c_placed(placed_c) == py_placed(placed_py)
