"""Output folders are all-or-nothing; unwritable outputs are refused before any work.

Interrupts are real: the CLI runs in a subprocess in its own session (its own
process group, as a shell runs a foreground job) and the whole group gets
SIGINT, as Ctrl-C in a terminal sends it, at several points: during the
replay, after the first file of the new run appears, after half of them, and
once the new manifest is written (just before the swap).  To make those points
reachable under any load, the subprocess runs the real CLI with every atomic
file write followed by a wait for the test's go-ahead, given only while the
point is not reached (nothing else is changed).  After each interrupt the
folder must be exactly the previous run (byte for byte) or exactly the new
one, the exit status 130 with a message, no temporary folder left, and the
same command must then run to completion.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

#: The subprocess: the real CLI, every atomic write followed by a sleep of
#: ``argv[1]`` seconds, or, with a handshake folder in ``argv[2]``, by a wait for
#: the test's go-ahead (``ack-N`` after ``wrote-N``; at most 60 s), so that an
#: interrupt lands between two writes however loaded the machine is.
SLOW_CLI = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import aryl._io as io
    _orig = io.atomic_write_bytes
    _delay_s = float(sys.argv[1])
    _hs = None if sys.argv[2] == "-" else Path(sys.argv[2])
    _n = [0]
    def _slow(path, data):
        out = _orig(path, data)
        if _hs is None:
            time.sleep(_delay_s)
            return out
        _n[0] += 1
        (_hs / f"wrote-{_n[0]}").touch()
        ack, deadline = _hs / f"ack-{_n[0]}", time.monotonic() + 60
        while not ack.exists() and time.monotonic() < deadline:
            time.sleep(0.002)
        return out
    io.atomic_write_bytes = _slow
    from aryl.cli import main
    sys.argv = ["aryl", *sys.argv[3:]]
    main()
""")


def _trace(d: Path, n: int = 60) -> Path:
    p = d / "t.csv"
    rows = [{"job_id": f"j{i}", "submit_time_s": 40.0 * i, "duration_s": 500.0 + 31 * (i % 9),
             "gpus": [1, 2, 4, 8][i % 4]} for i in range(n)]
    pd.DataFrame(rows).to_csv(p, index=False)
    return p


def _args(cmd: str, trace: Path, out: Path, seed: int) -> list[str]:
    policy = ["--policy", "fifo"] if cmd == "replay" else ["--policies", "fifo,sjf,tiresias"]
    return [cmd, *policy, "--trace", str(trace), "--training-servers", "2",
            "--inference-servers", "2", "--inference", "none", "--seed", str(seed),
            "--out", str(out), "--no-progress"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _without_timing(snap: dict[str, bytes]) -> dict[str, bytes]:
    # wall-clock measures differ run to run (timing.json); every other file is the same
    return {k: v for k, v in snap.items() if not k.endswith("timing.json")}


def _start(args: list[str], cwd: Path, delay_s: float,
           handshake: Path | None = None) -> subprocess.Popen[bytes]:
    log = open(cwd / "output.txt", "wb")  # noqa: SIM115 - the child keeps its own copy
    try:
        return subprocess.Popen([sys.executable, "-c", SLOW_CLI, str(delay_s),
                                 str(handshake or "-"), *args], cwd=cwd,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()


def _wait(pred: object, proc: subprocess.Popen[bytes], timeout_s: float = 60,
          handshake: Path | None = None) -> bool:
    """Wait until ``pred()``; False if the process ended first.

    With ``handshake`` (the child started with it), each write of the child waits
    until ``pred()`` has been checked after it: the child is let go on
    (``ack-N``) only while ``pred()`` is false, so it stays between two writes
    once the point is reached.
    """
    deadline, n = time.monotonic() + timeout_s, 0
    while not pred():  # type: ignore[operator]
        if handshake is not None and (handshake / f"wrote-{n + 1}").exists():
            n += 1
            if pred():  # type: ignore[operator]
                break
            (handshake / f"ack-{n}").touch()
            continue
        if proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.002)
    return True


def _ctrl_c(proc: subprocess.Popen[bytes]) -> int:
    os.killpg(proc.pid, signal.SIGINT)  # the whole group, as a terminal's Ctrl-C
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError("no exit within 30 s of SIGINT") from None


def _tmp_files(parent: Path, name: str) -> list[Path]:
    return [p for t in parent.glob(f".{name}.*.tmp") for p in t.rglob("*") if p.is_file()]


def _point(where: str, parent: Path, name: str, n_files: int) -> object:
    if where == "replay":  # nothing of the new run written yet
        return lambda: (parent / "output.txt").read_bytes().count(b"jobs on") >= 1
    if where == "first file":
        return lambda: len(_tmp_files(parent, name)) >= 1
    if where == "half":
        return lambda: len(_tmp_files(parent, name)) >= n_files // 2
    if where == "manifest":
        return lambda: any(p.name == "manifest.json" for p in _tmp_files(parent, name))
    raise AssertionError(where)


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="needs POSIX process groups")
@pytest.mark.parametrize("where", ["replay", "first file", "half", "manifest"])
@pytest.mark.parametrize("cmd", ["replay", "compare"])
def test_ctrl_c_leaves_the_old_run_or_the_new_one(cmd: str, where: str, tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    out = tmp_path / "D"
    # the old run (seed 1) and, as a reference, the new one (seed 2) in another folder
    old = CliRunner().invoke(main, _args(cmd, trace, out, 1))
    assert old.exit_code == 0, old.output
    ref = tmp_path / "ref"
    r = CliRunner().invoke(main, _args(cmd, trace, ref, 2))
    assert r.exit_code == 0, r.output
    before, new = _snapshot(out), _snapshot(ref)
    assert _without_timing(before) != _without_timing(new)  # the two runs differ
    n_files = len(new)  # replay: 7 files; compare: 3 x 6 + compare.csv + manifest = 20

    hs = tmp_path / "handshake"
    hs.mkdir()
    proc = _start(_args(cmd, trace, out, 2), tmp_path, delay_s=0.0, handshake=hs)
    reached = _wait(_point(where, tmp_path, "D", n_files), proc, handshake=hs)
    code = _ctrl_c(proc) if reached else proc.wait()
    text = (tmp_path / "output.txt").read_text()
    after = _snapshot(out)
    if reached:
        assert code == 130, text
        assert "Interrupted." in text, text
        assert "Traceback" not in text, text
    if after == before:
        assert reached, text
        assert f"{out} is unchanged" in text, text
    else:  # the swap happened: the whole new run
        assert _without_timing(after) == _without_timing(new), sorted(after)
        assert sorted(after) == sorted(new)
    assert not list(tmp_path.glob(".D.*")), "a temporary folder was left"
    # the interrupt must land before the swap in these points (the handshake makes sure)
    assert after == before, (where, text)
    # a rerun works and gives the new run
    r = CliRunner().invoke(main, _args(cmd, trace, out, 2))
    assert r.exit_code == 0, r.output
    assert _without_timing(_snapshot(out)) == _without_timing(new)


def test_an_error_while_writing_leaves_the_old_run(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import aryl._io as io

    trace = _trace(tmp_path)
    out = tmp_path / "D"
    assert CliRunner().invoke(main, _args("compare", trace, out, 1)).exit_code == 0
    before = _snapshot(out)
    calls = {"n": 0}
    orig = io._atomic_file  # every file (text, CSV streamed, Parquet) is written through it

    def fail_on_the_eighth(path: object) -> Any:
        calls["n"] += 1
        if calls["n"] == 8:  # the second policy's folder, half written
            raise OSError(28, "No space left on device")
        return orig(path)  # type: ignore[arg-type]

    monkeypatch.setattr(io, "_atomic_file", fail_on_the_eighth)
    r = CliRunner().invoke(main, _args("compare", trace, out, 2))
    assert r.exit_code != 0
    assert calls["n"] == 8
    assert _snapshot(out) == before
    assert not list(tmp_path.glob(".D.*"))


# ------------------------------------------------------------ unwritable outputs


def _file(tmp_path: Path) -> Path:
    f = tmp_path / "a-file"
    f.write_text("x")
    return f


#: command -> argv with the output location OUT (every writing command)
WRITERS = {
    "replay --out": lambda t, o: ["replay", "--trace", str(t), "--training-servers", "2",
                                  "--inference-servers", "2", "--out", str(o)],
    "compare --out": lambda t, o: ["compare", "--trace", str(t), "--training-servers", "2",
                                   "--inference-servers", "2", "--out", str(o)],
    "sweep run --out": lambda t, o: ["sweep", "run", str(_spec(t)), "--out", str(o)],
    "sweep report --out": lambda t, o: ["sweep", "report", str(t.parent), "--out", str(o)],
    "experiment paper --out": lambda t, o: ["experiment", "paper", "--quick", "--out", str(o)],
    "experiment paper --data": lambda t, o: ["experiment", "paper", "--quick", "--data", str(o),
                                             "--out", str(t.parent / "res")],
    "trace convert OUT": lambda t, o: ["trace", "convert", str(t), str(o)],
    "plan --out": lambda t, o: ["plan", str(_state(t)), "--out", str(o)],
}
FILE_OUTPUTS = {"trace convert OUT", "plan --out"}


def _spec(t: Path) -> Path:
    p = t.parent / "s.toml"
    p.write_text(f"[grid]\ntrace = '{t}'\npolicy = 'fifo'\nn_training_servers = 2\n"
                 "n_inference_servers = 2\n")
    return p


def _state(t: Path) -> Path:
    p = t.parent / "state.json"
    p.write_text(json.dumps({"now_s": 0, "servers": [{"id": "s0", "gpus": 8}], "jobs": []}))
    return p


def _refused(case: str, out: Path, tmp_path: Path, *why: str) -> None:
    """Exit 2 with one of the reasons ``why`` (click's own path check words some)."""
    trace = _trace(tmp_path, 8)
    r = CliRunner().invoke(main, WRITERS[case](trace, out))
    assert r.exit_code == 2, (case, r.output)
    assert "Traceback" not in r.output
    assert any(w in r.output for w in why), (case, r.output)
    assert str(out) in r.output.replace("\n", ""), (case, r.output)
    # refused before the work: no replay table, no sweep progress
    assert "aryl replay: policy" not in r.output
    assert "runs done" not in r.output


@pytest.mark.parametrize("case", sorted(WRITERS))
def test_a_path_under_a_file_is_refused_before_any_work(case: str, tmp_path: Path) -> None:
    f = _file(tmp_path)
    _refused(case, f / "sub" / "out", tmp_path, f"{str(f)!r} is a file")


@pytest.mark.parametrize("case", sorted(WRITERS))
def test_a_file_or_folder_in_the_way_is_refused(case: str, tmp_path: Path) -> None:
    if case in FILE_OUTPUTS:
        d = tmp_path / "a-folder"
        d.mkdir()
        _refused(case, d, tmp_path, "is a folder, not a file", "is a directory.")
    else:
        _refused(case, _file(tmp_path), tmp_path, "exists and is not a folder", "is a file.")


@pytest.mark.skipif(IS_ROOT, reason="root writes into read-only folders; the probe is "
                    "covered by the read-only-file-system case below")
@pytest.mark.parametrize("case", sorted(WRITERS))
def test_a_read_only_folder_is_refused(case: str, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        _refused(case, ro / "out", tmp_path, "Permission denied")
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("case", sorted(WRITERS))
def test_a_location_where_no_file_can_be_created_is_refused(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what a read-only file system does even for root: creating a file fails with EROFS
    import aryl._io as io

    real = io._create_file

    def erofs(path: Path) -> int:
        if path.name.startswith(".aryl-write-probe-"):
            raise OSError(30, "Read-only file system")
        return real(path)

    monkeypatch.setattr(io, "_create_file", erofs)
    # a folder output may be new (its parents are made); a file goes into an existing folder
    out = tmp_path / "out" if case in FILE_OUTPUTS else tmp_path / "new" / "out"
    _refused(case, out, tmp_path, "Read-only file system")


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="needs POSIX process groups")
def test_ctrl_c_in_trace_convert_exits_130_and_writes_nothing(tmp_path: Path) -> None:
    trace = _trace(tmp_path, 200)
    out = tmp_path / "o.csv"
    # each write sleeps 60 s after its file is in place: the interrupt surely lands before
    # the command ends (it must end it at once); the file is whole, never torn
    proc = _start(["trace", "convert", str(trace), str(out)], tmp_path, 60.0)
    assert _wait(lambda: out.exists(), proc)
    code = _ctrl_c(proc)
    text = (tmp_path / "output.txt").read_text()
    assert code == 130, text
    assert "Interrupted." in text
    assert "Traceback" not in text
    assert "Aborted" not in text
    assert len(pd.read_csv(out)) == 200
    assert not list(tmp_path.glob(".o.csv.*"))  # no temporary file left


@pytest.mark.parametrize("case", sorted(FILE_OUTPUTS))
def test_a_file_output_in_a_missing_folder_is_refused_before_any_work(
    case: str, tmp_path: Path
) -> None:
    _refused(case, tmp_path / "no" / "such" / "o.csv", tmp_path,
             f"folder {str(tmp_path / 'no' / 'such')!r} does not exist")


@pytest.mark.parametrize("case", sorted(set(WRITERS) - FILE_OUTPUTS - {"sweep run --out",
                                                                        "experiment paper --data"}))
def test_a_folder_aryl_did_not_write_is_refused_naming_the_option(case: str,
                                                                   tmp_path: Path) -> None:
    # these commands replace their folder as a whole: never one with files of someone else
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("x")
    trace = _trace(tmp_path, 8)
    r = CliRunner().invoke(main, WRITERS[case](trace, mine))
    assert r.exit_code == 2, r.output
    assert r.output.replace("\n", "").startswith(
        f"Error: --out: {str(mine)!r} is a non-empty folder that aryl did not write"), r.output
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_a_csv_trace_never_takes_the_meta_of_an_earlier_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # a CSV trace is two files (data, then <name>.meta.json); an interrupt between the
    # two writes leaves the new data beside the old sidecar, which must then be ignored
    import aryl.traces.loader as loader
    from aryl.traces import load_trace, synthesize_elastic, write_trace

    src = load_trace(str(_trace(tmp_path, 30)))
    out = tmp_path / "o.csv"
    write_trace(synthesize_elastic(src, elastic_fraction=0.5, seed=7), out)
    assert load_trace(out).meta["elastic_synthesis"]["seed"] == 7

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(loader, "atomic_write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_trace(src, out)  # the data of a trace without elastic synthesis
    monkeypatch.undo()
    back = load_trace(out)
    assert "elastic_synthesis" not in back.meta  # not the seed-7 synthesis of the old one
    assert "elastic" not in back.jobs.columns
    assert "written for other data" in caplog.text
    # a whole write is read back with its meta
    write_trace(synthesize_elastic(src, elastic_fraction=0.5, seed=3), out)
    assert load_trace(out).meta["elastic_synthesis"]["seed"] == 3


def test_an_interrupt_as_a_temporary_is_created_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C landing right after the OS made the temporary file or folder, before the
    # call that made it returns: the writer knew the name before, so it is removed
    # (tempfile.mkstemp / mkdtemp, used before, left it behind)
    import aryl._io as io

    real_create, real_mkdir = io._create_file, Path.mkdir

    def create_then_interrupt(path: Path) -> int:
        os.close(real_create(path))
        raise KeyboardInterrupt

    def mkdir_then_interrupt(self: Path, *args: object, **kwargs: object) -> None:
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if self.name.endswith(".tmp"):
            raise KeyboardInterrupt

    monkeypatch.setattr(io, "_create_file", create_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        io.atomic_write_bytes(tmp_path / "a.bin", b"x")
    assert sorted(tmp_path.iterdir()) == []
    monkeypatch.setattr(io, "_create_file", real_create)
    monkeypatch.setattr(Path, "mkdir", mkdir_then_interrupt)
    with pytest.raises(KeyboardInterrupt), io.atomic_directory(tmp_path / "D"):
        pass
    assert sorted(tmp_path.iterdir()) == []
    monkeypatch.setattr(Path, "mkdir", real_mkdir)
    # and the writers still write (the names are fresh, the modes those of open/mkdir)
    io.atomic_write_bytes(tmp_path / "a.bin", b"x")
    with io.atomic_directory(tmp_path / "D") as d:
        (d / "f").write_text("y")
    assert (tmp_path / "a.bin").read_bytes() == b"x"
    assert (tmp_path / "D" / "f").read_text() == "y"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D", "a.bin"]
