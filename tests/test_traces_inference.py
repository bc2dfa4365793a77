"""Inference demand: bundled profile, synthetic diurnal curve, CSV."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from aryl.errors import InvalidInputError, TraceFormatError
from aryl.traces.inference import bundled_profile, load_inference


def test_bundled_profile_shape() -> None:
    prof = bundled_profile()
    assert len(prof) == 48
    assert prof["offset_s"].tolist() == [1800.0 * k for k in range(48)]
    assert prof["load"].max() == 1.0
    assert prof["load"].min() >= 0.0


def test_bundled_tiles_the_day_profile() -> None:
    prof = bundled_profile()["load"].to_numpy()
    d = load_inference("bundled", n_servers=40, span_s=2 * 86400 + 1, start_s=1000.0,
                       peak_utilisation=0.5)
    assert len(d.times_s) == 97  # ceil((2 days + 1 s) / 1800 s)
    assert d.times_s[0] == 1000.0
    assert d.times_s[1] - d.times_s[0] == 1800.0
    expected = [math.ceil(round(40 * 0.5 * x, 9)) for x in prof]
    assert d.servers_needed[:48].tolist() == expected
    assert d.servers_needed[48:96].tolist() == expected
    assert d.servers_needed.max() == 20
    assert d.servers_needed.dtype == np.int64
    assert d.servers_needed_at(1000.0 + 1800.0 * 13 + 5) == expected[13]
    assert d.servers_needed_at(0.0) == expected[0]  # before the first step
    # step 0 holds on [1000, 2800), step 1 from 2800
    at = d.servers_needed_at(np.array([1000.0, 2799.0, 2800.0]))
    assert at.tolist() == [expected[0], expected[0], expected[1]]


def test_diurnal_formula_without_noise() -> None:
    d = load_inference("diurnal", n_servers=100, span_s=86400, step_s=3600,
                       peak_utilisation=1.0, noise_sigma=0.0, trough_fraction=0.2,
                       trough_time_s=4 * 3600)
    hours = np.arange(24) + 0.5
    load = 0.2 + 0.8 * 0.5 * (1 - np.cos(2 * np.pi * (hours - 4) / 24))
    assert d.servers_needed.tolist() == [math.ceil(round(100 * x, 9)) for x in load]
    assert int(np.argmax(d.servers_needed)) in (15, 16)  # peak 12 h after the 04:00 trough


def test_diurnal_noise_is_seeded() -> None:
    a = load_inference("diurnal", n_servers=50, span_s=86400, step_s=600, seed=1)
    b = load_inference("diurnal", n_servers=50, span_s=86400, step_s=600, seed=1)
    c = load_inference("diurnal", n_servers=50, span_s=86400, step_s=600, seed=2)
    assert a.servers_needed.tolist() == b.servers_needed.tolist()
    assert a.servers_needed.tolist() != c.servers_needed.tolist()
    assert a.meta["seed"] == 1
    assert (a.servers_needed >= 0).all()
    assert (a.servers_needed <= 50).all()


def test_csv_demand(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("time_s,servers_needed\n0,3\n600,5\n1200,0\n")
    d = load_inference(path, n_servers=8, span_s=1)
    assert d.times_s.tolist() == [0.0, 600.0, 1200.0]
    assert d.servers_needed.tolist() == [3, 5, 0]
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,servers_needed\n0,3\n600,9\n")
    with pytest.raises(TraceFormatError) as err:
        load_inference(bad, n_servers=8, span_s=1)
    assert (err.value.line, err.value.column) == (3, "servers_needed")
    bad.write_text("time_s,servers_needed\n0,3\n0,2\n")
    with pytest.raises(TraceFormatError) as err:
        load_inference(bad, n_servers=8, span_s=1)
    assert (err.value.line, err.value.column) == (3, "time_s")
    bad.write_text("time_s,servers_needed\n0,\n")
    with pytest.raises(TraceFormatError, match="blank"):
        load_inference(bad, n_servers=8, span_s=1)


@pytest.mark.parametrize(("rows", "line", "column", "kind"), [
    ("0,3\n10,2\n5,1\n", 4, "time_s", "not_increasing"),  # 5 after 10
    ("0,3\n10,-1\n", 3, "servers_needed", "negative_count"),
])
def test_csv_demand_errors_name_their_own_kind(
        tmp_path: Path, rows: str, line: int, column: str, kind: str) -> None:
    # a time out of order was reported as [not_a_number] (of the value 5.0) and a
    # negative count as [zero_gpus]
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,servers_needed\n" + rows)
    with pytest.raises(TraceFormatError) as err:
        load_inference(bad, n_servers=8, span_s=1)
    assert (err.value.line, err.value.column) == (line, column)
    assert f"[{kind}]" in str(err.value)
    assert "not_a_number" not in str(err.value)
    assert "zero_gpus" not in str(err.value)


def test_bad_arguments() -> None:
    with pytest.raises(InvalidInputError, match="spec"):
        load_inference("nope", n_servers=1, span_s=10)
    with pytest.raises(InvalidInputError, match="peak_utilisation"):
        load_inference(n_servers=1, span_s=10, peak_utilisation=0.0)
    with pytest.raises(InvalidInputError, match="span_s"):
        load_inference(n_servers=1, span_s=0)
