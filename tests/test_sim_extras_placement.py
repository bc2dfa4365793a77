"""Phase 2 chooses only extra workers that can be placed (issue 9, item 2).

The ``aryl`` elastic phase (and ``elastic-greedy``, same path) gives extra
workers to elastic jobs by an MCKP over free GPUs; a worker of ``g`` GPUs needs
``g`` free GPUs on *one* server.  Checked here against brute force on small
random clusters: every extra-count vector is enumerated and its placeability
decided by an exhaustive search over assignments of workers to servers.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from aryl.scheduling import ClusterState, PassContext, SchedulePlan, make_policy
from aryl.scheduling.aryl import ArylPass
from aryl.sim import SimConfig, simulate

S = 8  # GPUs per server


def T(w: float, alpha: float) -> float:
    return w / (1.0 + alpha * (w - 1.0))


def placeable(free: tuple[int, ...], sizes: tuple[int, ...]) -> bool:
    """Exhaustive: can workers of these sizes be assigned to servers with these free GPUs?"""

    @functools.cache
    def go(i: int, left: tuple[int, ...]) -> bool:
        if i == len(sizes):
            return True
        g = sizes[i]
        tried = set()
        for s, f in enumerate(left):
            if f >= g and f not in tried:  # servers with equal free GPUs are symmetric
                tried.add(f)
                nxt = list(left)
                nxt[s] -= g
                if go(i + 1, tuple(sorted(nxt))):
                    return True
        return False

    return go(0, tuple(sorted(free)))


def jobs_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows).astype({
        "submit_time_s": "float64", "duration_s": "float64", "gpus": "int64",
        "gpus_per_worker": "int64", "min_workers": "int64", "max_workers": "int64",
        "elastic": "bool", "alpha": "float64",
    })


@st.composite
def cluster(draw: st.DrawFn) -> tuple[int, list[dict[str, Any]]]:
    n_srv = draw(st.integers(1, 3))
    rows: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, 4))):
        gpus = draw(st.integers(1, S))  # one worker of `gpus` GPUs (3, 5, 6, 7 fragment)
        rows.append(dict(job_id=f"R{i}", submit_time_s=0.0, duration_s=1e6, gpus=gpus,
                         gpus_per_worker=gpus, min_workers=1, max_workers=1, elastic=False,
                         alpha=0.0))
    for i in range(draw(st.integers(1, 3))):
        g = draw(st.sampled_from([1, 2, 4, 8]))
        b = draw(st.integers(1, 2))
        m = b + draw(st.integers(1, 3))
        tw = draw(st.integers(b, m))
        rows.append(dict(job_id=f"E{i}", submit_time_s=0.0,
                         duration_s=draw(st.sampled_from([1000.0, 5000.0, 20000.0])),
                         gpus=g * tw, gpus_per_worker=g, min_workers=b, max_workers=m,
                         elastic=True, alpha=draw(st.sampled_from([0.0, 0.1, 0.3]))))
    order = draw(st.permutations(range(len(rows))))
    return n_srv, [rows[i] for i in order]


def first_pass(
    n_srv: int, rows: list[dict[str, Any]], policy: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[int], pd.DataFrame, int]:
    """Run; return the free GPUs phase 2 saw at t = 0, the t = 0 starts and its repairs."""
    seen: list[list[int]] = []
    repairs: list[int] = []
    orig = ArylPass.elastic_phase

    def spy(self: ArylPass, d: Any, free: list[int], *a: Any, **kw: Any) -> bool:
        entry = list(free)
        ok = orig(self, d, free, *a, **kw)
        if ok and self.st.now_s == 0.0:
            seen.append(entry)
            repairs.append(d.n_extra_repairs)
        return ok

    monkeypatch.setattr(ArylPass, "elastic_phase", spy)
    res = simulate(jobs_frame(rows), policy=policy, inference=False,
                   config=SimConfig(n_training_servers=n_srv, n_inference_servers=0, check=True,
                                    engine="python"))  # the spy is on the Python pass
    monkeypatch.undo()
    ev = res.events
    starts = ev[(ev["time_s"] == 0.0) & (ev["event"] == "start")].set_index("job_id")
    return (seen[-1] if seen else []), starts, (repairs[-1] if repairs else 0)


ISSUE_CASE = (3, [
    dict(job_id="R1", submit_time_s=0.0, duration_s=1e5, gpus=6, gpus_per_worker=6,
         min_workers=1, max_workers=1, elastic=False, alpha=0.0),
    dict(job_id="R2", submit_time_s=0.0, duration_s=1e5, gpus=6, gpus_per_worker=6,
         min_workers=1, max_workers=1, elastic=False, alpha=0.0),
    dict(job_id="E1", submit_time_s=0.0, duration_s=5e4, gpus=8, gpus_per_worker=4,
         min_workers=1, max_workers=2, elastic=True, alpha=0.0),
    dict(job_id="E2", submit_time_s=0.0, duration_s=2000.0, gpus=8, gpus_per_worker=1,
         min_workers=4, max_workers=8, elastic=True, alpha=0.0),
])


@pytest.mark.parametrize("policy", ["aryl", "elastic-greedy"])
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sc=cluster())
@example(sc=ISSUE_CASE)
def test_chosen_extras_are_placed_and_none_placeable_is_left(
    sc: tuple[int, list[dict[str, Any]]], policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against brute force, at the first pass (t = 0, no current extras).

    Let ``F`` be the free GPUs per server that phase 2 sees (after the base
    phase placed every started job's base workers), ``k`` the extra workers each
    started elastic job ``i`` (``g_i`` GPUs per worker, ``b_i .. m_i`` workers)
    got, and ``V(k) = sum_i R_i / T_i(b_i) - R_i / T_i(b_i + k_i)`` the JCT
    reduction (no rescale pause: the jobs start now), ``R_i`` the job's work.
    A vector is *placeable* when its extra workers can all be assigned to
    servers of ``F`` (exhaustive search).  Asserted:

    1. every chosen extra is placed: the engine started job ``i`` with exactly
       ``b_i + k_i`` workers on servers that hold them (the invariant checker
       runs after the pass), and ``k`` is placeable;
    2. no placeable improvement is left: for no job is ``k + e_i`` placeable
       with ``k_i < m_i - b_i`` and a marginal value
       ``V(k + e_i) - V(k) > 1e-9 * max(1, V(k))``;
    3. (``aryl``, exact MCKP) when every vector of maximal value under the GPU
       count alone (``sum_i k_i g_i <= sum F``) is placeable, ``V(k)`` equals
       the brute-force optimum over placeable vectors.
    """
    n_srv, rows = sc
    free, starts, _ = first_pass(n_srv, rows, policy, monkeypatch)
    jobs = {r["job_id"]: r for r in rows}
    el = [j for j in starts.index if jobs[j]["elastic"]]
    if not el:
        return
    assert free, "phase 2 ran at t = 0"
    g = [jobs[j]["gpus_per_worker"] for j in el]
    b = [jobs[j]["min_workers"] for j in el]
    mx = [jobs[j]["max_workers"] - jobs[j]["min_workers"] for j in el]
    k = [int(starts.loc[j, "workers"]) - jobs[j]["min_workers"] for j in el]
    R = [jobs[j]["duration_s"] * T(jobs[j]["gpus"] / jobs[j]["gpus_per_worker"], jobs[j]["alpha"])
         for j in el]
    a = [jobs[j]["alpha"] for j in el]

    def value(kv: tuple[int, ...] | list[int]) -> float:
        return sum(R[i] / T(b[i], a[i]) - R[i] / T(b[i] + kv[i], a[i]) for i in range(len(el)))

    def can(kv: tuple[int, ...] | list[int]) -> bool:
        sizes = tuple(sorted((g[i] for i in range(len(el)) for _ in range(kv[i])), reverse=True))
        return placeable(tuple(free), sizes)

    assert all(0 <= k[i] <= mx[i] for i in range(len(el)))
    assert can(k)  # 1.
    v = value(k)
    tol = 1e-9 * max(1.0, v)
    for i in range(len(el)):  # 2.
        if k[i] < mx[i]:
            k2 = list(k)
            k2[i] += 1
            assert not (value(k2) - v > tol and can(k2)), (el[i], k, free)
    if policy != "aryl":
        return
    vectors = list(itertools.product(*(range(m + 1) for m in mx)))
    fits = [kv for kv in vectors if sum(kv[i] * g[i] for i in range(len(el))) <= sum(free)]
    best_count = max(value(kv) for kv in fits)
    optimal = [kv for kv in fits if value(kv) >= best_count - tol]
    if all(can(kv) for kv in optimal):  # 3.
        best_placeable = max(value(kv) for kv in fits if can(kv))
        assert v == pytest.approx(best_placeable, rel=1e-9, abs=1e-9)


def test_issue_case_uses_every_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3 servers; R1, R2 (one 6-GPU worker each), E1 (4-GPU workers, 1..2), E2 (1-GPU
    # workers, 4..8), alpha = 0.  Base phase (SJF by time at base size: E2 2000*8/4 =
    # 4000 s first, then R1, R2, E1 at 1e5 s): E2's 4 workers on s0, R1 on s1, R2 on s2,
    # E1's 4-GPU worker on s0.  Free: 0, 2, 2.  E1's extra worker (4 GPUs) fits on no
    # server; E2's 4 extra 1-GPU workers fit (2 + 2): 24 of 24 GPUs busy, E2 runs at its
    # traced 8 workers and ends at 2000 s.
    free, starts, repairs = first_pass(*ISSUE_CASE, "aryl", monkeypatch)
    assert sorted(free) == [0, 2, 2]
    assert starts.loc["E2", "workers"] == 8
    assert starts.loc["E1", "workers"] == 1
    assert repairs == 0  # the per-job slot cap already removes E1's option
    df = jobs_frame(ISSUE_CASE[1])
    for policy in ("aryl", "aryl-no-loan", "elastic-greedy"):
        res = simulate(df, policy=policy, inference=False, config=SimConfig(
            n_training_servers=3, n_inference_servers=0, check=True, timeseries_step_s=500.0))
        ts = res.timeseries
        assert ts.loc[ts["time_s"] < 2000.0, "busy_gpus"].tolist() == [24] * 4, policy
        j = res.jobs.set_index("job_id")
        assert j.loc["E2", "finish_s"] == 2000.0, policy
        # E1: 1 worker (speed T(1)/T(2) = 1/2) until 2000 (1000 traced s done), then 2
        # workers after a 30 s pause: 2000 + 30 + (50000 - 1000) = 51030
        assert j.loc["E1", "finish_s"] == 51030.0, policy


def test_repair_when_two_jobs_want_the_only_4_gpu_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3 servers.  Base phase, SJF by time at base size: E1 (1818 s) -> s0, E0 (2105 s)
    # -> s0 (best fit), E2 (20000 s) -> s1, R0 (5 GPUs) -> s2, R1 (1 GPU) -> s0.
    # Free: s0 8-4-1-1 = 2, s1 8-4 = 4, s2 8-5 = 3 (9 GPUs, one 4-GPU slot).
    # Values (alpha 0 / 0.1 / 0.3; R = duration * T(traced workers)):
    #   E2 (4-GPU workers, R = 5000 * 4 = 20000): +1 -> 20000 - 10000 = 10000
    #   E1 (4-GPU workers, R = 1000 * 2/1.1 = 1818.2): +1 -> 1818.2 - 1000 = 818.2
    #   E0 (1-GPU workers, R = 1000 * 4/1.9 = 2105.3): +1 736.8, +2 982.5, +3 1105.3
    # The MCKP over 9 GPUs takes E2+1, E1+1, E0+1 (4 + 4 + 1 GPUs, 11555.2) but only
    # one 4-GPU worker fits: E1's cap becomes 0, the re-solve gives E2+1, E0+3 (7 GPUs,
    # 11105.3, the best placeable: E1 cannot be added, E0 is at its maximum).
    rows = [
        dict(job_id="E2", submit_time_s=0.0, duration_s=5000.0, gpus=16, gpus_per_worker=4,
             min_workers=1, max_workers=4, elastic=True, alpha=0.0),
        dict(job_id="R0", submit_time_s=0.0, duration_s=1e6, gpus=5, gpus_per_worker=5,
             min_workers=1, max_workers=1, elastic=False, alpha=0.0),
        dict(job_id="E1", submit_time_s=0.0, duration_s=1000.0, gpus=8, gpus_per_worker=4,
             min_workers=1, max_workers=3, elastic=True, alpha=0.1),
        dict(job_id="R1", submit_time_s=0.0, duration_s=1e6, gpus=1, gpus_per_worker=1,
             min_workers=1, max_workers=1, elastic=False, alpha=0.0),
        dict(job_id="E0", submit_time_s=0.0, duration_s=1000.0, gpus=4, gpus_per_worker=1,
             min_workers=1, max_workers=4, elastic=True, alpha=0.3),
    ]
    free, starts, repairs = first_pass(3, rows, "aryl", monkeypatch)
    assert free == [2, 4, 3]
    assert repairs == 1
    assert starts.loc[["E2", "E1", "E0"], "workers"].tolist() == [2, 1, 4]


# ------------------------------------------------- the phase itself, random free GPUs


def _phase(
    policy: str, free: list[int], jobs: list[tuple[int, int, int, float, float]]
) -> ArylPass:
    """An ``aryl`` pass over servers with these free GPUs and these jobs starting now.

    Job ``(g, b, m, R, alpha)``: workers of ``g`` GPUs, base ``b``, maximum ``m``,
    ``R`` single-worker seconds of work (reference size 1, so ``remaining_s = R``).
    """
    st = ClusterState(config=__import__("aryl").SchedulerConfig(starvation_bound_s=1e9))
    for i in range(len(free)):
        st.add_server(f"s{i}", role="training", gpus=S)
    for i, (g, b, m, r, a) in enumerate(jobs):
        st.add_job(f"j{i}", arrival_s=0.0, gpus_per_worker=g, ref_workers=1, remaining_s=r,
                   min_workers=b, max_workers=m, elastic=True, alpha=a)
    ctx = PassContext(free=list(free), loaned=[], offered=[], capacity_gpus=sum(free))
    pas = ArylPass(make_policy(policy), st, ctx)  # type: ignore[arg-type]
    pas.set_groups([])
    return pas


@st.composite
def phase_case(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, int, int, float, float]]]:
    free = draw(st.lists(st.integers(0, S), min_size=1, max_size=3))
    jobs = []
    for _ in range(draw(st.integers(1, 4))):
        g = draw(st.sampled_from([1, 2, 4, 4, 8]))  # large workers compete for slots
        b = draw(st.integers(1, 3))
        m = b + draw(st.integers(1, 3))
        jobs.append((g, b, m, draw(st.sampled_from([500.0, 3000.0, 20000.0])),
                     draw(st.sampled_from([0.0, 0.1, 0.5]))))
    return free, jobs


@st.composite
def contention_case(
    draw: st.DrawFn,
) -> tuple[list[int], list[tuple[int, int, int, float, float]]]:
    """Fragmented servers (2-6 free GPUs each) and 2-4 jobs of 2/4-GPU workers."""
    free = draw(st.lists(st.integers(2, 6), min_size=2, max_size=3))
    jobs = []
    for _ in range(draw(st.integers(2, 4))):
        b = draw(st.integers(1, 2))
        jobs.append((draw(st.sampled_from([2, 4])), b, b + draw(st.integers(1, 3)),
                     draw(st.sampled_from([500.0, 3000.0, 20000.0])),
                     draw(st.sampled_from([0.0, 0.1, 0.5]))))
    return free, jobs


@pytest.mark.parametrize("policy", ["aryl", "elastic-greedy"])
@settings(max_examples=400, deadline=None)
@given(case=st.one_of(phase_case(), contention_case()))
def test_phase_two_on_random_free_gpus_against_brute_force(
    case: tuple[list[int], list[tuple[int, int, int, float, float]]], policy: str
) -> None:
    """Phase 2 alone (as a pass calls it: the fast path, then the solver), jobs starting now.

    Same definitions as above, with ``F`` drawn directly (1-3 servers, 0-8 free GPUs
    each) and 1-4 elastic jobs of 1/2/4/8-GPU workers, so that jobs often compete
    for the same large slots and the repair and fill steps run.  Asserted: (1) the
    extras handed out are placed on servers with room (per server, the extra GPUs
    sum to at most its free GPUs); (2) no single job can get one more extra worker
    with a marginal value > 1e-9 * max(1, V) such that the larger vector is
    placeable (exhaustive); (3) for ``aryl``, when every count-optimal vector is
    placeable, ``V`` equals the optimum over placeable vectors.
    """
    free, jobs = case
    pas = _phase(policy, free, jobs)
    n = len(jobs)
    d = SchedulePlan(now_s=0.0,
                     starts=[(j, {-1: jobs[j][1]}, 0) for j in range(n)])  # type: ignore[misc]
    fast = list(free)
    if not pas.elastic_phase(d, fast, [], {}, unconstrained_only=True, free_wo_extras=free):
        scratch = list(free)
        assert pas.elastic_phase(d, scratch, [], {}, free_wo_extras=list(free))
    if d.n_extra_repairs:
        event("repaired")  # coverage (--hypothesis-show-statistics)
    got = [{s: c for s, c in place.items() if s != -1} for _, place, _ in d.starts]
    used = [0] * len(free)
    for j, ex in enumerate(got):
        for s, c in ex.items():
            used[s] += c * jobs[j][0]
    assert all(u <= f for u, f in zip(used, free, strict=True))  # 1.
    k = [sum(ex.values()) for ex in got]
    g = [jb[0] for jb in jobs]
    b = [jb[1] for jb in jobs]
    mx = [jb[2] - jb[1] for jb in jobs]
    R = [jb[3] for jb in jobs]
    a = [jb[4] for jb in jobs]

    def value(kv: Any) -> float:
        return sum(R[i] / T(b[i], a[i]) - R[i] / T(b[i] + kv[i], a[i]) for i in range(n))

    def can(kv: Any) -> bool:
        sizes = tuple(sorted((g[i] for i in range(n) for _ in range(kv[i])), reverse=True))
        return placeable(tuple(free), sizes)

    v = value(k)
    tol = 1e-9 * max(1.0, v)
    for i in range(n):  # 2.
        if k[i] < mx[i]:
            k2 = list(k)
            k2[i] += 1
            assert not (value(k2) - v > tol and can(k2)), (i, k, free, jobs)
    if policy != "aryl":
        return
    vectors = list(itertools.product(*(range(m + 1) for m in mx)))
    fits = [kv for kv in vectors if sum(kv[i] * g[i] for i in range(n)) <= sum(free)]
    best_count = max(value(kv) for kv in fits)
    if all(can(kv) for kv in fits if value(kv) >= best_count - tol):  # 3.
        assert v == pytest.approx(max(value(kv) for kv in fits if can(kv)), rel=1e-9, abs=1e-9)


def test_fill_adds_the_placeable_workers_a_repair_left_out() -> None:
    # Two servers with 4 free GPUs each; J0: 4-GPU workers, base 1, up to 3 (2 extras),
    # R = 1200; J1: 2-GPU workers, base 1, up to 2 (1 extra), R = 400; alpha = 0, so
    # value(k) = R - R / (1 + k):  J0 +1 600, +2 800 (marginal 200, 50 per GPU);
    # J1 +1 200 (100 per GPU).  Start from k = (1, 0), as a repair may leave it: the
    # fill adds J1's worker first (100 > 50 per GPU): J0's 4 GPUs on server 0, J1's 2 on
    # server 1; then J0 +2 needs a second 4-GPU slot, but server 1 has 2 left: no
    # placement exists (4 + 4 + 2 > 8), so the fill stops at (1, 1), 2 GPUs free.
    from aryl.scheduling.kernels import extras_table

    free0 = [4, 4]
    pas = _phase("aryl", free0, [(4, 1, 3, 1200.0, 0.0), (2, 1, 2, 400.0, 0.0)])
    i64 = np.int64
    g = np.array([4, 2], dtype=i64)
    base = np.array([1, 1], dtype=i64)
    values, _ = extras_table(np.array([1200.0, 400.0]), base, base, np.array([3, 2], dtype=i64),
                             g, np.zeros(2), np.zeros(2))
    np.testing.assert_allclose(values[0], [600.0, 800.0])
    assert values[1, 0] == 200.0
    cand, ci, ext = [0, 1], np.array([0, 1], dtype=i64), np.zeros(2, dtype=i64)
    free = list(free0)

    def place(kv: np.ndarray) -> Any:
        return pas.place_extras(free, None, cand, {}, kv, ext, ci, g, 0)

    k0 = np.array([1, 0], dtype=i64)
    placed0 = place(k0)
    assert free == [0, 4]
    assert not placed0[2]
    k, placed = ArylPass.fill_extras(values, k0, np.array([2, 1], dtype=i64), [4, 2], free,
                                        free0, placed0, place)
    assert k.tolist() == [1, 1]
    assert placed[0] == {0: {0: 1}, 1: {1: 1}}
    assert free == [0, 2]
