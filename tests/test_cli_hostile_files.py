"""Every command x every input-file option x hostile files: exit 2, the file named, no traceback.

Kinds of file: bytes that are not UTF-8 (and not any format aryl reads), an
empty file, a folder where a file is expected, a missing path.  Each must give
``Error: ...`` naming the file (its path or name) with exit status 2 (an
input error, as click's usage errors), never a Python traceback, and must
write nothing.  ``aryl trace convert --drop-invalid`` that would write a trace
with no job is refused the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from aryl.cli import main

HOSTILE = b"\xff\xfe\x00\x81 not text \xc3\x28\n\x80\x80,\xff\n"

KINDS: dict[str, Callable[[Path], Path]] = {}


def _kind(name: str) -> Callable[[Callable[[Path], Path]], Callable[[Path], Path]]:
    def deco(fn: Callable[[Path], Path]) -> Callable[[Path], Path]:
        KINDS[name] = fn
        return fn
    return deco


@_kind("non-utf8")
def _bytes(d: Path) -> Path:
    p = d / "input.bin"
    p.write_bytes(HOSTILE)
    return p


@_kind("empty")
def _empty(d: Path) -> Path:
    p = d / "input.empty"
    p.write_bytes(b"")
    return p


@_kind("folder")
def _folder(d: Path) -> Path:
    p = d / "input.dir"
    p.mkdir()
    return p


@_kind("missing")
def _missing(d: Path) -> Path:
    return d / "input.missing"


def _trace(d: Path) -> Path:
    p = d / "ok.csv"
    p.write_text("job_id,submit_time_s,duration_s,gpus\na,0,100,1\nb,10,50,2\n")
    return p


def _pods(d: Path) -> Path:
    p = d / "openb_pod_list_default.csv"
    p.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\npod-0,12000,16384,1,1000,,LS,Running,0,500,20\n")
    return p


_SMALL = ["--training-servers", "2", "--inference-servers", "2", "--no-progress"]

#: (command, option) -> argv builder taking (the hostile path, a scratch folder)
CASES: dict[str, Callable[[Path, Path], list[str]]] = {
    "replay --trace": lambda f, d: ["replay", "--trace", str(f), *_SMALL, "--inference", "none"],
    "replay --config": lambda f, d: ["replay", "--trace", str(_trace(d)), "--config", str(f),
                                     *_SMALL],
    "replay --cluster": lambda f, d: ["replay", "--trace", str(_trace(d)), "--cluster", str(f)],
    "replay --inference": lambda f, d: ["replay", "--trace", str(_trace(d)), "--inference",
                                        str(f), *_SMALL],
    "compare --trace": lambda f, d: ["compare", "--trace", str(f), *_SMALL, "--inference",
                                     "none"],
    "compare --config": lambda f, d: ["compare", "--trace", str(_trace(d)), "--config", str(f),
                                      *_SMALL],
    "compare --cluster": lambda f, d: ["compare", "--trace", str(_trace(d)), "--cluster", str(f)],
    "compare --inference": lambda f, d: ["compare", "--trace", str(_trace(d)), "--inference",
                                         str(f), *_SMALL],
    "trace inspect TRACE": lambda f, d: ["trace", "inspect", str(f)],
    "trace inspect --node-list": lambda f, d: ["trace", "inspect", str(_pods(d)),
                                               "--node-list", str(f)],
    "trace convert SRC": lambda f, d: ["trace", "convert", str(f), str(d / "out.csv")],
    "sweep run SPEC": lambda f, d: ["sweep", "run", str(f), "--out", str(d / "sw")],
    "sweep SPEC": lambda f, d: ["sweep", str(f), "--out", str(d / "sw")],
    "sweep run SPEC --dry-run": lambda f, d: ["sweep", "run", str(f), "--out", str(d / "sw"),
                                              "--dry-run"],
    "experiment paper --spec": lambda f, d: ["experiment", "paper", "--spec", str(f), "--out",
                                             str(d / "res")],
    "experiment paper --philly": lambda f, d: ["experiment", "paper", "--quick", "--philly",
                                               str(f), "--out", str(d / "res")],
    "experiment paper --config": lambda f, d: ["experiment", "paper", "--quick", "--config",
                                               str(f), "--out", str(d / "res")],
    "plan STATE.json": lambda f, d: ["plan", str(f)],
    "solve FILE": lambda f, d: ["solve", str(f), "--capacity", "4"],
}

#: A file that is not a folder, where a folder is expected: the folder kinds differ.
FOLDER_CASES: dict[str, Callable[[Path, Path], list[str]]] = {
    "sweep report SWEEP_DIR": lambda f, d: ["sweep", "report", str(f)],
}


def _assert_refused(argv: list[str], f: Path, d: Path) -> None:
    before = sorted(p.name for p in d.iterdir())
    r = CliRunner().invoke(main, argv)
    out = r.output
    assert r.exit_code == 2, (argv, out, r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit), (argv, r.exception)
    assert "Traceback" not in out, out
    assert "Error" in out, out
    assert f.name in out, (argv, out)  # the message names the file
    inputs = {"ok.csv", "openb_pod_list_default.csv"}
    after = sorted(p.name for p in d.iterdir() if p.name not in inputs)
    assert after == [n for n in before if n not in inputs], (argv, after)  # nothing written


#: An empty --config is valid TOML that sets nothing (the defaults run; see below).
_VALID = {("replay --config", "empty"), ("compare --config", "empty"),
          ("experiment paper --config", "empty")}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_input_file_exits_2_naming_it(case: str, kind: str, tmp_path: Path) -> None:
    if (case, kind) in _VALID:
        pytest.skip("an empty TOML file is a valid configuration that sets nothing")
    f = KINDS[kind](tmp_path)
    _assert_refused(CASES[case](f, tmp_path), f, tmp_path)


@pytest.mark.parametrize("kind", ["non-utf8", "empty", "missing"])
@pytest.mark.parametrize("case", sorted(FOLDER_CASES))
def test_hostile_input_folder_exits_2_naming_it(case: str, kind: str, tmp_path: Path) -> None:
    f = KINDS[kind](tmp_path)
    _assert_refused(FOLDER_CASES[case](f, tmp_path), f, tmp_path)


def test_empty_folder_is_not_a_sweep(tmp_path: Path) -> None:
    f = tmp_path / "sweep.dir"
    f.mkdir()
    _assert_refused(["sweep", "report", str(f)], f, tmp_path)


def test_plan_stdin_not_utf8_exits_2() -> None:
    r = CliRunner().invoke(main, ["plan", "-"], input=HOSTILE)
    assert r.exit_code == 2, r.output
    assert "standard input: not UTF-8 text (byte 0xff at line 1)" in r.output
    assert "Traceback" not in r.output


def test_config_not_utf8_names_the_byte_and_line(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_bytes(b"[sim]\nseed = 1\n# caf\xe9\n")
    r = CliRunner().invoke(main, ["replay", "--trace", str(_trace(tmp_path)), "--config",
                                  str(cfg), *_SMALL])
    assert r.exit_code == 2, r.output
    # 0xe9 (Latin-1 e-acute) is the first byte that is not UTF-8, on line 3
    assert f"--config: {cfg}: not UTF-8 text (byte 0xe9 at line 3)" in r.output


def test_convert_refuses_to_write_a_trace_with_no_job(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    # both rows invalid: a negative duration and a missing GPU count
    src.write_text("job_id,submit_time_s,duration_s,gpus\na,0,-5,1\nb,10,50,\n")
    out = tmp_path / "o.csv"
    r = CliRunner().invoke(main, ["trace", "convert", str(src), str(out), "--drop-invalid"])
    assert r.exit_code == 2, r.output
    assert "nothing to write" in r.output
    assert "all 2 rows were dropped" in r.output
    assert not out.exists()
    # the same trace with one good row is written (1 job)
    src.write_text("job_id,submit_time_s,duration_s,gpus\na,0,-5,1\nb,10,50,2\n")
    r = CliRunner().invoke(main, ["trace", "convert", str(src), str(out), "--drop-invalid"])
    assert r.exit_code == 0, r.output
    assert "1 jobs" in r.output
    assert out.read_text().count("\n") == 2  # header + one job


def test_an_empty_config_file_sets_nothing(tmp_path: Path) -> None:
    cfg = tmp_path / "empty.toml"
    cfg.write_bytes(b"")
    r = CliRunner().invoke(main, ["replay", "--trace", str(_trace(tmp_path)), "--config",
                                  str(cfg), *_SMALL, "--show-config"])
    assert r.exit_code == 0, r.output
    r0 = CliRunner().invoke(main, ["replay", "--trace", str(_trace(tmp_path)), *_SMALL,
                                   "--show-config"])
    # the effective configuration is the one without --config (every value from defaults)
    assert r.stdout == r0.stdout
