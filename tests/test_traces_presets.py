"""Bundled presets, the Philly busiest window, elastic synthesis."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aryl.errors import InvalidInputError
from aryl.traces import PRESETS, Trace, list_presets, load_trace, synthesize_elastic
from aryl.traces.elastic import rigid_gpus_per_worker

# The Microsoft Philly job table is not bundled (no licence file): its tests run when
# $ARYL_PHILLY_CSV names a copy, and are skipped otherwise.
PHILLY = Path(os.environ.get("ARYL_PHILLY_CSV", "")).expanduser()

ITP_ROWS = {"itp-c01": 1595, "itp-c02": 5778, "itp-c03": 3011, "itp-c04": 15802,
            "itp-c05": 3629, "itp-c06": 2396, "itp-c07": 12699, "itp-c08": 13047,
            "itp-c09": 11134, "itp-c10": 260, "itp-all": 69351}


def test_presets_match_documented_row_counts() -> None:
    assert sorted(PRESETS) == sorted(ITP_ROWS)
    assert [p.name for p in list_presets()] == sorted(ITP_ROWS)
    for name, rows in ITP_ROWS.items():
        trace = load_trace(name)
        assert trace.n_jobs == rows == PRESETS[name].n_jobs
        assert trace.dropped == {}
        assert trace.jobs["submit_time_s"].is_monotonic_increasing


def test_default_preset_is_itp_c07() -> None:
    trace = load_trace()
    assert trace.source == "itp-c07"
    assert trace.format == "itp"
    assert sorted(trace.jobs["gpus"].unique().tolist()) == [1, 2, 4, 8, 16]
    assert set(trace.jobs["tenant"]) == {"cluster07"}
    assert trace.jobs["job_id"].iloc[0] == "a11b4fc9-8f06-7093-2b93-bcb89acf0e7e"
    assert trace.jobs["submit_time_s"].iloc[0] == 1999.0


def test_itp_all_merges_clusters_on_a_common_time_base() -> None:
    trace = load_trace("itp-all")
    counts = trace.jobs["tenant"].value_counts()
    assert counts["cluster04"] == 15802
    assert counts["cluster10"] == 260
    assert trace.jobs["job_id"].is_unique


@pytest.mark.skipif(not PHILLY.is_file(), reason="set ARYL_PHILLY_CSV to the Philly job table")
def test_philly_full_and_busiest_15_days() -> None:
    full = load_trace(PHILLY)
    assert full.n_jobs == 82247
    assert full.dropped == {}
    assert full.jobs["gpus"].max() == 128
    trace = load_trace(PHILLY, window="busiest-15d")
    assert trace.n_jobs == 28563
    window = trace.meta["window"]
    assert window["start_s"] == 1507620294.0  # 2017-10-10 07:24:54 UTC
    assert window["end_s"] == 1507620294.0 + 15 * 86400
    # brute force over every submit time as a start gives no bigger window
    t = full.jobs["submit_time_s"].to_numpy()
    best = max(int(((t >= s) & (t < s + 15 * 86400)).sum()) for s in t[::97])
    assert best <= trace.n_jobs


def test_rigid_gpus_per_worker() -> None:
    gpus = np.array([1, 2, 4, 8, 16, 32, 64, 12, 3, 6, 24], dtype=np.int64)
    assert rigid_gpus_per_worker(gpus, 8).tolist() == [1, 2, 4, 8, 8, 8, 8, 6, 3, 6, 8]
    assert rigid_gpus_per_worker(gpus, 4).tolist() == [1, 2, 4, 4, 4, 4, 4, 4, 3, 3, 4]


def _trace(gpus: list[int]) -> Trace:
    n = len(gpus)
    jobs = pd.DataFrame({
        "job_id": pd.array([f"j{i}" for i in range(n)], dtype="str"),
        "submit_time_s": np.arange(n, dtype=np.float64),
        "duration_s": np.full(n, 100.0),
        "gpus": np.asarray(gpus, dtype=np.int64),
    })
    return Trace(jobs=jobs, source="test", format="canonical")


def test_synthesize_elastic_rules() -> None:
    gpus = [1, 2, 3, 4, 8, 12, 16, 64] * 25
    out = synthesize_elastic(_trace(gpus), elastic_fraction=0.4, seed=3)
    jobs = out.jobs
    assert int(jobs["elastic"].sum()) == 80
    el = jobs[jobs["elastic"]]
    rigid = jobs[~jobs["elastic"]]
    assert (el["gpus_per_worker"] == 1).all()
    assert (el["min_workers"] == np.maximum(1, (el["gpus"] + 1) // 2)).all()
    assert (el["max_workers"] == 2 * el["gpus"]).all()
    assert (rigid["min_workers"] == rigid["max_workers"]).all()
    assert (rigid["gpus_per_worker"] * rigid["min_workers"] == rigid["gpus"]).all()
    row12 = rigid[rigid["gpus"] == 12].iloc[0]
    assert (row12["gpus_per_worker"], row12["min_workers"]) == (6, 2)
    assert jobs["alpha"].between(0.02, 0.2).all()
    assert jobs["min_workers"].dtype == np.int64
    assert jobs["elastic"].dtype == bool
    meta = out.meta["elastic_synthesis"]
    assert (meta["seed"], meta["elastic_fraction"], meta["n_elastic"]) == (3, 0.4, 80)
    # deterministic, and a different seed changes the choice
    again = synthesize_elastic(_trace(gpus), elastic_fraction=0.4, seed=3)
    pd.testing.assert_frame_equal(again.jobs, jobs)
    other = synthesize_elastic(_trace(gpus), elastic_fraction=0.4, seed=4)
    assert not other.jobs["elastic"].equals(jobs["elastic"])


def test_synthesize_elastic_keeps_existing_columns_and_checks_args() -> None:
    first = synthesize_elastic(_trace([1, 2, 4]), elastic_fraction=1.0, seed=0)
    assert first.jobs["max_workers"].tolist() == [2, 4, 8]
    kept = synthesize_elastic(first, elastic_fraction=0.0, seed=9)
    pd.testing.assert_frame_equal(kept.jobs, first.jobs)
    assert kept.meta["elastic_synthesis"] == {"kept_existing_columns": True}
    with pytest.raises(InvalidInputError, match="elastic_fraction"):
        synthesize_elastic(_trace([1]), elastic_fraction=1.5)
    with pytest.raises(InvalidInputError, match="alpha"):
        synthesize_elastic(_trace([1]), alpha_low=0.3, alpha_high=0.1)


@pytest.mark.skipif(not PHILLY.is_file(), reason="set ARYL_PHILLY_CSV to the Philly job table")
def test_philly_window_30_days_after_first_submission() -> None:
    # the 15 days from 30 days after the first submission ("about 26,600 jobs" is
    # sometimes quoted for a 15-day Philly window; it is not the busiest one)
    trace = load_trace(PHILLY, window="1507138241,1508434241")
    assert trace.n_jobs == 26575
    assert trace.meta["window"]["n_before"] + trace.meta["window"]["n_after"] == 82247 - 26575


# The ElasticFlow artifact's clusterNN.csv files, when $ARYL_ITP_SRC names their folder.
ITP_SRC = Path(os.environ.get("ARYL_ITP_SRC", "")).expanduser()


@pytest.mark.skipif(not (ITP_SRC / "cluster01.csv").is_file(),
                    reason="set ARYL_ITP_SRC to the folder of the ITP source traces")
def test_bundled_itp_files_are_byte_identical_to_the_source() -> None:
    import gzip

    from aryl.traces.presets import preset_files

    for i in range(1, 11):
        (bundled,) = preset_files(PRESETS[f"itp-c{i:02d}"])
        assert gzip.decompress(bundled.read_bytes()) == (ITP_SRC / f"cluster{i:02d}.csv")\
            .read_bytes()
