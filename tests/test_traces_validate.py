"""Bad data: each a clear error naming file, line and column, or a counted drop."""

from __future__ import annotations

from pathlib import Path

import pytest

from aryl.errors import InvalidInputError, TraceFormatError
from aryl.traces import load_trace

ITP_HEADER = "job_id,submission_time,duration,num_gpu\n"
HELIOS_HEADER = (
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
    "duration,queue\n"
)
PAI_HEADER = (
    "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,"
    "gpu_type\n"
)
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
)


def _write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path, **kwargs) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as err:
        load_trace(path, **kwargs)
    assert err.value.path == str(path)
    assert str(path) in str(err.value)
    return err.value


def test_pod_needs_8_gpus_on_a_2_gpu_machine(tmp_path: Path) -> None:
    nodes = _write(tmp_path, "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n"
                   "n1,64000,262144,8,G2\n", "nodes.csv")
    pods = _write(tmp_path, POD_HEADER + "p0,1000,1,1,1000,P100,LS,Running,0,10,1\n"
                  "p1,1000,1,8,1000,P100,LS,Running,0,10,1\n"
                  "p2,1000,1,8,1000,,LS,Running,0,10,1\n")
    err = _error(pods, node_list=nodes)
    assert (err.line, err.column) == (3, "num_gpu")
    assert "exceeds_server" in str(err)
    trace = load_trace(pods, node_list=nodes, on_invalid="drop")
    assert list(trace.jobs["job_id"]) == ["p0", "p2"]  # p2 may use the 8-GPU G2 node
    assert trace.dropped == {"exceeds_server": 1}


def test_12_gpus_on_8_gpu_servers_without_multi_server(tmp_path: Path) -> None:
    path = _write(tmp_path, ITP_HEADER + "a,1,10,8\nb,2,10,12\n")
    err = _error(path, allow_multi_server=False, gpus_per_server=8)
    assert (err.line, err.column) == (3, "num_gpu")
    assert "exceeds_server" in str(err)
    assert load_trace(path).n_jobs == 2  # multi-server jobs on by default
    trace = load_trace(path, allow_multi_server=False, on_invalid="drop")
    assert trace.dropped == {"exceeds_server": 1}
    assert list(trace.jobs["job_id"]) == ["a"]


def test_more_gpus_than_the_cluster(tmp_path: Path) -> None:
    path = _write(tmp_path, ITP_HEADER + "a,1,10,64\nb,2,10,65\n")
    err = _error(path, max_gpus=64)
    assert (err.line, err.column) == (3, "num_gpu")
    assert "exceeds_cluster" in str(err)


def test_a_duration_above_the_bound_is_refused(tmp_path: Path) -> None:
    # 1e9 s (about 32 years) is the longest duration anywhere in the model
    path = _write(tmp_path, ITP_HEADER + "a,1,1000000000,1\nb,2,1000000001,1\n")
    err = _error(path)
    assert (err.line, err.column) == (3, "duration")
    assert "long_duration" in str(err)
    assert "above 1e+09 s" in str(err)
    trace = load_trace(path, on_invalid="drop")
    assert trace.dropped == {"long_duration": 1}
    assert list(trace.jobs["duration_s"]) == [1e9]


def test_zero_gpu_row(tmp_path: Path) -> None:
    path = _write(tmp_path, ITP_HEADER + "a,1,10,1\nb,2,10,0\n")
    err = _error(path)
    assert (err.line, err.column) == (3, "num_gpu")
    assert "zero_gpus" in str(err)


def test_pai_rows(tmp_path: Path) -> None:
    good = ("j1,worker,4,Terminated,100,400,600,29.3,100,V100\n"
            "j2,worker,1,Terminated,50,80,600,29.3,50,T4\n")
    trace = load_trace(_write(tmp_path, PAI_HEADER + good))
    assert dict(zip(trace.jobs["job_id"], trace.jobs["gpus"], strict=True)) == {
        "j1/worker": 4, "j2/worker": 1}  # 0.5 GPU rounds up, never to 0
    path = _write(tmp_path, PAI_HEADER + good + "j3,worker,2,Terminated,5,9,600,29.3,,\n")
    err = _error(path)
    assert (err.line, err.column) == (4, "plan_gpu")
    assert "missing_value" in str(err)
    trace = load_trace(path, on_invalid="drop")
    assert trace.dropped == {"missing_value": 1}
    assert trace.n_jobs == 2


def _helios(tmp_path: Path, start: str, end: str) -> Path:
    return _write(tmp_path, HELIOS_HEADER + "ok,u,vc,1,1,1,COMPLETED,0,5,50,45,5\n"
                  f"bad,u,vc,2,1,1,COMPLETED,10,{start},{end},0,0\n")


def test_end_before_start_by_3_s(tmp_path: Path) -> None:
    err = _error(_helios(tmp_path, "100", "97"))
    assert (err.line, err.column) == (3, "end_time")
    assert "end before start" in str(err)
    assert "negative_duration" in str(err)


def test_end_equal_to_start(tmp_path: Path) -> None:
    err = _error(_helios(tmp_path, "100", "100"))
    assert (err.line, err.column) == (3, "end_time")
    assert "zero_duration" in str(err)


def test_missing_end(tmp_path: Path) -> None:
    err = _error(_helios(tmp_path, "100", ""))
    assert (err.line, err.column) == (3, "end_time")
    assert "missing_value" in str(err)


def test_header_without_submit_time(tmp_path: Path) -> None:
    path = _write(tmp_path, "job_id,duration,num_gpu\na,10,1\n")
    err = _error(path)
    assert (err.line, err.column) == (1, "submission_time")
    assert "itp" in str(err)
    err = _error(path, format="itp")
    assert (err.line, err.column) == (1, "submission_time")


def test_blank_submit_time_is_never_zero(tmp_path: Path) -> None:
    path = _write(tmp_path, ITP_HEADER + "a,1,10,1\nb, ,10,1\nc,,10,1\n")
    err = _error(path)
    assert (err.line, err.column) == (3, "submission_time")
    assert "blank" in str(err)
    trace = load_trace(path, on_invalid="drop")
    assert trace.dropped == {"missing_value": 2}
    assert list(trace.jobs["job_id"]) == ["a"]


def test_earliest_line_is_reported_and_drops_are_counted_by_kind(tmp_path: Path) -> None:
    rows = [
        "a,1,10,1",        # 2 ok
        "b,x,10,1",        # 3 not_a_number (submit)
        "c,3,NaN,1",       # 4 not_a_number (duration)
        "d,4,-5,1",        # 5 negative_duration
        "e,5,0,1",         # 6 zero_duration
        "f,6,10,1.5",      # 7 not_an_integer
        "a,7,10,1",        # 8 duplicate_job_id
        "g,8,10,2",        # 9 ok
    ]
    path = _write(tmp_path, ITP_HEADER + "\n".join(rows) + "\n")
    err = _error(path)
    assert (err.line, err.column) == (3, "submission_time")
    assert "'x'" in str(err)
    trace = load_trace(path, on_invalid="drop")
    assert trace.dropped == {"not_a_number": 2, "not_an_integer": 1, "negative_duration": 1,
                             "zero_duration": 1, "duplicate_job_id": 1}
    assert list(trace.jobs["job_id"]) == ["a", "g"]
    assert trace.meta["n_rows_read"] == 8


def test_duplicate_job_id_names_the_second_line(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, ITP_HEADER + "a,1,10,1\nb,2,10,1\na,3,10,1\n"))
    assert (err.line, err.column) == (4, "job_id")


def test_parquet_bad_row_names_row(tmp_path: Path) -> None:
    import pandas as pd

    path = tmp_path / "t.parquet"
    pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [1.0, None],
                  "duration_s": [1.0, 2.0], "gpus": [1, 1]}).to_parquet(path)
    err = _error(path)
    assert err.column == "submit_time_s"
    assert "row 2" in str(err)


def test_bad_options(tmp_path: Path) -> None:
    path = _write(tmp_path, ITP_HEADER + "a,1,10,1\n")
    with pytest.raises(InvalidInputError, match="on_invalid"):
        load_trace(path, on_invalid="ignore")
    with pytest.raises(InvalidInputError, match=r"missing\.csv. does not exist"):
        load_trace(tmp_path / "missing.csv")
    with pytest.raises(InvalidInputError, match="tz"):
        load_trace(_write(tmp_path, "timestamp,duration,num_gpus\n2017-10-09 07:01:55,1,1\n",
                          "p.csv"), tz="Mars/Olympus")


def test_window_with_a_job_straddling_its_start(tmp_path: Path) -> None:
    # s is submitted before the window and still runs at its start: out.
    # e is submitted inside and runs past the end: kept whole. z is submitted at end: out.
    path = _write(tmp_path, ITP_HEADER + "s,90,50,1\na,100,5,1\nb,150,5,2\ne,190,500,4\n"
                  "z,200,5,1\n")
    trace = load_trace(path, window="100,200")
    assert list(trace.jobs["job_id"]) == ["a", "b", "e"]
    assert trace.jobs["duration_s"].tolist() == [5.0, 5.0, 500.0]
    assert trace.meta["window"]["n_before"] == 1
    assert trace.meta["window"]["n_after"] == 1
    trace = load_trace(path, window=(100.0, 200.0))
    assert trace.n_jobs == 3
    with pytest.raises(InvalidInputError, match="window"):
        load_trace(path, window="200,100")


def test_busiest_window(tmp_path: Path) -> None:
    from aryl.traces.window import busiest_window

    # 10-s windows: [0,10) holds 2, [30,40) holds 3 (30, 31, 39); ties go earliest.
    assert busiest_window([0.0, 5.0, 30.0, 31.0, 39.0, 40.0, 45.0], 10.0) == (30.0, 40.0, 3)
    assert busiest_window([0.0, 5.0, 20.0, 25.0], 10.0) == (0.0, 10.0, 2)
    # the same in hours through load_trace: 1-h window = 360 x the 10-s one
    rows = "".join(f"{j},{t * 360},1,1\n" for j, t in zip("abcdefg", (0, 5, 30, 31, 39, 40, 45),
                                                           strict=True))
    trace = load_trace(_write(tmp_path, ITP_HEADER + rows), window="busiest-1h")
    assert list(trace.jobs["job_id"]) == ["c", "d", "e"]
    assert trace.meta["window"]["start_s"] == 30 * 360.0


def test_philly_bad_timestamp_and_iso_fallback(tmp_path: Path) -> None:
    path = _write(tmp_path, "timestamp,duration,num_gpus\n2017-10-09T07:01:55,1,1\n"
                  "yesterday,1,1\n", "p.csv")
    err = _error(path)
    assert (err.line, err.column) == (3, "timestamp")
    assert "bad_timestamp" in str(err)
    trace = load_trace(path, on_invalid="drop")
    assert trace.jobs["submit_time_s"].tolist() == [1507557715.0]
    assert trace.dropped == {"bad_timestamp": 1}


def test_busiest_window_matches_brute_force() -> None:
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from aryl.traces.window import busiest_window

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.integers(0, 200), min_size=1, max_size=40), st.integers(1, 60))
    def check(times: list[int], length: int) -> None:
        t = np.array(times, dtype=np.float64)
        start, end, n = busiest_window(t, float(length))
        counts = [int(((t >= s) & (t < s + length)).sum()) for s in sorted(set(times))]
        best = max(counts)
        assert n == best
        assert start == min(s for s, c in zip(sorted(set(times)), counts, strict=True)
                            if c == best)
        assert end == start + length

    check()


@pytest.mark.parametrize("method", ["hashes", "factorize"])
@pytest.mark.parametrize("collide", [False, True])
@pytest.mark.parametrize("arrow", ["object", "str", "sliced", "chunked", "small-offsets"])
def test_duplicate_rule_matches_pandas_duplicated(
    arrow: str, collide: bool, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hash-based duplicate rule flags exactly the rows the object-array formula
    flags (the first *valid* occurrence keeps the id; flagged rows take none), for
    object and Arrow-backed id columns (sliced, in several chunks, 32-bit offsets),
    also when every hash collides (``collide``: only the string comparison decides)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    import aryl.traces.validate as validate
    from aryl.traces.validate import RowChecker

    # the hashes from 2**18 rows, the ids' hash table below: both paths here
    monkeypatch.setattr(validate, "_HASH_FROM_ROWS", 0 if method == "hashes" else 2**62)
    if collide:  # 3 hash values for ~600 distinct ids
        monkeypatch.setattr(validate, "string_hashes",
                            lambda s: np.asarray(pa.compute.utf8_length(s), np.uint64) % 3)
    rng = np.random.default_rng(5)
    n = 2000
    ids = np.array([f"j{k}" for k in rng.integers(0, 600, n)] + ["", "j1 "], dtype=object)
    n = len(ids)
    bad = rng.random(n) < 0.2
    ck = RowChecker(None, np.arange(n), "drop", line_label="index")
    ck.flag(bad, "missing_value", "job_id", "pre-flagged")
    big = pa.array(ids.tolist(), type=pa.large_string())
    col = {
        "object": ids,
        "str": pd.array(ids, dtype="str"),
        "sliced": pd.array(pa.array(["x", *ids.tolist(), "y"], type=pa.large_string())
                           .slice(1, n), dtype="str"),
        "chunked": pd.arrays.ArrowStringArray(pa.chunked_array([big.slice(0, 700),
                                                                big.slice(700)])),
        "small-offsets": pd.arrays.ArrowStringArray(
            pa.chunked_array([pa.array(ids.tolist(), type=pa.string())])),
    }[arrow]
    ck.duplicate_rules(col, "job_id")
    expected = (pd.Series(ids, dtype=object).where(~bad).duplicated(keep="first").to_numpy()
                & ~bad)
    assert ck.counts["duplicate_job_id"] == int(expected.sum()) > 0
    np.testing.assert_array_equal(ck.bad, bad | expected)


def test_string_hashes_equal_for_equal_strings() -> None:
    """Equal strings hash equal whatever the array's layout (offsets width, slice,
    chunks); 200,000 distinct ids get 200,000 distinct hashes; the empty string, a
    NUL byte and a shift of the same bytes are told apart."""
    import numpy as np
    import pyarrow as pa

    from aryl.traces.validate import string_hashes

    words = ["", "a", "\x00", "a\x00", "\x00a", "ab", "ba", "é", "x" * 300, "x" * 301]
    h = string_hashes(pa.array(words))
    assert len(set(h.tolist())) == len(words)
    for layout in (pa.array(words, type=pa.large_string()),
                   pa.array(["z", *words], type=pa.large_string()).slice(1),
                   pa.chunked_array([pa.array(words[:4]), pa.array(words[4:])])):
        np.testing.assert_array_equal(string_hashes(layout), h)
    ids = pa.array([f"ps0-{i}" for i in range(200_000)])
    assert len(np.unique(string_hashes(ids))) == 200_000


def test_error_quotes_the_cell_as_given(tmp_path: Path) -> None:
    """A bad cell is quoted as a Python value (read alone, not via an object copy
    of the column): a float count, a text boolean."""
    import pandas as pd

    from aryl.traces.validate import validate_jobs

    jobs = pd.DataFrame({"job_id": ["a", "b", "c"], "submit_time_s": [0.0, 1.0, 2.0],
                         "duration_s": [5.0, 5.0, 5.0], "gpus": [1.0, 2.5, 1.0]})
    with pytest.raises(TraceFormatError, match=r"not a whole number \(got 2\.5\)"):
        validate_jobs(jobs)
    scaled = jobs.assign(gpus=[1, 2, 1], gpus_per_worker=1, min_workers=1, max_workers=1,
                         elastic=["true", "maybe", "no"], alpha=0.1)
    with pytest.raises(TraceFormatError, match=r"not a boolean .*\(got 'maybe'\)"):
        validate_jobs(scaled)
