"""Policy choices on hand-computed scenarios (issue 15): each test fails on a
realistic bug that the rest of the suite let through.

* SJF order (a reversed sort starts the longest job first);
* the simulator passing the configured reclaim policy to the reclaim kernel;
* ``elastic-greedy`` giving each next worker by *marginal* gain;
* the pause correction of the simulator's own MCKP table for jobs that start
  in the same pass (sign and presence);
* ``loan_reserve_servers`` kept back from loaning.

Scenarios use small clusters without preemption-requeue or fragmentation, so
they do not depend on how re-queued jobs are ordered.  All clusters are
8-GPU servers; server ids: training ``0 .. n_train-1``, then inference.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aryl.sim import SimConfig, SimResult, simulate
from aryl.traces.inference import InferenceDemand


def frame(rows: list[dict]) -> pd.DataFrame:
    """Canonical jobs; rigid unless ``min_workers``/``max_workers`` are given."""
    out = []
    for r in rows:
        r = dict(r)
        if "min_workers" not in r:
            g = r.get("gpus_per_worker", min(r["gpus"], 8))
            r["gpus_per_worker"] = g
            r["min_workers"] = r["max_workers"] = r["gpus"] // g
        r.setdefault("alpha", 0.05)
        r["elastic"] = r["max_workers"] > r["min_workers"]
        out.append(r)
    return pd.DataFrame(out).astype({"submit_time_s": "float64", "duration_s": "float64",
                                     "gpus": "int64", "gpus_per_worker": "int64",
                                     "min_workers": "int64", "max_workers": "int64",
                                     "elastic": "bool", "alpha": "float64"})


def replay(rows: list[dict], policy: str, inference: object = False, **cfg: object) -> SimResult:
    cfg.setdefault("n_inference_servers", 0)
    cfg.setdefault("check", True)
    return simulate(frame(rows), policy=policy, config=SimConfig(**cfg),  # type: ignore[arg-type]
                    inference=inference)


def events(res: SimResult, job: str | None = None) -> list[tuple[float, str, int]]:
    ev = res.events if job is None else res.events[res.events["job_id"] == job]
    return list(zip(ev["time_s"].tolist(), ev["event"].tolist(), ev["workers"].tolist(),
                    strict=True))


def col(res: SimResult, name: str) -> dict[str, float]:
    return dict(zip(res.jobs["job_id"], res.jobs[name].tolist(), strict=True))


# --------------------------------------------------------------------------- SJF order

# One training server.  A (8 GPUs, 1,000 s) holds it from t=0; L (8 GPUs, 500 s)
# arrives at 10, S (8 GPUs, 100 s) at 20; both wait for A.  At t=1,000 SJF takes
# the shorter estimate first: S runs 1,000..1,100, then L 1,100..1,600.  (fifo, and
# a reversed SJF sort, would start L first: L 1,000..1,500, S 1,500..1,600.)
_SJF_ROWS = [
    dict(job_id="A", submit_time_s=0, duration_s=1000, gpus=8),
    dict(job_id="L", submit_time_s=10, duration_s=500, gpus=8),
    dict(job_id="S", submit_time_s=20, duration_s=100, gpus=8),
]


@pytest.mark.parametrize("policy", ["sjf", "aryl", "aryl-no-loan", "aryl-no-elastic",
                                    "elastic-greedy"])
def test_sjf_starts_the_shortest_queued_job_first(policy: str) -> None:
    res = replay(_SJF_ROWS, policy, n_training_servers=1)
    assert col(res, "first_start_s") == {"A": 0.0, "L": 1100.0, "S": 1000.0}
    assert col(res, "finish_s") == {"A": 1000.0, "L": 1600.0, "S": 1100.0}
    # mean queuing delay (0 + 1,090 + 980) / 3 = 690
    assert res.summary["queuing_delay_s"]["mean"] == 690.0


def test_fifo_and_the_starvation_guard_start_the_oldest_first() -> None:
    # fifo: L (older) at 1,000, S at 1,500.  sjf with a starvation bound of 0 s:
    # every queued job is "starving", so the oldest goes first as well.
    for policy, cfg in (("fifo", {}), ("sjf", {"starvation_bound_s": 0.0})):
        res = replay(_SJF_ROWS, policy, n_training_servers=1, **cfg)
        assert col(res, "first_start_s") == {"A": 0.0, "L": 1000.0, "S": 1500.0}, policy
    # a bound of 985 s: at t=1,000 L has waited 990 s (starving) and S only 980 s
    res = replay(_SJF_ROWS, "sjf", n_training_servers=1, starvation_bound_s=985.0)
    assert col(res, "first_start_s") == {"A": 0.0, "L": 1000.0, "S": 1500.0}
    # a bound of 995 s: nobody starves yet, SJF order
    res = replay(_SJF_ROWS, "sjf", n_training_servers=1, starvation_bound_s=995.0)
    assert col(res, "first_start_s") == {"A": 0.0, "L": 1100.0, "S": 1000.0}


def test_sjf_ties_go_to_the_earlier_arrival() -> None:
    # two 300 s jobs wait for A; the one that arrived first (X at 10) starts first
    rows = [
        dict(job_id="A", submit_time_s=0, duration_s=1000, gpus=8),
        dict(job_id="X", submit_time_s=10, duration_s=300, gpus=8),
        dict(job_id="Y", submit_time_s=20, duration_s=300, gpus=8),
    ]
    res = replay(rows, "sjf", n_training_servers=1)
    assert col(res, "first_start_s") == {"A": 0.0, "X": 1000.0, "Y": 1300.0}


def test_sjf_estimate_is_the_time_at_the_base_size() -> None:
    # E (elastic, 4 workers of 1 GPU, traced at 8 GPUs for 400 s, alpha 0) needs
    # 400 * T(8) / T(4) = 800 s at its base; R (rigid, 4 GPUs) needs 600 s (its traced
    # duration would say E is shorter: 400 < 600).  A and B hold the server; when A
    # ends at 1,000 the 4 free GPUs go to R (600 < 800); E starts when B ends at
    # 1,100 and runs 800 s.
    rows = [
        dict(job_id="A", submit_time_s=0, duration_s=1000, gpus=4),
        dict(job_id="B", submit_time_s=0, duration_s=1100, gpus=4),
        dict(job_id="E", submit_time_s=10, duration_s=400, gpus=8, gpus_per_worker=1,
             min_workers=4, max_workers=4, alpha=0.0),
        dict(job_id="R", submit_time_s=20, duration_s=600, gpus=4),
    ]
    df = frame(rows)
    df.loc[df["job_id"] == "E", "elastic"] = True  # runs at 4 workers, below its trace
    res = simulate(df, policy="aryl-no-loan", inference=False,
                   config=SimConfig(n_training_servers=1, n_inference_servers=0, check=True))
    assert col(res, "first_start_s") == {"A": 0.0, "B": 0.0, "E": 1100.0, "R": 1000.0}
    assert col(res, "finish_s") == {"A": 1000.0, "B": 1100.0, "E": 1900.0, "R": 1600.0}


# --------------------------------------------------------------------------- reclaim policy

# One training server and two inference servers (ids 1, 2), no reserve; demand
# 0 servers until t=500, then 1.  A fills server 0.  B (8 GPUs) is offered both
# idle servers and takes the best fit, the lower id: 1.  C (2 GPUs) is offered
# server 2; D (2 GPUs) joins C there (best fit among loaned servers).  At t=500
# one server goes back:
#   server 1: B only  -> cost 8/8 = 1, 1 job, 0 idle GPUs
#   server 2: C and D -> cost 1 + 1 = 2, 2 jobs, 4 idle GPUs
# aryl (cost), fewest-jobs and exact (fewest preemptions) return server 1 and
# preempt B; most-idle returns server 2 and preempts C and D; random takes the
# first server of numpy's seeded permutation of the 2 loaned servers.
_RECLAIM_ROWS = [
    dict(job_id="A", submit_time_s=0, duration_s=10_000, gpus=8),
    dict(job_id="B", submit_time_s=10, duration_s=10_000, gpus=8),
    dict(job_id="C", submit_time_s=20, duration_s=10_000, gpus=2),
    dict(job_id="D", submit_time_s=30, duration_s=10_000, gpus=2),
]


def _reclaim_at_500(policy: str, seed: int = 0) -> tuple[list[int], list[str]]:
    demand = InferenceDemand(np.array([0.0, 500.0]), np.array([0, 1]), n_servers=2)
    res = replay(_RECLAIM_ROWS, "aryl", inference=demand, n_training_servers=1,
                 n_inference_servers=2, loan_reserve_servers=0, reclaim_policy=policy,
                 seed=seed)
    ev = res.events[res.events["time_s"] == 500.0]
    servers = ev.loc[ev["event"] == "reclaim", "workers"].tolist()
    preempted = ev.loc[ev["event"] == "preempt", "job_id"].tolist()
    # before the reclaim: B on server 1, C and D on server 2
    loans = res.events[res.events["event"] == "loan"]
    assert list(zip(loans["time_s"], loans["workers"], strict=True))[:2] == [(10.0, 1),
                                                                             (20.0, 2)]
    return servers, sorted(preempted)


@pytest.mark.parametrize(("policy", "server", "preempted"), [
    ("aryl", 1, ["B"]),
    ("fewest-jobs", 1, ["B"]),
    ("exact", 1, ["B"]),
    ("most-idle", 2, ["C", "D"]),
])
def test_the_configured_reclaim_policy_chooses_the_server(
    policy: str, server: int, preempted: list[str]
) -> None:
    assert _reclaim_at_500(policy) == ([server], preempted)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_reclaim_follows_its_seeded_permutation(seed: int) -> None:
    # "random" ranks the loaned servers [1, 2] by numpy's permutation(2) of the seed
    first = [1, 2][int(np.argmin(np.random.default_rng(seed).permutation(2)))]
    expect = ["B"] if first == 1 else ["C", "D"]
    assert _reclaim_at_500("random", seed) == ([first], expect)


# --------------------------------------------------------------------------- elastic-greedy


def test_greedy_gives_each_next_worker_by_marginal_gain() -> None:
    from aryl.sim.adapters import _greedy

    # cumulative JCT reductions of 1, 2 extra workers (1 GPU each):
    #   X: 10, 11 (marginal 10, then 1);  Y: 6, 12 (marginal 6, then 6)
    values = np.array([[10.0, 11.0], [6.0, 12.0]])
    weights = np.array([[1, 2], [1, 2]], dtype=np.int64)
    # capacity 2: X's first (10), then Y's first (6) -- not X's second (marginal 1)
    assert _greedy(values, weights, 2).tolist() == [1, 1]
    # capacity 3: then Y's second (marginal 6 > X's 1)
    assert _greedy(values, weights, 3).tolist() == [1, 2]
    assert _greedy(values, weights, 4).tolist() == [2, 2]
    # a worker that does not fit is skipped, the next that fits is taken
    w2 = np.array([[3, 6], [1, 2]], dtype=np.int64)
    assert _greedy(values, w2, 2).tolist() == [0, 2]
    # ties on gain per GPU: the lower row first
    tie = np.array([[5.0, 6.0], [5.0, 6.0]])
    assert _greedy(tie, weights, 1).tolist() == [1, 0]
    # gain per GPU, not per worker: 2-GPU workers of Z (12/2 = 6 per GPU) lose to X (10)
    zw = np.array([[1, 2], [2, 4]], dtype=np.int64)
    zv = np.array([[10.0, 11.0], [12.0, 24.0]])
    assert _greedy(zv, zw, 3).tolist() == [1, 1]
    # absent (NaN) and non-positive options are never taken
    nan = np.array([[np.nan, np.nan], [-1.0, 3.0]])
    assert _greedy(nan, weights, 4).tolist() == [0, 0]


def test_elastic_greedy_replay_spreads_workers_by_marginal_gain() -> None:
    # One training server (8 GPUs); P (1,200 s) and Q (600 s) arrive at 0, each 1..8
    # workers of 1 GPU, traced at 1 worker, alpha 0 (T(w) = w).  Bases take 2 GPUs,
    # 6 are left for extras.  Marginal gain of P's k-th extra worker: 1200/k - 1200/(k+1)
    # = 600, 200, 100, 60, ...; Q's: 300, 100, 50, ...  Taken in order: P 600, Q 300,
    # P 200, Q 100 (tie with P's 100: Q is the lower row, started first by SJF),
    # P 100, P 60  ->  P 5 workers, Q 3.  (Cumulative gain would give P all 6.)
    # Q finishes at 600/3 = 200; then P (200 s of work left at 5 workers) stays at 5:
    # the values J(0) - J(k) with the 30 s pause are 100, 133.3, 150, 190 (k=4, no
    # pause), 166.7, 171.4, 175, so every marginal beyond k=4 is negative.  P finishes
    # at 1200 / 5 = 240.
    rows = [
        dict(job_id="P", submit_time_s=0, duration_s=1200, gpus=1, gpus_per_worker=1,
             min_workers=1, max_workers=8, alpha=0.0),
        dict(job_id="Q", submit_time_s=0, duration_s=600, gpus=1, gpus_per_worker=1,
             min_workers=1, max_workers=8, alpha=0.0),
    ]
    res = replay(rows, "elastic-greedy", n_training_servers=1)
    assert events(res, "P") == [(0.0, "arrive", 0), (0.0, "start", 5), (240.0, "finish", 0)]
    assert events(res, "Q") == [(0.0, "arrive", 0), (0.0, "start", 3), (200.0, "finish", 0)]
    # the MCKP optimum is the same split: 960 + 400 = 1,360 beats (3,3) 900 + 450 and
    # (5,1) 1,000 + 300
    res = replay(rows, "aryl-no-loan", n_training_servers=1)
    assert col(res, "finish_s") == {"P": 240.0, "Q": 200.0}


# --------------------------------------------------------------------------- pause correction

# One 8-GPU training server, defaults (rescale pause 30 s).  R (t=0, traced 4 GPUs,
# 1 GPU per worker, 2..8 workers, 10,000 s, alpha 1.0: T(w) = 1, extra workers gain
# nothing) runs at its base of 2 and is in the MCKP with a 30 s pause on every
# option.  N (t=10, 1 GPU, 1..2 workers, default alpha 0.05) starts in that pass:
# its option "1 extra worker" is worth W - W / T(2) with W its work and no pause
# (it starts now), T(2) = 2 / 1.05.  The kernel's table charges the pass's pause
# (30 s) to every option of every row; the simulator adds it back for N.


def _pause_case(duration_n: float, policy: str = "aryl") -> SimResult:
    rows = [
        dict(job_id="R", submit_time_s=0, duration_s=10_000, gpus=4, gpus_per_worker=1,
             min_workers=2, max_workers=8, alpha=1.0),
        dict(job_id="N", submit_time_s=10, duration_s=duration_n, gpus=1, gpus_per_worker=1,
             min_workers=1, max_workers=2),
    ]
    return replay(rows, policy, n_training_servers=1)


@pytest.mark.parametrize("policy", ["aryl", "aryl-no-loan", "elastic-greedy"])
def test_job_starting_now_pays_no_rescale_pause(policy: str) -> None:
    # issue 15's case, W = 100: value 100 - 52.5 = 47.5 (17.5 if the pause were charged,
    # -12.5 with the correction's sign inverted).  N starts with 2 workers and finishes
    # at 10 + 100 / (2 / 1.05) = 62.5.
    res = _pause_case(100.0, policy)
    assert events(res, "N") == [(10.0, "arrive", 0), (10.0, "start", 2),
                                (pytest.approx(62.5, rel=1e-12), "finish", 0)]
    # R never scales: every option is worth -30 s (no gain, a pause)
    assert events(res, "R") == [(0.0, "arrive", 0), (0.0, "start", 2), (10_000.0, "finish", 0)]


def test_pause_correction_is_applied_not_only_signed_right() -> None:
    # W = 50: the extra worker is worth 50 - 26.25 = 23.75 s, less than the 30 s pause,
    # so without the correction (23.75 - 30 < 0) N would start with 1 worker and end
    # at 60.  With it: 2 workers, finish 10 + 50 * 1.05 / 2 = 36.25.
    res = _pause_case(50.0)
    assert events(res, "N") == [(10.0, "arrive", 0), (10.0, "start", 2),
                                (pytest.approx(36.25, rel=1e-12), "finish", 0)]


def test_running_jobs_do_pay_the_pause() -> None:
    # G (7 GPUs) holds the server until t=100; E (1..2 workers of 1 GPU, 200 s at its
    # traced 1 worker, alpha 0.05) starts at t=0 with the 1 free GPU.  At t=100 E has
    # 100 s of work left: a second worker saves 100 - 100 * 1.05 / 2 = 47.5 s and costs
    # the 30 s pause (value 17.5 > 0), so E grows and ends at 100 + 30 + 52.5 = 182.5.
    # If G holds on until t=140, E has 60 s left: the saving 60 - 31.5 = 28.5 s is below
    # the pause, E stays at 1 worker and ends at 200.
    rows = [
        dict(job_id="G", submit_time_s=0, duration_s=100, gpus=7, gpus_per_worker=7,
             min_workers=1, max_workers=1),
        dict(job_id="E", submit_time_s=0, duration_s=200, gpus=1, gpus_per_worker=1,
             min_workers=1, max_workers=2),
    ]
    res = replay(rows, "aryl", n_training_servers=1)
    assert events(res, "E") == [(0.0, "arrive", 0), (0.0, "start", 1),
                                (100.0, "scale_out", 2),
                                (pytest.approx(182.5, rel=1e-12), "finish", 0)]
    rows[0]["duration_s"] = 140
    res = replay(rows, "aryl", n_training_servers=1)
    assert events(res, "E") == [(0.0, "arrive", 0), (0.0, "start", 1), (200.0, "finish", 0)]


# --------------------------------------------------------------------------- loan reserve

# One training server (A holds it 0..1,000), three idle inference servers (ids 1, 2,
# 3), no demand.  B, C, D (8 GPUs, 1,000 s) arrive at 1, 2, 3 and each needs a
# loaned server.  Loanable = servers not on loan - needed (0) - reserve; the
# highest-id idle servers are offered and a job takes the lowest id offered.


@pytest.mark.parametrize(("reserve", "loans", "d_start", "max_loaned"), [
    # B is offered 1,2,3 and takes 1; C is offered 2,3 and takes 2; D takes 3
    (0, [(1.0, 1), (2.0, 2), (3.0, 3)], 3.0, 3),
    # one server kept back: B offered 2,3 -> 2; C offered 3; D waits for A (t=1,000)
    (1, [(1.0, 2), (2.0, 3)], 1000.0, 2),
    # two kept back: B offered 3; C (earlier than D) takes A's server at 1,000; D takes
    # server 3 when B leaves it at 1,001 (still on loan in that pass: no new loan)
    (2, [(1.0, 3)], 1001.0, 1),
    # nothing loanable: one job at a time, B 1,000, C 2,000, D 3,000
    (3, [], 3000.0, 0),
])
def test_loan_reserve_keeps_idle_servers_back(
    reserve: int, loans: list[tuple[float, int]], d_start: float, max_loaned: int
) -> None:
    rows = [dict(job_id="A", submit_time_s=0, duration_s=1000, gpus=8)] + [
        dict(job_id=j, submit_time_s=t, duration_s=1000, gpus=8)
        for j, t in (("B", 1), ("C", 2), ("D", 3))
    ]
    demand = InferenceDemand(np.array([0.0]), np.array([0]), n_servers=3)
    res = replay(rows, "aryl", inference=demand, n_training_servers=1,
                 n_inference_servers=3, loan_reserve_servers=reserve)
    ev = res.events[res.events["event"] == "loan"]
    assert list(zip(ev["time_s"], ev["workers"], strict=True)) == loans
    assert res.summary["n_loans"] == len(loans)
    assert col(res, "first_start_s")["D"] == d_start
    assert res.timeseries["loaned_servers"].max() == max_loaned
