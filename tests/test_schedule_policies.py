"""Policies of the scheduling pass on hand-made states (``aryl.schedule`` directly).

Each scenario is a :class:`ClusterState` small enough to decide by hand; the
expected plan and the arithmetic are in the comments.  Covered: the policy
options and the registry's refusals; ``fifo`` and ``fifo-backfill`` (the EASY
reservation: shadow time, extra GPUs, the tie at the shadow time, jobs started
in the same pass); ``tiresias`` (levels, backfill, the preemption round);
``sjf`` (the starvation bound as an option, the backfill memo of failed sizes);
the loans around every policy (offers, the reserve, the cool-down, keeping
idle loans); the placement helpers; the kernels' greedy, table and
``unconstrained_only`` shortcut against brute force.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from aryl.errors import InvalidInputError
from aryl.scheduling import ClusterState, Reason, SchedulePlan, SchedulerConfig, schedule
from aryl.scheduling.kernels import (
    extras_table,
    jobs_in_start_order,
    mckp_extras,
    reclaim_request,
    solve_extras,
)
from aryl.scheduling.placement import best_fit, bf_place, gang_place, gang_place_typed
from aryl.scheduling.policy import PassContext, Policy
from aryl.scheduling.registry import make_policy, policy_class
from aryl.scheduling.sjf import sjf_key_elastic, sjf_key_rigid, wait_origin_key
from aryl.scheduling.tiresias import TiresiasPolicy


def message(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(InvalidInputError) as info:
        fn(*args, **kwargs)
    return str(info.value)


# ------------------------------------------------------------------ options, registry

def test_policy_options_are_checked() -> None:
    assert message(make_policy, "fifo", {"speed": 1}) == (
        "policy 'fifo': unknown option(s) ['speed']; known: ['return_idle_loans']")
    assert message(make_policy, "aryl", {"return_idle_loans": 1}) == (
        "policy 'aryl': option return_idle_loans must be true or false")
    assert message(make_policy, "sjf", {"starvation_bound_s": -1}) == (
        "policy 'sjf': option starvation_bound_s must be a number >= 0 "
        "(inf: no bound)")
    assert message(make_policy, "aryl", {"starvation_bound_s": True}) == (
        "policy 'aryl': option starvation_bound_s must be a number >= 0 "
        "(inf: no bound)")
    assert message(make_policy, "sjf", {"starvation_bound_s": "1"}) == (
        "policy 'sjf': option starvation_bound_s must be a number >= 0 "
        "(inf: no bound)")
    assert message(make_policy, "sjf", {"starvation_bound_s": math.nan}) == (
        "policy 'sjf': option starvation_bound_s must be a number >= 0 "
        "(inf: no bound)")
    assert message(make_policy, "tiresias", {"las_thresholds_gpu_s": ["a"]}) == (
        "policy 'tiresias': option las_thresholds_gpu_s must be a list of numbers "
        "(not NaN)")
    assert message(make_policy, "tiresias", {"las_thresholds_gpu_s": 5}) == (
        "policy 'tiresias': option las_thresholds_gpu_s must be a list of numbers "
        "(not NaN)")
    # sizes that used to escape as OverflowError (a traceback from `aryl plan --option`)
    assert message(make_policy, "sjf", {"starvation_bound_s": 10**400}) == (
        "policy 'sjf': option starvation_bound_s must be a number >= 0 (inf: no bound)")
    assert message(make_policy, "tiresias", {"las_thresholds_gpu_s": [10**400]}) == (
        "policy 'tiresias': option las_thresholds_gpu_s must be a list of numbers (not NaN)")
    assert message(make_policy, "tiresias", {"las_thresholds_gpu_s": [1.0, math.nan]}) == (
        "policy 'tiresias': option las_thresholds_gpu_s must be a list of numbers (not NaN)")
    assert make_policy("sjf", {"starvation_bound_s": math.inf}).bound_option == math.inf
    assert message(make_policy, "sjf", {"las_thresholds_gpu_s": [1]}) == (
        "policy 'sjf': unknown option(s) ['las_thresholds_gpu_s']; known: "
        "['return_idle_loans', 'starvation_bound_s']")


def test_policy_options_take_effect() -> None:
    assert make_policy("aryl").return_idle_loans is True
    assert make_policy("aryl", {"return_idle_loans": False}).return_idle_loans is False
    assert make_policy("sjf").bound_option is None  # type: ignore[attr-defined]
    assert make_policy("sjf", {"starvation_bound_s": 0}).bound_option == 0.0  # type: ignore[attr-defined]
    assert make_policy("sjf", {"starvation_bound_s": 7}).bound_option == 7.0  # type: ignore[attr-defined]
    t = make_policy("tiresias")
    assert isinstance(t, TiresiasPolicy)
    assert t.thresholds == [3600.0, 36000.0]
    assert t.queue_name == "las:3600.0,36000.0"
    t2 = make_policy("tiresias", {"las_thresholds_gpu_s": [50, 10]})
    assert t2.thresholds == [10.0, 50.0]  # type: ignore[attr-defined]
    assert t2.queue_name == "las:10.0,50.0"  # type: ignore[attr-defined]
    # levels: the thresholds crossed (a value equal to a threshold has crossed it)
    assert [t2.level(x) for x in (0.0, 9.9, 10.0, 49.0, 50.0, 1e9)] == [0, 0, 1, 1, 2, 2]  # type: ignore[attr-defined]
    assert make_policy("sjf").queue_key[0] == "sjf-rigid"  # type: ignore[attr-defined]
    assert make_policy("aryl").queue_key[0] == "sjf-elastic"  # type: ignore[attr-defined]
    # instances are cached per (name, options); unhashable option values are not cached
    assert make_policy("sjf", {"starvation_bound_s": 7}) is make_policy(
        "sjf", {"starvation_bound_s": 7})
    a = make_policy("tiresias", {"las_thresholds_gpu_s": [1, 2]})
    assert a is not make_policy("tiresias", {"las_thresholds_gpu_s": [1, 2]})
    assert a.thresholds == [1.0, 2.0]  # type: ignore[attr-defined]


def test_the_registry_names_unknown_policies() -> None:
    assert message(policy_class, "fif") == (
        "policy: unknown policy 'fif' (did you mean 'fifo'?); choose from ['aryl', "
        "'aryl-no-elastic', 'aryl-no-loan', 'elastic-greedy', 'fifo', 'fifo-backfill', 'sjf', "
        "'tiresias']")
    assert message(policy_class, "zzzz").startswith("policy: unknown policy 'zzzz'; choose from")
    assert message(policy_class, ["fifo"]).startswith(  # type: ignore[arg-type]
        "policy: unknown policy ['fifo'] (did you mean 'fifo'?); choose from")
    assert policy_class("fifo-backfill").name == "fifo-backfill"


def test_the_base_policy_decides_nothing_itself() -> None:
    pol = Policy()
    st = ClusterState()
    st.add_server("t0", role="training", gpus=8)
    j = st.add_job("e", arrival_s=0.0, gpus_per_worker=1, ref_workers=2, remaining_s=5.0,
                   min_workers=1, max_workers=3, elastic=True)
    assert pol.base_workers(st, j) == 2  # not elastic: the reference size
    assert pol.scalable(st, j) is False
    assert pol.wants_loan(st) is False  # nothing queued
    st.enqueue(j, 0.0)
    assert pol.wants_loan(st) is True
    with pytest.raises(NotImplementedError):
        pol.decide(st, PassContext(free=[8], loaned=[], offered=[], capacity_gpus=8),
                   SchedulePlan(now_s=0.0))
    aryl = make_policy("aryl")
    assert aryl.base_workers(st, j) == 1
    assert aryl.scalable(st, j) is True


# ------------------------------------------------------------------ helpers

def cluster(n_train: int = 1, n_inf: int = 0, gpus: int = 8, now: float = 0.0,
            **cfg: Any) -> ClusterState:
    cfg.setdefault("loan_reserve_servers", 0)
    st = ClusterState(now_s=now, config=SchedulerConfig(**cfg))
    for i in range(n_train):
        st.add_server(f"t{i}", role="training", gpus=gpus)
    for i in range(n_inf):
        st.add_server(f"i{i}", role="inference", gpus=gpus, status="idle")
    return st


def job(st: ClusterState, name: str, *, t: float = 0.0, g: int = 1, w: int = 1,
        rem: float = 100.0, mn: int | None = None, mx: int | None = None,
        alpha: float = 0.05, queue: bool = True) -> int:
    j = st.add_job(name, arrival_s=t, gpus_per_worker=g, ref_workers=w, remaining_s=rem,
                   min_workers=mn, max_workers=mx, elastic=mn is not None and mn != mx,
                   alpha=alpha)
    if queue:
        st.enqueue(j, t)
    return j


def run(st: ClusterState, name: str, place: dict[int, int], at: float = 0.0) -> None:
    j = st.job_index([name])[0]
    st.start(j, place, at)


def starts(st: ClusterState, plan: SchedulePlan) -> list[tuple[str, dict[int, int], str]]:
    return [(st.job_id[j], p, r.label) for j, p, r in plan.starts]


# ------------------------------------------------------------------ fifo, fifo-backfill

def test_fifo_head_blocks_and_sizes_count_gpus_per_worker() -> None:
    st = cluster(n_train=2)
    job(st, "A", t=0, g=2, w=3)  # 6 GPUs
    job(st, "B", t=1, g=4, w=3)  # 12 GPUs
    job(st, "C", t=2, g=1, w=1)  # 1 GPU, behind B
    plan = schedule(st, policy="fifo")
    # A: 3 workers of 2 GPUs fit one server: best fit, ties to the lower index: t0 (8 -> 2).
    # B: 3 workers of 4 GPUs, 2 per server: one whole free server (t1) plus 1 worker on
    # a server with >= 4 free GPUs: t0 has 2: B does not fit and blocks C (no backfill)
    assert starts(st, plan) == [("A", {0: 3}, "fifo_head")]


def test_fifo_stops_when_the_head_needs_more_gpus_than_are_free() -> None:
    st = cluster(n_train=1)
    job(st, "A", t=0, w=6)
    job(st, "B", t=1, w=4)  # 6 + 4 > 8
    job(st, "C", t=2, w=1)
    assert starts(st, schedule(st, policy="fifo")) == [("A", {0: 6}, "fifo_head")]


def test_backfill_ends_exactly_at_the_shadow_time() -> None:
    # R: 4 GPUs, started at 0 with 110 s of work: ends at 110.  At t = 10, H (8 GPUs)
    # waits for R: shadow 110, extra 8 - 8 = 0.  X (4 GPUs, 100 s) ends at
    # 10 + 100 = 110 <= 110: backfilled.  Y (4 GPUs, 101 s) would end at 111 and there
    # is no extra GPU: it waits (and X took the 4 free GPUs anyway).
    st = cluster(n_train=1, now=10.0)
    job(st, "R", t=0, w=4, rem=110.0)
    run(st, "R", {0: 4}, at=0.0)
    job(st, "H", t=1, w=8)
    job(st, "X", t=2, w=4, rem=100.0)
    plan = schedule(st, policy="fifo-backfill")
    assert starts(st, plan) == [("X", {0: 4}, "backfill")]
    # one second longer and X would delay H: not started
    st2 = cluster(n_train=1, now=10.0)
    job(st2, "R", t=0, w=4, rem=110.0)
    run(st2, "R", {0: 4}, at=0.0)
    job(st2, "H", t=1, w=8)
    job(st2, "X", t=2, w=4, rem=100.5)
    assert starts(st2, schedule(st2, policy="fifo-backfill")) == []


def test_the_reservation_sums_running_jobs_in_end_order() -> None:
    # Two 8-GPU servers, t = 0.  R1: 4 GPUs on t0, ends at 300; R2: 8 GPUs on t1,
    # ends at 100 (speed 1).  Free: 4 (t0).  H needs 16: 4 free + R2's 8 at 100 = 12,
    # + R1's 4 at 300 = 16: shadow 300, extra 0.  X (4 GPUs, 250 s) ends at 250 <= 300:
    # backfilled.  (Summed in start order, R1 then R2, the need would be met at R2's
    # entry and the shadow read as 100: X would wait.)
    st = cluster(n_train=2)
    job(st, "R1", w=4, rem=300.0)
    job(st, "R2", w=8, rem=100.0)
    run(st, "R1", {0: 4})
    run(st, "R2", {1: 8})
    job(st, "H", t=1, w=8, g=2)
    job(st, "X", t=2, w=4, rem=250.0)
    assert starts(st, schedule(st, policy="fifo-backfill")) == [("X", {0: 4}, "backfill")]


def test_extra_gpus_at_the_shadow_time_admit_a_long_job() -> None:
    # Two 8-GPU servers.  R1: 8 GPUs on t0 ends at 100; R2: 4 GPUs on t1 ends at 500.
    # Free: 4 (t1).  H needs 8: 4 + R1's 8 at 100 = 12 >= 8: shadow 100, extra 4.
    # L (4 GPUs, 1,000 s) ends after 100 but needs only the 4 extra GPUs: started
    # (extra 0, no GPU free).  M (1 GPU) finds none free: waits.
    st = cluster(n_train=2)
    job(st, "R1", w=8, rem=100.0)
    job(st, "R2", w=4, rem=500.0)
    run(st, "R1", {0: 8})
    run(st, "R2", {1: 4})
    job(st, "H", t=1, w=8)
    job(st, "L", t=2, w=4, rem=1000.0)
    job(st, "M", t=3, w=1, rem=10.0)
    assert starts(st, schedule(st, policy="fifo-backfill")) == [("L", {1: 4}, "backfill")]
    # R2 of 5 GPUs instead: free 3 (t1); shadow 100, extra 3 + 8 - 8 = 3.  K (2 GPUs,
    # 1,000 s) takes 2 extra GPUs (extra 1, free 1); K2 (2 GPUs) does not fit the 1
    # free GPU; S (1 GPU, 50 s) ends at 50 <= 100: backfilled on the last GPU.
    st = cluster(n_train=2)
    job(st, "R1", w=8, rem=100.0)
    job(st, "R2", w=5, rem=500.0)
    run(st, "R1", {0: 8})
    run(st, "R2", {1: 5})
    job(st, "H", t=1, w=8)
    job(st, "K", t=2, w=2, rem=1000.0)
    job(st, "K2", t=3, w=2, rem=1000.0)
    job(st, "S", t=4, w=1, rem=50.0)
    assert starts(st, schedule(st, policy="fifo-backfill")) == [
        ("K", {1: 2}, "backfill"), ("S", {1: 1}, "backfill")]


def test_jobs_started_in_the_same_pass_count_in_the_reservation() -> None:
    # One 8-GPU server, empty, t = 0.  A (4 GPUs, 50 s) starts (fifo head); H (8 GPUs)
    # cannot: shadow = A's end 50, extra 4 + 4 - 8 = 0.  X (4 GPUs, 40 s) ends at 40 <= 50:
    # backfilled.  Without A in the reservation there would be no shadow time at all.
    st = cluster(n_train=1)
    job(st, "A", t=0, w=4, rem=50.0)
    job(st, "H", t=1, w=8)
    job(st, "X", t=2, w=4, rem=40.0)
    job(st, "Y", t=3, w=1, rem=60.0)  # no GPU left
    assert starts(st, schedule(st, policy="fifo-backfill")) == [
        ("A", {0: 4}, "fifo_head"), ("X", {0: 4}, "backfill")]


def test_a_paused_running_job_ends_after_its_pause() -> None:
    # R was preempted earlier and restarted at t = 0 with a 60 s restart cost: 100 s of
    # work at speed 1 from 60, so it ends at 160, not 100.  H (8 GPUs) waits for it:
    # shadow 160.  X (4 GPUs, 150 s) ends at 150 <= 160: backfilled (with a shadow of
    # 100 it would not be).
    st = cluster(n_train=1, restart_cost_s=60.0)
    r = job(st, "R", w=4, rem=100.0)
    st.restarted[r] = True
    run(st, "R", {0: 4})
    assert st.progress_at_s[r] == 60.0
    job(st, "H", t=1, w=8)
    job(st, "X", t=2, w=4, rem=150.0)
    assert starts(st, schedule(st, policy="fifo-backfill")) == [("X", {0: 4}, "backfill")]


def test_backfill_skips_a_job_too_big_for_now_and_takes_a_later_one() -> None:
    # One server; R holds 6 GPUs until 100.  H (8) waits: shadow 100, extra 6 + 2 - 8 = 0.
    # B (4 GPUs, 10 s) does not fit the 2 free GPUs: skipped (not the end of the scan);
    # C (2 GPUs, 10 s) ends at 10: backfilled.
    st = cluster(n_train=1)
    job(st, "R", w=6, rem=100.0)
    run(st, "R", {0: 6})
    job(st, "H", t=1, w=8)
    job(st, "B", t=2, w=4, rem=10.0)
    job(st, "C", t=3, w=2, rem=10.0)
    assert starts(st, schedule(st, policy="fifo-backfill")) == [("C", {0: 2}, "backfill")]


# ------------------------------------------------------------------ sjf

def test_sjf_keys_by_hand() -> None:
    st = cluster()
    a = job(st, "a", w=2, rem=100.0, alpha=0.5)  # rigid at 2
    e = job(st, "e", w=4, rem=100.0, mn=1, mx=8, alpha=0.5)
    # rigid: 100 s at its reference size
    assert sjf_key_rigid(st, a) == pytest.approx(100.0, rel=1e-15)
    # elastic at its base of 1 worker: work 100 x T(4) = 100 x 4 / 2.5 = 160; T(1) = 1
    assert sjf_key_elastic(st, e) == pytest.approx(160.0, rel=1e-15)
    assert sjf_key_rigid(st, e) == pytest.approx(100.0, rel=1e-15)
    st.waited_s[a] = 30.0
    st.queued_since_s[a] = 50.0
    assert wait_origin_key(st, a) == 20.0


def test_the_starvation_option_overrides_the_configured_bound() -> None:
    # One server, t = 1,000; A holds nothing.  L (8 GPUs, 500 s) queued since 0,
    # S (8 GPUs, 100 s) since 500.  Config bound 4 h: nobody starves, SJF takes S.
    # Option bound 900 s: L has waited 1,000 >= 900, starving: L first.
    st = cluster(n_train=1, now=1000.0)
    job(st, "L", t=0, w=8, rem=500.0)
    job(st, "S", t=500, w=8, rem=100.0)
    assert starts(st, schedule(st, policy="sjf")) == [("S", {0: 8}, "sjf_order")]
    plan = schedule(st, policy="sjf", options={"starvation_bound_s": 900})
    assert starts(st, plan) == [("L", {0: 8}, "starvation_guard")]
    # at exactly the bound (1,000 s waited) L is starving too
    plan = schedule(st, policy="sjf", options={"starvation_bound_s": 1000.0})
    assert starts(st, plan) == [("L", {0: 8}, "starvation_guard")]
    plan = schedule(st, policy="sjf", options={"starvation_bound_s": 1000.5})
    assert starts(st, plan) == [("S", {0: 8}, "sjf_order")]


def test_a_starving_job_that_does_not_fit_blocks_backfill() -> None:
    # One server; R holds 4 GPUs.  L (8 GPUs) waited 2,000 s >= bound 1,000: starving,
    # does not fit, blocks: S (1 GPU, short) must not start.
    st = cluster(n_train=1, now=2000.0, starvation_bound_s=1000.0)
    job(st, "R", w=4, rem=5000.0)
    run(st, "R", {0: 4})
    job(st, "L", t=0, w=8, rem=500.0)
    job(st, "S", t=1990, w=1, rem=1.0)
    assert starts(st, schedule(st, policy="sjf")) == []
    # a starving job that fits starts, then SJF order fills the rest (first = sjf_order)
    st = cluster(n_train=1, now=2000.0, starvation_bound_s=1000.0)
    job(st, "L", t=0, w=4, rem=500.0)
    job(st, "B", t=1995, w=8, rem=5.0)  # shortest, does not fit after L
    job(st, "S", t=1990, w=2, rem=10.0)
    assert starts(st, schedule(st, policy="sjf")) == [
        ("L", {0: 4}, "starvation_guard"), ("S", {0: 2}, "backfill")]


def test_sjf_backfill_skips_sizes_that_already_failed() -> None:
    # Two 8-GPU servers with 5 GPUs busy each: 3 free on each, 6 in total.  SJF order:
    # B (3 workers of 2 GPUs, 20 s): 6 GPUs by count, but each server holds one 2-GPU
    # worker: not placed; 3 workers of 2 GPUs is remembered as failing.
    # A (2 x 1 GPU, 30 s): best fit on t0 (3 -> 1 free); a backfill (B came first).
    # E (1 x 2 GPUs, 35 s): smaller than the failed size: tried, t1 (3 -> 1).
    # C (3 x 2 GPUs, 40 s): 6 GPUs > 2 left: skipped.  D (1 x 1 GPU, 50 s): t0.
    st = cluster(n_train=2, now=100.0)
    job(st, "R0", w=5, rem=1e4)
    job(st, "R1", w=5, rem=1e4)
    run(st, "R0", {0: 5})
    run(st, "R1", {1: 5})
    job(st, "B", t=1, g=2, w=3, rem=20.0)
    job(st, "A", t=2, g=1, w=2, rem=30.0)
    job(st, "E", t=3, g=2, w=1, rem=35.0)
    job(st, "C", t=4, g=2, w=3, rem=40.0)
    job(st, "D", t=5, g=1, w=1, rem=50.0)
    plan = schedule(st, policy="sjf")
    assert starts(st, plan) == [("A", {0: 2}, "backfill"), ("E", {1: 1}, "backfill"),
                                ("D", {0: 1}, "backfill")]


# ------------------------------------------------------------------ tiresias

def test_tiresias_levels_backfill_and_preemption() -> None:
    # Thresholds 100 and 1,000 GPU-s.  One 8-GPU server at t = 50.
    # R_hi: running since 0 on 6 GPUs: attained 300 -> level 1.
    # R_lo: running since 40 on 2 GPUs: attained 20 -> level 0.
    # Queue: N (new, 8 GPUs, level 0) and T (level 0, 1 GPU, queued after N).
    # N does not fit (0 free): blocked head at level 0; T does not fit either.
    # Preemption round: victims at a level above 0: R_hi only; freeing its 6 GPUs gives
    # 6 < 8: not enough, so nothing is preempted (R_lo is at N's level).
    opts = {"las_thresholds_gpu_s": [100.0, 1000.0]}
    st = cluster(n_train=1, now=50.0)
    job(st, "R_hi", w=6, rem=1e4)
    job(st, "R_lo", w=2, rem=1e4)
    run(st, "R_hi", {0: 6}, at=0.0)
    run(st, "R_lo", {0: 2}, at=40.0)
    job(st, "N", t=45, w=8)
    job(st, "T", t=46, w=1)
    plan = schedule(st, policy="tiresias", options=opts)
    assert plan.preemptions == []
    assert plan.starts == []
    # N of 6 GPUs instead: preempting R_hi frees 6 >= 6 and N fits: R_hi preempted,
    # N starts (las_priority); T (1 GPU) still does not fit
    st = cluster(n_train=1, now=50.0)
    job(st, "R_hi", w=6, rem=1e4)
    job(st, "R_lo", w=2, rem=1e4)
    run(st, "R_hi", {0: 6}, at=0.0)
    run(st, "R_lo", {0: 2}, at=40.0)
    job(st, "N", t=45, w=6)
    job(st, "T", t=46, w=1)
    plan = schedule(st, policy="tiresias", options=opts)
    assert [(st.job_id[j], r.label) for j, r in plan.preemptions] == [("R_hi", "las_preempt")]
    assert starts(st, plan) == [("N", {0: 6}, "las_priority")]


def test_tiresias_preempts_the_lowest_priority_first_latest_index_first() -> None:
    # Thresholds 10 and 100.  One 8-GPU server at t = 100.  Running: A (index 0, 2 GPUs
    # since 0: 200 GPU-s, level 2), B (index 1, 2 GPUs since 50: 100 -> level 2),
    # C (index 2, 4 GPUs since 99: 4 GPU-s, level 0).  N (4 GPUs, level 0) is queued.
    # Victims above level 0: A and B, both level 2; latest index first: B, then A.
    # B frees 2 (2 < 4), A frees 2 more (4 >= 4): both preempted, N placed.
    opts = {"las_thresholds_gpu_s": [10.0, 100.0]}
    st = cluster(n_train=1, now=100.0)
    job(st, "A", w=2, rem=1e4)
    job(st, "B", w=2, rem=1e4)
    job(st, "C", w=4, rem=1e4)
    run(st, "A", {0: 2}, at=0.0)
    run(st, "B", {0: 2}, at=50.0)
    run(st, "C", {0: 4}, at=99.0)
    job(st, "N", t=90, w=4)
    plan = schedule(st, policy="tiresias", options=opts)
    assert [st.job_id[j] for j, _ in plan.preemptions] == ["B", "A"]
    assert starts(st, plan) == [("N", {0: 4}, "las_priority")]


def test_tiresias_backfills_behind_a_blocked_job() -> None:
    # Thresholds default.  Two servers, t0 6 GPUs busy (level 0 job), t1 empty.
    # Queue: W (level 0, 16 GPUs: needs both servers whole) blocked, then S (2 GPUs)
    # backfills on t0 (best fit: 2 free there) and V (4 GPUs) on t1.
    st = cluster(n_train=2, now=10.0)
    job(st, "R", w=6, rem=1e4)
    run(st, "R", {0: 6}, at=0.0)
    job(st, "W", t=1, w=8, g=2)
    job(st, "S", t=2, w=2)
    job(st, "V", t=3, w=4)
    plan = schedule(st, policy="tiresias")
    assert starts(st, plan) == [("S", {0: 2}, "backfill"), ("V", {1: 4}, "backfill")]
    assert plan.preemptions == []  # R is at W's level


# ------------------------------------------------------------------ loans

def test_offers_leave_the_reserve_and_respect_the_cooldown() -> None:
    # One training server (busy), three idle inference servers, reserve 1: the two
    # highest-index idle servers are offered; a 16-GPU job takes both (borrowed for base).
    def state(**cfg: Any) -> ClusterState:
        st = cluster(n_train=1, n_inf=3, now=1000.0, **cfg)
        job(st, "R", w=8, rem=1e4)
        run(st, "R", {0: 8})
        job(st, "N", t=1, w=16, rem=10.0)
        return st

    st = state(loan_reserve_servers=1)
    plan = schedule(st, policy="aryl")
    assert starts(st, plan) == [("N", {2: 8, 3: 8}, "sjf_order")]
    assert plan.borrowed_servers == [(2, Reason.LOAN_FOR_BASE), (3, Reason.LOAN_FOR_BASE)]
    # reserve 2: one server offered, not enough: nothing starts, nothing borrowed
    st = state(loan_reserve_servers=2)
    plan = schedule(st, policy="aryl")
    assert plan.starts == []
    assert plan.borrowed_servers == []
    # a reclaim 500 s ago with a 600 s cool-down: no offer at all
    st = state(loan_reserve_servers=0, loan_cooldown_s=600.0)
    st.last_reclaim_s = 500.0
    assert schedule(st, policy="aryl").borrowed_servers == []
    st.last_reclaim_s = 400.0  # exactly 600 s ago: cooled down
    assert len(schedule(st, policy="aryl").borrowed_servers) == 2
    # a serving server is never offered; servers_needed counts against the loanable ones
    st = state(loan_reserve_servers=0)
    st.servers_needed = 1
    st.set_serving()
    plan = schedule(st, policy="aryl")
    assert plan.borrowed_servers == [(2, Reason.LOAN_FOR_BASE), (3, Reason.LOAN_FOR_BASE)]
    # non-loaning policies never borrow
    assert schedule(state(), policy="aryl-no-loan").borrowed_servers == []


def test_keeping_idle_loans_borrows_every_offer() -> None:
    # return_idle_loans=False: every offered server is borrowed (loan_kept, highest
    # index first) even if the pass puts nothing there, and nothing is returned
    st = cluster(n_train=1, n_inf=2)
    job(st, "A", w=1, rem=10.0)
    plan = schedule(st, policy="aryl", options={"return_idle_loans": False})
    assert plan.borrowed_servers == [(2, Reason.LOAN_KEPT), (1, Reason.LOAN_KEPT)]
    assert starts(st, plan) == [("A", {0: 1}, "sjf_order")]
    after = plan.apply(st)
    assert after.loaned_servers() == [1, 2]
    assert schedule(after, policy="aryl", options={"return_idle_loans": False}
                    ).returned_servers == []
    # with the default, the idle loans go back on the next pass
    plan2 = schedule(after, policy="aryl")
    assert plan2.returned_servers == [(1, Reason.IDLE_LOAN), (2, Reason.IDLE_LOAN)]


def test_a_loan_used_only_by_extras_is_borrowed_for_extras() -> None:
    # One 4-GPU training server, one idle 4-GPU inference server.  E (elastic, 1..8
    # workers of 1 GPU, alpha 0, 10,000 s at its reference 1 worker) starts with its
    # base 1 worker on t0 and extra workers on the training server first, then the
    # offered server: 7 extras (3 on t0, 4 on i0); i0 holds only extras.
    st = cluster(n_train=1, n_inf=1, gpus=4)
    job(st, "E", w=1, rem=10000.0, mn=1, mx=8, alpha=0.0)
    plan = schedule(st, policy="aryl")
    assert starts(st, plan) == [("E", {0: 4, 1: 4}, "sjf_order")]
    assert plan.borrowed_servers == [(1, Reason.LOAN_FOR_EXTRA)]


# ------------------------------------------------------------------ placement helpers

def test_best_fit_and_gang_placement() -> None:
    free = [3, 8, 2, 4, 4]
    assert best_fit(free, range(5), 2) == 2  # the fullest that holds 2
    assert best_fit(free, range(5), 4) == 3  # 4 free at 3 and 4: the lower index
    assert best_fit(free, range(5), 9) == -1
    assert best_fit(free, [1, 4], 1) == 4
    # gang: 2 workers of 4 GPUs on 8-GPU servers fit one server (the best fit: 1)
    assert gang_place(free, range(5), 2, 4, 8) == {1: 2}
    # 3 workers of 4: one whole free server (1) + 1 worker best fit (3: 4 free)
    assert gang_place(free, range(5), 3, 4, 8) == {1: 2, 3: 1}
    # 4 workers of 4: two whole free servers needed, only one: None
    assert gang_place(free, range(5), 4, 4, 8) is None
    # remainder with no room: None
    assert gang_place([8, 2], range(2), 3, 4, 8) is None
    # exactly whole servers, no remainder
    assert gang_place([8, 8, 8], range(3), 4, 4, 8) == {0: 2, 1: 2}
    # worker granularity: 3 workers of 3 GPUs, 2 per 8-GPU server (6 GPUs): one whole
    # server + 1 worker on the best fit with >= 3 free
    assert gang_place([8, 5, 3], range(3), 3, 3, 8) == {0: 2, 2: 1}


def test_bf_place_one_server_else_chunks_else_spill() -> None:
    free = [3, 5, 2, 6]
    f = list(free)
    assert bf_place(f, [[0, 1], [2, 3]], 5, 1) == {1: 5}
    assert f == [3, 0, 2, 6]
    f = list(free)
    # 7 GPUs: no single server of group 1 (3, 5): chunks, most free first (1: 5, 0: 2)
    assert bf_place(f, [[0, 1], [2, 3]], 7, 1) == {1: 5, 0: 2}
    f = list(free)
    # 10: group 1 gives 8 (5 + 3), the rest (2) spills to group 2 (best fit: 2)
    assert bf_place(f, [[0, 1], [2, 3]], 10, 1) == {1: 5, 0: 3, 2: 2}
    assert f == [0, 0, 0, 6]
    f = list(free)
    assert bf_place(f, [[0, 1], [2, 3]], 17, 1) is None
    assert f == free  # untouched
    # 4 workers of 2 GPUs: no server of group 1 holds 8; its chunks: server 1 (5 free:
    # 2 workers), server 0 (3 free: 1 worker); the 4th spills to group 2, best fit for
    # 2 GPUs: server 2 (2 free)
    f = list(free)
    assert bf_place(f, [[0, 1], [2, 3]], 4, 2) == {1: 2, 0: 1, 2: 1}
    f = [4, 4]
    assert bf_place(f, [[0, 1]], 2, 4) == {0: 1, 1: 1}  # ties: lower index first


def test_gang_place_typed_takes_the_fastest_type_that_fits() -> None:
    from aryl.scheduling.speed import SpeedModel

    st = ClusterState(speeds=SpeedModel("slow", factors={"fast": 2.0}))
    st.add_server("s0", role="training", gpus=8, gpu_type="slow")
    st.add_server("f0", role="training", gpus=4, gpu_type="fast")
    j = job(st, "j", w=4)
    assert gang_place_typed(st, st.free, j, 4) == {1: 4}  # fast first
    assert gang_place_typed(st, [8, 2], j, 4) == {0: 4}  # fast full: slow
    assert gang_place_typed(st, [2, 2], j, 4) is None
    # the fast type first even when a slow server is the fuller fit: 2 workers, free
    # (2 on the slow s0, 4 on the fast f0) -> f0
    k = job(st, "k", w=2)
    assert gang_place_typed(st, [2, 4], k, 2) == {1: 2}
    empty = ClusterState()
    empty.add_server("i", role="inference", gpus=8)
    k = job(empty, "k", w=1)
    assert gang_place_typed(empty, empty.free, k, 1) is None  # no training server


# ------------------------------------------------------------------ kernels

def _brute(values: np.ndarray, weights: np.ndarray, cap: int) -> float:
    n, m = values.shape
    best = 0.0
    for choice in itertools.product(range(m + 1), repeat=n):
        w = sum(int(weights[i, c - 1]) for i, c in enumerate(choice) if c)
        if w > cap:
            continue
        v = 0.0
        ok = True
        for i, c in enumerate(choice):
            if c:
                x = values[i, c - 1]
                if math.isnan(x):
                    ok = False
                    break
                v += x
        if ok:
            best = max(best, v)
    return best


def test_mckp_extras_is_the_table_and_the_exact_solver() -> None:
    # 3 jobs, JCT table of aryl.elastic (checked there); here: the solver's choice has
    # the brute-force value and each option is within the job's maximum
    rem = np.array([1000.0, 500.0, 4000.0])
    cur = np.array([1, 2, 1], dtype=np.int64)
    base = np.array([1, 2, 1], dtype=np.int64)
    mx = np.array([4, 3, 5], dtype=np.int64)
    g = np.array([1, 2, 1], dtype=np.int64)
    alpha = np.array([0.1, 0.0, 0.3])
    pause = np.array([30.0, 0.0, 30.0])
    values, weights = extras_table(rem, cur, base, mx, g, alpha, pause)
    for cap in (0, 1, 2, 3, 5, 8):
        k = mckp_extras(rem, cur, base, mx, g, alpha, pause, cap, backend="reference")
        assert k is not None
        used = sum(int(k[i]) * int(g[i]) for i in range(3))
        assert used <= cap
        got = sum(float(values[i, k[i] - 1]) for i in range(3) if k[i])
        assert got == pytest.approx(_brute(values, weights, cap), abs=1e-6)
        assert all(0 <= k[i] <= mx[i] - base[i] for i in range(3))
    empty = mckp_extras(rem[:0], cur[:0], base[:0], mx[:0], g[:0], alpha[:0], pause[:0], 4,
                        backend="native")
    assert empty is not None
    assert empty.shape == (0,)


def test_greedy_by_marginal_gain_per_gpu() -> None:
    # values (JCT reduction) of k = 1, 2, 3 extra workers; weights k x g
    values = np.array([[10.0, 14.0, 15.0],   # marginal 10, 4, 1 per worker (1 GPU each)
                       [12.0, 30.0, np.nan]])  # 2 GPUs per worker: 6, 9 per GPU
    weights = np.array([[1, 2, 3], [2, 4, 6]])
    # capacity 5: heap by gain per GPU: job0 first (10), then job1 (6 per GPU, 2 GPUs,
    # cap 5 -> 2), then job1's next (18 / 2 = 9 per GPU, 2 GPUs, cap 2 -> 0), done
    k = solve_extras(values, weights, 5, backend="native", solver="greedy")
    assert k.tolist() == [1, 2]  # type: ignore[union-attr]
    # capacity 2: job0 (1 GPU), then job1 needs 2 > 1 left: skipped; job0's next (4)
    k = solve_extras(values, weights, 2, backend="native", solver="greedy")
    assert k.tolist() == [2, 0]  # type: ignore[union-attr]
    # a job whose first worker gains nothing is never given one
    k = solve_extras(np.array([[0.0, 5.0]]), np.array([[1, 2]]), 4, backend="native",
                     solver="greedy")
    assert k.tolist() == [0]  # type: ignore[union-attr]
    # no options at all
    k = solve_extras(np.zeros((2, 0)), np.zeros((2, 0), dtype=np.int64), 4, backend="native",
                     solver="greedy")
    assert k.tolist() == [0, 0]  # type: ignore[union-attr]


def test_unconstrained_only_and_max_extra() -> None:
    values = np.array([[5.0, 9.0, 9.0], [-1.0, -2.0, np.nan], [3.0, 2.0, 1.0]])
    weights = np.array([[1, 2, 3], [1, 2, 3], [2, 4, 6]])
    # each job's best: job0 9 at 2 workers (ties: fewer), job1 none (negative), job2 1
    # worker; GPUs 2 + 0 + 2 = 4
    k = solve_extras(values, weights, 4, backend="native", unconstrained_only=True)
    assert k.tolist() == [2, 0, 1]  # type: ignore[union-attr]
    assert solve_extras(values, weights, 3, backend="native", unconstrained_only=True) is None
    # a cap of 1 worker on job0 makes its best 5 at 1 worker: 1 + 2 = 3 GPUs fit
    k = solve_extras(values, weights, 3, backend="native", unconstrained_only=True,
                     max_extra=np.array([1, 3, 3]))
    assert k.tolist() == [1, 0, 1]  # type: ignore[union-attr]
    # the exact solver with caps: job0 capped at 0
    k = solve_extras(values, weights, 10, backend="reference", max_extra=np.array([0, 3, 3]))
    assert k.tolist() == [0, 0, 1]  # type: ignore[union-attr]
    assert solve_extras(np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64), 5,
                        backend="native").shape == (0,)  # type: ignore[union-attr]
    assert solve_extras(np.zeros((2, 0)), np.zeros((2, 0), dtype=np.int64), 5,
                        backend="native", unconstrained_only=True).tolist() == [0, 0]  # type: ignore[union-attr]


def test_reclaim_request_lists_loaned_servers_and_their_jobs_in_start_order() -> None:
    st = cluster(n_train=1, n_inf=3)
    st.lend(1)
    st.lend(3)
    e = job(st, "e", g=2, w=2, rem=100.0, mn=1, mx=4)
    r = job(st, "r", w=2, rem=100.0)
    f = job(st, "f", w=1, rem=100.0)
    run(st, "r", {3: 2})
    run(st, "e", {0: 1, 1: 1, 3: 2})
    run(st, "f", {0: 1})
    assert jobs_in_start_order(st, [3, 1, 0]) == {3: [r, e], 1: [e], 0: [e, f]}
    req = reclaim_request(st, 1, True)
    assert req.server_id.tolist() == [1, 3]
    assert req.server_gpus.tolist() == [8, 8]
    assert req.job_id.tolist() == [e, r]  # first seen on server 1 (e), then 3 (r)
    # placements: (job position, server, workers): e on 1 (1), r on 3 (2), e on 3 (2)
    assert list(zip(req.placement_job.tolist(), req.placement_server.tolist(),
                    req.placement_workers.tolist(), strict=True)) == [
        (0, 1, 1), (1, 3, 2), (0, 3, 2)]
    assert req.job_workers.tolist() == [4, 2]
    assert req.job_gpus_per_worker.tolist() == [2, 1]
    assert req.job_min_workers.tolist() == [1, 2]  # elastic: its minimum; rigid: all
    assert req.job_elastic.tolist() == [True, False]
    assert req.job_preemptible.tolist() == [True, True]
    assert req.n_servers == 1
    # a non-elastic policy treats every job as rigid: its base is its whole size
    req = reclaim_request(st, 2, False)
    assert req.job_min_workers.tolist() == [4, 2]
    assert req.job_elastic.tolist() == [False, False]
    assert req.n_servers == 2


# ------------------------------------------------------------------ typed clusters

def _typed(rem_n: float, running: list[tuple[str, float, int, bool]],
           restart_cost_s: float = 60.0) -> tuple[ClusterState, SchedulePlan]:
    """A fast training server f0 (8 GPUs, the reference type) and a slow idle inference
    server s0 (8 GPUs at half speed); alpha 0 everywhere, so a job of 8 one-GPU workers
    needs ``rem`` s on f0 and 2 x ``rem`` s on s0.  ``running``: jobs on f0 as (name,
    seconds left, GPUs, paused by a restart); N (8 workers) is queued at t = 0."""
    from aryl.scheduling.speed import SpeedModel

    st = ClusterState(config=SchedulerConfig(loan_reserve_servers=0,
                                             restart_cost_s=restart_cost_s),
                      speeds=SpeedModel("fast", factors={"slow": 0.5}))
    st.add_server("f0", role="training", gpus=8, gpu_type="fast")
    st.add_server("s0", role="inference", gpus=8, gpu_type="slow", status="idle")
    for name, left, gpus, paused in running:
        j = job(st, name, w=gpus, rem=left, alpha=0.0)
        st.restarted[j] = paused
        run(st, name, {0: gpus})
    job(st, "N", w=8, rem=rem_n, alpha=0.0)
    return st, schedule(st, policy="aryl")


def test_a_job_starts_on_a_slow_loan_only_when_it_finishes_no_later() -> None:
    # R holds f0 for 100 s more.  N of 300 s: 600 s on s0 now, or 100 + 300 = 400 s
    # by waiting for f0: it waits (nothing borrowed)
    st, plan = _typed(300.0, [("R", 100.0, 8, False)])
    assert plan.starts == []
    assert plan.borrowed_servers == []
    # N of 50 s: 100 s on s0 against 150 s: borrowed and started on s0
    st, plan = _typed(50.0, [("R", 100.0, 8, False)])
    assert starts(st, plan) == [("N", {1: 8}, "sjf_order")]
    assert plan.borrowed_servers == [(1, Reason.LOAN_FOR_BASE)]
    # N of 100 s: 200 s either way: a tie starts now
    st, plan = _typed(100.0, [("R", 100.0, 8, False)])
    assert starts(st, plan) == [("N", {1: 8}, "sjf_order")]


def test_the_wait_counts_a_pause_and_sums_releases_in_end_order() -> None:
    # R restarted now and pays 60 s before its 100 s: f0 frees at 160.  N of 130 s:
    # 260 s on s0 against 160 + 130 = 290 s: starts now (counting from now instead of
    # the end of the pause it would wait: 100 + 130 = 230 < 260)
    st, plan = _typed(130.0, [("R", 100.0, 8, True)])
    assert starts(st, plan) == [("N", {1: 8}, "sjf_order")]
    # two jobs hold f0: L (4 GPUs, 300 s, started first) and S (4 GPUs, 50 s).  N needs
    # 8: 4 at 50 s and 4 more at 300 s: the wait is 300.  N of 250 s: 500 s on s0 against
    # 300 + 250 = 550: starts now (reading the releases in start order would give a
    # wait of 50 and 50 + 250 = 300 < 500: wait)
    st, plan = _typed(250.0, [("L", 300.0, 4, False), ("S", 50.0, 4, False)])
    assert starts(st, plan) == [("N", {1: 8}, "sjf_order")]
    # N of 350: 700 against 650: waits
    st, plan = _typed(350.0, [("L", 300.0, 4, False), ("S", 50.0, 4, False)])
    assert plan.starts == []


def test_free_fast_gpus_need_no_wait() -> None:
    # f0 has 4 free GPUs and a 4-GPU job ends in 100 s; N of 4 workers fits f0 now
    from aryl.scheduling.speed import SpeedModel

    st = ClusterState(config=SchedulerConfig(loan_reserve_servers=0),
                      speeds=SpeedModel("fast", factors={"slow": 0.5}))
    st.add_server("f0", role="training", gpus=8, gpu_type="fast")
    st.add_server("s0", role="inference", gpus=8, gpu_type="slow", status="idle")
    job(st, "R", w=4, rem=100.0, alpha=0.0)
    run(st, "R", {0: 4})
    job(st, "N", w=4, rem=10.0, alpha=0.0)
    plan = schedule(st, policy="aryl")
    assert starts(st, plan) == [("N", {0: 4}, "sjf_order")]
    assert plan.borrowed_servers == []


# ------------------------------------------------------------------ plans and reclaims

def test_apply_refuses_actions_that_do_not_fit_the_state() -> None:
    st = cluster(n_train=1, n_inf=1, now=10.0)
    job(st, "R", w=4, rem=100.0)
    run(st, "R", {0: 4})
    job(st, "Q", w=2, rem=50.0)
    r, q = st.job_index(["R", "Q"])

    def refused(plan: SchedulePlan) -> str:
        with pytest.raises(InvalidInputError) as info:
            plan.apply(st)
        return str(info.value)

    assert refused(SchedulePlan(now_s=5.0)) == "plan at 5.0 s is older than the state (10.0 s)"
    assert refused(SchedulePlan(now_s=10.0, reclaim_actions=[(q, None, Reason.RECLAIM_PREEMPT)])
                   ) == "reclaim action on job 'Q', not running"
    assert refused(SchedulePlan(now_s=10.0, preemptions=[(q, Reason.LAS_PREEMPT)])) == (
        "preemption of job 'Q', not running")
    assert refused(SchedulePlan(now_s=10.0, resizes=[(q, {0: 1}, Reason.MCKP_MOVE)])) == (
        "resize of job 'Q', not running")
    assert refused(SchedulePlan(now_s=10.0, starts=[(r, {0: 1}, Reason.SJF_ORDER)])) == (
        "start of job 'R', not queued")
    # the reader's own placement check (ClusterState.check_placement): t0 has 4 free
    # GPUs (R holds 4); Q is rigid at 2 workers, R at 4; i0 (server 1) is not on loan
    B = st.add_job("B", arrival_s=0.0, gpus_per_worker=1, ref_workers=6, remaining_s=9.0)
    st.enqueue(B, 10.0)
    for plan, message in (
        (SchedulePlan(now_s=10.0, starts=[(q, {0: 5}, Reason.SJF_ORDER)]),
         "start of job 'Q': placement: 5 workers outside [min_workers, max_workers] = [2, 2]"),
        (SchedulePlan(now_s=10.0, starts=[(q, {0: 1}, Reason.SJF_ORDER)]),
         "start of job 'Q': placement: 1 workers outside [min_workers, max_workers] = [2, 2]"),
        (SchedulePlan(now_s=10.0, starts=[(B, {0: 6}, Reason.SJF_ORDER)]),
         "start of job 'B': placement: 6 worker(s) of 1 GPU(s) do not fit server 't0' "
         "(4 of 8 GPUs free)"),
        (SchedulePlan(now_s=10.0, starts=[(q, {7: 2}, Reason.SJF_ORDER)]),
         "start of job 'Q': placement: no server with index 7"),
        (SchedulePlan(now_s=10.0, starts=[(q, {-1: 2}, Reason.SJF_ORDER)]),
         "start of job 'Q': placement: no server with index -1"),
        (SchedulePlan(now_s=10.0, starts=[(q, {0: 0, 1: 2}, Reason.SJF_ORDER)]),
         "start of job 'Q': placement: workers on server 't0' must be an integer >= 1, got 0"),
        (SchedulePlan(now_s=10.0, starts=[(q, {}, Reason.SJF_ORDER)]),
         "start of job 'Q': placement: must list at least one server, got {}"),
        (SchedulePlan(now_s=10.0, starts=[(q, {1: 2}, Reason.SJF_ORDER)]),
         "start of job 'Q': placement: server 'i0' is an inference server that is not on "
         "loan; it cannot host training workers"),
        (SchedulePlan(now_s=10.0, resizes=[(r, {0: 9}, Reason.MCKP_SCALE_OUT)]),
         "resize of job 'R': placement: 9 workers outside [min_workers, max_workers] = [4, 4]"),
        # before: a NaN time was applied (now_s NaN), server -1 meant the last server
        (SchedulePlan(now_s=math.nan), "plan.now_s: must be a finite number, got nan"),
        (SchedulePlan(now_s=10.0, borrowed_servers=[(-1, Reason.LOAN_FOR_BASE)]),
         "borrowed server -1: no server with that index"),
        (SchedulePlan(now_s=10.0, returned_servers=[(2, Reason.IDLE_LOAN)]),
         "returned server 2: no server with that index"),
        (SchedulePlan(now_s=10.0, reclaimed_servers=[True]),
         "reclaimed server True: no server with that index"),
        (SchedulePlan(now_s=10.0, reclaim_actions=[(r, {1: 1}, Reason.RECLAIM_SCALE_IN)]),
         "reclaim action on job 'R': placement: server 'i0' is an inference server that is "
         "not on loan; it cannot host training workers"),
    ):
        assert refused(plan) == message
    # without validation the same start is applied as given
    after = SchedulePlan(now_s=10.0, starts=[(q, {0: 4}, Reason.SJF_ORDER)]).apply(
        st, validate=False)
    assert after.placement[q] == {0: 4}
    assert st.placement[q] is None  # a copy


def test_apply_order_and_the_observer() -> None:
    # R runs 4 workers on t0 and 4 on the loaned i0; the plan: i0 reclaimed (R scales in
    # to its 4 on t0), i1 borrowed, P preempted, E resized, Q started on i1; then the
    # state's memo is stored and the serving servers follow the returns
    st = cluster(n_train=1, n_inf=2, now=0.0)
    st.lend(1)
    job(st, "R", w=8, rem=100.0, mn=4, mx=8)
    job(st, "P", w=2, rem=100.0)
    job(st, "E", w=1, rem=100.0, mn=1, mx=2)
    job(st, "Q", w=8, rem=100.0)
    run(st, "R", {0: 4, 1: 4})
    run(st, "P", {0: 2})
    run(st, "E", {0: 1})
    r, p, e, q = st.job_index(["R", "P", "E", "Q"])
    st.now_s = 20.0
    st.servers_needed = 1
    log: list[tuple[Any, ...]] = []

    class Obs:
        def before_job_change(self, j: int) -> None:
            log.append(("before", st.job_id[j]))

        def job_started(self, j: int, reason: Reason) -> None:
            log.append(("start", st.job_id[j], reason.label))

        def job_resized(self, j: int, old: int, reason: Reason) -> None:
            log.append(("resize", st.job_id[j], old, reason.label))

        def job_preempted(self, j: int, reason: Reason) -> None:
            log.append(("preempt", st.job_id[j], reason.label))

        def server_lent(self, s: int, reason: Reason) -> None:
            log.append(("lent", s, reason.label))

        def server_returned(self, s: int, reason: Reason) -> None:
            log.append(("returned", s, reason.label))

    plan = SchedulePlan(
        now_s=20.0,
        reclaim_actions=[(r, {0: 4}, Reason.RECLAIM_SCALE_IN)],
        reclaimed_servers=[1],
        borrowed_servers=[(2, Reason.LOAN_FOR_BASE)],
        preemptions=[(p, Reason.LAS_PREEMPT)],
        resizes=[(e, {0: 2}, Reason.MCKP_SCALE_OUT)],
        starts=[(q, {2: 8}, Reason.SJF_ORDER)],
        elastic_memo=(3, 1),
    )
    assert bool(plan)
    assert plan.n_actions == 6
    after = plan.apply(st, observer=Obs())
    assert log == [
        ("before", "R"), ("resize", "R", 8, "reclaim_scale_in"),
        ("returned", 1, "reclaimed"), ("lent", 2, "loan_for_base"),
        ("before", "P"), ("preempt", "P", "las_preempt"),
        ("before", "E"), ("resize", "E", 1, "mckp_scale_out"),
        ("start", "Q", "sjf_order"),
    ]
    assert after.now_s == 20.0
    assert after.elastic_memo == (3, 1)
    assert after.placement[r] == {0: 4}
    assert after.placement[q] == {2: 8}
    # reclaimed at 20: i0 serves the 1 server needed; i1 is on loan
    assert after.server_status == [0, 1, 3]
    assert after.server_reclaimed_s[1] == 20.0
    after.check_indexes()
    # an empty plan is false and has no actions; a return of an idle loan is applied
    empty = SchedulePlan(now_s=20.0)
    assert not empty
    assert empty.n_actions == 0
    for field_ in ("reclaim_actions", "reclaimed_servers", "borrowed_servers", "preemptions",
                   "resizes", "starts", "returned_servers"):
        one = SchedulePlan(now_s=20.0)
        getattr(one, field_).append((0, None, Reason.FIFO_HEAD))
        assert bool(one), field_
        assert one.n_actions == 1, field_


def test_a_reclaim_preempts_a_job_left_below_its_base_and_reports_a_shortfall() -> None:
    # t0 and the loaned i0, i1 (8 GPUs).  E (elastic, 1-GPU workers, base 6, 12 running):
    # 8 on t0 and 4 on i0.  K (rigid, 4 workers) on i1.  Inference needs 2 servers now
    # (deadline now): both loans go back.  E keeps t0's 8 >= base 6: scaled in;
    # K loses every worker: preempted.
    st = cluster(n_train=1, n_inf=2, now=50.0)
    st.lend(1)
    st.lend(2)
    job(st, "E", w=12, rem=1000.0, mn=6, mx=12)
    job(st, "K", w=4, rem=1000.0)
    run(st, "E", {0: 8, 1: 4})
    run(st, "K", {2: 4})
    st.servers_needed = 2
    st.reclaim_deadline_s = 50.0
    plan = schedule(st, policy="aryl")
    assert st.job_index(["E", "K"]) == [0, 1]
    assert sorted(plan.reclaimed_servers) == [1, 2]
    assert plan.reclaim_shortfall == 0
    acts = {st.job_id[j]: (p, r.label) for j, p, r in plan.reclaim_actions}
    assert acts == {"E": ({0: 8}, "reclaim_scale_in"), "K": (None, "reclaim_preempt")}
    # the same for a non-elastic policy: E's base is its whole size: preempted too
    plan = schedule(st, policy="aryl-no-elastic")
    acts = {st.job_id[j]: (p, r.label) for j, p, r in plan.reclaim_actions}
    assert acts == {"E": (None, "reclaim_preempt"), "K": (None, "reclaim_preempt")}
    # a deadline in the future: nothing reclaimed yet
    st.reclaim_deadline_s = 60.0
    assert schedule(st, policy="aryl").reclaimed_servers == []
    # 3 servers needed of 2 inference servers is refused (it was planned with a
    # shortfall of 0: the deficit capped at the 2 on loan)
    st.reclaim_deadline_s = 50.0
    st.servers_needed = 3
    with pytest.raises(InvalidInputError) as info:
        schedule(st, policy="aryl")
    assert str(info.value) == (
        "state.servers_needed: must be an integer in [0, 2] (the inference servers), got 3")


# ------------------------------------------------------------------ more fifo-backfill

@pytest.mark.parametrize("policy", ["fifo", "fifo-backfill"])
def test_fifo_counts_only_training_gpus_as_free(policy: str) -> None:
    # a state from another policy (or a client): A runs on the loaned i0.  t0 is empty:
    # B (4 GPUs) starts there.  (Counting A's 8 GPUs as busy training GPUs left 0 free.)
    st = cluster(n_train=1, n_inf=1)
    st.lend(1)
    job(st, "A", w=8, rem=100.0)
    run(st, "A", {1: 8})
    job(st, "B", t=1, w=4, rem=100.0)
    reason = "fifo_head"
    assert starts(st, schedule(st, policy=policy)) == [("B", {0: 4}, reason)]


def test_the_reservation_ignores_gpus_freed_on_loaned_servers() -> None:
    # t0 runs R (4 GPUs, ends at 100); the loaned i0 runs A (8 GPUs, ends at 10).  H
    # (8 GPUs) waits for t0: 4 free + R's 4 at 100: shadow 100 (A's 8 GPUs at 10 are on
    # i0 and free nothing on t0).  X (4 GPUs, 50 s) ends by 100: backfilled.  Y (4 GPUs,
    # 200 s): no GPU left anyway; with a shadow of 10 X (ends 50 > 10) would have waited
    st = cluster(n_train=1, n_inf=1)
    st.lend(1)
    job(st, "R", w=4, rem=100.0)
    job(st, "A", w=8, rem=10.0)
    run(st, "R", {0: 4})
    run(st, "A", {1: 8})
    job(st, "H", t=1, w=8)
    job(st, "X", t=2, w=4, rem=50.0)
    assert starts(st, schedule(st, policy="fifo-backfill")) == [("X", {0: 4}, "backfill")]


def test_backfill_bookkeeping_of_extra_and_free_gpus() -> None:
    # t0 runs R (6 GPUs, ends at 100); t1 is empty: 2 + 8 = 10 free GPUs.  H (12 workers
    # of 1 GPU) needs a whole free server and 4 more: t0 has 2: H is the head; shadow
    # 100 (10 + 6 = 16 >= 12), extra 16 - 12 = 4.
    # L1 (2 GPUs, 500 s): past the shadow, 2 <= extra 4: started (best fit: t0's 2);
    #   extra 2, 8 free.
    # S4 (4 GPUs, 50 s): ends by 100: started on t1; extra stays 2, 4 free.
    # L2 (2 GPUs, 500 s): 2 <= extra 2: started on t1; extra 0, 2 free.
    # L3 (1 GPU, 500 s): extra 0: waits (1 GPU is free but reserved for H).
    # S1 (1 GPU, 50 s): ends by 100: started on the last free GPU (t1).
    st = cluster(n_train=2)
    job(st, "R", w=6, rem=100.0)
    run(st, "R", {0: 6})
    job(st, "H", t=1, w=12)
    job(st, "L1", t=2, w=2, rem=500.0)
    job(st, "S4", t=3, w=4, rem=50.0)
    job(st, "L2", t=4, w=2, rem=500.0)
    job(st, "L3", t=5, w=1, rem=500.0)
    job(st, "S1", t=6, w=1, rem=50.0)
    assert starts(st, schedule(st, policy="fifo-backfill")) == [
        ("L1", {0: 2}, "backfill"), ("S4", {1: 4}, "backfill"), ("L2", {1: 2}, "backfill"),
        ("S1", {1: 1}, "backfill")]


def test_jobs_started_in_one_pass_take_their_gpus_in_turn() -> None:
    # two empty 8-GPU servers, started in arrival order with best fit (the fullest
    # server that holds the job, ties to the lower index):
    # X (1 worker of 2 GPUs): t0 and t1 tie at 8: t0 (8 -> 6).
    # Y (1 worker of 4 GPUs): t0 (6) is fuller than t1 (8): t0 (6 -> 2).
    # W (1 worker of 4 GPUs): t0 has 2: t1 (8 -> 4).
    for policy in ("fifo", "fifo-backfill"):
        st = cluster(n_train=2)
        job(st, "X", t=0, g=2, w=1)
        job(st, "Y", t=1, g=4, w=1)
        job(st, "W", t=2, g=4, w=1)
        assert starts(st, schedule(st, policy=policy)) == [
            ("X", {0: 1}, "fifo_head"), ("Y", {0: 1}, "fifo_head"),
            ("W", {1: 1}, "fifo_head")], policy


def test_reservation_counts_gpus_of_multi_gpu_workers_and_speeds() -> None:
    # t = 1,000, two 8-GPU servers.  R (elastic, 2-GPU workers, ref 2, alpha 0) runs 4
    # workers on t0 (all 8 GPUs) at speed T(4) / T(2) = 2: 200 ref-s left end at
    # 1,000 + 100.  H (8 workers of 2 GPUs, both servers whole) waits: 8 free on t1 + R's
    # 8 at 1,100 = 16: shadow 1,100, extra 0.  X (4 workers of 2 GPUs on t1) of 100 s
    # ends at 1,100 <= 1,100: backfilled; of 101 s it would delay H: not started.
    for rem_x, started in ((100.0, True), (101.0, False)):
        st = cluster(n_train=2, now=1000.0)
        job(st, "R", g=2, w=2, rem=200.0, mn=2, mx=4, alpha=0.0)
        run(st, "R", {0: 4}, at=1000.0)
        job(st, "H", t=1, g=2, w=8)
        job(st, "X", t=2, g=2, w=4, rem=rem_x)
        got = starts(st, schedule(st, policy="fifo-backfill"))
        assert got == ([("X", {1: 4}, "backfill")] if started else []), rem_x


def _typed2(rem_n: float, *, types: list[tuple[str, str, float]], now: float = 1000.0,
            running: list[tuple[str, float, int, int]] | None = None,
            need: tuple[int, int] = (8, 1)) -> tuple[ClusterState, SchedulePlan]:
    """Servers ``types`` = [(id, gpu type, factor)] (training; the last one an idle
    inference server), reference type "ref" (factor 1, not in the cluster); alpha 0.
    ``running``: (name, ref-s left, server index, GPUs); N (``need`` = workers, GPUs per
    worker; ref size = its workers) is queued."""
    from aryl.scheduling.speed import SpeedModel

    st = ClusterState(now_s=now, config=SchedulerConfig(loan_reserve_servers=0),
                      speeds=SpeedModel("ref", factors={t: f for _, t, f in types}))
    for sid, t, _ in types[:-1]:
        st.add_server(sid, role="training", gpus=8, gpu_type=t)
    sid, t, _ = types[-1]
    st.add_server(sid, role="inference", gpus=8, gpu_type=t, status="idle")
    for name, left, s, gpus in running or []:
        job(st, name, t=now, w=gpus, rem=left, alpha=0.0)
        run(st, name, {s: gpus}, at=now)
    w, g = need
    job(st, "N", t=now, g=g, w=w, rem=rem_n, alpha=0.0)
    return st, schedule(st, policy="aryl")


def test_the_loan_decision_with_speeds_other_than_the_reference() -> None:
    # f0: type fast (factor 2); s0: idle inference server of type slow (factor 1).  R
    # holds f0 (8 GPUs) with 200 ref-s left at speed 2: f0 frees at now + 100.  N (8
    # one-GPU workers) runs rem / 2 on f0 and rem on s0.
    types = [("f0", "fast", 2.0), ("s0", "slow", 1.0)]
    busy = [("R", 200.0, 0, 8)]
    # rem 300: 300 now on s0 against 100 + 150 = 250: wait
    st, plan = _typed2(300.0, types=types, running=busy)
    assert plan.starts == []
    # rem 100: 100 against 100 + 50: start on s0 now
    st, plan = _typed2(100.0, types=types, running=busy)
    assert starts(st, plan) == [("N", {1: 8}, "sjf_order")]
    # rem 200: 200 against 100 + 100: a tie starts
    st, plan = _typed2(200.0, types=types, running=busy)
    assert starts(st, plan) == [("N", {1: 8}, "sjf_order")]


def test_every_faster_training_type_is_weighed() -> None:
    # training types in server order: m0 (type mid, factor 1, as fast as the loan) then
    # f0 (fast, factor 4).  Both are full until now + 100 (R1, R2).  N of 800 ref-s:
    # 800 on s0 (slow, factor 1) now, or 100 + 200 on f0: it waits.  (Stopping at the
    # first training type not faster than the loan, mid, would start it now.)
    types = [("m0", "mid", 1.0), ("f0", "fast", 4.0), ("s0", "slow", 1.0)]
    busy = [("R1", 100.0, 0, 8), ("R2", 400.0, 1, 8)]
    st, plan = _typed2(800.0, types=types, running=busy)
    assert plan.starts == []
    st, plan = _typed2(100.0, types=types, running=busy)  # 100 against 100 + 25: now
    assert starts(st, plan) == [("N", {2: 8}, "sjf_order")]


def test_free_but_fragmented_fast_gpus_count_as_no_wait() -> None:
    # f0 and f1 (fast, factor 2) each hold a 6-GPU job (ends in 1,000 s): 2 + 2 = 4 free
    # GPUs, enough by count for N (1 worker of 4 GPUs) but on no single server.  The
    # wait estimate ignores fragmentation: 0 s, so N (rem 2: 1 s on fast, 2 s on the slow
    # s0) waits for a fast server (2 > 0 + 1).
    types = [("f0", "fast", 2.0), ("f1", "fast", 2.0), ("s0", "slow", 1.0)]
    busy = [("A", 2000.0, 0, 6), ("B", 2000.0, 1, 6)]
    _, plan = _typed2(2.0, types=types, running=busy, need=(1, 4))
    assert plan.starts == []


def test_mckp_extras_passes_every_option_on() -> None:
    # one job: R = 100 single-worker s at base 1 (current 1), up to 3 extra workers of
    # 2 GPUs, alpha 0, pause 0: values 100 - 100 / (1 + k) = 50, 66.7, 75
    one = dict(rem_work=np.array([100.0]), cur_workers=np.array([1]), base=np.array([1]),
               max_workers=np.array([4]), gpw=np.array([2]), alpha=np.array([0.0]),
               pause_s=np.array([0.0]))
    k = mckp_extras(**one, capacity=5, backend="native")  # type: ignore[arg-type]
    assert k is not None
    assert k.dtype == np.int64
    assert k.tolist() == [2]  # 4 GPUs of 5: 2 extra workers
    k = mckp_extras(**one, capacity=6, backend="native", max_extra=np.array([1]))  # type: ignore[arg-type]
    assert k is not None
    assert k.tolist() == [1]
    k = mckp_extras(**one, capacity=6, backend="native", unconstrained_only=True)  # type: ignore[arg-type]
    assert k is not None
    assert k.tolist() == [3]
    assert mckp_extras(**one, capacity=5, backend="native",  # type: ignore[arg-type]
                       unconstrained_only=True) is None
    two = {key: np.concatenate([v, v]) for key, v in one.items()}
    # greedy, capacity 4: marginal gains per GPU 25 (each job's first worker), then 8.3:
    # one worker each; the exact MCKP finds the same 50 + 50 = 100 > 66.7
    k = mckp_extras(**two, capacity=4, backend="native", solver="greedy")  # type: ignore[arg-type]
    assert k is not None
    assert k.tolist() == [1, 1]
    empty = mckp_extras(**{key: v[:0] for key, v in one.items()}, capacity=4,  # type: ignore[arg-type]
                        backend="native")
    assert empty is not None
    assert empty.dtype == np.int64


def test_the_wait_is_for_gpus_not_workers() -> None:
    # f0 (fast, factor 2) holds A (6 GPUs, 2,000 ref-s at speed 2: 1,000 s): 2 GPUs free.
    # N: 1 worker of 4 GPUs, rem 2 ref-s: 1 s on fast after a wait of 1,000 s for 4 GPUs,
    # or 2 s on the slow s0 now: it starts now
    types = [("f0", "fast", 2.0), ("s0", "slow", 1.0)]
    st, plan = _typed2(2.0, types=types, running=[("A", 2000.0, 0, 6)], need=(1, 4))
    assert starts(st, plan) == [("N", {1: 1}, "sjf_order")]


# ------------------------------------------------------------------ typed tables

def test_throughput_rows_by_hand() -> None:
    from aryl.scheduling.kernels import throughput_rows
    from aryl.scheduling.speed import SpeedModel

    st = cluster()
    a = job(st, "a", w=2, alpha=0.5, mn=1, mx=3)
    b = job(st, "b", w=4, alpha=0.0, mn=2, mx=3)
    base = np.array([1, 2])
    mx = np.array([3, 3])
    # a: T(1..3) at alpha 0.5 = 1, 2 / 1.5, 3 / 2; b: T(2..3) at alpha 0 = 2, 3, then NaN
    rows = throughput_rows(st, [a, b], base, mx, "default")
    assert rows.shape == (2, 3)
    assert rows[0].tolist() == [1.0, 2 / 1.5, 1.5]
    assert rows[1, :2].tolist() == [2.0, 3.0]
    assert np.isnan(rows[1, 2])
    # with a speed model: the type's factor (T4 at 0.5)
    typed = ClusterState(speeds=SpeedModel("V100", factors={"T4": 0.5}))
    typed.add_server("t0", role="training", gpus=8, gpu_type="T4")
    a2 = job(typed, "a", w=2, alpha=0.5, mn=1, mx=3)
    rows = throughput_rows(typed, [a2], np.array([1]), np.array([3]), "T4")
    assert rows.tolist() == [[0.5, 0.5 * 2 / 1.5, 0.75]]
    # no candidates: one empty column block
    assert throughput_rows(st, [], np.zeros(0, np.int64), np.zeros(0, np.int64),
                           "default").shape == (0, 1)


def test_extras_table_from_throughput_by_hand() -> None:
    from aryl.scheduling.kernels import extras_table_from_throughput

    # job 0 runs at 2 workers (base 1, max 3, 2 GPUs per worker), pause 10:
    #   tput (1, 2, 4), rem 8: J(k) = 8 / tput[k] + 10 x [1 + k != 2]
    #   J(0) = 8 + 10 = 18, J(1) = 4, J(2) = 2 + 10 = 12: values 14, 6
    # job 1 starts now (pause 0, current = base 2, max 3): tput (2, 3, NaN), rem 6:
    #   J(0) = 3, J(1) = 2: value 1 (no pause); k = 2 is beyond its maximum: NaN
    rem = np.array([8.0, 6.0])
    cur = np.array([2, 2])
    base = np.array([1, 2])
    mx = np.array([3, 3])
    g = np.array([2, 1])
    tput = np.array([[1.0, 2.0, 4.0], [2.0, 3.0, np.nan]])
    pause = np.array([10.0, 0.0])
    values, weights = extras_table_from_throughput(rem, cur, base, mx, g, tput, pause)
    assert values.dtype == np.float64
    assert weights.dtype == np.int64
    assert values[0].tolist() == [14.0, 6.0]
    assert values[1, 0] == 1.0
    assert np.isnan(values[1, 1])
    assert weights.tolist() == [[2, 4], [1, 2]]
    # no pause at all: plain JCT differences
    values, _ = extras_table_from_throughput(rem, cur, base, mx, g, tput, np.zeros(2))
    assert values[0].tolist() == [4.0, 6.0]
    assert values[1, 0] == 1.0
    # no jobs
    values, weights = extras_table_from_throughput(
        np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
        np.zeros(0, np.int64), np.zeros((0, 1)), np.zeros(0))
    assert values.shape == (0, 0)
    assert weights.shape == (0, 0)


def test_a_parametric_throughput_row_by_hand() -> None:
    from aryl.scheduling.speed import SpeedModel

    m = SpeedModel("V100", factors={"A": 2.0})
    # alpha 1: T(w) = w / w = 1 for w >= 1, and 0 workers give 0 (not 0 / 0)
    assert m.throughput_row(None, 1.0, "V100", 0, 3, 1) == [0.0, 1.0, 1.0]
    assert m.throughput_row(None, 1.0, "A", 0, 2, 1) == [0.0, 2.0]
    assert m.throughput_row(None, 0.0, "A", 1, 3, 1) == [2.0, 4.0, 6.0]


def test_a_measured_row_at_the_edge_of_the_look_up_table() -> None:
    from aryl.scheduling.speed import SpeedModel
    from aryl.speeds import SpeedTable

    table = SpeedTable.bundled()
    m = SpeedModel("V100", table=table)
    m.throughput("bert", 0.1, "V100", 1, 1)  # builds the first table: replicas 0 .. 64
    row = m.throughput_row("bert", 0.1, "V100", 1, 65, 1)  # replicas 1 .. 65
    assert len(row) == 65
    assert row == [table.scaling("bert", "V100", r) for r in range(1, 66)]
    row = m.throughput_row("bert", 0.1, "V100", 3, 2, 1)  # 3, 4 (one GPU per worker)
    assert row == [table.scaling("bert", "V100", 3), table.scaling("bert", "V100", 4)]


# ------------------------------------------------------------------ typed base and extras

def _two_types() -> ClusterState:
    """t0 (type A) and t1 (type B), 8 GPUs each, training; both types equally fast (no
    speed model), so the type order is the servers' order: A, then B."""
    st = ClusterState(config=SchedulerConfig(loan_reserve_servers=0))
    st.add_server("t0", role="training", gpus=8, gpu_type="A")
    st.add_server("t1", role="training", gpus=8, gpu_type="B")
    return st


def _resizes(st: ClusterState, plan: SchedulePlan) -> list[tuple[str, dict[int, int], str]]:
    return [(st.job_id[j], p, r.label) for j, p, r in plan.resizes]


def test_a_typed_base_placement_takes_gpus_of_extras_and_phase_two_shrinks_them() -> None:
    # E (elastic, base 2, max 8, 1-GPU workers, alpha 0, 10,000 s) runs 8 workers on t0
    # (2 base + 6 extras); R holds t1.  N (4 GPUs) fits no free GPU: on type A it takes
    # 4 of the 6 GPUs held by E's extras (a displaced extra).  Phase 2 on type A has the
    # 2 GPUs left for E: its best option (every extra worker gains, alpha 0) is 2 extras:
    # E shrinks to 4 workers.  Nothing is left free: memo (0 free GPUs, 0 loans).
    st = _two_types()
    job(st, "E", w=2, rem=10000.0, mn=2, mx=8, alpha=0.0)
    job(st, "R", w=8, rem=10000.0)
    run(st, "E", {0: 8})
    run(st, "R", {1: 8})
    job(st, "N", t=1, w=4, rem=10.0)
    plan = schedule(st, policy="aryl-no-loan")
    assert starts(st, plan) == [("N", {0: 4}, "sjf_order")]
    assert _resizes(st, plan) == [("E", {0: 4}, "mckp_scale_in")]
    assert plan.elastic_memo == (0, 0)
    # the same pass under a policy without elastic scaling cannot use extras: N waits
    plan = schedule(st, policy="aryl-no-elastic")
    assert plan.starts == []


def test_typed_extras_stay_on_the_type_of_the_base_workers() -> None:
    # Both servers empty.  E1 (elastic, base 1, max 12, 10,000 s) starts on type A (t0,
    # the first of two equally fast types); its extras may use only type A's servers:
    # 7 more on t0, none on t1.  8 GPUs (t1) stay free: memo (8, 0).
    st = _two_types()
    job(st, "E1", w=1, rem=10000.0, mn=1, mx=12, alpha=0.0)
    plan = schedule(st, policy="aryl-no-loan")
    assert starts(st, plan) == [("E1", {0: 8}, "sjf_order")]
    assert plan.resizes == []
    assert plan.elastic_memo == (8, 0)


def test_one_knapsack_per_type() -> None:
    # E2 (elastic, base 1, max 8) runs at its base on t1 (type B).  E1 (same shape) is
    # queued and starts on type A (t0, free).  Type A: E1 alone takes t0's 7 other GPUs.
    # Type B: E2 alone grows to 8 workers on t1.  No GPU is left: memo (0, 0).
    st = _two_types()
    job(st, "E2", w=1, rem=10000.0, mn=1, mx=8, alpha=0.0)
    run(st, "E2", {1: 1})
    job(st, "E1", t=1, w=1, rem=10000.0, mn=1, mx=8, alpha=0.0)
    plan = schedule(st, policy="aryl-no-loan")
    assert starts(st, plan) == [("E1", {0: 8}, "sjf_order")]
    assert _resizes(st, plan) == [("E2", {1: 8}, "mckp_scale_out")]
    assert plan.elastic_memo == (0, 0)
    # the greedy peer makes the same choice here (every worker gains, nothing competes)
    plan = schedule(st, policy="elastic-greedy")
    assert starts(st, plan) == [("E1", {0: 8}, "sjf_order")]
    assert _resizes(st, plan) == [("E2", {1: 8}, "greedy_scale_out")]


def test_sjf_takes_the_gpus_of_multi_gpu_workers() -> None:
    # two empty 8-GPU servers.  SJF order: X (1 worker of 2 GPUs, 10 s) best fit t0
    # (8 -> 6); Y (1 worker of 4 GPUs, 20 s): t0 (6) is fuller than t1 (8): t0 (6 -> 2);
    # W (1 worker of 4 GPUs, 30 s): t0 has 2: t1
    st = cluster(n_train=2)
    job(st, "X", g=2, w=1, rem=10.0)
    job(st, "Y", g=4, w=1, rem=20.0)
    job(st, "W", g=4, w=1, rem=30.0)
    assert starts(st, schedule(st, policy="sjf")) == [
        ("X", {0: 1}, "sjf_order"), ("Y", {0: 1}, "sjf_order"), ("W", {1: 1}, "sjf_order")]


def test_fill_extras_adds_the_best_placeable_worker_per_gpu_each_round() -> None:
    from aryl.scheduling.aryl import ArylPass

    # two jobs; a fake placement that succeeds while the extra GPUs fit 4 GPUs.
    # job 0: 2-GPU workers, at most 1 extra, value 12 (6 per GPU).
    # job 1: 1-GPU workers, at most 3 extras, values 10, 15, 17 (marginals 10, 5, 2).
    # Rounds from k = (0, 0): job 1's first (10/GPU) -> (0, 1), 1 GPU; job 0's (6/GPU)
    # -> (1, 1), 3 GPUs; job 1's second (5) -> (1, 2), 4 GPUs; job 1's third (2) would
    # need 5 GPUs: refused; nothing else: (1, 2).
    values = np.array([[12.0, np.nan, np.nan], [10.0, 15.0, 17.0]])
    g_l = [2, 1]
    free = [0]
    free0 = [4]
    tried: list[list[int]] = []

    def place(kv: np.ndarray) -> tuple[dict[int, dict[int, int]], list[int], dict[int, int]]:
        tried.append(kv.tolist())
        used = int(kv[0]) * 2 + int(kv[1])
        free[0] = free0[0] - used
        short = {} if used <= 4 else {1: 0}
        return {}, [0, 1], short

    k, placed = ArylPass.fill_extras(values, np.array([0, 0]), np.array([1, 3]), g_l, free,
                                     free0, ({}, [], {}), place)
    assert k.tolist() == [1, 2]
    assert tried == [[0, 1], [1, 1], [1, 2], [1, 3]]
    assert free == [0]  # as the accepted (1, 2) left it: 4 - 4
    assert placed == ({}, [0, 1], {})


def test_fill_extras_skips_options_that_gain_nothing_or_do_not_exist() -> None:
    from aryl.scheduling.aryl import ArylPass

    # job 0 is at its maximum (1 extra); job 1's next option is absent (NaN); job 2's
    # first worker gains 0.5 (taken: any positive gain), its second gains 0 (not taken);
    # room for everything
    values = np.array([[3.0, np.nan], [2.0, np.nan], [0.5, 0.5]])
    k0 = np.array([1, 1, 0])
    max_extra = np.array([1, 2, 2])
    free = [10]
    free0 = [10]

    def place(kv: np.ndarray) -> tuple[dict[int, dict[int, int]], list[int], dict[int, int]]:
        free[0] = free0[0] - int(kv.sum())
        return {}, [], {}

    k, _ = ArylPass.fill_extras(values, k0, max_extra, [1, 1, 1], free, free0,
                                ({}, [], {}), place)
    assert k.tolist() == [1, 1, 1]
    assert free == [7]


def test_typed_base_placements_keep_the_scratch_of_extras_in_step() -> None:
    # t0 (type A): E (elastic, base 1, max 8, 10,000 s) runs 8 workers (7 extras);
    # t1 (type B): R (rigid, 4 GPUs); 4 free GPUs on t1.  SJF order N1 (6 GPUs), N2 (3),
    # N3 (3).  N1 fits no free GPUs (A: 0, B: 4): on A over E's extras (t0: 7 -> 1 left).
    # N2 fits B's free GPUs: t1 (4 -> 1), and the scratch of extras follows (t1: 1).
    # N3 (3 GPUs): A 1, B 1 in the scratch: not placed.  Phase 2: E keeps 1 extra (the
    # GPU left on t0): 2 workers.  1 GPU left free (t1): memo (1, 0).
    st = _two_types()
    job(st, "E", w=1, rem=10000.0, mn=1, mx=8, alpha=0.0)
    job(st, "R", w=4, rem=10000.0)
    run(st, "E", {0: 8})
    run(st, "R", {1: 4})
    job(st, "N1", t=1, w=6, rem=10.0)
    job(st, "N2", t=1, w=3, rem=20.0)
    job(st, "N3", t=1, w=3, rem=30.0)
    plan = schedule(st, policy="aryl-no-loan")
    assert starts(st, plan) == [("N1", {0: 6}, "sjf_order"), ("N2", {1: 3}, "sjf_order")]
    assert _resizes(st, plan) == [("E", {0: 2}, "mckp_scale_in")]
    assert plan.elastic_memo == (1, 0)


def test_a_typed_loan_of_equal_speed_is_always_worth_it() -> None:
    # two GPU types, no speed model (both equally fast): t0 (A) full; the idle inference
    # server i0 (type B) is offered.  N (1 worker) starts there (nothing is faster than
    # the loan, so there is nothing to wait for)
    st = ClusterState(config=SchedulerConfig(loan_reserve_servers=0))
    st.add_server("t0", role="training", gpus=8, gpu_type="A")
    st.add_server("i0", role="inference", gpus=8, gpu_type="B", status="idle")
    job(st, "R", w=8, rem=1000.0)
    run(st, "R", {0: 8})
    job(st, "N", t=1, w=1, rem=100.0)
    plan = schedule(st, policy="aryl")
    assert starts(st, plan) == [("N", {1: 1}, "sjf_order")]
    assert plan.borrowed_servers == [(1, Reason.LOAN_FOR_BASE)]


def _fast_and_slow() -> ClusterState:
    """f0: type fast (factor 2); s0: type slow, the reference (factor 1); 8 GPUs each;
    the pause is 30 s."""
    from aryl.scheduling.speed import SpeedModel

    st = ClusterState(config=SchedulerConfig(loan_reserve_servers=0),
                      speeds=SpeedModel("slow", factors={"fast": 2.0}))
    st.add_server("f0", role="training", gpus=8, gpu_type="fast")
    st.add_server("s0", role="training", gpus=8, gpu_type="slow")
    return st


def test_extras_are_valued_at_the_speed_of_their_type() -> None:
    # E (elastic 1..2, 1-GPU workers, alpha 0, 100 ref-s) runs 1 worker on the fast f0
    # (speed 2: 50 s left).  A second worker: 100 / 4 = 25 s + the 30 s pause = 55 > 50:
    # not worth it.  (At reference speed it would be: 100 - 50 - 30 = 20 > 0.)
    st = _fast_and_slow()
    job(st, "E", w=1, rem=100.0, mn=1, mx=2, alpha=0.0)
    job(st, "R1", w=8, rem=1e4, alpha=0.0)
    run(st, "E", {0: 1})
    run(st, "R1", {1: 8})
    plan = schedule(st, policy="aryl-no-loan")
    assert plan.resizes == []
    assert plan.elastic_memo == (7, 0)


def test_the_typed_knapsack_solves_with_the_types_speeds() -> None:
    # On the fast f0 (speed factor 2), 2 GPUs free: E1 (1..2 workers, 150 ref-s) and E2
    # (1..3, 130 ref-s), both at 1 worker, alpha 0, pause 30.  Value of k extras:
    # R / 2 x (1 - 1 / (1 + k)) - 30:  E1: k=1 7.5;  E2: k=1 2.5, k=2 13.33.
    # Both best options need 1 + 2 = 3 GPUs > 2: the knapsack: E2 +2 (13.33) beats
    # E1 +1 and E2 +1 (10).  (At reference speed, R x (...) - 30, it would be E1 +1 and
    # E2 +1: 45 + 35 = 80 > 56.7.)
    st = _fast_and_slow()
    job(st, "E1", w=1, rem=150.0, mn=1, mx=2, alpha=0.0)
    job(st, "E2", w=1, rem=130.0, mn=1, mx=3, alpha=0.0)
    job(st, "R0", w=4, rem=1e4, alpha=0.0)
    job(st, "R1", w=8, rem=1e4, alpha=0.0)
    for name, place in (("E1", {0: 1}), ("E2", {0: 1}), ("R0", {0: 4}), ("R1", {1: 8})):
        run(st, name, place)
    plan = schedule(st, policy="aryl-no-loan")
    assert _resizes(st, plan) == [("E2", {0: 3}, "mckp_scale_out")]
    assert plan.elastic_memo == (0, 0)


def test_slot_caps_keep_the_knapsack_from_choosing_unplaceable_workers() -> None:
    # E (elastic, 2-GPU workers, 1..5, 10,000 s) at its base on t0; 3 GPUs free on t0
    # and 3 on t1: 6 GPUs, but room for one 2-GPU worker per server.  The knapsack is
    # capped at 2 extra workers (no repair needed): one on each server.
    st = cluster(n_train=2)
    job(st, "E", g=2, w=1, rem=10000.0, mn=1, mx=5, alpha=0.0)
    job(st, "R1", w=3, rem=1e4)
    job(st, "R2", w=5, rem=1e4)
    for name, place in (("E", {0: 1}), ("R1", {0: 3}), ("R2", {1: 5})):
        run(st, name, place)
    plan = schedule(st, policy="aryl")
    assert _resizes(st, plan) == [("E", {0: 2, 1: 1}, "mckp_scale_out")]
    assert plan.n_extra_repairs == 0
    assert plan.elastic_memo == (2, 0)


def test_sjf_estimate_of_a_rigid_job_is_at_its_reference_size() -> None:
    # a rigid job traced at 4 workers but listed with min = max = 2: its estimate is the
    # time at its reference size, 100 s (the base phase runs it at 4)
    st = cluster()
    j = st.add_job("r", arrival_s=0.0, gpus_per_worker=1, ref_workers=4, remaining_s=100.0,
                   min_workers=2, max_workers=2, alpha=0.5)
    assert sjf_key_elastic(st, j) == pytest.approx(100.0, rel=1e-15)
    assert solve_extras(np.zeros((2, 0)), np.zeros((2, 0), dtype=np.int64), 5,
                        backend="native", unconstrained_only=True).dtype == np.int64  # type: ignore[union-attr]
