"""bench/philly_shaped.py: seeded Philly-shaped traces (determinism, marginals, arrivals)."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from aryl.errors import InvalidInputError
from aryl.traces import load_trace

REPO = Path(__file__).resolve().parents[1]
# The Microsoft Philly job table is not bundled (no licence file): these tests run when
# $ARYL_PHILLY_CSV names a copy, and are skipped otherwise.
PHILLY = Path(os.environ.get("ARYL_PHILLY_CSV", "")).expanduser()
needs_philly = pytest.mark.skipif(not PHILLY.is_file(), reason="Philly table not available")


def _load_generator() -> ModuleType:
    path = REPO / "bench" / "philly_shaped.py"
    spec = importlib.util.spec_from_file_location("philly_shaped", path)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["philly_shaped"] = mod
    spec.loader.exec_module(mod)
    return mod


ps = _load_generator()


@needs_philly
def test_same_seed_same_frame_other_seed_other_frame() -> None:
    a = ps.generate(20_000, 3, PHILLY)
    pd.testing.assert_frame_equal(a, ps.generate(20_000, 3, PHILLY))
    b = ps.generate(20_000, 4, PHILLY)
    assert not a["submit_time_s"].equals(b["submit_time_s"])
    assert not a["duration_s"].equals(b["duration_s"])
    # a shorter trace with the same seed is not required to be a prefix; the same
    # size is: determinism is per (n_jobs, seed, source)
    assert len(ps.generate(7, 3, PHILLY)) == 7


@needs_philly
def test_canonical_unique_sorted_and_round_trips(tmp_path: Path) -> None:
    jobs = ps.generate(50_000, 1, PHILLY)
    assert list(jobs.columns) == ["job_id", "submit_time_s", "duration_s", "gpus", "tenant"]
    assert jobs["job_id"].is_unique
    assert jobs["job_id"].iloc[12] == "ps1-12"
    assert jobs["submit_time_s"].is_monotonic_increasing
    assert (jobs["duration_s"] > 0).all()
    assert (jobs["gpus"] >= 1).all()
    # the CLI writes it atomically; load_trace reads it back (canonical format) as is
    out = tmp_path / "x.parquet"
    assert ps.main(["--jobs", "50000", "--seed", "1", "--out", str(out), "--source",
                    str(PHILLY)]) == 0
    back = load_trace(out)
    assert back.format == "canonical"
    assert back.meta["seed"] == 1
    pd.testing.assert_frame_equal(back.jobs, jobs, check_dtype=False)
    assert [p.name for p in tmp_path.iterdir()] == ["x.parquet"]  # no temporary left


def _ecdf_distance(sample: np.ndarray, population: np.ndarray) -> float:
    """sup_x |F_sample(x) - F_population(x)| over all jump points (exact for step CDFs)."""
    xs = np.union1d(sample, population)
    fs = np.searchsorted(np.sort(sample), xs, side="right") / sample.size
    fp = np.searchsorted(np.sort(population), xs, side="right") / population.size
    return float(np.abs(fs - fp).max())


@needs_philly
def test_sizes_and_durations_follow_the_source_jointly() -> None:
    n = 200_000
    jobs = ps.generate(n, 0, PHILLY)
    src = load_trace(PHILLY).jobs
    # Each job is a source row drawn i.i.d., so the frequency of a GPU size is
    # binomial(n, p) / n: within 5 standard errors sqrt(p (1 - p) / n) (a false alarm
    # has probability < 1e-6 per size).
    p_src = src["gpus"].value_counts(normalize=True)
    p_gen = jobs["gpus"].value_counts(normalize=True)
    for g, p in p_src.items():
        assert abs(p_gen.get(g, 0.0) - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12, g
    assert set(p_gen.index) <= set(p_src.index)
    # Durations: one-sample Kolmogorov distance to the source's empirical CDF (the
    # population sampled).  P(D > 1.95 / sqrt(n)) <= 0.001 for i.i.d. draws (the
    # bound of a continuous CDF is conservative for a discrete one).
    d = _ecdf_distance(jobs["duration_s"].to_numpy(), src["duration_s"].to_numpy())
    assert d <= 1.95 / math.sqrt(n)
    # Jointly: every generated (gpus, duration, tenant) is a source row ...
    key = ["gpus", "duration_s", "tenant"]
    rows = jobs[key].drop_duplicates().merge(src[key].drop_duplicates(), how="left",
                                              indicator=True)
    assert (rows["_merge"] == "both").all()
    # ... and the size-duration association is kept: the mean log-duration per size
    # (Philly: 6.7 for 1 GPU, 4.5 for 2, 9.1 for 4, 9.7 for 8) within 5 standard
    # errors of the source's; durations shuffled across sizes would miss by ~2.
    for g in (1, 2, 4, 8):
        x = np.log(src.loc[src["gpus"] == g, "duration_s"].to_numpy())
        y = np.log(jobs.loc[jobs["gpus"] == g, "duration_s"].to_numpy())
        assert abs(y.mean() - x.mean()) <= 5 * x.std() / math.sqrt(y.size), g


@needs_philly
def test_arrivals_copy_source_hours_of_the_same_hour_of_week_at_the_documented_rate() -> None:
    m = ps.source_model(PHILLY)
    n = 1_000_000
    jobs = ps.generate(n, 2, PHILLY)
    t = jobs["submit_time_s"].to_numpy()
    slot = ((t - m.t0_s) // 3600).astype(np.int64)
    n_slots = int(slot[-1])  # complete output hours (the last one is cut at n jobs)
    strata = ps.strata(m.t0_s, n_slots + 1)
    # 1. Structure: every complete output hour holds the submission offsets (whole
    # seconds, exact in float64) of a source hour in the same local hour of the week.
    src_t = m.submit_s
    src_hour = ((src_t - m.t0_s) // 3600).astype(np.int64)
    src_strata = ps.strata(m.t0_s, m.n_hours)
    seen: dict[int, set[tuple[float, ...]]] = {h: set() for h in range(168)}
    for k, offs in pd.Series(src_t - m.t0_s - 3600.0 * src_hour).groupby(src_hour):
        seen[int(src_strata[k])].add(tuple(offs))
    gen_offs = pd.Series(t - m.t0_s - 3600.0 * slot).groupby(slot)
    for j, offs in gen_offs:
        if j < n_slots:
            assert tuple(offs) in seen[int(strata[j])], j
    # 2. Rate: the arrivals in the complete hours are a sum of independent draws, one
    # per hour, each uniform over its stratum's source hours: mean sum(mu_h), variance
    # sum(var_h) (population moments of the source counts).  Within 4 standard
    # deviations; and the documented rate is the weekly mean of mu_h.
    h = strata[:n_slots]
    count = int((slot < n_slots).sum())
    mean = float(m.stratum_mean[h].sum())
    sd = math.sqrt(float(m.stratum_var[h].sum()))
    assert abs(count - mean) <= 4 * sd
    assert sd / mean < 0.015  # the test is sharp: ~1.2% per standard deviation here
    assert m.rate_per_hour == pytest.approx(float(m.stratum_mean.mean()))
    # so n jobs span about n / rate hours (same tolerance, plus the partial last hour)
    span_h = (t[-1] - t[0]) / 3600
    assert abs(span_h * m.rate_per_hour / n - 1) <= 4 * sd / mean + 2 / span_h


def test_bad_arguments_name_the_argument(tmp_path: Path) -> None:
    for bad in (0, -3, 2.5, True, "10"):
        with pytest.raises(InvalidInputError, match="n_jobs must be an integer >= 1"):
            ps.generate(bad, 0, PHILLY)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="seed must be an integer >= 0"):
        ps.generate(10, -1, PHILLY)
    missing = tmp_path / "nope.csv"
    with pytest.raises(InvalidInputError, match=r"Philly table not found at .*nope\.csv"):
        ps.generate(10, 0, missing)
    with pytest.raises(InvalidInputError, match="set ARYL_PHILLY_CSV"):
        ps.generate(10, 0, "")
    short = tmp_path / "short.csv"  # two days of jobs: not every hour of the week
    short.write_text("timestamp,duration,num_gpus\n2017-10-02 10:00:00,60,1\n"
                     "2017-10-03 11:30:00,120,2\n")
    with pytest.raises(InvalidInputError, match="spans less than a week"):
        ps.generate(10, 0, short)
