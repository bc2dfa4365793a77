"""Ctrl-C: a sweep or `aryl experiment paper` stops within 2 s, leaves no worker process,
keeps every finished run (and only whole runs), and never leaves a mix of two outputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aryl.sweep import parse_spec, read_jobs, read_runs, run_sweep
from aryl.sweep.store import finished_keys

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_helpers import alive, aryl_command, descendants, interrupt, output_of, start, wait_for

sys.path.pop(0)

#: The brief's bound from SIGINT to exit.
EXIT_WITHIN_S = 2.0

SPEC = """
[grid]
trace = "itp-c10"
policy = ["fifo", "aryl"]
seed = [{seeds}]
n_training_servers = 2
n_inference_servers = 2
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("twice", [False, True], ids=["once", "twice"])
def test_ctrl_c_stops_a_sweep_keeps_finished_runs_and_resumes(tmp_path: Path,
                                                               twice: bool) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(seeds=", ".join(str(i) for i in range(40))))
    out = tmp_path / "out"
    proc = start(["sweep", str(spec), "--out", str(out), "-j", "2"], tmp_path)
    wait_for(lambda: len(finished_keys(out)) >= 3 or proc.poll() is not None, 120,
             "three finished runs")
    assert proc.poll() is None, output_of(tmp_path)
    wait_for(lambda: len(descendants(proc.pid)) >= 2, 10, "the pool's workers")
    elapsed, kids = interrupt(proc, twice=twice)
    output = output_of(tmp_path)
    assert elapsed < EXIT_WITHIN_S, (elapsed, output)
    # 130 = exit(128 + SIGINT); -SIGINT when the second Ctrl-C lands during interpreter
    # teardown (Python restores the default handler then): shells show both as 130
    assert proc.returncode in ((130, -signal.SIGINT) if twice else (130,)), output
    assert "Interrupted." in output
    # the console wraps the line at its width wherever the path ends (words kept whole)
    assert "run the same command again to resume" in " ".join(output.split())
    # no Python warning reaches the user (the resource tracker's "leaked semaphore")
    assert "leaked" not in output, output
    assert "Warning" not in output, output
    assert "Traceback" not in output, output
    assert kids, "the sweep ran no worker process"
    time.sleep(0.2)
    assert [k for k in kids if alive(k)] == [], "a worker process outlived the sweep"
    # every visible run is whole, nothing half-written is left
    done = finished_keys(out)
    assert 3 <= len(done) < 80
    assert len(read_runs(out)) == len(done)
    assert len(read_jobs(out, sorted(done))) == 260 * len(done)
    assert not list(out.rglob(".*.tmp"))
    if twice:
        return
    # the same spec resumes: only the unfinished runs run
    outcome = run_sweep(parse_spec({"grid": {
        "trace": "itp-c10", "policy": ["fifo", "aryl"], "seed": list(range(40)),
        "n_training_servers": 2, "n_inference_servers": 2}}), out, n_procs=2)
    assert (outcome.n_skipped, outcome.n_done, outcome.failures) == (len(done), 80 - len(done),
                                                                     [])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_ctrl_c_during_experiment_paper_leaves_the_previous_results(tmp_path: Path) -> None:
    out = tmp_path / "results"
    out.mkdir()
    previous = {"manifest.json": json.dumps({"command": "aryl experiment paper --quick"}),
                "results.md": "# the previous complete results\n",
                "headline.csv": "trace\nitp-c10\n"}
    for name, text in previous.items():
        (out / name).write_text(text)
    data = tmp_path / ".results.sweep"
    proc = start(["experiment", "paper", "--quick", "--out", str(out), "-j", "2",
                  "--reclaim-instances", "40"], tmp_path)
    wait_for(lambda: len(finished_keys(data)) >= 2 or proc.poll() is not None, 120,
             "two finished replays")
    assert proc.poll() is None, output_of(tmp_path)
    elapsed, kids = interrupt(proc)
    output = output_of(tmp_path)
    assert elapsed < EXIT_WITHIN_S, (elapsed, output)
    assert proc.returncode == 130, output
    assert "is unchanged" in " ".join(output.split()), output
    time.sleep(0.2)
    assert [k for k in kids if alive(k)] == []
    # the previous results, byte for byte, and nothing else beside them but the dataset
    assert {p.name: p.read_text() for p in out.iterdir()} == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == [".results.sweep", "output.txt",
                                                          "results"]
    assert len(finished_keys(data)) >= 2


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_ctrl_c_to_the_process_group_while_workers_start(tmp_path: Path) -> None:
    # A terminal's Ctrl-C reaches the whole process group, also a pool worker that is
    # still importing aryl (before its initializer ignores SIGINT): that worker used
    # to print a KeyboardInterrupt traceback under the driver's "Interrupted." line.
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(seeds="0, 1"))
    out = tmp_path / "out"
    with open(tmp_path / "output.txt", "w") as log:
        proc = subprocess.Popen([*aryl_command(), "sweep", str(spec), "--out", str(out),
                                 "-j", "2"],
                                cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, COLUMNS="120"), start_new_session=True)
    wait_for(lambda: len(descendants(proc.pid)) >= 1 or proc.poll() is not None, 60,
             "the first pool worker")
    time.sleep(0.5)  # the worker is past Python's start-up, importing aryl
    kids = descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError("the sweep did not exit within 30 s of SIGINT") from None
    output = output_of(tmp_path)
    assert kids, output
    assert proc.returncode == 130, output
    assert "Interrupted" in output, output
    assert "Traceback" not in output, output
    assert "KeyboardInterrupt" not in output, output
    time.sleep(0.2)
    assert [k for k in kids if alive(k)] == [], "a worker process outlived the sweep"
