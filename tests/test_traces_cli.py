"""``aryl trace inspect`` and ``aryl trace convert``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from aryl.cli import main
from aryl.traces import load_trace

ITP = "job_id,submission_time,duration,num_gpu\na,0,3600,1\nb,1800,3600,2\nc,3600,x,4\n"


def test_inspect(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(ITP)
    runner = CliRunner()
    result = runner.invoke(main, ["trace", "inspect", str(path)])
    assert result.exit_code == 2
    assert f"Error: {path}, line 4, column 'duration': not a finite number (got 'x') " \
        "[not_a_number]" in result.output
    result = runner.invoke(main, ["trace", "inspect", str(path), "--drop-invalid", "--bins", "2"])
    assert result.exit_code == 0, result.output
    assert "not_a_number" in result.output
    assert "GPU sizes" in result.output
    # jobs a (1 GPU, 0..3600) and b (2 GPUs from 1800): 3 GPU-hours over a 1,800 s span
    # is 3 * 3600 / 1800 = 6 GPUs of work submitted per second of span; bins [0, 900) and
    # [900, 1800) hold job a only (b starts at 1,800): 1.0 GPU each, so the mean offered
    # load (the table's mean) is 1.0; 3 - 0.5 = 2.5 GPU-hours run after the last submit
    out = result.output
    assert re.search(r"GPU-hours\s+│ 3\s+│", out), out
    assert re.search(r"mean offered load\s+│ 1\.0 GPUs \(the mean of the offered-load", out)
    assert re.search(r"work submitted / span\s+│ 6\.0 GPUs \(also counts the 2\.5 GPU-hours", out)
    assert re.search(r"│\s+0 │\s+900 │\s+1\.0 │", out), out
    assert re.search(r"│\s+900 │\s+1,800 │\s+1\.0 │", out), out
    assert re.search(r"│ not_a_number │\s+1 │", out), out


def test_convert_writes_canonical_with_meta(tmp_path: Path) -> None:
    out = tmp_path / "c10.csv"
    result = CliRunner().invoke(main, ["trace", "convert", "itp-c10", str(out),
                                       "--elastic-fraction", "0.5", "--seed", "7"])
    assert result.exit_code == 0, result.output
    trace = load_trace(out)
    assert trace.n_jobs == 260
    assert int(trace.jobs["elastic"].sum()) == 130
    meta = json.loads((tmp_path / "c10.csv.meta.json").read_text())
    assert meta["elastic_synthesis"]["seed"] == 7
    assert trace.meta["elastic_synthesis"]["seed"] == 7
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_convert_refuses_an_unknown_suffix_before_reading(tmp_path: Path) -> None:
    # the source does not exist: the OUT suffix is reported first, named as OUT (it was
    # reported after reading the whole trace, as "path: ...")
    r = CliRunner().invoke(main, ["trace", "convert", str(tmp_path / "missing.csv"),
                                  str(tmp_path / "jobs.xyz")])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Error: OUT: cannot tell the output format of ")
    assert "does not exist" not in r.output
    assert not (tmp_path / "jobs.xyz").exists()
    path = tmp_path / "t.csv"
    path.write_text(ITP)
    r = CliRunner().invoke(main, ["trace", "convert", str(path), str(tmp_path / "J.CSV.GZ"),
                                  "--drop-invalid"])
    assert r.exit_code == 0, r.output  # the suffix in any case, as write_trace reads it
    assert load_trace(tmp_path / "J.CSV.GZ").jobs["job_id"].tolist() == ["a", "b"]
