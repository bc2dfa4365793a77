"""The replay's compact columns give the same results as before.

The native engine keeps job sizes, workers and counters as int32 columns, the event
log's job and workers as int32, the job ids as one Arrow string column, and lets the
job table's static columns go for the run (they come back from the engine).  None of
that may change a single output: the Python twin (``engine="python"``, plain Python
ints and lists throughout) is the reference, on a Philly-like slice with elastic
jobs, preemptions, loans and a full event log, given sorted and shuffled (the two
paths of ``build_job_table``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aryl.sim import SimConfig, release_free_memory, simulate
from aryl.sim.jobs import build_job_table
from aryl.traces import load_trace, synthesize_elastic

pytest.importorskip("aryl._core._sched")


def _slice(n: int = 1500) -> pd.DataFrame:
    tr = load_trace("itp-c07")
    tr = tr.replace(jobs=tr.jobs.iloc[:n].reset_index(drop=True))
    return synthesize_elastic(tr, elastic_fraction=0.5, seed=0).jobs


def _cfg(engine: str) -> SimConfig:
    # a small cluster: queues, elastic scaling, loans and reclaims all happen
    return SimConfig(n_training_servers=6, n_inference_servers=4, engine=engine)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("policy", ["aryl", "fifo", "tiresias"])
def test_native_results_equal_the_python_twin(policy: str, shuffle: bool) -> None:
    jobs = _slice()
    if shuffle:
        jobs = jobs.sample(frac=1.0, random_state=1).reset_index(drop=True)
    native = simulate(jobs, policy=policy, config=_cfg("native"))
    twin = simulate(jobs, policy=policy, config=_cfg("python"))
    pd.testing.assert_frame_equal(native.jobs, twin.jobs, check_exact=True)
    pd.testing.assert_frame_equal(native.events, twin.events, check_exact=True)
    pd.testing.assert_frame_equal(native.timeseries, twin.timeseries, check_exact=True)
    # the summaries differ only in the recorded engine
    assert native.summary["config"].pop("engine") == "native"
    assert twin.summary["config"].pop("engine") == "python"
    assert native.summary == twin.summary
    # the run exercised what the compact columns hold
    ev = native.events["event"].value_counts()
    assert ev.get("arrive", 0) == len(jobs)
    if policy == "aryl":
        assert ev.get("scale_out", 0) > 0
        assert ev.get("loan", 0) > 0
    assert (native.events["job_id"] == "").sum() == ev.drop(
        ["arrive", "infeasible", "start", "scale_out", "scale_in", "move", "preempt",
         "finish"], errors="ignore").sum()  # the server events have no job id


def test_the_table_comes_back_from_the_engine_unchanged() -> None:
    from aryl.sim.adapters import default_inference
    from aryl.sim.native import NativeEngine

    jobs = _slice(400).sample(frac=1.0, random_state=2).reset_index(drop=True)
    cfg = _cfg("native")
    table = build_job_table(jobs, gpus_per_server=8, default_alpha=cfg.default_alpha)
    eng = NativeEngine(table, "aryl", cfg, default_inference(4, cfg.seed))
    eng.run()
    back = eng.table
    assert back is not table
    # the engine's own arrays, the same values: the floats and flags as given, gpus
    # in int64, the sizes as the engine keeps them (int32: build_result widens them
    # one at a time); the input rows are not kept (no result reads them)
    for name in ("submit_time_s", "duration_s", "gpus", "gpus_per_worker", "min_workers",
                 "max_workers", "traced_workers", "elastic", "alpha"):
        a, b = getattr(back, name), getattr(table, name)
        want = np.int32 if name in ("gpus_per_worker", "min_workers", "max_workers",
                                    "traced_workers") else b.dtype
        assert a.dtype == want, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert not hasattr(back, "input_row")
    assert back.job_id.tolist() == table.job_id.tolist()


def test_job_ids_are_one_string_column_not_python_objects() -> None:
    jobs = pd.DataFrame({"job_id": ["b", "a", "c"], "submit_time_s": [2.0, 1.0, 3.0],
                         "duration_s": [1.0, 1.0, 1.0], "gpus": [1, 2, 4]})
    t = build_job_table(jobs, gpus_per_server=8, default_alpha=0.1)
    assert isinstance(t.job_id, pd.arrays.ArrowStringArray)
    assert t.job_id.tolist() == ["a", "b", "c"]  # arrival order
    # a sorted trace keeps its validated columns as they are (no reordering copy)
    s = build_job_table(jobs.sort_values("submit_time_s").reset_index(drop=True),
                        gpus_per_server=8, default_alpha=0.1)
    assert s.job_id.tolist() == ["a", "b", "c"]
    assert s.input_row is None  # in input order: no array of n rows
    assert s.input_rows().tolist() == [0, 1, 2]
    assert s.gpus.tolist() == [2, 1, 4]
    res = simulate(jobs, policy="fifo", config=SimConfig(n_training_servers=1,
                                                         n_inference_servers=0))
    assert str(res.jobs["job_id"].dtype) == "str"
    assert res.jobs["job_id"].tolist() == ["a", "b", "c"]


def test_release_free_memory_leaves_data_intact() -> None:
    a = np.arange(1_000_000, dtype=np.float64)
    release_free_memory()
    assert a.sum() == 999_999 * 1_000_000 / 2  # exact: below 2**53


def test_event_column_is_a_categorical_of_the_event_names() -> None:
    """The event log's ``event`` is a categorical over :data:`EVENT_NAMES` (one byte a
    row) that reads the same labels as a text column of the Python twin's codes,
    with either engine; the server events' ``job_id`` is ""."""
    from aryl.sim.metrics import EVENT_NAMES

    jobs = _slice(600)
    for engine in ("native", "python"):
        ev = simulate(jobs, policy="aryl", config=_cfg(engine)).events
        col = ev["event"]
        assert isinstance(col.dtype, pd.CategoricalDtype)
        assert list(col.cat.categories) == list(EVENT_NAMES)
        assert col.cat.codes.dtype == np.int8
        text = col.astype(str)
        assert set(text) <= set(EVENT_NAMES)
        assert (text == col).all()  # comparisons with text read the labels
        server = text.isin(["loan", "loan_return", "reclaim"])
        assert server.any()
        assert (ev.loc[server, "job_id"] == "").all()
        assert (ev.loc[~server, "job_id"] != "").all()
        ids = ev["job_id"]
        assert isinstance(ids.dtype, pd.CategoricalDtype)
        # codes: the narrowest integer that holds the categories (pandas' rule)
        assert ids.cat.codes.dtype == np.int16
        # categories: the jobs' ids in simulation order, then "" (server events)
        res_jobs = simulate(jobs, policy="aryl", config=_cfg(engine)).jobs
        assert ids.cat.categories.tolist() == [*res_jobs["job_id"].tolist(), ""]
        assert ids.cat.categories.dtype == "str"


def test_id_labels_fill_server_events_with_empty_ids() -> None:
    from aryl.sim.metrics import _id_labels

    ids = pd.array(["a", "b", "c"], dtype="str").take([2, 0, 1])  # not one buffer in order
    got = _id_labels(ids, np.array([1, -1, 0, 2, -1]))
    assert isinstance(got.dtype, pd.CategoricalDtype)
    assert got.categories.tolist() == ["c", "a", "b", ""]
    assert got.tolist() == ["a", "", "c", "b", ""]
    assert (got == "a").tolist() == [True, False, False, False, False]
    empty = _id_labels(pd.array([], dtype="str"), np.array([-1]))
    assert empty.tolist() == [""]
    assert _id_labels(ids, np.array([], dtype=np.int32)).tolist() == []


def test_job_table_of_a_loaded_trace_skips_no_value(tmp_path):
    """build_job_table(validated=True), as simulate() builds it for a path it
    loads itself, gives the table of the full rules, column by column."""
    import numpy as np
    import pandas as pd

    from aryl.sim.jobs import build_job_table
    from aryl.traces import load_trace

    rigid = pd.DataFrame({"job_id": ["b", "a", "c"], "submit_time_s": [5.0, 1.0, 1.0],
                          "duration_s": [10.0, 20.0, 30.0], "gpus": [12, 1, 8]})
    scaled = rigid.assign(gpus_per_worker=[4, 1, 2], min_workers=[1, 1, 4],
                          max_workers=[3, 1, 4], elastic=[True, False, False],
                          alpha=[0.25, 0.0, 0.5])
    for frame in (rigid, scaled):
        path = tmp_path / "t.csv"
        frame.to_csv(path, index=False)
        jobs = load_trace(path).jobs
        a = build_job_table(jobs, gpus_per_server=8, default_alpha=0.1)
        b = build_job_table(jobs, gpus_per_server=8, default_alpha=0.1, validated=True)
        assert list(a.job_id) == list(b.job_id) == ["a", "c", "b"]
        assert a.input_row is b.input_row is None  # a loaded trace is in arrival order
        for name in ("submit_time_s", "duration_s", "gpus", "gpus_per_worker", "min_workers",
                     "max_workers", "traced_workers", "elastic", "alpha"):
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype, name
            np.testing.assert_array_equal(x, y, err_msg=name)
