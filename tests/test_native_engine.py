"""The compiled pass and engine (``aryl._core._sched``) against their Python twins.

Reference: the Python pass (``aryl.schedule(..., backend="reference")``) and the
Python engine (``SimConfig(engine="python")``).  Every comparison is exact:
plans with their placements in insertion order, per-job tables, event logs,
time series and summaries bit for bit.

* random cluster states (hypothesis): one pass of every policy, with reclaims
  due, loans, cool-downs, options, one or two GPU types (parametric factors or
  measured speeds), mixed types;
* lockstep replays (hypothesis): the Python engine runs a random trace and at
  every pass the compiled pass must return the Python pass's plan;
* whole replays: every policy and reclaim policy, grace periods, horizons,
  kept idle loans, the ``lyra`` preset, a 2-type parametric TOML spec, mixed
  types, the event log off, the invariant checker on;
* the engine's edges: the progress calls, Ctrl-C from a progress callback, the
  reclaim log, the stall watchdog's message, the choice of engine.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aryl.scheduling import ClusterState, SchedulerConfig, make_policy, schedule
from aryl.scheduling.placement import bf_place
from aryl.scheduling.plan import SchedulePlan
from aryl.scheduling.speed import SpeedModel
from aryl.sim import SimConfig, simulate
from aryl.sim.native import uses_native
from aryl.traces import load_trace, synthesize_elastic
from aryl.traces.inference import InferenceDemand

POLICIES = ["fifo", "fifo-backfill", "sjf", "tiresias", "aryl", "aryl-no-loan",
            "aryl-no-elastic", "elastic-greedy"]
RECLAIM = ["aryl", "random", "fewest-jobs", "most-idle", "exact"]


def plan_key(plan: SchedulePlan) -> tuple[Any, ...]:
    """Everything a plan holds, placements as (server, workers) lists in dict order."""
    def p(d: dict[int, int] | None) -> Any:
        return None if d is None else list(d.items())

    return (
        plan.now_s,
        [(j, p(x), int(r)) for j, x, r in plan.reclaim_actions],
        list(plan.reclaimed_servers), plan.reclaim_shortfall,
        [(s, int(r)) for s, r in plan.borrowed_servers],
        [(j, int(r)) for j, r in plan.preemptions],
        [(j, p(x), int(r)) for j, x, r in plan.resizes],
        [(j, p(x), int(r)) for j, x, r in plan.starts],
        [(s, int(r)) for s, r in plan.returned_servers],
        plan.elastic_memo, plan.n_extra_repairs,
    )


# ------------------------------------------------------------------ random states


@st.composite
def cluster_state(draw: st.DrawFn) -> ClusterState:
    """A random consistent state: servers of one or two types (training, then
    inference serving / idle / loaned), queued jobs and running jobs placed by best
    fit on training and loaned servers, a demand that may be due now."""
    typed = draw(st.sampled_from(["one", "factors", "measured"]))
    cfg = SchedulerConfig(
        loan_reserve_servers=draw(st.integers(0, 1)),
        loan_cooldown_s=draw(st.sampled_from([0.0, 600.0])),
        starvation_bound_s=draw(st.sampled_from([0.0, 500.0, math.inf])),
        reclaim_policy=draw(st.sampled_from(RECLAIM)),
        seed=draw(st.integers(0, 3)),
        mix_gpu_types=draw(st.booleans()),
        rescale_pause_s=draw(st.sampled_from([0.0, 30.0])),
    )
    if typed == "one":
        speeds = None
    elif typed == "factors":
        speeds = SpeedModel("A", factors={"B": draw(st.sampled_from([0.25, 0.5, 2.0]))})
    else:
        from aryl.speeds import SpeedTable

        speeds = SpeedModel("V100", table=SpeedTable.bundled())
    types = ("V100", "T4") if typed == "measured" else ("A", "B")
    now = float(draw(st.sampled_from([1000.0, 5000.0])))
    s = ClusterState(now_s=now, config=cfg, speeds=speeds)
    n_t = draw(st.integers(1, 5))
    for i in range(n_t):
        t = types[0] if (typed == "one" or i % 2 == 0) else types[1]
        s.add_server(f"t{i}", role="training", gpus=draw(st.sampled_from([4, 8])), gpu_type=t)
    n_i = draw(st.integers(0, 4))
    for i in range(n_i):
        t = types[0] if typed == "one" else types[1]
        status = draw(st.sampled_from(["serving", "idle", "loaned"]))
        rs = draw(st.sampled_from([-math.inf, now - 100.0, now - 5000.0]))
        s.add_server(f"i{i}", role="inference", gpus=8, gpu_type=t, status=status,
                     reclaimed_s=rs)
    s.servers_needed = draw(st.integers(0, n_i))
    s.reclaim_deadline_s = draw(st.sampled_from([now, math.inf]))
    families = ["cifar10", "bert", "deepspeech2", "yolov3"]
    free = list(s.free)
    groups = [s.training_servers, s.loaned_servers()]
    for k in range(draw(st.integers(0, 18))):
        g = draw(st.sampled_from([1, 2, 4]))
        ref = draw(st.integers(1, 6))
        el = draw(st.booleans())
        mn = max(1, ref // 2) if el else ref
        mx = ref * 2 if el else ref
        fam = draw(st.sampled_from(families)) if typed == "measured" and draw(st.booleans()) \
            else None
        arr = float(draw(st.integers(0, int(now))))
        j = s.add_job(f"j{k}", arrival_s=arr, gpus_per_worker=g, ref_workers=ref,
                      remaining_s=float(draw(st.sampled_from([10.0, 500.0, 4000.0]))),
                      min_workers=mn, max_workers=mx, elastic=el,
                      alpha=draw(st.sampled_from([0.0, 0.05, 0.3])), family=fam)
        s.attained_gpu_s[j] = float(draw(st.sampled_from([0.0, 3000.0, 50000.0])))
        s.enqueue(j, arr)
        if draw(st.booleans()):
            w = draw(st.integers(mn, mx))
            place = bf_place(free, groups, w, g)
            if place is not None:
                s.start(j, place, min(now, arr + 1.0))
    return s


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_state(), st.sampled_from(POLICIES), st.booleans(), st.data())
def test_one_pass_equals_the_python_pass(
    s: ClusterState, policy: str, keep_idle: bool, data: st.DataObject
) -> None:
    opts: dict[str, Any] = {}
    pol = make_policy(policy)
    if pol.loans and keep_idle:
        opts["return_idle_loans"] = False
    if policy == "tiresias":
        opts["las_thresholds_gpu_s"] = data.draw(st.sampled_from([[3600.0, 36000.0], [100.0]]))
    if policy in ("sjf", "aryl") and data.draw(st.booleans()):
        opts["starvation_bound_s"] = 0.0
    pol = make_policy(policy, opts)
    try:
        ref = schedule(s, policy=pol, backend="reference")
    except Exception as exc:  # e.g. "exact" reclaim over its limit: both must raise it
        with pytest.raises(type(exc), match=str(exc)[:40].replace("(", r"\(")):
            schedule(s, policy=pol, backend="native")
        return
    got = schedule(s, policy=pol, backend="native")
    assert plan_key(got) == plan_key(ref)
    for what, hit in (("reclaim", ref.reclaimed_servers), ("borrow", ref.borrowed_servers),
                      ("return", ref.returned_servers), ("start", ref.starts),
                      ("resize", ref.resizes), ("preempt", ref.preemptions)):
        if hit:
            event(f"{policy}: {what}")
    # and the next pass, on the state after this plan (memos, extras, loans in use)
    after = ref.apply(s)
    after.now_s += 600.0
    assert plan_key(schedule(after, policy=pol, backend="native")) == plan_key(
        schedule(after, policy=pol, backend="reference"))


def test_schedule_backend_is_validated() -> None:
    s = ClusterState()
    with pytest.raises(Exception, match="backend: must be 'native' or 'reference'"):
        schedule(s, policy="fifo", backend="cuda")


# ------------------------------------------------------------------ random replays


@st.composite
def trace(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(1, 30))
    rows = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 30.0, 200.0, 1500.0]))
        gpus = draw(st.sampled_from([1, 2, 4, 8, 12, 16]))
        el = draw(st.booleans())
        if el:
            gpw, lo, hi = 1, max(1, (gpus + 1) // 2), 2 * gpus
        else:
            gpw = max(d for d in range(1, 9) if gpus % d == 0)
            lo = hi = gpus // gpw
        rows.append({"job_id": f"j{i}", "submit_time_s": t,
                     "duration_s": float(draw(st.sampled_from([1, 50, 700, 4000]))),
                     "gpus": gpus, "gpus_per_worker": gpw, "min_workers": lo,
                     "max_workers": hi, "elastic": el,
                     "alpha": draw(st.sampled_from([0.0, 0.05, 0.3]))})
    return pd.DataFrame(rows)


@st.composite
def replay_case(draw: st.DrawFn) -> tuple[pd.DataFrame, Any, SimConfig, dict[str, Any]]:
    jobs = draw(trace())
    n_inf = draw(st.integers(0, 3))
    steps = draw(st.lists(st.integers(0, n_inf), min_size=1, max_size=6))
    times = np.arange(len(steps), dtype=np.float64) * draw(st.sampled_from([300.0, 1000.0]))
    demand = InferenceDemand(times, np.array(steps, dtype=np.int64), n_servers=n_inf)
    horizon = draw(st.sampled_from([None, 2000.0]))
    cfg = SimConfig(
        n_training_servers=draw(st.integers(1, 3)), n_inference_servers=n_inf,
        loan_reserve_servers=draw(st.integers(0, 1)),
        reclaim_grace_s=draw(st.sampled_from([0.0, 100.0])),
        reclaim_policy=draw(st.sampled_from(RECLAIM)),
        loan_cooldown_s=draw(st.sampled_from([0.0, 600.0])),
        checkpoint_interval_s=draw(st.sampled_from([600.0, 1800.0])),
        horizon_s=horizon, seed=draw(st.integers(0, 2)), check=True,
        # the native engine keeps only the rows that hold at a point of this grid
        timeseries_step_s=draw(st.sampled_from([1.0, 60.0, 300.0, 5000.0])),
    )
    opts = {"return_idle_loans": False} if draw(st.integers(0, 3)) == 0 else {}
    return jobs, (demand if n_inf else False), cfg, opts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replay_case(), st.sampled_from(POLICIES))
def test_lockstep_every_pass_of_a_python_replay(
    case: tuple[pd.DataFrame, Any, SimConfig, dict[str, Any]], policy: str
) -> None:
    import aryl.sim.engine as engine_mod
    from aryl.scheduling.api import schedule_python

    jobs, demand, cfg, opts = case
    if not make_policy(policy).loans:
        opts = {}
    compared = []

    def both(st_: ClusterState, pol: Any) -> SchedulePlan:
        ref = schedule_python(st_, pol)
        assert plan_key(schedule(st_, policy=pol, backend="native")) == plan_key(ref)
        compared.append(1)
        return ref

    mp = pytest.MonkeyPatch()
    mp.setattr(engine_mod, "schedule_python", both)
    try:
        simulate(jobs, policy=policy, config=dataclasses.replace(cfg, engine="python"),
                 inference=demand, policy_options=opts)
    finally:
        mp.undo()
    assert compared  # at least the first arrival's pass


def assert_same_result(a: Any, b: Any) -> None:
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    pd.testing.assert_frame_equal(a.events, b.events)
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries)
    sa, sb = dict(a.summary), dict(b.summary)
    ca, cb = dict(sa.pop("config")), dict(sb.pop("config"))
    assert ca.pop("engine") == "python"
    assert cb.pop("engine") == "native"
    assert ca == cb
    assert sa == sb
    assert a.timing["n_decisions"] == b.timing["n_decisions"]


def both_engines(jobs: Any, policy: str, cfg: SimConfig, **kw: Any) -> tuple[Any, Any]:
    a = simulate(jobs, policy=policy, config=dataclasses.replace(cfg, engine="python"), **kw)
    b = simulate(jobs, policy=policy, config=dataclasses.replace(cfg, engine="native"), **kw)
    return a, b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replay_case(), st.sampled_from(POLICIES))
def test_random_replays_are_identical(
    case: tuple[pd.DataFrame, Any, SimConfig, dict[str, Any]], policy: str
) -> None:
    jobs, demand, cfg, opts = case
    if not make_policy(policy).loans:
        opts = {}
    assert uses_native(cfg, policy)
    assert_same_result(*both_engines(jobs, policy, cfg, inference=demand,
                                     policy_options=opts))


# ------------------------------------------------------------------ whole replays


def itp(n: int, preset: str = "itp-c01", seed: int = 0) -> pd.DataFrame:
    tr = load_trace(preset)
    tr = tr.replace(jobs=tr.jobs.iloc[:n].reset_index(drop=True))
    return synthesize_elastic(tr, elastic_fraction=0.5, seed=seed).jobs


def two_type_spec(tmp_path: Path) -> str:
    path = tmp_path / "two.toml"
    path.write_text(
        '[[pools]]\nname = "fast"\nrole = "training"\nn_servers = 3\ngpus_per_server = 8\n'
        'gpu_type = "A100"\n\n'
        '[[pools]]\nname = "slow"\nrole = "training"\nn_servers = 2\ngpus_per_server = 8\n'
        'gpu_type = "K80"\n\n'
        '[[pools]]\nname = "inf"\nrole = "inference"\nn_servers = 3\ngpus_per_server = 8\n'
        'gpu_type = "T4"\n'
    )
    return str(path)


CASES = {
    "small": dict(n_training_servers=6, n_inference_servers=4, loan_reserve_servers=0),
    "grace": dict(n_training_servers=4, n_inference_servers=3, loan_reserve_servers=0,
                  reclaim_grace_s=600.0, seed=3),
    "horizon": dict(n_training_servers=3, n_inference_servers=2),  # + 40,000 s: below
    "lyra": dict(cluster="lyra"),
    "no-events": dict(n_training_servers=5, n_inference_servers=2, record_events=False),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_replays_are_identical(policy: str, case: str) -> None:
    jobs = itp(250)
    cfg = SimConfig(check=True, **CASES[case])
    if case == "horizon":
        cfg = dataclasses.replace(cfg, horizon_s=float(jobs["submit_time_s"].min()) + 40_000.0)
    a, b = both_engines(jobs, policy, cfg)
    assert_same_result(a, b)
    if case == "no-events":
        assert len(b.events) == 0
    if case == "horizon":
        assert (b.jobs["status"] == "not_arrived").any()


@pytest.mark.parametrize("reclaim_policy", RECLAIM[1:])
def test_reclaim_policies_are_identical(reclaim_policy: str) -> None:
    cfg = SimConfig(n_training_servers=4, n_inference_servers=3, loan_reserve_servers=0,
                    reclaim_policy=reclaim_policy, check=True)
    a, b = both_engines(itp(200), "aryl", cfg)
    assert_same_result(a, b)
    assert a.summary["n_reclaims"] > 0  # the policy was exercised


@pytest.mark.parametrize("policy", ["aryl", "fifo", "tiresias", "aryl-no-elastic"])
@pytest.mark.parametrize("mix", [False, True])
def test_two_type_parametric_spec_is_identical(tmp_path: Path, policy: str, mix: bool) -> None:
    cfg = SimConfig(cluster=two_type_spec(tmp_path), speed_model="parametric",
                    loaned_gpu_speed=0.5, loan_reserve_servers=0, mix_gpu_types=mix, check=True)
    a, b = both_engines(itp(200, "itp-c06", seed=1), policy, cfg)
    assert_same_result(a, b)


def test_kept_idle_loans_are_identical() -> None:
    cfg = SimConfig(n_training_servers=5, n_inference_servers=4, loan_reserve_servers=0,
                    check=True)
    a, b = both_engines(itp(250), "aryl", cfg, policy_options={"return_idle_loans": False})
    assert_same_result(a, b)
    assert (a.events["event"] == "loan_return").sum() == 0  # kept until reclaimed


# ------------------------------------------------------------------ engine edges


def test_progress_calls_and_reclaim_log_are_the_python_engines() -> None:
    jobs = itp(3000, "itp-c07")
    cfg = SimConfig(n_training_servers=12, n_inference_servers=4)
    calls: dict[str, list[tuple[int, int, float]]] = {"python": [], "native": []}
    logs: dict[str, list[Any]] = {"python": [], "native": []}
    for eng in ("python", "native"):
        simulate(jobs, policy="aryl", config=dataclasses.replace(cfg, engine=eng),
                 progress=lambda d, n, t, e=eng: calls[e].append((d, n, t)),
                 reclaim_log=logs[eng])
    assert len(calls["python"]) >= 3  # every 2048 loop iterations, then at the end
    assert calls["native"] == calls["python"]
    assert len(logs["python"]) > 0
    assert len(logs["native"]) == len(logs["python"])
    for x, y in zip(logs["python"], logs["native"], strict=True):
        for f in ("server_id", "server_gpus", "placement_job", "placement_server",
                  "placement_workers", "job_id", "job_workers", "job_gpus_per_worker",
                  "job_min_workers", "job_elastic", "job_preemptible"):
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f))
        assert x.n_servers == y.n_servers


def test_ctrl_c_in_a_progress_callback_stops_the_native_run() -> None:
    seen: list[int] = []

    def progress(done: int, n: int, t: float) -> None:
        seen.append(done)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        simulate(itp(3000, "itp-c07"), policy="fifo",
                 config=SimConfig(n_training_servers=12, engine="native"), progress=progress)
    assert len(seen) == 1  # stopped at the first chunk boundary


def test_the_stall_watchdog_says_the_same() -> None:
    # A tick of 1e-300 s at t = 1000 never advances the clock (test_sim_faults): both
    # engines stop after 2 n + 1000 = 1002 events at that time with one message.
    rows = pd.DataFrame([dict(job_id="a", submit_time_s=1000.0, duration_s=100.0, gpus=8)])
    msgs = []
    for eng in ("python", "native"):
        cfg = SimConfig(n_training_servers=1, n_inference_servers=0, engine=eng)
        object.__setattr__(cfg, "tick_s", 1e-300)
        with pytest.raises(RuntimeError, match="stalled at t = 1000 s: 1003 events") as ei:
            simulate(rows, policy="tiresias", config=cfg, inference=False)
        msgs.append(str(ei.value))
    assert msgs[0] == msgs[1]


def test_which_engine_runs() -> None:
    cfg = SimConfig()
    assert uses_native(cfg, "fifo")
    assert uses_native(cfg, "aryl")
    assert not uses_native(dataclasses.replace(cfg, engine="python"), "fifo")
    # the reference kernels are Python: the Python engine runs
    assert not uses_native(dataclasses.replace(cfg, backend="reference"), "aryl")
    with pytest.raises(Exception, match="engine: must be 'native' or 'python'"):
        SimConfig(engine="gpu")


def test_a_job_that_may_grow_to_2_31_workers_replays_in_little_memory() -> None:
    # The compiled pass once sized an elastic job's throughput row by max_workers (16 GiB
    # for 2**31 - 1); rows are sized by what can be placed. A fresh process (ru_maxrss,
    # KiB): the native replay in which that job grows onto the free GPUs.
    code = (
        "import resource, pandas as pd\n"
        "from aryl.sim import simulate, SimConfig\n"
        "jobs = pd.DataFrame({'job_id': ['a', 'b'], 'submit_time_s': [0.0, 10.0],\n"
        "    'duration_s': [3600.0, 600.0], 'gpus': [1, 1], 'gpus_per_worker': [1, 1],\n"
        "    'min_workers': [1, 1], 'max_workers': [2**31 - 1, 4], 'elastic': [True, True],\n"
        "    'alpha': [0.05, 0.05]})\n"
        "r = simulate(jobs, policy='aryl', config=SimConfig(engine='native',\n"
        "    n_training_servers=2, n_inference_servers=1))\n"
        "print(r.summary['n_scale_out'], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    n_scale_out, peak_kib = map(int, out.stdout.split())
    assert n_scale_out >= 1  # the job did grow
    assert peak_kib < 1_000_000, out.stdout  # under 1 GB
