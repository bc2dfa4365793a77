"""The result frames' public dtypes, pinned, and the native engine's hand-over.

``build_result`` builds the frames from the native engine's own arrays (int32
counts and sizes widened one at a time, the engine's columns released as they are
taken): none of that may show in what :func:`aryl.simulate` returns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from aryl.sim import SimConfig, simulate
from aryl.traces import load_trace, synthesize_elastic

pytest.importorskip("aryl._core._sched")

JOBS_DTYPES = {
    "job_id": "str", "submit_time_s": "float64", "duration_s": "float64", "gpus": "int64",
    "gpus_per_worker": "int64", "min_workers": "int64", "max_workers": "int64",
    "elastic": "bool", "alpha": "float64", "status": "str", "first_start_s": "float64",
    "finish_s": "float64", "queuing_delay_s": "float64", "wait_s": "float64",
    "jct_s": "float64", "n_preemptions": "int64", "n_scale_in": "int64",
    "n_scale_out": "int64", "n_moves": "int64", "gpu_s": "float64", "main_pool": "str",
}
TIMESERIES_DTYPES = {
    "time_s": "float64", "queue_length": "int64", "busy_gpus": "int64",
    "loaned_servers": "int64", "running_jobs": "int64", "inference_servers_needed": "int64",
}
EVENTS_DTYPES = {"time_s": "float64", "job_id": "category", "event": "category",
                 "workers": "int64"}


def _trace(n: int = 800) -> pd.DataFrame:
    tr = load_trace("itp-c07")
    tr = tr.replace(jobs=tr.jobs.iloc[:n].reset_index(drop=True))
    return synthesize_elastic(tr, elastic_fraction=0.5, seed=0).jobs


@pytest.mark.parametrize("engine", ["native", "python"])
def test_result_frames_keep_their_dtypes(engine: str) -> None:
    jobs = _trace()
    horizon = float(jobs["submit_time_s"].quantile(0.7))  # unfinished and not arrived too
    res = simulate(jobs, policy="aryl", config=SimConfig(
        n_training_servers=4, n_inference_servers=4, engine=engine, horizon_s=horizon))
    assert set(res.jobs["status"]) == {"finished", "unfinished", "not_arrived"}
    for frame, want in ((res.jobs, JOBS_DTYPES), (res.timeseries, TIMESERIES_DTYPES),
                        (res.events, EVENTS_DTYPES)):
        assert {c: str(t) for c, t in frame.dtypes.items()} == want
        assert list(frame.columns) == list(want)
    for col in ("job_id", "status", "main_pool"):
        arr = res.jobs[col].array
        assert isinstance(arr, pd.arrays.ArrowStringArray)
        assert arr._pa_array.type == pa.large_string()  # as pandas' own str columns
        assert res.jobs[col].dtype == pd.StringDtype("pyarrow", na_value=np.nan)
    assert res.events["job_id"].cat.codes.dtype == np.int16  # < 32,767 jobs
    assert res.events["event"].cat.codes.dtype == np.int8
    assert res.events["job_id"].cat.categories.dtype == "str"
    # the columns are writable arrays of their own (none is a view of another)
    for frame in (res.jobs, res.timeseries):
        arrays = [frame[c].to_numpy() for c in frame.columns
                  if frame[c].dtype.kind in "fib"]
        for i, a in enumerate(arrays):
            for b in arrays[i + 1:]:
                assert not np.shares_memory(a, b)


def test_the_native_engine_is_emptied_as_the_result_is_built() -> None:
    from aryl.sim.adapters import default_inference
    from aryl.sim.jobs import build_job_table
    from aryl.sim.metrics import build_result
    from aryl.sim.native import NativeEngine

    jobs = _trace(400)
    cfg = SimConfig(n_training_servers=4, n_inference_servers=4)
    table = build_job_table(jobs, gpus_per_server=8, default_alpha=cfg.default_alpha)
    eng = NativeEngine(table, "aryl", cfg, default_inference(4, cfg.seed))
    eng.run()
    # the engine hands back its int32 columns (counts, sizes) without widening them
    assert eng.n_preempt.dtype == np.int32
    assert eng.table.min_workers.dtype == np.int32
    assert eng._ev[1].dtype == np.int32  # the event log's job indexes
    res = build_result(eng, {})
    st, t = eng.state, eng.table
    for obj, names in ((st, ("waited_s", "queued_since_s", "remaining_s")),
                       (t, ("gpus_per_worker", "traced_workers", "min_workers")),
                       (eng, ("n_preempt", "n_move", "_core", "_ts", "_ev"))):
        for name in names:
            assert getattr(obj, name) is None, name
    with pytest.raises(RuntimeError, match="already"):
        eng.pool_split(np.zeros(400))
    # and the values are the table's
    np.testing.assert_array_equal(res.jobs["min_workers"], table.min_workers)
    np.testing.assert_array_equal(res.jobs["gpus"], table.gpus)
    assert res.jobs["n_preemptions"].sum() == res.summary["n_preemptions"]


def test_str_labels_take_the_names_by_code() -> None:
    from aryl.sim.metrics import _str_labels

    names = ["training", "inference-a", ""]
    for dt in (np.int8, np.int32, np.int64):
        got = _str_labels(names, np.array([1, -1, 0, 0, 2, -1], dtype=dt))
        assert got.tolist() == ["inference-a", "", "training", "training", "", ""]
        assert got.dtype == pd.StringDtype("pyarrow", na_value=np.nan)
    assert _str_labels(names, np.array([], dtype=np.int8)).tolist() == []


def test_stats_partition_their_scratch_array_after_the_mean() -> None:
    from aryl.sim.metrics import _stats

    rng = np.random.default_rng(3)
    x = rng.exponential(1e4, 10_001)
    want = {"mean": float(x.mean()), "max": float(x.max())}
    p = np.percentile(x, [50, 95, 99])
    want.update(p50=float(p[0]), p95=float(p[1]), p99=float(p[2]))
    assert _stats(x.copy()) == want  # bit for bit: the same mean (before the partition)
    assert _stats(np.array([])) == dict.fromkeys(("mean", "p50", "p95", "p99", "max"))


def test_widen_in_place_widens_the_first_half() -> None:
    from aryl._core import _sched

    want = np.array([0, 1, -1, 7, 2**31 - 1, -(2**31), 5, 123456789, -42], dtype=np.int32)
    for n in (0, 1, 2, 3, len(want)):
        a = np.full(n, -7, dtype=np.int64)
        a.view(np.int32)[:n] = want[:n]
        _sched.widen_in_place(a)
        assert a.dtype == np.int64
        assert a.tolist() == want[:n].tolist()


def test_a_trace_handed_over_is_freed_before_the_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``aryl replay`` hands its trace to the replay (cli.replay._run takes a one-item
    list): the trace's frame goes once the job table is built, not after the run."""
    import gc
    import weakref

    from aryl.cli.replay import _run
    from aryl.sim.native import NativeEngine
    from aryl.traces import Trace

    alive: list[bool] = []
    real = NativeEngine.run

    def run(self: NativeEngine) -> None:
        gc.collect()
        alive.append(frame() is not None)  # as the loop starts
        real(self)

    monkeypatch.setattr(NativeEngine, "run", run)
    cfg = SimConfig(n_training_servers=4, n_inference_servers=0)
    for hand_over in (False, True):
        trace = Trace(jobs=_trace(3000))
        frame = weakref.ref(trace.jobs)
        if hand_over:
            held = [trace]
            del trace
            res = _run(held, "fifo", cfg, None, show_progress=False)
            assert held == []
        else:
            res = _run(trace, "fifo", cfg, None, show_progress=False)
        assert len(res.jobs) == 3000
    assert alive == [True, False]  # the caller's trace stays; a handed-over one goes
