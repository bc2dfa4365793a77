"""Each reader on a small handmade file in its public schema; expected canonical
rows written out by hand (epoch seconds computed with calendar.timegm)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aryl.errors import TraceFormatError
from aryl.traces import CANONICAL_COLUMNS, load_trace, write_trace


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _rows(trace) -> list[tuple]:
    cols = ["job_id", "submit_time_s", "duration_s", "gpus"]
    return [tuple(r) for r in trace.jobs[cols].itertuples(index=False)]


def _check_dtypes(jobs: pd.DataFrame) -> None:
    assert list(jobs.columns) == [c for c in CANONICAL_COLUMNS if c in jobs.columns]
    assert jobs["job_id"].dtype == "str"
    assert jobs["submit_time_s"].dtype == np.float64
    assert jobs["duration_s"].dtype == np.float64
    assert jobs["gpus"].dtype == np.int64


ITP = """job_id,submission_time,duration,num_gpu
a,10,100,1
b,5,50,2
c,10,20,4
"""


def test_itp(tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path, "c.csv", ITP))
    assert trace.format == "itp"
    assert _rows(trace) == [("b", 5.0, 50.0, 2), ("a", 10.0, 100.0, 1), ("c", 10.0, 20.0, 4)]
    _check_dtypes(trace.jobs)
    assert trace.dropped == {}


PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,2,5902.0,6214e9

"""


def test_philly_default_tz_is_pacific(tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path, "philly.csv", PHILLY))
    assert trace.format == "philly"
    assert trace.meta["tz"] == "America/Los_Angeles"
    # 06:13:03 PDT = 13:13:03 UTC; 07:01:55 PDT = 14:01:55 UTC; trailing blank line skipped
    assert _rows(trace) == [
        ("philly-3", 1507554783.0, 2951.0, 2),
        ("philly-2", 1507557715.0, 66.0, 1),
    ]
    assert list(trace.jobs["tenant"]) == ["6214e9", "11cb48"]
    _check_dtypes(trace.jobs)


def test_philly_explicit_tz(tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path, "philly.csv", PHILLY), tz="UTC")
    assert trace.jobs["submit_time_s"].tolist() == [1507529583.0, 1507529583.0 + 48 * 60 + 52]


def test_philly_dst_fall_back_takes_earlier_instant(tmp_path: Path) -> None:
    text = "timestamp,duration,num_gpus\n2017-11-05 01:30:00,10,1\n"
    trace = load_trace(_write(tmp_path, "p.csv", text))
    assert trace.jobs["submit_time_s"].tolist() == [1509870600.0]  # 08:30 UTC (PDT)


HELIOS_HEADER = (
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
    "duration,queue\n"
)


def test_helios_datetimes(tmp_path: Path) -> None:
    text = HELIOS_HEADER + (
        "j1,u1,vcA,8,16,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,"
        "2020-04-01 01:00:10,3600,10\n"
        "j2,u2,vcB,0,4,1,COMPLETED,2020-04-01 00:00:05,2020-04-01 00:00:06,"
        "2020-04-01 00:00:09,3,1\n"
        "j3,u1,vcA,16,32,2,FAILED,2020-03-31 23:59:00,2020-04-01 00:00:00,"
        "2020-04-01 00:00:30,30,60\n"
    )
    trace = load_trace(_write(tmp_path, "cluster_log.csv", text))
    assert trace.format == "helios"
    assert trace.meta["tz"] == "Asia/Shanghai"
    # 2020-04-01 00:00:00 CST = 2020-03-31 16:00:00 UTC
    assert _rows(trace) == [("j3", 1585670340.0, 30.0, 16), ("j1", 1585670400.0, 3600.0, 8)]
    assert list(trace.jobs["tenant"]) == ["vcA", "vcA"]
    assert trace.dropped == {"cpu_only": 1}


def test_helios_numeric_seconds(tmp_path: Path) -> None:
    text = HELIOS_HEADER + "j1,u,vc,1,1,1,COMPLETED,100,160,1160,1000,60\n"
    trace = load_trace(_write(tmp_path, "h.csv", text))
    assert _rows(trace) == [("j1", 100.0, 1000.0, 1)]
    assert "tz" not in trace.meta


PAI_HEADER = (
    "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,"
    "gpu_type\n"
)
PAI_ROWS = (
    "j1,worker,4,Terminated,100,400,600,29.3,100,V100\n"
    "j2,tensorflow,1,Terminated,50,80,600,29.3,50,T4\n"
    "j3,ps,1,Terminated,10,20,600,29.3,0,\n"
    "j4,worker,3,Terminated,60,70,600,29.3,50,MISC\n"
)


def test_pai2020_gpu_percent_times_instances(tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path, "pai_task_table.csv", PAI_HEADER + PAI_ROWS))
    assert trace.format == "pai2020"
    # inst_num=4, plan_gpu=100 -> 4; 1 x 50% -> 0.5 -> 1 (ceil); 3 x 50% -> 1.5 -> 2
    assert _rows(trace) == [
        ("j2/tensorflow", 50.0, 30.0, 1),
        ("j4/worker", 60.0, 10.0, 2),
        ("j1/worker", 100.0, 300.0, 4),
    ]
    assert list(trace.jobs["gpu_type"]) == ["T4", "MISC", "V100"]
    assert trace.meta["n_fractional_gpus_rounded_up"] == 2
    assert trace.dropped == {"cpu_only": 1}


def test_pai2020_headerless_with_job_table(tmp_path: Path) -> None:
    tasks = _write(tmp_path, "pai_task_table.csv", PAI_ROWS)
    jobs = _write(tmp_path, "pai_job_table.csv",
                  "j1,i1,alice,Terminated,100,400\nj2,i2,bob,Terminated,50,80\n")
    trace = load_trace(tasks, format="pai2020", pai_job_table=jobs)
    assert _rows(trace)[0] == ("j2/tensorflow", 50.0, 30.0, 1)
    assert list(trace.jobs["tenant"]) == ["bob", "", "alice"]
    with pytest.raises(TraceFormatError, match="PAI 2020 job table"):
        load_trace(_write(tmp_path, "j.csv",
                          "job_name,inst_id,user,status,start_time,end_time\nj1,i,u,T,1,2\n"))


POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
)


def test_alibaba2023_pods(tmp_path: Path) -> None:
    text = POD_HEADER + (
        "pod-0,12000,16384,1,1000,,LS,Running,0,500,20\n"
        "pod-1,6000,12288,1,460,V100M16|V100M32,LS,Running,10,100,30\n"
        "pod-2,6000,12288,0,0,,BE,Running,5,100,5\n"
        "pod-3,6000,12288,8,1000,G2,BE,Succeeded,7,90,8\n"
    )
    trace = load_trace(_write(tmp_path, "openb_pod_list_default.csv", text))
    assert trace.format == "alibaba2023"
    assert _rows(trace) == [("pod-0", 0.0, 480.0, 1), ("pod-3", 7.0, 82.0, 8),
                            ("pod-1", 10.0, 70.0, 1)]
    assert list(trace.jobs["gpu_type"]) == ["", "G2", "V100M16|V100M32"]
    assert trace.dropped == {"cpu_only": 1}
    assert trace.meta["n_fractional_gpus_rounded_up"] == 1


def test_canonical_roundtrip_csv_and_parquet(tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path, "c.csv", ITP))
    for name in ("out.csv", "out.parquet", "out.csv.gz"):
        path = write_trace(trace, tmp_path / name)
        back = load_trace(path)
        assert back.format == "canonical"
        pd.testing.assert_frame_equal(back.jobs, trace.jobs)
        assert back.meta["origin"]["format"] == "itp"
    assert (tmp_path / "out.csv.meta.json").is_file()


def test_canonical_optional_columns(tmp_path: Path) -> None:
    text = (
        "job_id,submit_time_s,duration_s,gpus,gpus_per_worker,min_workers,max_workers,"
        "elastic,alpha,tenant,priority,gpu_type\n"
        "x,1.5,10,4,1,2,8,true,0.1,vc1,3,V100\n"
        "y,0.5,20,8,8,1,1,False,0.05,,0,\n"
    )
    jobs = load_trace(_write(tmp_path, "t.csv", text)).jobs
    assert list(jobs["job_id"]) == ["y", "x"]
    assert jobs["elastic"].tolist() == [False, True]
    assert jobs["min_workers"].tolist() == [1, 2]
    assert jobs["max_workers"].dtype == np.int64
    assert jobs["alpha"].tolist() == [0.05, 0.1]
    assert jobs["priority"].tolist() == [0, 3]
    assert jobs["tenant"].tolist() == ["", "vc1"]


def test_format_override_and_unknown(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.csv", ITP)
    assert load_trace(path, format="itp").n_jobs == 3
    with pytest.raises(TraceFormatError, match="lacks column") as err:
        load_trace(path, format="philly")
    assert err.value.line == 1
    with pytest.raises(TraceFormatError, match="unknown trace format"):
        load_trace(_write(tmp_path, "x.csv", "foo,bar\n1,2\n"))


def test_shuffled_rows_give_the_same_trace(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    n = 200
    df = pd.DataFrame({
        "job_id": [f"j{i}" for i in range(n)],
        "submission_time": rng.permutation(n) * 3 + 1,
        "duration": rng.integers(1, 1000, n),
        "num_gpu": rng.choice([1, 2, 4, 8], n),
    })
    a = load_trace(_write(tmp_path, "a.csv", df.to_csv(index=False)))
    b = load_trace(_write(tmp_path, "b.csv", df.sample(frac=1.0, random_state=3)
                          .to_csv(index=False)))
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    assert a.jobs["submit_time_s"].is_monotonic_increasing


def _odd_parquet(tmp_path: Path) -> Path:
    """Parquet with what a reader must handle: a stored index, names padded with
    spaces, nulls in a count and a text column, bools, datetimes, a nested field
    whose name prefixes another column's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = pd.DataFrame({
        " job_id ": ["a", "b", None, "d"],
        "submit_time_s": [0.0, 1.0, np.nan, 3.0],
        "gpus": pd.array([1, None, 2, 4], dtype="Int64"),
        "elastic": [True, False, True, False],
        "when": pd.to_datetime(["2017-10-01 10:00", "2017-10-01 11:00", None,
                                "2017-10-02 00:00"]),
    }, index=pd.Index([10, 20, 30, 40], name="row"))
    table = pa.Table.from_pandas(frame)
    table = table.append_column("a", pa.array([{"b": 1}, {"b": 2}, None, {"b": 4}]))
    table = table.append_column("a.b", pa.array(["x", "y", "z", "w"]))
    path = tmp_path / "odd.parquet"
    pq.write_table(table, path)
    return path


def test_parquet_columns_are_read_raw_columns(tmp_path: Path) -> None:
    """Column by column (``ParquetColumns``), a Parquet file reads as ``read_raw``
    reads it whole: the same names (stripped, the stored index left out), values and
    dtypes, each a Series on a fresh RangeIndex."""
    from aryl.traces.readers import ParquetColumns, read_raw

    path = _odd_parquet(tmp_path)
    whole, lines, label = read_raw(path)
    cols = ParquetColumns(path)
    try:
        assert list(cols.columns) == list(whole.columns) == [
            "job_id", "submit_time_s", "gpus", "elastic", "when", "a", "a.b"]
        assert len(cols) == len(whole) == 4
        for name in cols.columns:
            pd.testing.assert_series_equal(cols[name], whole[name])
    finally:
        cols.close()
    assert (lines.tolist(), label) == ([2, 3, 4, 5], "row")


def test_parquet_trace_is_checked_one_raw_column_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a Parquet trace reads each column once and lets it go before the
    next one is read (the raw table is never held whole next to the checked
    columns); only ``elastic`` is kept until the scaling rules that quote it."""
    import gc
    import weakref

    from aryl.traces import readers

    n = 50
    jobs = pd.DataFrame({"job_id": [f"j{i}" for i in range(n)],
                         "submit_time_s": np.arange(n, dtype=float), "duration_s": 10.0,
                         "gpus": 2, "gpus_per_worker": 1, "min_workers": 1,
                         "max_workers": 2, "elastic": True, "alpha": 0.1, "tenant": "vc"})
    path = tmp_path / "t.parquet"
    jobs.to_parquet(path)
    read: list[tuple[str, weakref.ref]] = []
    alive_at_read: list[list[str]] = []
    original = readers.ParquetColumns.__getitem__

    def spy(self: readers.ParquetColumns, name: str) -> pd.Series:
        gc.collect()
        alive_at_read.append([c for c, ref in read if ref() is not None])
        series = original(self, name)
        read.append((name, weakref.ref(series)))
        return series

    monkeypatch.setattr(readers.ParquetColumns, "__getitem__", spy)
    trace = load_trace(path)
    assert [c for c, _ in read] == list(jobs.columns)  # each once
    for name, alive in zip([c for c, _ in read], alive_at_read, strict=True):
        assert alive == (["elastic"] if name == "alpha" else []), name
    pd.testing.assert_frame_equal(trace.jobs, load_trace(jobs).jobs)


def test_a_trace_is_read_from_the_c_heap_and_the_pool_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_trace allocates from Arrow's system pool (which gives freed columns
    back) and leaves the process's default pool as it found it: after a load,
    after a failed load, and around nested blocks."""
    import pyarrow as pa

    from aryl.traces import readers

    before = pa.default_memory_pool().backend_name
    jobs = pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [0.0, 1.0],
                         "duration_s": [5.0, 5.0], "gpus": [1, 2]})
    path = tmp_path / "t.parquet"
    jobs.to_parquet(path)
    seen: list[str] = []
    original = readers.ParquetColumns.__getitem__

    def spy(self: readers.ParquetColumns, name: str) -> pd.Series:
        seen.append(pa.default_memory_pool().backend_name)
        return original(self, name)

    monkeypatch.setattr(readers.ParquetColumns, "__getitem__", spy)
    trace = load_trace(path)
    assert set(seen) == {"system"}
    assert pa.default_memory_pool().backend_name == before
    assert trace.jobs["job_id"].tolist() == ["a", "b"]  # arrays outlive the block
    jobs.assign(gpus=[1, 0]).to_parquet(path)
    with pytest.raises(TraceFormatError):
        load_trace(path)
    assert pa.default_memory_pool().backend_name == before
    with readers.c_heap_arrow_pool():
        with readers.c_heap_arrow_pool():
            assert pa.default_memory_pool().backend_name == "system"
        assert pa.default_memory_pool().backend_name == "system"
    assert pa.default_memory_pool().backend_name == before
