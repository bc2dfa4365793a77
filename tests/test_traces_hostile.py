"""Hostile trace files and arguments: every one must give a clear
``TraceFormatError`` / ``InvalidInputError`` (file, line, column or argument),
a one-line CLI error without traceback, and nothing written on failure."""

from __future__ import annotations

import gzip
import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from aryl._io import atomic_write_text
from aryl.cli import main
from aryl.errors import InvalidInputError, TraceFormatError
from aryl.traces import load_trace

H = "job_id,submission_time,duration,num_gpu\n"


def _w(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def _err(path: Path, **kw: object) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as info:
        load_trace(path, **kw)  # type: ignore[arg-type]
    return info.value


# ------------------------------------------------------------------ CSV structure


def test_extra_leading_field_is_not_silently_shifted(tmp_path: Path) -> None:
    # pandas used to take the first field as the index and shift every column
    err = _err(_w(tmp_path, "s.csv", H + "x,a,1,2,1\ny,b,3,4,2\n"))
    assert (err.line, err.column) == (2, None)
    assert "5 fields" in str(err)
    assert "4" in str(err)


def test_extra_nonblank_field_on_a_later_line(tmp_path: Path) -> None:
    err = _err(_w(tmp_path, "s.csv", H + "a,1,2,1\nb,3,4,2,9\n"))
    assert err.line == 3


def test_trailing_blank_fields_are_tolerated(tmp_path: Path) -> None:
    trace = load_trace(_w(tmp_path, "t.csv", H + "a,1,2,1,\nb,3,4,2,,\n"))
    assert trace.jobs["gpus"].tolist() == [1, 2]
    assert trace.jobs["duration_s"].tolist() == [2.0, 4.0]


def test_duplicate_header_column(tmp_path: Path) -> None:
    err = _err(_w(tmp_path, "d.csv", "job_id,job_id,submission_time,duration,num_gpu\n"
                                     "a,b,1,2,1\n"))
    assert (err.line, err.column) == (1, "job_id")


def test_empty_file(tmp_path: Path) -> None:
    err = _err(_w(tmp_path, "e.csv", ""))
    assert err.line == 1
    assert "empty" in str(err)


def test_quoted_newline_keeps_line_numbers(tmp_path: Path) -> None:
    err = _err(_w(tmp_path, "q.csv", H + '"a\nb",1,2,1\nc,1,x,1\n'))
    assert (err.line, err.column) == (4, "duration")


def test_crlf_bom_quotes(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + (H + '"a,1",1,"2",1\r\nb,3,4,2\r\n').encode()
    trace = load_trace(_w(tmp_path, "c.csv", data))
    assert trace.jobs["job_id"].tolist() == ["a,1", "b"]


def test_windows_1252_bytes_name_the_line(tmp_path: Path) -> None:
    err = _err(_w(tmp_path, "w.csv", H.encode() + b"a,1,2,1\ncaf\xe9,1,2,1\n"))
    assert err.line == 3
    assert "UTF-8" in str(err)


def test_windows_1252_bytes_gzip(tmp_path: Path) -> None:
    err = _err(_w(tmp_path, "w.csv.gz", gzip.compress(H.encode() + b"caf\xe9,1,2,1\n")))
    assert err.line == 2


def test_not_parquet(tmp_path: Path) -> None:
    err = _err(_w(tmp_path, "x.parquet", H + "a,1,2,1\n"))
    assert "Parquet" in str(err)


# ------------------------------------------------------------------ cells


def test_huge_gpu_count_is_not_wrapped(tmp_path: Path) -> None:
    err = _err(_w(tmp_path, "h.csv", H + "a,1,2,1e30\n"))
    assert (err.line, err.column) == (2, "num_gpu")
    trace = load_trace(tmp_path / "h.csv", on_invalid="drop")
    assert trace.n_jobs == 0
    assert trace.dropped == {"not_an_integer": 1}


def test_parquet_uint64_gpus(tmp_path: Path) -> None:
    path = tmp_path / "u.parquet"
    pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [1.0, 2.0], "duration_s": [3.0, 4.0],
                  "gpus": np.array([2**64 - 1, 1], dtype=np.uint64)}).to_parquet(path)
    err = _err(path)
    assert err.column == "gpus"


def test_parquet_bool_is_not_a_count(tmp_path: Path) -> None:
    path = tmp_path / "b.parquet"
    pd.DataFrame({"job_id": ["a"], "submit_time_s": [1.0], "duration_s": [3.0],
                  "gpus": [True]}).to_parquet(path)
    assert _err(path).column == "gpus"


def test_gpus_not_a_multiple_of_gpus_per_worker(tmp_path: Path) -> None:
    text = ("job_id,submit_time_s,duration_s,gpus,gpus_per_worker,min_workers,max_workers,"
            "elastic,alpha\na,1,2,4,2,1,2,true,0.1\nb,1,2,1,2,1,1,false,0.1\n")
    err = _err(_w(tmp_path, "g.csv", text))
    assert (err.line, err.column) == (3, "gpus_per_worker")


# ------------------------------------------------------------------ arguments


@pytest.mark.parametrize("tz", ["Mars/Olympus", ""])
def test_unknown_tz_even_for_relative_formats(tmp_path: Path, tz: str) -> None:
    with pytest.raises(InvalidInputError, match="tz"):
        load_trace(_w(tmp_path, "i.csv", H + "a,1,2,1\n"), tz=tz)


@pytest.mark.parametrize("spec", ["nan,5", "0,inf", "-inf,10"])
def test_window_bounds_must_be_finite(tmp_path: Path, spec: str) -> None:
    with pytest.raises(InvalidInputError, match="window"):
        load_trace(_w(tmp_path, "i.csv", H + "a,1,2,1\n"), window=spec)


def test_unrelated_header_is_not_called_a_near_match(tmp_path: Path) -> None:
    # the Pollux workload files share only 'name' with the Alibaba pod list
    err = _err(_w(tmp_path, "p.csv", "name,time,application,num_replicas,batch_size\n"
                                     "a,1,cifar10,1,64\n"))
    assert "unknown trace format" in str(err)


# ------------------------------------------------------------------ output


def test_output_file_mode_follows_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        out = atomic_write_text(tmp_path / "o.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_cli_convert_unwritable_is_one_line(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # root ignores a read-only directory, so make the final rename fail instead
    src = _w(tmp_path, "i.csv", H + "a,1,2,1\n")

    def refuse(*args: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("aryl._io.os.replace", refuse)
    result = CliRunner().invoke(main, ["trace", "convert", str(src), str(tmp_path / "o.csv")])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert result.output.strip().splitlines() == [
        f"Error: cannot write {str(tmp_path / 'o.csv')!r}: Permission denied"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.csv"]


@pytest.mark.parametrize("name", ["w.csv", "s.csv", "x.parquet"])
def test_cli_bad_files_exit_2_one_line(tmp_path: Path, name: str) -> None:
    data = {"w.csv": H.encode() + b"caf\xe9,1,2,1\n", "s.csv": (H + "x,a,1,2,1\n").encode(),
            "x.parquet": (H + "a,1,2,1\n").encode()}[name]
    src = _w(tmp_path, name, data)
    out = tmp_path / "o.csv"
    result = CliRunner().invoke(main, ["trace", "convert", str(src), str(out)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()


# ------------------------------------------------------------------ seeds and demand


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_synthesize_elastic_bad_seed(seed: object) -> None:
    from aryl.traces import synthesize_elastic

    trace = load_trace("itp-c10")
    with pytest.raises(InvalidInputError, match="seed"):
        synthesize_elastic(trace, seed=seed)  # type: ignore[arg-type]


def test_cli_convert_negative_seed_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["trace", "convert", "itp-c10", str(tmp_path / "o.csv"),
                                       "--elastic-fraction", "0.5", "--seed", "-1"])
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    assert "seed" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("kw", "word"), [
    ({"seed": -1}, "seed"),
    ({"span_s": 1e18}, "steps"),
    ({"start_s": float("inf")}, "start_s"),
    ({"noise_sigma": float("inf")}, "noise_sigma"),
])
def test_load_inference_bad_arguments(kw: dict[str, float], word: str) -> None:
    from aryl.traces.inference import load_inference

    args: dict[str, float] = {"span_s": 86400.0, **kw}
    with pytest.raises(InvalidInputError, match=word):
        load_inference("diurnal", n_servers=16, **args)  # type: ignore[arg-type]


# ------------------------------------------------------------------ timestamps, pods

PHILLY_H = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def test_philly_mixed_naive_and_offset_timestamps(tmp_path: Path) -> None:
    # used to raise pandas' "Mixed timezones detected" ValueError
    text = (PHILLY_H + "2017-11-05 01:30:00,10,1,10,c\n2017-10-10T07:00:00Z,10,1,10,c\n"
            "2017-10-10 7:00,10,1,10,c\n2017-10-10T07:00:00+02:00,10,1,10,c\n")
    trace = load_trace(_w(tmp_path, "p.csv", text))
    got = dict(zip(trace.jobs["job_id"], trace.jobs["submit_time_s"], strict=True))
    # calendar.timegm: 01:30 PDT (earlier instant) = 08:30 UTC; 7:00 PDT = 14:00 UTC
    assert got == {"philly-2": 1509870600.0, "philly-3": 1507618800.0,
                   "philly-4": 1507644000.0, "philly-5": 1507611600.0}


def test_philly_offset_only_timestamps(tmp_path: Path) -> None:
    # all-aware column used to raise a TypeError from astype
    trace = load_trace(_w(tmp_path, "p.csv", PHILLY_H + "2017-10-10T07:00:00+02:00,10,1,10,c\n"))
    assert trace.jobs["submit_time_s"].tolist() == [1507611600.0]


POD_H = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
         "deletion_time,scheduled_time\n")


@pytest.mark.parametrize(("row", "kind"), [
    ("p,1000,100,1,-5,,LS,Running,0,100,10", "bad_gpu_share"),
    ("p,1000,100,1,1500,,LS,Running,0,100,10", "bad_gpu_share"),
    ("p,1000,100,2,500,,LS,Running,0,100,10", "bad_gpu_share"),
    ("p,1000,100,1,,,LS,Running,0,100,10", "missing_value"),
])
def test_pod_gpu_share_is_checked(tmp_path: Path, row: str, kind: str) -> None:
    path = _w(tmp_path, "pods.csv", POD_H + "ok,1000,100,1,500,,LS,Running,0,100,10\n" + row + "\n")
    err = _err(path)
    assert (err.line, err.column) == (3, "gpu_milli")
    trace = load_trace(path, on_invalid="drop")
    assert trace.jobs["job_id"].tolist() == ["ok"]
    assert trace.dropped == {kind: 1}


def test_cli_inspect_header_only_is_an_error(tmp_path: Path) -> None:
    # issue 10: a header-only file is an error, not a table of dashes
    result = CliRunner().invoke(main, ["trace", "inspect", str(_w(tmp_path, "h.csv", H))])
    assert result.exit_code == 2, result.output
    assert "line 2: no jobs: the file has a header but no data rows" in result.output


def test_cli_inspect_empty_window_says_no_nan(tmp_path: Path) -> None:
    # a window that keeps no job (the job is submitted at 500 s) shows dashes, not nan
    path = str(_w(tmp_path, "w.csv", H + "a,500,10,1\n"))
    result = CliRunner().invoke(main, ["trace", "inspect", path, "--window", "0,100"])
    assert result.exit_code == 0, result.output
    assert "nan" not in result.output
    assert "- / -" in result.output


def test_cli_inspect_shows_local_dates(tmp_path: Path) -> None:
    path = _w(tmp_path, "p.csv", PHILLY_H + "2017-10-10 00:24:54,10,1,10,c\n")
    result = CliRunner().invoke(main, ["trace", "inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "2017-10-10 00:24:54 PDT" in result.output


def test_format_that_contradicts_a_preset() -> None:
    with pytest.raises(InvalidInputError, match="format"):
        load_trace("itp-c10", format="philly")
    assert load_trace("itp-c10", format="itp").n_jobs == 260


def test_node_list_with_another_format(tmp_path: Path) -> None:
    nodes = _w(tmp_path, "nodes.csv", "sn,gpu,model\nn0,8,V100\n")
    with pytest.raises(InvalidInputError, match="node_list"):
        load_trace(_w(tmp_path, "i.csv", H + "a,1,2,1\n"), node_list=nodes)


def test_round_trip_csv_parquet_csv_keeps_data_and_origin(tmp_path: Path) -> None:
    from aryl.traces import synthesize_elastic, write_trace

    text = PHILLY_H + ("2017-10-10 00:24:54,10.125,1,10,c\n2017-10-09 23:00:00,0.1,2,1,\n"
                       "2017-10-11 01:00:00,1e-7,1,1,d\n")
    first = synthesize_elastic(load_trace(_w(tmp_path, "p.csv", text)), seed=3)
    write_trace(first, tmp_path / "a.parquet")
    second = load_trace(tmp_path / "a.parquet")
    write_trace(second, tmp_path / "b.csv")
    third = load_trace(tmp_path / "b.csv")
    pd.testing.assert_frame_equal(first.jobs, third.jobs)
    assert third.meta["tz"] == "America/Los_Angeles"
    assert third.meta["elastic_synthesis"] == first.meta["elastic_synthesis"]
    # the raw source survives two conversions (it used to be replaced by a.parquet)
    assert third.meta["origin"]["format"] == "philly"
    assert third.meta["origin"]["source"] == str(tmp_path / "p.csv")
    assert [h["format"] for h in third.meta["history"]] == ["philly", "canonical"]


@pytest.mark.parametrize("window", [("a", "b"), 5, (1,), (1, 2, 3), b"1,2"])
def test_window_argument_types(tmp_path: Path, window: object) -> None:
    with pytest.raises(InvalidInputError, match="window"):
        load_trace(_w(tmp_path, "i.csv", H + "a,1,2,1\nb,30,4,2\n"), window=window)  # type: ignore[arg-type]


def test_window_as_list(tmp_path: Path) -> None:
    trace = load_trace(_w(tmp_path, "i.csv", H + "a,1,2,1\nb,30,4,2\n"), window=[5, 40])  # type: ignore[arg-type]
    assert trace.jobs["job_id"].tolist() == ["b"]


@pytest.mark.parametrize(("kw", "word"), [
    ({"gpus_per_server": 2.5}, "gpus_per_server"),
    ({"max_gpus": True}, "max_gpus"),
    ({"allow_multi_server": "no"}, "allow_multi_server"),
])
def test_loader_argument_types(tmp_path: Path, kw: dict[str, object], word: str) -> None:
    with pytest.raises(InvalidInputError, match=word):
        load_trace(_w(tmp_path, "i.csv", H + "a,1,2,1\n"), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("source", [None, 5, ""])
def test_source_argument(source: object) -> None:
    with pytest.raises(InvalidInputError, match="source"):
        load_trace(source)  # type: ignore[arg-type]


def test_source_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="directory"):
        load_trace(tmp_path)


@pytest.mark.parametrize("n_bins", [0, -1, 2.5, True])
def test_offered_load_bins(n_bins: object) -> None:
    from aryl.traces.summary import offered_load

    with pytest.raises(InvalidInputError, match="n_bins"):
        offered_load(load_trace("itp-c10"), n_bins)  # type: ignore[arg-type]


# ------------------------------------------------------------------ inference CSV


def _demand(path: Path):  # type: ignore[no-untyped-def]
    from aryl.traces.inference import load_inference

    return load_inference(path, n_servers=16, span_s=1.0)


def test_inference_csv_line_numbers_count_comments_and_blanks(tmp_path: Path) -> None:
    path = _w(tmp_path, "d.csv", "# made by hand\ntime_s,servers_needed\n\n0,1\n1800,x\n")
    with pytest.raises(TraceFormatError) as info:
        _demand(path)
    assert (info.value.line, info.value.column) == (5, "servers_needed")


def test_inference_csv_extra_field_is_not_shifted(tmp_path: Path) -> None:
    # pandas used to read "0,1,5" as index 0, time_s 1, servers_needed 5
    path = _w(tmp_path, "d.csv", "time_s,servers_needed\n0,1,5\n1800,2,6\n")
    with pytest.raises(TraceFormatError) as info:
        _demand(path)
    assert info.value.line == 2


def test_inference_csv_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError) as info:
        _demand(_w(tmp_path, "d.csv", b"time_s,servers_needed\n0,1\n9,caf\xe9\n"))
    assert info.value.line == 3


def test_inference_csv_good(tmp_path: Path) -> None:
    demand = _demand(_w(tmp_path, "d.csv", "time_s,servers_needed\r\n0,1\r\n1800,2,\r\n"))
    assert demand.times_s.tolist() == [0.0, 1800.0]
    assert demand.servers_needed.tolist() == [1, 2]
