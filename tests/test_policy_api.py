"""The public policy API (aryl.Policy): a Python policy in the compiled event loop.

Hand-computed replays, a Python reimplementation of ``fifo`` that must give the
built-in compiled fifo's results bit for bit on a slice of a real trace, the
rules the engine checks (each broken on purpose, the message names policy,
time, job and rule), the user's traceback, options, and one pass through
``aryl.schedule``.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

import aryl
from aryl import Decision, PolicyError, SimConfig, simulate
from aryl.errors import InvalidInputError

pytestmark = pytest.mark.skipif(
    not __import__("aryl.sim.native", fromlist=["native_available"]).native_available(),
    reason="needs the compiled engine")


def _cfg(n_train: int, gps: int = 8, **kw: object) -> SimConfig:
    return SimConfig(n_training_servers=n_train, gpus_per_server=gps, n_inference_servers=0, **kw)


def _jobs(rows: list[tuple[str, float, float, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["job_id", "submit_time_s", "duration_s", "gpus"])


# ------------------------------------------------------------------ reference policies
def best_fit(free: np.ndarray, servers: range, need: int) -> int:
    """placement.py best_fit: fewest free GPUs >= need, ties lower index."""
    best, best_free = -1, 1 << 62
    for s in servers:
        f = int(free[s])
        if need <= f < best_free:
            best, best_free = s, f
            if f == need:
                break
    return best


def gang_place(free: np.ndarray, servers: range, w: int, g: int, gps: int) -> dict[int, int] | None:
    """placement.py gang_place written again from its docstring (homogeneous servers)."""
    per = gps // g
    if per == 0:
        return None
    n_full, rest = divmod(w, per)
    if n_full == 0:
        s = best_fit(free, servers, rest * g)
        return None if s < 0 else {s: rest}
    out: dict[int, int] = {}
    for s in servers:
        if free[s] == gps:
            out[s] = per
            if len(out) == n_full:
                break
    if len(out) < n_full:
        return None
    if rest:
        cands = [s for s in servers if s not in out and free[s] >= rest * g]
        if not cands:
            return None
        out[min(cands, key=lambda s: (int(free[s]), s))] = rest
    return out


class PyFifo(aryl.Policy):
    """Strict FIFO with gang placement: fifo.py, through the public API."""

    name = "py-fifo"

    def decide(self, v: aryl.PassView) -> Decision | None:
        d = Decision()
        free = v.free_gpus.copy()
        servers = range(v.n_training)
        gps = int(v.server_gpus[0])
        for j in v.queue.tolist():
            g, w = int(v.gpus_per_worker[j]), int(v.ref_workers[j])
            if w * g > int(free[: v.n_training].sum()):
                break
            p = gang_place(free, servers, w, g, gps)
            if p is None:
                break
            for s, k in p.items():
                free[s] -= k * g
            d.start(j, p)
        return d


# ------------------------------------------------------------------ hand-computed
def test_toy_replay_by_hand() -> None:
    # one server of 8 GPUs; a (8 GPUs, 100 s) at 0, b (8, 50) at 10, c (4, 30) at 20.
    # strict FIFO: a 0..100; b waits for a: 100..150; c is behind b (no backfill):
    # 150..180.  Queuing delays 0, 90, 130 -> mean 220/3.
    jobs = _jobs([("a", 0.0, 100.0, 8), ("b", 10.0, 50.0, 8), ("c", 20.0, 30.0, 4)])
    r = simulate(jobs, policy=PyFifo(), config=_cfg(1), inference=False)
    assert r.jobs["first_start_s"].tolist() == [0.0, 100.0, 150.0]
    assert r.jobs["finish_s"].tolist() == [100.0, 150.0, 180.0]
    assert r.summary["policy"] == "py-fifo"
    assert r.summary["queuing_delay_s"]["mean"] == pytest.approx(220 / 3)


class Backfill(aryl.Policy):
    """Largest job first; whatever fits goes (a greedy over the queue)."""

    name = "largest-first"

    def decide(self, v: aryl.PassView) -> Decision | None:
        d = Decision()
        free = v.free_gpus.copy()
        need = v.ref_workers[v.queue] * v.gpus_per_worker[v.queue]
        for i in np.argsort(-need, kind="stable").tolist():
            j = int(v.queue[i])
            g, w = int(v.gpus_per_worker[j]), int(v.ref_workers[j])
            s = best_fit(free, range(v.n_training), w * g)
            if s >= 0:
                free[s] -= w * g
                d.start(j, {s: w})
        return d


def test_largest_first_by_hand() -> None:
    # one 8-GPU server; x (2 GPUs, 40 s) at 0 runs 0..40.  At 5 y (4 GPUs, 10 s) and
    # at 6 z (6 GPUs, 10 s) arrive: 6 GPUs are free at 5, so y starts at 5 (5..15).
    # At 6, 2 free: z waits.  At 15 (y done) 6 free: z 15..25.
    jobs = _jobs([("x", 0.0, 40.0, 2), ("y", 5.0, 10.0, 4), ("z", 6.0, 10.0, 6)])
    r = simulate(jobs, policy=Backfill(), config=_cfg(1), inference=False)
    assert r.jobs.set_index("job_id")["first_start_s"].to_dict() == {"x": 0.0, "y": 5.0, "z": 15.0}
    assert r.jobs.set_index("job_id")["finish_s"].to_dict() == {"x": 40.0, "y": 15.0, "z": 25.0}


def test_python_fifo_matches_native_fifo_on_a_trace_slice() -> None:
    trace = aryl.load_trace("itp-c07")
    jobs = trace.jobs.iloc[:600].reset_index(drop=True)
    cfg = _cfg(10)
    ref = simulate(jobs, policy="fifo", config=cfg, inference=False)
    got = simulate(jobs, policy=PyFifo(), config=cfg, inference=False)
    assert ref.summary["n_jobs"] == 600
    assert ref.summary["queuing_delay_s"]["mean"] > 0  # the slice queues: a real test
    pd.testing.assert_frame_equal(got.jobs, ref.jobs, check_exact=True)
    s_ref = {k: v for k, v in ref.summary.items() if k != "policy"}
    s_got = {k: v for k, v in got.summary.items() if k != "policy"}
    assert s_got == s_ref
    pd.testing.assert_frame_equal(got.events, ref.events, check_exact=True)


# ------------------------------------------------------------------ rules
class Bad(aryl.Policy):
    name = "bad"
    defaults: ClassVar[dict[str, Any]] = {"mode": "overcommit"}

    def decide(self, v: aryl.PassView) -> Decision | None:
        mode = self.options["mode"]
        d = Decision()
        if mode == "overcommit" and len(v.queue) >= 2:
            d.start(int(v.queue[0]), {0: 1})
            d.start(int(v.queue[1]), {0: 1})
        elif mode == "unknown":
            d.start(99, {0: 1})
        elif mode == "running" and len(v.running):
            d.start(int(v.running[0]), {0: 1})
        elif mode == "range" and len(v.queue):
            d.start(int(v.queue[0]), {0: 1, 1: 1})
        elif mode == "preempt-queued" and len(v.queue):
            d.preempt(int(v.queue[0]))
        elif mode == "no-server" and len(v.queue):
            d.start(int(v.queue[0]), {7: 1})
        elif mode == "type" and len(v.queue):
            return "start everything"  # type: ignore[return-value]
        elif len(v.queue):
            d.start(int(v.queue[0]), {0: 1})
        return d


_JOBS2 = _jobs([("first", 0.0, 100.0, 6), ("second", 0.0, 100.0, 6), ("late", 50.0, 10.0, 2)])


@pytest.mark.parametrize(("mode", "words"), [
    # two 6-GPU workers on one 8-GPU server: the second over-commits at t = 0
    ("overcommit", ["policy 'bad'", "t = 0 s", "start of job 'second' (index 1)",
                    "over-commits server 0", "6 GPU(s) > 2 GPU(s) free"]),
    ("unknown", ["policy 'bad'", "t = 0 s", "job index 99", "no such job"]),
    # t = 0: nothing runs, first start at t = 0 fails? no: mode 'running' starts
    # nothing until a job runs, so the first pass with a running job errs
    ("range", ["start of job 'first' (index 0)", "2 workers outside the job's range [1, 1]"]),
    ("preempt-queued", ["preemption of job 'first' (index 0)", "the job is queued, not running"]),
    ("no-server", ["start of job 'first'", "server 7 does not exist (0..1)"]),
    ("type", ["policy 'bad' at t = 0 s", "decide returned str"]),
])
def test_rules_name_policy_time_job_rule(mode: str, words: list[str], tmp_path: object) -> None:
    with pytest.raises(PolicyError) as ei:
        simulate(_JOBS2, policy=Bad(mode=mode), config=_cfg(2), inference=False)
    for w in words:
        assert w in str(ei.value), (w, str(ei.value))


def test_start_of_a_running_job() -> None:
    # mode 'running': at t = 0 nothing runs and nothing starts (the decision is empty),
    # so only the 'late' arrival at 50 would give a pass with running jobs: none run.
    # A policy that starts 'first' at t = 0 and then 'first' again:
    class Twice(aryl.Policy):
        name = "twice"

        def decide(self, v: aryl.PassView) -> Decision | None:
            d = Decision()
            if v.now_s == 0.0:
                d.start(0, {0: 1})
            elif len(v.running):
                d.start(int(v.running[0]), {1: 1})
            return d

    with pytest.raises(PolicyError, match=r"policy 'twice' at t = 50 s: start of job 'first' "
                                          r"\(index 0\): the job is running, not queued"):
        simulate(_JOBS2, policy=Twice(), config=_cfg(2), inference=False)


def test_same_job_twice_in_one_decision() -> None:
    class Dup(aryl.Policy):
        def decide(self, v: aryl.PassView) -> Decision | None:
            return Decision(starts=[(0, {0: 1}), (0, {1: 1})])

    with pytest.raises(PolicyError, match=r"policy 'Dup' at t = 0 s: start of job 'first' "
                                          r"\(index 0\): the job already has a decision"):
        simulate(_JOBS2, policy=Dup(), config=_cfg(2), inference=False)


def test_exception_in_decide_keeps_the_users_traceback() -> None:
    class Boom(aryl.Policy):
        name = "boom"

        def decide(self, v: aryl.PassView) -> Decision | None:
            if v.now_s >= 50:
                raise KeyError("my bug")
            return None

    with pytest.raises(KeyError) as ei:
        simulate(_JOBS2, policy=Boom(), config=_cfg(2), inference=False)
    tb = "".join(traceback.format_exception(ei.value))
    assert 'raise KeyError("my bug")' in tb  # the user's own line
    assert "(raised in the decide step of policy 'boom' at t = 50 s)" in tb


def test_no_output_on_a_broken_rule(tmp_path: object) -> None:
    from pathlib import Path

    from click.testing import CliRunner

    from aryl.cli import main

    out = Path(str(tmp_path)) / "out"
    trace = Path(str(tmp_path)) / "t.csv"
    _JOBS2.to_csv(trace, index=False)
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # this module as `test_policy_api` (however pytest runs)
        sys.path.insert(0, here)
    res = CliRunner().invoke(main, [
        "compare", "--trace", str(trace), "--policies", "test_policy_api:Bad",
        "--baseline", "fifo",
        "--set", "sim.n_training_servers=2", "--set", "sim.n_inference_servers=0",
        "--out", str(out), "--no-progress"])
    assert res.exit_code != 0
    assert "policy 'bad' at t = 0 s" in res.output
    assert "Traceback" not in res.output
    assert not out.exists() or not any(out.rglob("*.csv"))


# ------------------------------------------------------------------ options, identity
def test_options_checked() -> None:
    assert Bad().options == {"return_idle_loans": True, "mode": "overcommit"}
    assert Bad({"mode": "range"}).options["mode"] == "range"
    with pytest.raises(InvalidInputError, match=r"policy 'bad': unknown option\(s\) \['x'\]"):
        Bad(x=1)
    with pytest.raises(InvalidInputError, match="option mode must be of type str"):
        Bad(mode=3)
    with pytest.raises(InvalidInputError, match=r"options .* given with a policy object"):
        simulate(_JOBS2, policy=Bad(), config=_cfg(2), inference=False,
                 policy_options={"mode": "x"})


def test_python_engine_refuses_a_python_policy() -> None:
    with pytest.raises(InvalidInputError, match="runs in the compiled engine only"):
        simulate(_JOBS2, policy=PyFifo(), config=_cfg(2, engine="python"), inference=False)


def test_identity_changes_with_the_source(tmp_path: object,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys
    from pathlib import Path

    from aryl.scheduling.user import policy_identity

    d = Path(str(tmp_path))
    src = "import aryl\nclass P(aryl.Policy):\n    def decide(self, v):\n        return None\n"
    (d / "mypol_ident.py").write_text(src)
    monkeypatch.syspath_prepend(str(d))
    m = importlib.import_module("mypol_ident")
    a = policy_identity(m.P())
    (d / "mypol_ident.py").write_text(src + "# edited\n")
    del sys.modules["mypol_ident"]
    m2 = importlib.import_module("mypol_ident")
    b = policy_identity(m2.P())
    assert a["class"] == b["class"] == "mypol_ident:P"
    assert a["version"].startswith("sha256:")
    assert a["version"] != b["version"]


# ------------------------------------------------------------------ one pass
def test_one_pass_through_schedule() -> None:
    from aryl.scheduling import ClusterState, Reason, SchedulerConfig

    st = ClusterState(now_s=0.0, config=SchedulerConfig(loan_reserve_servers=0))
    st.add_server("t0", role="training", gpus=8)
    j = st.add_job("j0", arrival_s=0.0, gpus_per_worker=4, ref_workers=2, remaining_s=10.0)
    st.enqueue(j, 0.0)
    plan = aryl.schedule(st, policy=PyFifo())
    # 2 workers x 4 GPUs: n_full = 2 // (8 // 4) = 1 whole free server (0), rest 0
    assert plan.starts == [(0, {0: 2}, Reason.POLICY_DECISION)]


class OnLoan(aryl.Policy):
    """Every queued job on the first offered inference server (a loaning policy)."""

    name = "on-loan"
    loans = True

    def decide(self, v: aryl.PassView) -> Decision | None:
        d = Decision()
        if len(v.offered) and len(v.queue):
            d.start(int(v.queue[0]), {int(v.offered[0]): 1})
        return d


def test_a_loaning_policy_borrows_what_it_places_on() -> None:
    from aryl.scheduling import ClusterState, Reason, SchedulerConfig

    st = ClusterState(now_s=0.0, config=SchedulerConfig(loan_reserve_servers=0))
    st.add_server("t0", role="training", gpus=8)
    st.add_server("i0", role="inference", gpus=8, status="idle")
    st.add_server("i1", role="inference", gpus=8, status="idle")
    j = st.add_job("j0", arrival_s=0.0, gpus_per_worker=8, ref_workers=1, remaining_s=10.0)
    st.enqueue(j, 0.0)
    plan = aryl.schedule(st, policy=OnLoan())
    # offered: both idle inference servers (indexes 1, 2; no reserve, no demand);
    # the job goes on server 1, which is borrowed for a base worker; 2 is not used
    assert plan.starts == [(0, {1: 1}, Reason.POLICY_DECISION)]
    assert plan.borrowed_servers == [(1, Reason.LOAN_FOR_BASE)]
    assert plan.returned_servers == []


@pytest.mark.parametrize("field", ["job", "server", "workers", "preempt"])
def test_an_integer_beyond_int64_is_a_policy_error(field: str) -> None:
    # 2**70 is an integer but not an int64: the binding's slow path used to leak
    # numpy's OverflowError (a traceback from inside aryl) instead of a PolicyError.
    big = 2**70

    class Huge(aryl.Policy):
        name = "huge"

        def decide(self, v: aryl.PassView) -> Decision | None:
            d = Decision()
            if field == "preempt":
                d.preempt(big)
            else:
                d.start(*{"job": (big, {0: 1}), "server": (0, {big: 1}),
                          "workers": (0, {0: big})}[field])
            return d

    kind = "preemptions" if field == "preempt" else r"starts\[0\]"
    with pytest.raises(PolicyError, match=rf"policy 'huge' at t = 0 s: Decision\.{kind} .*"
                                          rf"{big}.*int64"):
        simulate(_JOBS2, policy=Huge(), config=_cfg(2), inference=False)


@pytest.mark.parametrize("field", ["job", "server", "workers", "preempt"])
def test_a_bool_is_no_index_or_worker_count(field: str) -> None:
    # True is an int to Python (operator.index(True) == 1): a worker count of True used
    # to run as one worker; it is refused like any other non-integer
    class Truthy(aryl.Policy):
        name = "truthy"

        def decide(self, v: aryl.PassView) -> Decision | None:
            d = Decision()
            if field == "preempt":
                d.preempt(True)  # type: ignore[arg-type]
            else:
                d.start(*{"job": (True, {0: 1}), "server": (0, {True: 1}),
                          "workers": (0, {0: True})}[field])  # type: ignore[arg-type]
            return d

    kind = "preemptions" if field == "preempt" else r"starts\[0\]"
    with pytest.raises(PolicyError, match=rf"policy 'truthy' at t = 0 s: Decision\.{kind} "
                                          r".*True.*integers"):
        simulate(_JOBS2, policy=Truthy(), config=_cfg(2), inference=False)
