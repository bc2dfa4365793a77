"""Errors that say what to do (issue 10 item 4): exit code and text of each message."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.traces.readers import FORMATS

POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
              "creation_time,deletion_time,scheduled_time\n")
ALIBABA_2023 = Path(__file__).resolve().parents[2] / "shared" / "traces" / \
    "alibaba-pai-gpu-2023" / "openb_pod_list_default.csv"


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, " ".join(r.output.split())


@pytest.mark.parametrize("command", [["replay"], ["compare"], ["trace", "inspect"]])
def test_typo_in_a_preset_suggests_the_closest(command: list[str]) -> None:
    args = [*command, "itp-c7"] if command[0] == "trace" else [*command, "--trace", "itp-c7"]
    code, out = _run(*args)
    assert code == 2
    assert "'itp-c7' is neither a file nor a preset; did you mean 'itp-c07'?" in out


def test_unknown_name_without_a_close_preset_lists_the_presets() -> None:
    code, out = _run("replay", "--trace", "philly")
    assert code == 2
    assert "neither a file nor a preset (presets: itp-all, itp-c01," in out
    assert "did you mean" not in out


def test_missing_path_says_the_file_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    code, out = _run("replay", "--trace", str(missing))
    assert code == 2
    assert f"file '{missing}' does not exist" in out
    code, out = _run("trace", "inspect", str(tmp_path / "no-folder" / "t.parquet"))
    assert code == 2
    assert "does not exist (folder" in out


def test_unknown_header_lists_the_columns_of_every_format(tmp_path: Path) -> None:
    path = tmp_path / "odd.csv"
    path.write_text("a,b,c\n1,2,3\n")
    code, out = _run("replay", "--trace", str(path))
    assert code == 2
    assert f"{path}, line 1: unknown trace format: the header has columns a, b, c" in out
    for spec in FORMATS.values():
        assert f"{spec.name} {', '.join(spec.required)}" in out, spec.name


def test_header_looking_like_a_format_names_what_it_lacks(tmp_path: Path) -> None:
    path = tmp_path / "itp.csv"
    path.write_text("job_id,submission_time,duration\nx,1,2\n")
    code, out = _run("replay", "--trace", str(path))
    assert code == 2
    assert "looks like the 'itp' format" in out
    assert "lacks column(s) ['num_gpu']" in out
    assert "it needs job_id, submission_time, duration, num_gpu" in out


@pytest.mark.parametrize("command", ["replay", "compare"])
def test_header_only_trace_is_an_error_not_a_table_of_dashes(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / "h.csv"
    path.write_text("job_id,submit_time_s,duration_s,gpus\n")
    code, out = _run(command, "--trace", str(path), "--training-servers", "1")
    assert code == 2
    assert "line 2: no jobs: the file has a header but no data rows" in out
    assert "│" not in out  # no table printed


def test_window_that_keeps_no_job_is_an_error(tmp_path: Path) -> None:
    code, out = _run("replay", "--trace", "itp-c10", "--window", "0,1")
    assert code == 2
    # itp-c10 has 260 jobs, all submitted at or after 1 s
    assert "nothing to replay in itp-c10: the window [0, 1) keeps none of its jobs" in out
    assert "(0 before, 260 after)" in out


def test_every_row_dropped_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("job_id,submit_time_s,duration_s,gpus\na,0,10,0\nb,1,10,0.5\n")
    code, out = _run("replay", "--trace", str(path), "--drop-invalid")
    assert code == 2
    assert "dropped 2 invalid row(s) (not_an_integer: 1, zero_gpus: 1)" in out
    assert "all 2 rows were dropped" in out


def _pods(tmp_path: Path) -> Path:
    rows = [
        "ok1,1000,100,1,1000,,LS,Running,0,100,10",
        "p1,1000,100,1,1000,,BE,Pending,5,50,",          # never started: line 3
        "p2,1000,100,1,1000,,BE,Pending,6,60,",
        "cpu,1000,100,0,0,,BE,Running,7,70,8",           # CPU-only: always dropped
        "zero,1000,100,1,1000,,LS,Failed,8,20,20",       # deleted when scheduled: zero
        "p3,1000,100,1,1000,,BE,Pending,9,90,",
        "ok2,1000,100,2,1000,,LS,Running,10,300,12",
    ]
    path = tmp_path / "pods.csv"
    path.write_text(POD_HEADER + "\n".join(rows) + "\n")
    return path


def test_rows_that_cannot_be_replayed_are_counted_by_kind_with_the_flag(
    tmp_path: Path,
) -> None:
    path = _pods(tmp_path)
    code, out = _run("replay", "--trace", str(path), "--training-servers", "1")
    assert code == 2
    # the earliest bad row is line 3 (header = line 1); 3 pending + 1 zero-duration of 7 rows
    assert f"{path}, line 3, column 'scheduled_time': blank cell [missing_value]" in out
    assert ("4 of 7 rows cannot be used, by kind: missing_value 3 (scheduled_time 3); "
            "zero_duration 1 (deletion_time 1)") in out
    assert "--drop-invalid drops them (counted by kind)" in out
    # the same file with the flag replays the 2 good pods
    code, out = _run("replay", "--trace", str(path), "--training-servers", "1",
                     "--drop-invalid", "--policy", "fifo")
    assert code == 0, out
    assert "dropped 5 invalid row(s) (missing_value: 3, zero_duration: 1, cpu_only: 1)" in out
    assert "2 jobs on 1 training" in out


def test_trace_commands_name_the_flag_too(tmp_path: Path) -> None:
    code, out = _run("trace", "convert", str(_pods(tmp_path)), str(tmp_path / "o.csv"))
    assert code == 2
    assert "4 of 7 rows cannot be used" in out
    assert "--drop-invalid drops them" in out


@pytest.mark.skipif(not ALIBABA_2023.is_file(), reason="Alibaba 2023 pod list not present")
def test_alibaba_2023_pods_that_never_started() -> None:
    code, out = _run("replay", "--trace", str(ALIBABA_2023))
    assert code == 2
    assert "line 63, column 'scheduled_time': blank cell [missing_value]" in out
    # 861 of the 8,152 pods have a GPU and a blank scheduled_time (counted with the csv
    # module: rows with num_gpu != '0' and scheduled_time == ''; the 1,088 CPU-only pods
    # are always dropped, so they are not in the count)
    assert "861 of 8,152 rows cannot be used, by kind: missing_value 861 (scheduled_time 861)" \
        in out
    assert "--drop-invalid" in out
