"""One validation path for every input (issue 9 item 4).

A DataFrame given to ``aryl.simulate`` or ``load_trace``, a canonical CSV, a
Parquet file, and a preset's ``Trace`` edited by hand all go through
``aryl.traces.validate.check_jobs``: each bad kind is rejected by every input
with the same kind and column, and the error names the row (file line, Parquet
row or DataFrame index label).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import aryl
from aryl.errors import InvalidInputError, TraceFormatError
from aryl.sim import SimConfig
from aryl.sim.jobs import build_job_table
from aryl.traces import load_trace
from aryl.traces.validate import InvalidRowsError

CFG = SimConfig(n_training_servers=2, n_inference_servers=0)


def good_jobs() -> pd.DataFrame:
    """Four valid jobs with every scaling column; index labels r0..r3."""
    return pd.DataFrame(
        {
            "job_id": ["a", "b", "c", "d"],
            "submit_time_s": [0.0, 10.0, 20.0, 30.0],
            "duration_s": [100.0, 200.0, 300.0, 400.0],
            "gpus": [8, 4, 2, 8],
            "gpus_per_worker": [1, 4, 2, 1],
            "min_workers": [4, 1, 1, 8],
            "max_workers": [8, 1, 1, 8],
            "elastic": [True, False, False, False],
            "alpha": [0.1, 0.05, 0.05, 0.05],
        },
        index=["r0", "r1", "r2", "r3"],
    )


def _set(df: pd.DataFrame, row: str, **cells: Any) -> pd.DataFrame:
    """Change cells; a column takes the narrowest dtype that holds its new values."""
    df = df.copy()
    for col, value in cells.items():
        df[col] = df[col].astype(object)
        df.loc[row, col] = value
        df[col] = df[col].infer_objects()
    return df


# (name, cells changed in row r2, kind, column named); the bad row is the third one
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("fractional gpus", {"gpus": 2.7}, "not_an_integer", "gpus"),
    ("fractional workers", {"min_workers": 1.5}, "not_an_integer", "min_workers"),
    ("infinite gpus", {"gpus": np.inf}, "not_a_number", "gpus"),
    ("infinite duration", {"duration_s": np.inf}, "not_a_number", "duration_s"),
    ("text in a count", {"gpus": "two"}, "not_a_number", "gpus"),
    ("NaN submit time", {"submit_time_s": np.nan}, "missing_value", "submit_time_s"),
    ("blank job id", {"job_id": None}, "missing_value", "job_id"),
    ("negative duration", {"duration_s": -5.0}, "negative_duration", "duration_s"),
    ("zero duration", {"duration_s": 0.0}, "zero_duration", "duration_s"),
    ("zero gpus", {"gpus": 0, "gpus_per_worker": 1}, "zero_gpus", "gpus"),
    ("negative gpus", {"gpus": -2}, "zero_gpus", "gpus"),
    ("word in a bool column", {"elastic": "maybe"}, "not_a_number", "elastic"),
    ("number 2 in a bool column", {"elastic": 2}, "not_a_number", "elastic"),
    ("NaN in a bool column", {"elastic": np.nan}, "missing_value", "elastic"),
    # "False" is read as false (as in a CSV); with 1..2 workers the job is a rigid one
    # whose worker counts differ: an error, not an elastic job
    ("'False' with min != max", {"elastic": "False", "min_workers": 1, "max_workers": 2,
                                 "gpus_per_worker": 1}, "bad_scaling", "elastic"),
    ("rigid with min != max", {"elastic": False, "min_workers": 1, "max_workers": 2,
                               "gpus_per_worker": 1}, "bad_scaling", "elastic"),
    ("min > max", {"elastic": True, "min_workers": 3, "max_workers": 2,
                   "gpus_per_worker": 1}, "bad_scaling", "max_workers"),
    ("min_workers 0", {"elastic": True, "min_workers": 0, "gpus_per_worker": 1},
     "bad_scaling", "min_workers"),
    ("gpus_per_worker 0", {"gpus_per_worker": 0}, "bad_scaling", "gpus_per_worker"),
    ("gpus not a multiple of gpus_per_worker", {"gpus": 3}, "bad_scaling", "gpus_per_worker"),
    ("alpha above 1", {"alpha": 1.5}, "bad_scaling", "alpha"),
    ("negative alpha", {"alpha": -0.1}, "bad_scaling", "alpha"),
    ("NaN alpha", {"alpha": np.nan}, "missing_value", "alpha"),
    ("duplicate job id", {"job_id": "a"}, "duplicate_job_id", "job_id"),
]


def _to_csv(df: pd.DataFrame, path: Path) -> Path:
    df.to_csv(path, index=False)
    return path


def _to_parquet(df: pd.DataFrame, path: Path) -> Path:
    out = df.reset_index(drop=True).copy()
    for col in out.columns:  # Parquet columns have one type: mixed cells become text
        if out[col].dtype == object and len({type(v) for v in out[col].dropna()}) > 1:
            out[col] = [None if pd.isna(v) else str(v) for v in out[col]]
    out.to_parquet(path)
    return path


def _raises(call: Callable[[], Any]) -> InvalidRowsError:
    with pytest.raises(InvalidRowsError) as info:
        call()
    return info.value


@pytest.mark.parametrize(("name", "cells", "kind", "column"), CASES, ids=[c[0] for c in CASES])
def test_every_input_rejects_the_same_bad_row(
    tmp_path: Path, name: str, cells: dict[str, Any], kind: str, column: str
) -> None:
    bad = _set(good_jobs(), "r2", **cells)
    # DataFrame straight into the simulator: names the index label r2
    err = _raises(lambda: aryl.simulate(bad, config=CFG, inference=False))
    assert (err.kind, err.column, err.index) == (kind, column, "r2"), str(err)
    assert f"DataFrame index 'r2', column '{column}'" in str(err)
    # DataFrame through load_trace
    err = _raises(lambda: load_trace(bad))
    assert (err.kind, err.column, err.index) == (kind, column, "r2")
    # CSV: header is line 1, so the third row is line 4
    csv = _to_csv(bad, tmp_path / "t.csv")
    err = _raises(lambda: load_trace(csv))
    assert (err.kind, err.column, err.line, err.path) == (kind, column, 4, str(csv))
    assert f"{csv}, line 4, column '{column}'" in str(err)
    err = _raises(lambda: aryl.simulate(str(csv), config=CFG, inference=False))
    assert (err.kind, err.line) == (kind, 4)
    # Parquet: the third row is row 3
    pq = _to_parquet(bad, tmp_path / "t.parquet")
    err = _raises(lambda: load_trace(pq))
    assert (err.kind, err.column, err.row, err.path) == (kind, column, 3, str(pq))
    assert f"{pq}, row 3, column '{column}'" in str(err)


@pytest.mark.parametrize(("name", "cells", "kind", "column"), CASES, ids=[c[0] for c in CASES])
def test_drop_mode_drops_the_same_row_from_every_input(
    tmp_path: Path, name: str, cells: dict[str, Any], kind: str, column: str
) -> None:
    bad = _set(good_jobs(), "r2", **cells)
    sources: list[Any] = [bad, _to_csv(bad, tmp_path / "t.csv"),
                          _to_parquet(bad, tmp_path / "t.parquet")]
    for source in sources:
        trace = load_trace(source, on_invalid="drop")
        # the duplicate of "a" is r2's id, so r2 is the later one and is dropped too
        assert trace.jobs["job_id"].tolist() == ["a", "b", "d"], source
        assert trace.dropped == {kind: 1}, source


def test_gpus_2_7_is_an_error_not_a_2_gpu_job() -> None:
    # issue 9 item 4: today's cast turned 2.7 GPUs into 2
    df = pd.DataFrame({"job_id": ["x"], "submit_time_s": [0.0], "duration_s": [10.0],
                       "gpus": [2.7]})
    with pytest.raises(InvalidInputError, match=r"column 'gpus': not a whole number \(got 2.7\)"):
        aryl.simulate(df, config=CFG, inference=False)


@pytest.mark.parametrize("flag", ["False", np.nan, None])
def test_elastic_false_text_or_nan_with_4_to_8_workers_is_an_error(flag: Any) -> None:
    df = pd.DataFrame({"job_id": ["x"], "submit_time_s": [0.0], "duration_s": [10.0],
                       "gpus": [8], "gpus_per_worker": [1], "min_workers": [4],
                       "max_workers": [8], "elastic": pd.Series([flag], dtype=object),
                       "alpha": [0.1]})
    with pytest.raises(InvalidRowsError, match="column 'elastic'") as info:
        aryl.simulate(df, config=CFG, inference=False)
    assert info.value.kind == ("bad_scaling" if flag == "False" else "missing_value")


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        (["true", "FALSE", " yes ", "no"], [True, False, True, False]),
        ([1, 0, 1, 0], [True, False, True, False]),
        ([1.0, 0.0, 1.0, 0.0], [True, False, True, False]),
        ([True, False, True, False], [True, False, True, False]),
        (["1", "0", "True", "False"], [True, False, True, False]),
    ],
)
def test_accepted_booleans_mean_the_same_in_every_input(
    tmp_path: Path, cells: list[Any], expected: list[bool]
) -> None:
    df = good_jobs().reset_index(drop=True)
    df["elastic"] = pd.Series(cells, dtype=object if isinstance(cells[0], str) else None)
    # rows 1 and 3 are rigid (min == max), rows 0 and 2 elastic: make row 2 elastic-capable
    df.loc[2, ["gpus_per_worker", "min_workers", "max_workers"]] = [1, 1, 2]
    df.loc[3, ["min_workers", "max_workers"]] = [8, 8]
    table = build_job_table(df, gpus_per_server=8, default_alpha=0.05)
    assert table.elastic.tolist() == expected
    for path in (_to_csv(df, tmp_path / "b.csv"), _to_parquet(df, tmp_path / "b.parquet")):
        assert load_trace(path).jobs["elastic"].tolist() == expected, path


def test_counts_by_kind_and_column_and_names_the_earliest_row() -> None:
    bad = good_jobs()
    bad["gpus"] = bad["gpus"].astype(np.float64)
    bad.loc["r3", "gpus"] = 8.5          # not_an_integer (gpus)
    bad.loc["r1", "duration_s"] = -1.0   # negative_duration: the earliest bad row
    bad.loc["r2", "alpha"] = 2.0         # bad_scaling (alpha)
    err = _raises(lambda: load_trace(bad))
    assert (err.index, err.kind, err.column) == ("r1", "negative_duration", "duration_s")
    assert err.counts == {"not_an_integer": 1, "negative_duration": 1, "bad_scaling": 1}
    assert err.columns == {"not_an_integer": {"gpus": 1},
                           "negative_duration": {"duration_s": 1},
                           "bad_scaling": {"alpha": 1}}
    text = str(err)
    assert "3 of 4 rows cannot be used" in text
    assert "on_invalid='drop' drops them" in text
    # the simulator names its own way of dropping rows
    err = _raises(lambda: aryl.simulate(bad, config=CFG, inference=False))
    assert "load_trace(jobs, on_invalid='drop')" in str(err)
    # and the error survives a worker process (pickling) unchanged
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err)
    assert (again.kind, again.index, again.counts) == (err.kind, err.index, err.counts)


def test_missing_columns_and_incomplete_scaling_set() -> None:
    with pytest.raises(TraceFormatError, match=r"missing column\(s\) \['gpus'\]"):
        aryl.simulate(good_jobs().drop(columns="gpus"), config=CFG, inference=False)
    with pytest.raises(TraceFormatError, match="scaling columns come as a set"):
        aryl.simulate(good_jobs().drop(columns="alpha"), config=CFG, inference=False)
    with pytest.raises(InvalidInputError, match="expected a pandas DataFrame"):
        build_job_table([1, 2], gpus_per_server=8, default_alpha=0.05)  # type: ignore[arg-type]


def test_valid_input_gives_the_same_replay_from_every_source(tmp_path: Path) -> None:
    df = good_jobs()
    reference = aryl.simulate(df, policy="aryl", config=CFG, inference=False).jobs
    sources: list[Any] = [
        load_trace(df),
        str(_to_csv(df, tmp_path / "v.csv")),
        str(_to_parquet(df, tmp_path / "v.parquet")),
        load_trace(tmp_path / "v.csv"),
    ]
    for source in sources:
        res = aryl.simulate(source, policy="aryl", config=CFG, inference=False)
        pd.testing.assert_frame_equal(res.jobs, reference)
    # hand check of one value: b (4 GPUs, rigid) arrives at 10 s with 8 + 4 of 16 GPUs used
    # by a (8 of its 1-GPU workers) and nothing else: it starts at once, JCT = its 200 s
    assert reference.set_index("job_id").loc["b", "jct_s"] == 200.0


def test_a_preset_trace_edited_by_hand_is_checked_too() -> None:
    trace = load_trace("itp-c10")
    jobs = trace.jobs.copy()
    jobs["gpus"] = jobs["gpus"].astype(np.float64)
    jobs.loc[5, "gpus"] = 2.7
    with pytest.raises(InvalidRowsError, match="column 'gpus'") as info:
        aryl.simulate(trace.replace(jobs=jobs), config=CFG, inference=False)
    assert (info.value.index, info.value.kind) == (5, "not_an_integer")
    # the untouched preset replays (every job of itp-c10 passes the same rules)
    res = aryl.simulate(trace, policy="fifo",
                        config=SimConfig(n_training_servers=8, n_inference_servers=0),
                        inference=False)
    assert res.summary["n_jobs"] == 260
