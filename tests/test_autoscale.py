"""The inference autoscalers: Erlang-C against the closed form, the rules'
GPU counts on hand-made windows, headroom, the reclaim lead time, the cap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aryl.errors import InvalidInputError
from aryl.sim.autoscale import AutoscalerOptions, autoscale, erlang_c, erlang_c_gpus


def _closed_form(c: int, a: float) -> float:
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize(("c", "a"), [(1, 0.5), (4, 3.0), (10, 7.5), (30, 25.0), (2, 0.01)])
def test_erlang_c_matches_the_closed_form(c: int, a: float) -> None:
    assert erlang_c(c, a) == pytest.approx(_closed_form(c, a), rel=1e-12)
    assert erlang_c(c, c + 0.1) == 1.0


def test_erlang_c_gpus_is_the_smallest_count_meeting_the_slo() -> None:
    loads = np.array([0.0, 0.3, 3.0, 7.5, 12.0, 40.0])
    mean_s = np.array([1.0, 20.0, 1.0, 5.0, 30.0, 2.0])
    slo, eps = 10.0, 0.05
    got = erlang_c_gpus(loads, mean_s, slo_s=slo, epsilon=eps, max_gpus=200)

    def tail(c: int, a: float, es: float) -> float:
        return _closed_form(c, a) * math.exp(-(c - a) * slo / es)

    want = [0]
    for a, es in zip(loads[1:], mean_s[1:], strict=True):
        want.append(next(c for c in range(1, 201) if c > a and tail(c, a, es) <= eps))
    assert got.tolist() == want
    # more than max_gpus: max_gpus + 1
    assert erlang_c_gpus(np.array([50.0]), np.array([1.0]), slo_s=0.0, epsilon=0.01,
                         max_gpus=10).tolist() == [11]


def test_utilisation_rule_headroom_and_lead() -> None:
    # requests at 10 s and 20 s of 42 GPU-seconds each: the window [0, 60) read at
    # t = 60 has a = 84 / 60 = 1.4 GPUs; / 0.7 = 2 GPUs; 1-GPU servers -> 2 servers
    arr = np.array([10.0, 20.0])
    svc = np.array([42.0, 42.0])
    opt = AutoscalerOptions(rule="utilisation", step_s=60.0, window_s=60.0, target=0.7)
    d = autoscale(arr, svc, n_servers=10, gpus_per_server=1, span_s=180.0, options=opt)
    assert d.times_s.tolist() == [0.0, 60.0, 120.0]
    assert d.servers_needed.tolist() == [0, 2, 0]
    # headroom 0.5: ceil(2 * 1.5) = 3; 8-GPU servers: ceil(3 / 8) = 1
    h = AutoscalerOptions(rule="utilisation", target=0.7, headroom=0.5)
    assert autoscale(arr, svc, n_servers=10, gpus_per_server=1, span_s=180.0,
                     options=h).servers_needed.tolist() == [0, 3, 0]
    assert autoscale(arr, svc, n_servers=10, gpus_per_server=8, span_s=180.0,
                     options=h).servers_needed.tolist() == [0, 1, 0]
    # lead 30 s asks one step (60 s) ahead: [max(0, 2), max(2, 0), 0]
    lead = AutoscalerOptions(rule="utilisation", target=0.7, lead_s=30.0)
    assert autoscale(arr, svc, n_servers=10, gpus_per_server=1, span_s=180.0,
                     options=lead).servers_needed.tolist() == [2, 2, 0]
    # the cap: 1 server at most, one step capped
    capped = autoscale(arr, svc, n_servers=1, gpus_per_server=1, span_s=180.0, options=opt)
    assert capped.servers_needed.tolist() == [0, 1, 0]
    assert capped.meta["n_steps_capped"] == 1
    # a start offset moves the steps (and the windows) with it
    moved = autoscale(arr + 1000.0, svc, n_servers=10, gpus_per_server=1, span_s=180.0,
                      options=opt, start_s=1000.0)
    assert moved.times_s.tolist() == [1000.0, 1060.0, 1120.0]
    assert moved.servers_needed.tolist() == [0, 2, 0]


def test_erlang_c_rule_on_a_window() -> None:
    # 30 requests of 4 s in [0, 60): lambda = 0.5/s, E[S] = 4 s, a = 2 Erlangs;
    # SLO 1 s, eps 0.05: the smallest c with C(c, 2) exp(-(c - 2) / 4) <= 0.05
    arr = np.linspace(0.0, 59.0, 30)
    svc = np.full(30, 4.0)
    opt = AutoscalerOptions(rule="erlang-c", slo_s=1.0, epsilon=0.05)
    d = autoscale(arr, svc, n_servers=50, gpus_per_server=1, span_s=120.0, options=opt)
    c = next(c for c in range(3, 50) if _closed_form(c, 2.0) * math.exp(-(c - 2) / 4) <= 0.05)
    assert d.servers_needed.tolist() == [0, c]
    assert d.meta["gpus_needed"].tolist() == [0, c]


def test_bad_options_are_named() -> None:
    for kwargs, name in [({"rule": "hpa"}, "rule"), ({"target": 0.0}, "target"),
                         ({"epsilon": 1.0}, "epsilon"), ({"step_s": 0.0}, "step_s"),
                         ({"headroom": -0.1}, "headroom"), ({"lead_s": math.nan}, "lead_s")]:
        with pytest.raises(InvalidInputError, match=name):
            AutoscalerOptions(**kwargs)


def test_erlang_c_sizing_meets_its_slo_in_the_queue_replay() -> None:
    # Poisson arrivals, 6/s, exponential services of mean 1 s (a = 6 Erlangs); SLO 0.5 s,
    # eps 0.05.  The rule's count c meets P(wait > 0.5 s) <= 0.05 in the replay, c - 1
    # does not (closed forms: tail(c) and tail(c - 1) written out in the test).
    from aryl.sim.serving import replay_requests

    lam, slo, eps = 6.0, 0.5, 0.05
    c = int(erlang_c_gpus(np.array([lam]), np.array([1.0]), slo_s=slo, epsilon=eps,
                          max_gpus=100)[0])

    def tail(k: int) -> float:
        return _closed_form(k, lam) * math.exp(-(k - lam) * slo)

    assert tail(c) <= eps < tail(c - 1)
    rng = np.random.default_rng(11)
    n = 300_000
    arr = np.cumsum(rng.exponential(1 / lam, n))
    svc = rng.exponential(1.0, n)
    for k, want in ((c, tail(c)), (c - 1, tail(c - 1))):
        w = (replay_requests(arr, svc, np.array([0.0]), np.array([k])) - arr)[n // 20:]
        # within 10% of the closed form (the tail is a small probability)
        assert np.mean(w > slo) == pytest.approx(want, rel=0.1)
