"""The request-level replay: the FCFS queue against M/M/c closed forms, hand
cases (a reclaim with a cold start delays exactly these requests by exactly
these seconds), a brute-force oracle and the compiled kernel against its
Python twin; the serving capacity derived from a loan timeline."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl.errors import InvalidInputError
from aryl.sim.serving import ServingOptions, replay_requests, serve, serving_capacity
from aryl.traces.requests import RequestTrace


def _erlang_c_closed_form(c: int, a: float) -> float:
    # C(c, a) = (a^c / c! * c / (c - a)) / (sum_{k < c} a^k / k! + a^c / c! * c / (c - a))
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_mmc_waiting_probability_and_mean_wait(backend: str) -> None:
    # M/M/4, lambda = 3/s, mu = 1/s (a = 3 Erlangs, rho = 0.75)
    c, lam, mu = 4, 3.0, 1.0
    n = 400_000 if backend == "native" else 100_000
    rng = np.random.default_rng(7)
    arr = np.cumsum(rng.exponential(1 / lam, n))
    svc = rng.exponential(1 / mu, n)
    starts = replay_requests(arr, svc, np.array([0.0]), np.array([c]), backend=backend)
    wait = (starts - arr)[n // 20:]  # drop the warm-up (the queue starts empty)
    pc = _erlang_c_closed_form(c, lam / mu)  # 13.5 / 26.5 = 0.5094
    assert pc == pytest.approx(13.5 / 26.5)
    # tolerance: 3% of each figure (with 1e5..4e5 correlated samples the standard
    # errors are ~0.5-1%)
    assert np.mean(wait > 0) == pytest.approx(pc, rel=0.03)
    assert np.mean(wait) == pytest.approx(pc / (c * mu - lam), rel=0.03)
    # the tail: P(W > 1 s) = C exp(-(c mu - lambda) 1 s) = 0.5094 / e = 0.1874
    assert np.mean(wait > 1.0) == pytest.approx(pc * math.exp(-(c * mu - lam)), rel=0.03)


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_hand_cases(backend: str) -> None:
    def run(a, s, ct, cv):
        return replay_requests(np.array(a, float), np.array(s, float), np.array(ct, float),
                               np.array(cv), backend=backend).tolist()

    # one GPU: 0 -> [0, 2), 1 waits to 2, 2 waits to 4
    assert run([0, 1, 2], [2, 2, 2], [0], [1]) == [0.0, 2.0, 4.0]
    # two GPUs, one lent at t = 1 (drains: the request on it runs to 3):
    # r0 [0, 3) and r1 [0.5, 2.5); at 1 the cap is 1 and two run; r2 (arrives 1.5)
    # waits until fewer than 1 run: r1 ends 2.5 (r0 still runs), r0 ends 3 -> 3
    assert run([0, 0.5, 1.5], [3, 2, 1], [0, 1], [2, 1]) == [0.0, 0.5, 3.0]
    # capacity 0 until 10: both wait; the rise at 10 holds from 10 (ties: a step at s
    # holds from s); a request ending at s frees its GPU at s: r2 starts at 15
    assert run([1, 2, 3], [5, 5, 1], [0, 10], [0, 2]) == [10.0, 10.0, 15.0]
    # FCFS: starts in arrival order (r2 does not start before r1)
    assert run([0, 0, 0], [10, 10, 1], [0], [1]) == [0.0, 10.0, 20.0]
    # capacity 0 for ever from 5: r1 (arrives 6) is never served
    assert run([1, 6], [1, 1], [0, 5], [1, 0]) == [1.0, math.inf]


def _brute_force(a, s, ct, cv):
    """Earliest feasible start over every candidate time, O(n^2)."""
    starts: list[float] = []
    ends: list[float] = []

    def cap(t: float) -> int:
        k = max(0, int(np.searchsorted(ct, t, side="right")) - 1)
        return int(cv[k])

    for i in range(len(a)):
        lo = max(a[i], starts[-1] if starts else -math.inf)
        cands = sorted({lo, *[e for e in ends if e > lo], *[t for t in ct if t > lo]})
        got = math.inf
        for t in cands:
            busy = sum(1 for b, e in zip(starts, ends, strict=True) if b <= t < e)
            if busy < cap(t):
                got = t
                break
        starts.append(got)
        ends.append(got + s[i])
        if got == math.inf:
            break
    return starts + [math.inf] * (len(a) - len(starts))


@settings(max_examples=150, deadline=None)
@given(
    gaps=st.lists(st.integers(0, 6), min_size=1, max_size=25),
    svc=st.lists(st.integers(1, 9), min_size=25, max_size=25),
    steps=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 3)), max_size=6),
    c0=st.integers(0, 3),
)
def test_kernel_twin_and_brute_force_agree(gaps, svc, steps, c0) -> None:
    # whole-second times: ties between arrivals, ends and capacity steps are common
    a = np.cumsum(np.array(gaps, dtype=float))
    s = np.array(svc[: len(a)], dtype=float)
    ct = [0.0]
    cv = [c0]
    for dt, c in steps:
        ct.append(ct[-1] + dt)
        cv.append(c)
    ct_a, cv_a = np.array(ct), np.array(cv)
    native = replay_requests(a, s, ct_a, cv_a)
    ref = replay_requests(a, s, ct_a, cv_a, backend="reference")
    assert np.array_equal(native, ref)
    assert native.tolist() == _brute_force(a.tolist(), s.tolist(), ct, cv)


def test_replay_rejects_bad_input() -> None:
    one = np.array([0.0])
    with pytest.raises(InvalidInputError, match="non-decreasing"):
        replay_requests(np.array([2.0, 1.0]), np.array([1.0, 1.0]), one, np.array([1]))
    with pytest.raises(InvalidInputError, match="services finite > 0"):
        replay_requests(one, np.array([0.0]), one, np.array([1]))
    with pytest.raises(InvalidInputError, match="strictly increasing"):
        replay_requests(one, one + 1, np.array([0.0, 0.0]), np.array([1, 1]))
    with pytest.raises(InvalidInputError, match=">= 0"):
        replay_requests(one, one + 1, one, np.array([-1]))
    with pytest.raises(InvalidInputError, match="backend"):
        replay_requests(one, one + 1, one, np.array([1]), backend="gpu")


def _events(rows):
    return pd.DataFrame(rows, columns=["time_s", "event", "workers"]).assign(job_id="")


def _trace(arr, svc) -> RequestTrace:
    return RequestTrace(pd.DataFrame({"arrival_time_s": np.array(arr, float),
                                      "service_s": np.array(svc, float),
                                      "model": [""] * len(arr)}))


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_a_reclaim_with_a_20_s_cold_start_delays_exactly_these_requests(backend: str) -> None:
    # two inference servers of 1 GPU each (ids 10, 11); 11 lent at 100, reclaimed at
    # 200; a 20 s model load: it serves again from 220.  Requests of 30 s at 195, 198,
    # 205, 230 (clock start 0).
    ev = _events([(100.0, "loan", 11), (150.0, "start", 0), (200.0, "reclaim", 11)])
    cap = serving_capacity(ev, server_gpus={10: 1, 11: 1}, start_s=0.0, cold_start_s=20.0)
    assert cap.times_s.tolist() == [0.0, 100.0, 220.0]
    assert cap.gpus.tolist() == [2, 1, 2]
    assert (cap.n_cold_starts, cap.cold_server_s) == (1, 20.0)
    res = serve(_trace([195, 198, 205, 230], [30] * 4), ev, server_gpus={10: 1, 11: 1},
                start_s=0.0, options=ServingOptions(cold_start_s=20.0, slo_s=10.0),
                backend=backend)
    t = res.requests
    # with the loan: r0 195-225; r1 waits for the returned server: 220-250; r2 waits
    # for r0's GPU: 225-255; r3 waits for r1's: 250-280.
    assert t["start_s"].tolist() == [195.0, 220.0, 225.0, 250.0]
    # no loans (2 GPUs all along): r0 195, r1 198, r2 225 (r0's end), r3 230 (r1 ended 228)
    assert t["wait_no_loans_s"].tolist() == [0.0, 0.0, 20.0, 0.0]
    # so the loan delays r1 by 22 s and r3 by 20 s, and no one else
    assert t["loan_delay_s"].tolist() == [0.0, 22.0, 0.0, 20.0]
    s = res.summary
    assert s["n_delayed_by_loans"] == 2
    assert s["loan_delay_max_s"] == 22.0
    assert s["loan_delay_mean_s"] == 21.0
    # waits 0, 22, 20, 20 against the 10 s SLO: 1 of 4 met; without loans 3 of 4
    assert s["slo_attainment"] == 0.25
    assert s["slo_attainment_no_loans"] == 0.75
    assert s["latency_p50_s"] == pytest.approx(50.0)  # latencies 30, 52, 50, 50


def test_relent_while_loading_and_measured_loads() -> None:
    # lent 100, back 200 with a 20 s load, lent again 210 (mid-load): never serves again
    ev = _events([(100.0, "loan", 11), (200.0, "loan_return", 11), (210.0, "loan", 11)])
    cap = serving_capacity(ev, server_gpus={10: 8, 11: 8}, start_s=0.0, cold_start_s=20.0)
    assert cap.times_s.tolist() == [0.0, 100.0]
    assert cap.gpus.tolist() == [16, 8]
    assert cap.cold_server_s == 10.0
    # measured loads: each return draws one with default_rng(seed).choice
    ev2 = _events([(100.0, "loan", 11), (200.0, "reclaim", 11), (300.0, "loan", 10),
                   (400.0, "reclaim", 10)])
    loads = np.array([5.0, 50.0])
    draw = np.random.default_rng(3).choice(loads, size=2)
    cap2 = serving_capacity(ev2, server_gpus={10: 1, 11: 1}, start_s=0.0,
                            cold_start_s=loads, seed=3)
    want_t = [0.0, 100.0, 200.0 + draw[0], 300.0, 400.0 + draw[1]]
    want_v = [2, 1, 2, 1, 2]
    order = np.argsort(want_t, kind="stable")
    assert cap2.times_s.tolist() == [want_t[i] for i in order]
    assert cap2.gpus.tolist() == [want_v[i] for i in order]
    with pytest.raises(InvalidInputError, match="while not lent"):
        serving_capacity(_events([(1.0, "reclaim", 10)]), server_gpus={10: 1}, start_s=0.0)
    with pytest.raises(InvalidInputError, match="not an inference server"):
        serving_capacity(_events([(1.0, "loan", 3)]), server_gpus={10: 1}, start_s=0.0)
