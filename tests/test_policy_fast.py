"""The cost side of the policy API: the view built on first read, the decision
read by the binding, and ``Policy.only_starts`` (the engine skips the calls in
which nothing can start).

Hand-computed views of a small state; a view kept after its pass; decisions with
numpy integers (the slow path) against plain ints; ``only_starts`` against the
same policy without it (bit-identical replays) and its call count against the
rule evaluated on every pass's view; the guide's ``largest-first``
against the straightforward loop it replaced, bit for bit on a trace slice.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

import aryl
from aryl import Decision, PolicyError, SimConfig, simulate

pytestmark = pytest.mark.skipif(
    not __import__("aryl.sim.native", fromlist=["native_available"]).native_available(),
    reason="needs the compiled engine")

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def _cfg(n_train: int, gps: int = 8, **kw: object) -> SimConfig:
    return SimConfig(n_training_servers=n_train, gpus_per_server=gps, n_inference_servers=0, **kw)


def _jobs(rows: list[tuple[str, float, float, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["job_id", "submit_time_s", "duration_s", "gpus"])


def _slice(n: int) -> pd.DataFrame:
    return aryl.load_trace("itp-c07").jobs.iloc[:n].reset_index(drop=True)


@pytest.fixture
def largest_first(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import largest_first as mod

    yield mod
    sys.modules.pop("largest_first", None)


# ------------------------------------------------------------------ the view
class Recorder(aryl.Policy):
    """Reads every attribute of the view once and keeps a copy."""

    name = "recorder"
    seen: ClassVar[list[dict[str, Any]]] = []

    def decide(self, v: aryl.PassView) -> Decision | None:
        from aryl.scheduling.user import PER_PASS_ATTRIBUTES

        rec = {k: getattr(v, k) for k in PER_PASS_ATTRIBUTES}
        rec.update(now_s=v.now_s, alpha=v.alpha, rescale_pause_s=v.rescale_pause_s,
                   placement0=v.placement(0) if len(v.running) else None)
        Recorder.seen.append(rec)
        return None


def test_view_of_a_state_by_hand() -> None:
    from aryl.scheduling import ClusterState, SchedulerConfig

    st = ClusterState(now_s=0.0, config=SchedulerConfig(loan_reserve_servers=0,
                                                        rescale_pause_s=7.0))
    st.add_server("t0", role="training", gpus=8)
    st.add_server("t1", role="training", gpus=8)
    a = st.add_job("a", arrival_s=0.0, gpus_per_worker=2, ref_workers=3, remaining_s=100.0,
                   alpha=0.25)
    b = st.add_job("b", arrival_s=1.0, gpus_per_worker=4, ref_workers=1, remaining_s=50.0)
    c = st.add_job("c", arrival_s=2.0, gpus_per_worker=8, ref_workers=2, remaining_s=30.0)
    st.enqueue(a, 0.0)
    st.start(a, {0: 2, 1: 1}, 0.0)
    st.enqueue(b, 1.0)
    st.enqueue(c, 2.0)
    st.now_s = 10.0
    Recorder.seen = []
    aryl.schedule(st, policy=Recorder())
    (v,) = Recorder.seen
    # a: 3 workers x 2 GPUs = 4 GPUs on t0 and 2 on t1 since 0, at its traced size
    # (speed 1): 10 s of its 100 done, 6 GPUs x 10 s = 60 GPU-s attained.
    # b waited 10 - 1 = 9 s, c 10 - 2 = 8 s; free GPUs 8 - 4 = 4 and 8 - 2 = 6.
    assert v["now_s"] == 10.0
    assert v["queue"].tolist() == [b, c]
    assert v["queue_remaining_s"].tolist() == [50.0, 30.0]
    assert v["queue_waited_s"].tolist() == [9.0, 8.0]
    assert v["queue_attained_gpu_s"].tolist() == [0.0, 0.0]
    assert v["running"].tolist() == [a]
    assert v["running_workers"].tolist() == [3]
    assert v["running_ptr"].tolist() == [0, 2]
    assert v["running_server"].tolist() == [0, 1]
    assert v["running_server_workers"].tolist() == [2, 1]
    assert v["placement0"] == {0: 2, 1: 1}
    assert v["running_remaining_s"].tolist() == [90.0]
    assert v["running_speed"].tolist() == [1.0]
    assert v["running_attained_gpu_s"].tolist() == [60.0]
    assert v["free_gpus"].tolist() == [4, 6]
    assert v["loaned"].tolist() == v["offered"].tolist() == []
    assert v["server_status"].tolist() == [0, 0]
    assert v["capacity_gpus"] == 16
    assert v["servers_needed"] == 0
    assert v["alpha"].tolist()[a] == 0.25
    assert v["rescale_pause_s"] == 7.0
    for k in ("queue", "running_ptr", "free_gpus", "queue_waited_s"):
        assert not v[k].flags.writeable, k
        assert v[k].dtype == (np.float64 if k.endswith("_s") else np.int64), k


class Keeper(aryl.Policy):
    """Keeps the views (against the guide's advice) and the free GPUs it read."""

    name = "keeper"
    kept: ClassVar[list[tuple[aryl.PassView, list[int], np.ndarray]]] = []

    def decide(self, v: aryl.PassView) -> Decision | None:
        Keeper.kept.append((v, v.free_gpus.tolist(), v.free_gpus))
        d = Decision()
        for j in v.queue.tolist():
            g = int(v.gpus_per_worker[j])
            if v.free_gpus[0] >= g and not d.starts:
                d.start(j, {0: 1})
        return d


def test_a_view_kept_after_its_pass() -> None:
    # a (8 GPUs, 10 s) at 0 and b (8 GPUs, 10 s) at 1 on one 8-GPU server: passes at
    # 0 (a starts), 1 (b waits: 0 free), 10 (a done, b starts), 20 (b done)
    Keeper.kept = []
    jobs = _jobs([("a", 0.0, 10.0, 8), ("b", 1.0, 10.0, 8)])
    r = simulate(jobs, policy=Keeper(), config=_cfg(1), inference=False)
    assert r.jobs["first_start_s"].tolist() == [0.0, 10.0]
    assert [k[1] for k in Keeper.kept] == [[8], [0], [8], [8]]
    for view, read, arr in Keeper.kept:
        assert arr.tolist() == read  # a copy: the engine's later passes did not change it
        assert view.free_gpus is arr  # read in its pass: kept by the view
        with pytest.raises(ValueError, match="this pass is over"):
            _ = view.running  # first read after the pass


# ------------------------------------------------------------------ the decision
class NumpyFifo(aryl.Policy):
    """First-fit of whole jobs on one server, decided with numpy or Python ints."""

    name = "numpy-fifo"
    defaults: ClassVar[dict[str, Any]] = {"ints": "numpy"}

    def decide(self, v: aryl.PassView) -> Decision | None:
        d = Decision()
        free = v.free_gpus[: v.n_training].copy()
        for j in v.queue:
            need = v.ref_workers[j] * v.gpus_per_worker[j]
            s = np.flatnonzero(free >= need)
            if s.size == 0 or v.ref_workers[j] != 1:
                break
            free[s[0]] -= need
            if self.options["ints"] == "numpy":
                d.start(j, {s[0]: v.ref_workers[j]})  # numpy int64 everywhere
            else:
                d.start(int(j), {int(s[0]): int(v.ref_workers[j])})
        return d


def test_numpy_integers_in_a_decision_give_the_same_replay() -> None:
    jobs = _slice(400)
    jobs = jobs[jobs["gpus"] <= 8].reset_index(drop=True)
    cfg = _cfg(6)
    a = simulate(jobs, policy=NumpyFifo(ints="numpy"), config=cfg, inference=False)
    b = simulate(jobs, policy=NumpyFifo(ints="python"), config=cfg, inference=False)
    assert a.summary["queuing_delay_s"]["mean"] > 0  # the slice queues
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_exact=True)


def test_a_malformed_decision_names_the_entry() -> None:
    class Broken(aryl.Policy):
        name = "broken"

        def decide(self, v: aryl.PassView) -> Decision | None:
            return Decision(starts=[(0, [0, 1])])  # type: ignore[list-item]

    jobs = _jobs([("a", 0.0, 10.0, 8)])
    with pytest.raises(PolicyError, match=r"policy 'broken' at t = 0 s: Decision.starts\[0\] = "
                                          r"\(0, \[0, 1\]\): expected \(job index"):
        simulate(jobs, policy=Broken(), config=_cfg(1), inference=False)


# ------------------------------------------------------------------ only_starts
def _can_start(v: aryl.PassView) -> bool:
    """The skip rule of Policy.only_starts, evaluated on a view (its docstring)."""
    usable = v.usable_servers()
    free = v.free_gpus[usable]
    for j in v.queue.tolist():
        g = int(v.gpus_per_worker[j])
        if int((free // g).sum()) >= int(v.base_workers[j]):
            return True
    return False


def test_only_starts_skips_exactly_the_passes_where_nothing_can_start(largest_first: Any) -> None:
    calls = {"skipping": 0, "all": 0, "could": 0}

    class Skipping(largest_first.LargestFirst):
        def decide(self, v: aryl.PassView) -> Decision | None:
            calls["skipping"] += 1
            return super().decide(v)

    class Always(largest_first.LargestFirst):
        only_starts = False

        def decide(self, v: aryl.PassView) -> Decision | None:
            calls["all"] += 1
            calls["could"] += _can_start(v)
            d = super().decide(v)
            if not _can_start(v):
                assert not d.starts  # the rule is safe: nothing could start
            return d

    jobs = _slice(1500)
    cfg = SimConfig(n_training_servers=10, n_inference_servers=0)
    a = simulate(jobs, policy=Skipping(), config=cfg, inference=False)
    b = simulate(jobs, policy=Always(), config=cfg, inference=False)
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_exact=True)
    assert a.timing["n_decisions"] == b.timing["n_decisions"] == calls["all"]
    assert calls["skipping"] == calls["could"]
    assert 0 < calls["skipping"] < calls["all"]  # some passes were skipped, not all


def test_only_starts_refuses_a_preemption() -> None:
    class Liar(aryl.Policy):
        name = "liar"
        only_starts = True

        def decide(self, v: aryl.PassView) -> Decision | None:
            d = Decision()
            if len(v.running):
                d.preempt(int(v.running[0]))
            elif len(v.queue):
                d.start(int(v.queue[0]), {0: 1})
            return d

    # a (4 GPUs) starts at 0; b (4 GPUs) arrives at 1 with 4 free: a pass is called
    jobs = _jobs([("a", 0.0, 10.0, 4), ("b", 1.0, 10.0, 4)])
    with pytest.raises(PolicyError, match=r"policy 'liar' at t = 1 s: the decision preempts a "
                                          r"job, but the policy declares only_starts = True"):
        simulate(jobs, policy=Liar(), config=_cfg(1), inference=False)


# ------------------------------------------------------------------ the guide's example
class LoopLargestFirst(aryl.Policy):
    """The guide's first ``largest-first``: every candidate tried in turn."""

    name = "largest-first-loop"

    def decide(self, view: aryl.PassView) -> Decision | None:
        from largest_first import fit

        def by_free(free: list[int], servers: Any) -> list[int]:
            return sorted(servers, key=lambda s: (-free[s], s))

        decision = Decision()
        q = view.queue
        need = view.ref_workers[q] * view.gpus_per_worker[q]
        free = view.free_gpus.tolist()
        order = by_free(free, range(view.n_training))
        left = sum(free[: view.n_training])
        cand = np.flatnonzero(need <= left)
        cand = q[cand[np.argsort(-need[cand], kind="stable")]]
        for j, w, g in zip(cand.tolist(), view.ref_workers[cand].tolist(),
                           view.gpus_per_worker[cand].tolist(), strict=True):
            if w * g > left:
                continue
            place = fit(free, order, w, g)
            if place is not None:
                for s, k in place.items():
                    free[s] -= k * g
                order = by_free(free, order)
                left -= w * g
                decision.start(j, place)
        return decision


def test_the_guides_largest_first_equals_the_loop_it_replaced(largest_first: Any) -> None:
    jobs = _slice(2500)
    cfg = SimConfig(n_training_servers=12, n_inference_servers=4)
    a = simulate(jobs, policy=largest_first.LargestFirst(), config=cfg)
    b = simulate(jobs, policy=LoopLargestFirst(), config=cfg)
    assert a.summary["queuing_delay_s"]["mean"] > 0  # the slice queues
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_exact=True)
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
