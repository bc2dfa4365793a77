"""The bundled GPU speed table, the speed model and the family assignment (aryl.speeds)."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl.errors import InvalidInputError
from aryl.scheduling.state import ClusterState
from aryl.speeds import FAMILY_BUCKETS, REFERENCE_GPU_TYPE, SpeedTable, assign_families

REPO = Path(__file__).resolve().parent.parent
BUNDLED = REPO / "src" / "aryl" / "data" / "gpu_speeds.csv"
SIA = Path(os.environ.get("ARYL_SIA_PROFILES",
                          REPO.parent / "shared" / "traces" / "sia-profiles"))
needs_sia = pytest.mark.skipif(not (SIA / "bert").is_dir(), reason="Sia profiles not available")


def _bundled_rows() -> pd.DataFrame:
    return pd.read_csv(BUNDLED, comment="#")


def _raw(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _raw_step(model: str, suffix: str, bsz: int, replicas: int) -> float:
    """Fastest step time of any placement / scalability row with ``replicas`` replicas."""
    best = math.inf
    for row in _raw(SIA / model / f"placements-{suffix}.csv"):
        if int(row["local_bsz"]) == bsz and sum(int(c) for c in row["placement"]) == replicas:
            best = min(best, float(row["step_time"]))
    scal = SIA / model / f"scalability-{suffix}.csv"
    for row in _raw(scal):
        if int(float(row["local_bsz"])) == bsz and int(row["num_replicas"]) == replicas:
            best = min(best, float(row["step_time"]))
    return best


# --------------------------------------------------------------- against the raw profiles
@needs_sia
def test_relative_speeds_match_hand_picked_raw_rows() -> None:
    table = SpeedTable.bundled()
    # bert, local_bsz 11, placement "1": placements-azure.csv (V100) step 0.33023 s,
    # placements-aws.csv (T4) step 0.85528 s -> T4 = 0.33023 / 0.85528 = 0.386 of a V100
    v100 = next(float(r["step_time"]) for r in _raw(SIA / "bert" / "placements-azure.csv")
                if r["placement"] == "1" and r["local_bsz"] == "11")
    t4 = next(float(r["step_time"]) for r in _raw(SIA / "bert" / "placements-aws.csv")
              if r["placement"] == "1" and r["local_bsz"] == "11")
    assert table.relative_speed("bert", "T4") == pytest.approx(v100 / t4, rel=1e-5)
    assert 0.38 < v100 / t4 < 0.39
    # imagenet, local_bsz 163, placement "1": azure 0.31180 s, dgx (A100) 0.24205 s -> 1.288
    v100 = next(float(r["step_time"]) for r in _raw(SIA / "imagenet" / "placements-azure.csv")
                if r["placement"] == "1" and r["local_bsz"] == "163")
    a100 = next(float(r["step_time"]) for r in _raw(SIA / "imagenet" / "placements-dgx.csv")
                if r["placement"] == "1" and r["local_bsz"] == "163")
    assert table.relative_speed("imagenet", "A100") == pytest.approx(v100 / a100, rel=1e-5)
    assert 1.28 < v100 / a100 < 1.30


@needs_sia
def test_scaling_matches_the_fastest_raw_placement() -> None:
    table = SpeedTable.bundled()
    # bert on A100 at local_bsz 11: throughput(w) = w * 11 / fastest step time of any
    # w-replica row (placements "8", "17", "26", ... and scalability); S(w) = tput(w)/tput(1)
    tput = {w: w * 11 / _raw_step("bert", "dgx", 11, w) for w in (1, 2, 4, 8)}
    measured = {w: tput[w] / tput[1] for w in tput}
    assert 7.0 < measured[8] < 8.0
    envelope = 0.0
    for w in (1, 2, 4, 8):
        envelope = max(envelope, measured[w])  # running max, capped at linear
        assert table.scaling("bert", "A100", w) == pytest.approx(min(envelope, w), rel=1e-5)
    # imagenet on V100 at local_bsz 163, 16 replicas (best of "88", the 2-node scalability
    # row ...); the 8-GPU single-node run is slow (2.55x), the fastest 8-replica is "17"
    tput = {w: w * 163 / _raw_step("imagenet", "azure", 163, w) for w in (1, 8, 16)}
    rows = _bundled_rows().set_index(["family", "gpu_type", "replicas"])
    for w in (8, 16):
        assert rows.loc[("imagenet", "V100", w), "scaling_measured"] == pytest.approx(
            tput[w] / tput[1], rel=1e-5)


@needs_sia
def test_script_reproduces_the_bundled_file(tmp_path: Path) -> None:
    out = tmp_path / "gpu_speeds.csv"
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "make_gpu_profiles.py"),
                          str(SIA), str(out)], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes() == BUNDLED.read_bytes()


def test_script_rejects_a_folder_without_profiles(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "make_gpu_profiles.py"),
                          str(tmp_path)], capture_output=True, text=True, check=False)
    assert res.returncode == 2
    assert "lacks the model folders" in res.stderr


# --------------------------------------------------------------- the bundled table
def test_bundled_table_shape_and_reference() -> None:
    t = SpeedTable.bundled()
    assert t.families == ("bert", "cifar10", "deepspeech2", "imagenet", "yolov3")
    assert t.gpu_types == ("A100", "QuadroRTX6000", "RTX2080Ti", "T4", "V100")
    assert t.reference_gpu_type == REFERENCE_GPU_TYPE == "V100"
    rows = _bundled_rows()
    assert len(rows) <= 300
    for fam in t.families:
        assert t.relative_speed(fam, "V100") == 1.0
        for typ in t.gpu_types:
            one = rows[(rows.family == fam) & (rows.gpu_type == typ)]
            assert one.relative_speed.nunique() == 1
            assert t.relative_speed(fam, typ) == pytest.approx(float(one.relative_speed.iloc[0]))


def test_bundled_speeds_agree_with_hardware_facts_where_the_runs_are_gpu_bound() -> None:
    # T4 ~2-4x slower than a V100 for training; A100 ~1.5-3x faster (datasheets: 65 vs
    # 125 vs 312 dense fp16 tensor TFLOPS).  bert and cifar10 are GPU-bound at their
    # batch; deepspeech2 / yolov3 / imagenet are input-bound on A100 (documented).
    t = SpeedTable.bundled()
    for fam in ("bert", "cifar10", "deepspeech2", "imagenet"):
        assert 1 / 4 <= t.relative_speed(fam, "T4") <= 1 / 2
    for fam in ("bert", "cifar10"):
        assert 1.5 <= t.relative_speed(fam, "A100") <= 3.0


@pytest.mark.parametrize("extrapolation", ["doubling", "flat"])
def test_scaling_is_non_decreasing_and_at_most_linear(extrapolation: str) -> None:
    t = SpeedTable.from_csv(BUNDLED, extrapolation=extrapolation)  # type: ignore[arg-type]
    r = np.arange(0, 257, dtype=np.int64)
    for fam in t.families:
        for typ in t.gpu_types:
            s = t.scaling(fam, typ, r)
            assert s[0] == 0.0
            assert s[1] == 1.0
            assert np.all(np.diff(s) >= 0.0)
            assert np.all(s <= r)
            # the scalar path gives the same numbers
            assert [t.scaling(fam, typ, int(x)) for x in (1, 3, 5, 100)] == \
                [s[1], s[3], s[5], s[100]]


def test_interpolation_is_linear_in_log2_between_bundled_rows() -> None:
    t = SpeedTable.bundled()
    rows = _bundled_rows().set_index(["family", "gpu_type", "replicas"])["scaling"]
    s2, s4 = rows[("deepspeech2", "A100", 2)], rows[("deepspeech2", "A100", 4)]
    # S(3) = S(2) + (S(4) - S(2)) * (log2 3 - 1), below 3 here so no cap
    expect = s2 + (s4 - s2) * (math.log2(3) - 1)
    assert expect < 3
    assert t.scaling("deepspeech2", "A100", 3) == pytest.approx(expect, rel=1e-12)
    s8, s16 = rows[("yolov3", "T4", 8)], rows[("yolov3", "T4", 16)]
    assert t.scaling("yolov3", "T4", 12) == pytest.approx(
        s8 + (s16 - s8) * (math.log2(12) - 3), rel=1e-12)


def _curve_table(replicas: list[int], scaling: list[float], **kw: object) -> SpeedTable:
    return SpeedTable({("f", "V100"): 1.0, ("f", "T4"): 0.5},
                      {("f", "V100"): (replicas, scaling), ("f", "T4"): ([1], [1.0])},
                      **kw)  # type: ignore[arg-type]


def test_extrapolation_rules_by_hand() -> None:
    # r = 1, 2, 4 with S = 1, 1.8, 3.24: the last doubling gained 1.8x, so each further
    # doubling gains 1.8x: S(8) = 3.24 * 1.8 = 5.832, S(16) = 5.832 * 1.8 = 10.4976
    t = _curve_table([1, 2, 4], [1.0, 1.8, 3.24])
    assert t.scaling("f", "V100", 8) == pytest.approx(5.832, rel=1e-12)
    assert t.scaling("f", "V100", 16) == pytest.approx(10.4976, rel=1e-12)
    # between two profiled counts: S(3) = 1.8 + 1.44 * (log2 3 - 1)
    assert t.scaling("f", "V100", 3) == pytest.approx(1.8 + 1.44 * (math.log2(3) - 1))
    flat = _curve_table([1, 2, 4], [1.0, 1.8, 3.24], extrapolation="flat")
    assert flat.scaling("f", "V100", 16) == 3.24
    # a one-point curve stays at 1 beyond it
    assert t.scaling("f", "T4", 8) == 1.0
    # a linear curve: the log2 chord would give 2 + 2 (log2 3 - 1) = 3.17 > 3 at r = 3,
    # so the cap makes it exactly 3; beyond, linear stays linear
    lin = _curve_table([1, 2, 4], [1.0, 2.0, 4.0])
    assert lin.scaling("f", "V100", 3) == 3.0
    assert lin.scaling("f", "V100", 32) == pytest.approx(32.0, rel=1e-12)


def test_bundled_extrapolation_beyond_the_profiled_counts() -> None:
    # A100 is profiled up to 16 replicas: beta = log2(S(16) / S(8)) from the bundled rows
    t = SpeedTable.bundled()
    rows = _bundled_rows().set_index(["family", "gpu_type", "replicas"])["scaling"]
    s8, s16 = rows[("bert", "A100", 8)], rows[("bert", "A100", 16)]
    beta = math.log(s16 / s8) / math.log(2)
    assert t.max_profiled_replicas("bert", "A100") == 16
    for r in (32, 64, 100_000):  # 100,000 is past the look-up table
        assert t.scaling("bert", "A100", r) == pytest.approx(s16 * (r / 16) ** beta, rel=1e-12)
    flat = SpeedTable.from_csv(BUNDLED, extrapolation="flat")
    assert flat.scaling("bert", "A100", 100_000) == s16
    big = t.scaling("bert", "A100", np.array([16, 100_000]))
    assert big.tolist() == [s16, t.scaling("bert", "A100", 100_000)]


def test_throughput_and_speed_of_a_measured_table() -> None:
    t = SpeedTable.bundled()
    rows = _bundled_rows().set_index(["family", "gpu_type", "replicas"])
    # 2 workers x 2 GPUs of T4 running bert = 4 replicas: rel(T4) * S_T4(4)
    expect = rows.loc[("bert", "T4", 4), "relative_speed"] * rows.loc[("bert", "T4", 4),
                                                                        "scaling"]
    assert t.throughput("bert", "T4", 2, 2) == pytest.approx(expect, rel=1e-12)
    assert t.throughput("bert", "T4", 0, 2) == 0.0
    arr = t.throughput("bert", "T4", np.array([0, 1, 2]), 2)
    assert arr[2] == pytest.approx(expect, rel=1e-12)
    # speed = throughput ratio; 1 at the reference size on the reference type
    assert t.speed("imagenet", "V100", 8, 1, 8) == 1.0
    a100 = t.speed("imagenet", "A100", 8, 1, 8)
    assert a100 == pytest.approx(t.throughput("imagenet", "A100", 8, 1)
                                 / t.throughput("imagenet", "V100", 8, 1), rel=1e-12)
    assert t.speed("imagenet", "T4", 4, 1, 4, ref_gpu_type="T4") == 1.0


# --------------------------------------------------------------- parametric fallback
@settings(max_examples=300, deadline=None)
@given(alpha=st.floats(0.0, 1.0), w=st.integers(0, 256), g=st.integers(1, 8),
       factor=st.floats(0.1, 4.0))
def test_parametric_equals_the_formula(alpha: float, w: int, g: int, factor: float) -> None:
    t = SpeedTable.parametric(alpha=0.05, factors={"T4": factor})
    expect_t = w / (1.0 + alpha * (w - 1)) if w else 0.0
    assert t.scaling("anything", "A100", w, alpha=alpha) == expect_t
    assert t.throughput("anything", "A100", w, g, alpha=alpha) == g * expect_t
    assert t.throughput("x", "T4", w, g, alpha=alpha) == factor * g * expect_t
    assert t.relative_speed("x", "T4") == factor
    assert t.relative_speed("x", "V100") == 1.0
    arr = t.scaling("x", "T4", np.array([w, 1, 7]), alpha=alpha)
    assert arr[0] == expect_t
    # alpha 1 makes T(0)'s denominator 0: zero workers still give exactly 0
    assert t.scaling("x", "T4", np.array([0, 1, 2]), alpha=1.0).tolist() == [0.0, 1.0, 1.0]


@settings(max_examples=300, deadline=None)
@given(alpha=st.floats(0.0, 1.0), ref=st.integers(1, 64), w=st.integers(1, 128),
       g=st.integers(1, 8))
def test_parametric_speed_is_bit_identical_to_the_homogeneous_engine(
        alpha: float, ref: int, w: int, g: int) -> None:
    # "every speed ratio 1" must reproduce ClusterState.speed_at exactly (==, not approx)
    st_ = ClusterState()
    j = st_.add_job("j", arrival_s=0.0, gpus_per_worker=g, ref_workers=ref, remaining_s=100.0,
                    min_workers=1, max_workers=max(ref, w), elastic=True, alpha=alpha)
    t = SpeedTable.parametric(alpha=alpha)
    assert t.speed("f", "V100", w, g, ref) == st_.speed_at(j, w)
    assert t.speed("f", "T4", w, g, ref, ref_gpu_type="A100") == st_.speed_at(j, w)
    half = SpeedTable.parametric(alpha=alpha, factors={"T4": 0.5})
    assert half.speed("f", "T4", w, g, ref) == 0.5 * st_.speed_at(j, w)


# --------------------------------------------------------------- errors
def test_lookup_errors_name_the_argument() -> None:
    t = SpeedTable.bundled()
    with pytest.raises(InvalidInputError,
                       match=r"unknown model family 'berts'.*did you mean 'bert'"):
        t.relative_speed("berts", "V100")
    with pytest.raises(InvalidInputError, match=r"unknown gpu_type 'T40'.*did you mean 'T4'"):
        t.scaling("bert", "T40", 2)
    with pytest.raises(InvalidInputError, match="replicas: must be an integer >= 0"):
        t.scaling("bert", "T4", -1)
    with pytest.raises(InvalidInputError, match="replicas: must be integers"):
        t.scaling("bert", "T4", np.array([1.5]))
    with pytest.raises(InvalidInputError, match="gpus_per_worker: must be an integer >= 1"):
        t.throughput("bert", "T4", 1, 0)
    with pytest.raises(InvalidInputError, match="ref_workers"):
        t.speed("bert", "T4", 1, 1, 0)
    with pytest.raises(InvalidInputError, match=r"alpha: must be a number in \[0, 1\]"):
        SpeedTable.parametric(alpha=1.5)
    with pytest.raises(InvalidInputError, match=r"factors\['T4'\]"):
        SpeedTable.parametric(factors={"T4": 0.0})
    with pytest.raises(InvalidInputError, match=r"factors\['V100'\].*must be 1"):
        SpeedTable.parametric(factors={"V100": 2.0})
    with pytest.raises(InvalidInputError, match="no profiled replica counts"):
        SpeedTable.parametric().max_profiled_replicas("f", "V100")


@pytest.mark.parametrize(
    ("curve", "message"),
    [
        (([1, 2, 4], [1.0, 2.1, 3.0]), "above linear"),
        (([1, 2, 4], [1.0, 1.8, 1.7]), "non-decreasing"),
        (([1, 4, 2], [1.0, 1.8, 1.9]), "strictly increasing"),
        (([2, 4], [1.0, 1.8]), "must start at replicas 1"),
        (([1, 2], [1.0]), "equal length"),
        (([1, 2], [1.0, float("nan")]), "finite"),
    ],
)
def test_constructor_rejects_bad_curves_naming_the_pair(curve: tuple, message: str) -> None:
    with pytest.raises(InvalidInputError, match=rf"family 'f', gpu_type 'V100'.*{message}"):
        SpeedTable({("f", "V100"): 1.0}, {("f", "V100"): curve})


def test_constructor_needs_the_reference_type_at_speed_one() -> None:
    with pytest.raises(InvalidInputError, match="no row for the reference gpu_type 'V100'"):
        SpeedTable({("f", "T4"): 1.0}, {("f", "T4"): ([1], [1.0])})
    with pytest.raises(InvalidInputError, match=r"must be 1, got 0\.9"):
        SpeedTable({("f", "V100"): 0.9}, {("f", "V100"): ([1], [1.0])})
    with pytest.raises(InvalidInputError, match="relative_speed must be a finite number > 0"):
        SpeedTable({("f", "V100"): 1.0, ("f", "T4"): -1.0},
                   {("f", "V100"): ([1], [1.0]), ("f", "T4"): ([1], [1.0])})


_HEADER = "family,gpu_type,replicas,relative_speed,scaling\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("f,V100,1,1,1\nf,V100,2,1,x\n", r"line 4, column 'scaling': not a number: 'x'"),
        ("f,V100,1,1,1\nf,V100,two,1,2\n", r"line 4, column 'replicas': not an integer"),
        ("f,V100,1,1,1\nf,T4,1,0.5,1\nf,T4,2,0.6,1.5\n",
         r"line 5, column 'relative_speed': 0.6 differs from 0.5 on line 4"),
        ("f,V100,1,1,1\nf,V100,1,1,1\n", r"line 4: duplicate row for family 'f'"),
        ("f,V100,1,1\n", r"line 3: expected 5 fields, got 4"),
        ("f,V100,1,1,1\nf,V100,2,1,2.5\n", r"family 'f', gpu_type 'V100'.*above linear"),
    ],
)
def test_from_csv_errors_name_file_line_and_column(tmp_path: Path, body: str,
                                                    message: str) -> None:
    p = tmp_path / "speeds.csv"
    p.write_text("# a comment line\n" + _HEADER + body)
    with pytest.raises(InvalidInputError, match=message) as exc:
        SpeedTable.from_csv(p)
    assert str(p) in str(exc.value)


def test_from_csv_missing_column(tmp_path: Path) -> None:
    p = tmp_path / "speeds.csv"
    p.write_text("family,gpu_type,replicas,scaling\nf,V100,1,1\n")
    with pytest.raises(InvalidInputError, match=r"line 1: missing column 'relative_speed'"):
        SpeedTable.from_csv(p)


# --------------------------------------------------------------- family assignment
def _jobs(gpu_hours: list[float]) -> pd.DataFrame:
    n = len(gpu_hours)
    return pd.DataFrame({"job_id": [f"j{i}" for i in range(n)], "gpus": [2] * n,
                         "duration_s": [h * 3600 / 2 for h in gpu_hours]})


def test_assignment_follows_the_gpu_time_buckets() -> None:
    # 2 GPUs each; GPU-hours 0.5, 0.99 -> cifar10; 1.0 and 9.9 -> deepspeech2 or bert;
    # 10, 99 -> yolov3; 100, 5000 -> imagenet (upper bounds exclusive)
    hours = [0.5, 0.99, 1.0, 9.9, 10.0, 99.0, 100.0, 5000.0]
    fam = assign_families(_jobs(hours), seed=3)
    u = np.random.default_rng(3).random(len(hours))  # the documented draw, row order
    mid = ["deepspeech2" if x < 0.5 else "bert" for x in u[2:4]]
    assert fam.tolist() == ["cifar10", "cifar10", *mid, "yolov3", "yolov3", "imagenet",
                            "imagenet"]
    assert [b for b, _ in FAMILY_BUCKETS] == [1.0, 10.0, 100.0, math.inf]


def test_assignment_is_deterministic_per_seed_and_splits_the_middle_bucket() -> None:
    jobs = _jobs([5.0] * 2000)
    a, b, c = (assign_families(jobs, seed=s) for s in (7, 7, 8))
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()
    # 2000 fair coin flips: the count of bert is within 4.5 sigma (sigma = 22.4) of 1000
    assert abs(int((a == "bert").sum()) - 1000) < 100
    assert set(a.tolist()) == {"bert", "deepspeech2"}


def test_assignment_honours_a_model_column() -> None:
    jobs = _jobs([0.1, 500.0])
    jobs["model"] = ["imagenet", "cifar10"]  # against the GPU-time rule on purpose
    assert assign_families(jobs, seed=0).tolist() == ["imagenet", "cifar10"]


def test_assignment_rejects_unknown_models_naming_the_row() -> None:
    jobs = _jobs([0.1, 0.2, 0.3])
    jobs["model"] = ["bert", "resnet50", "ncf"]
    with pytest.raises(InvalidInputError,
                       match=r"row 1 \(job_id 'j1'\), column 'model': unknown model family "
                             r"'resnet50'; known: bert, cifar10"):
        assign_families(jobs, seed=0)
    jobs["model"] = ["bert", "imagenet", None]
    with pytest.raises(InvalidInputError, match=r"row 2 \(job_id 'j2'\), column 'model': missing"):
        assign_families(jobs, seed=0)


def test_assignment_input_errors() -> None:
    with pytest.raises(InvalidInputError, match="needs a column 'duration_s'"):
        assign_families(pd.DataFrame({"gpus": [1]}), seed=0)
    bad = _jobs([1.0, 2.0])
    bad.loc[1, "duration_s"] = 0.0
    with pytest.raises(InvalidInputError, match=r"row 1 \(job_id 'j1'\), column 'duration_s'"):
        assign_families(bad, seed=0)
    bad = _jobs([1.0])
    bad["gpus"] = [0]
    with pytest.raises(InvalidInputError, match=r"row 0 .*column 'gpus'"):
        assign_families(bad, seed=0)
    with pytest.raises(InvalidInputError, match="seed: must be an integer >= 0"):
        assign_families(_jobs([1.0]), seed=-1)
    with pytest.raises(InvalidInputError, match="needs a measured speed table"):
        assign_families(_jobs([1.0]), seed=0, table=SpeedTable.parametric())
