"""Seeded generator of Philly-shaped job traces of any size, for benchmarks.

``generate(n_jobs, seed, source=PHILLY_CSV)`` returns a canonical job table
(``job_id``, ``submit_time_s``, ``duration_s``, ``gpus``, ``tenant``; see
:mod:`aryl.traces.schema`) whose jobs look like the Microsoft Philly 2017 table
(the Pollux extraction: 82,247 jobs, 2017-09-04 .. 2017-12-22; not bundled: its
path in ``$ARYL_PHILLY_CSV``, or ``source=`` / ``--source``).  Command line::

    ARYL_PHILLY_CSV=path/to/philly.csv \
        python bench/philly_shaped.py --jobs 1000000 --seed 0 --out philly-1m.parquet

Arrivals (time-of-week-aware hour-block bootstrap)
    The source's submissions are cut into clock hours ``k = 0 .. H-1`` from the
    hour of its first submission (H = 2,616 hours); each hour has a *stratum*, its
    local (America/Los_Angeles) hour of the week, 0 = Monday 00:00-00:59.  Output
    hour ``j`` (from the same start, continuing past the source's end) takes the
    stratum of its own local time and copies the submission offsets within the hour
    of one source hour drawn uniformly from that stratum, empty hours included.  So
    the daily and weekly shape and the within-hour bursts (sweeps submitted in the
    same second) are the source's, and the expected number of arrivals in an output
    hour is the source's mean for its stratum: on average
    ``rate_per_hour = mean over strata of the stratum means`` (31.3 jobs per hour for
    Philly, against 82,247 / 2,616 = 31.4 for the table as a whole;
    :attr:`SourceModel.rate_per_hour`).  ``n_jobs`` jobs span about
    ``n_jobs / rate_per_hour`` hours: the full table's average load, stretched, so a
    million jobs cover about 32,000 hours (3.6 years).  The source's load changes over its 16 weeks
    (2 near-empty weeks, an October peak); the output mixes the weeks and has the
    average load throughout.
Jobs
    ``(duration_s, gpus, tenant)`` of each arrival is one source row drawn uniformly
    with replacement, independently of the arrival: sizes and durations jointly,
    with the source's correlation between them.  (Sweeps of identical jobs are not
    kept together.)

Deterministic per ``(n_jobs, seed, source)``: one ``numpy.random.default_rng(seed)``
stream.  Job ids ``ps<seed>-<i>`` (``i`` = row), unique.  Vectorised: a million jobs
in about a second once the source is loaded (loading and checking the CSV takes
about one more second, cached per process).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from aryl.errors import InvalidInputError
from aryl.traces import Trace, load_trace, write_trace

__all__ = ["PHILLY_CSV", "SourceModel", "generate", "source_model"]

#: The Microsoft Philly job table (not bundled, no licence file): its path, from
#: $ARYL_PHILLY_CSV ("" when unset).
PHILLY_CSV = os.environ.get("ARYL_PHILLY_CSV", "")
#: Local time of the Philly cluster (the reader's default for naive timestamps).
TZ = "America/Los_Angeles"
HOUR_S = 3600.0
HOURS_PER_WEEK = 168


@dataclasses.dataclass(frozen=True)
class SourceModel:
    """The source table cut into clock hours (see the module docstring).

    Attributes
    ----------
    t0_s : float
        Start of hour 0: the first submission's UTC hour, seconds since the epoch.
    submit_s, duration_s, gpus : ndarray (n_source,)
        Source jobs sorted by submit time (float64, float64, int64).
    tenant : pyarrow.Array of str (n_source,) or None
        The ``cluster`` column, if the source has one.
    hour_start : ndarray of int64 (H + 1,)
        Rows of source hour ``k`` are ``hour_start[k] .. hour_start[k + 1]``.
    stratum_hours : ndarray of int64 (H,)
        Source hours grouped by stratum (ascending within a stratum).
    stratum_start : ndarray of int64 (169,)
        Hours of stratum ``h`` are ``stratum_hours[stratum_start[h]:stratum_start[h+1]]``.
    rate_per_hour : float
        Expected arrivals per output hour, averaged over the week (jobs per hour).
    stratum_mean, stratum_var : ndarray of float64 (168,)
        Mean and variance (population) of the source hours' job counts per stratum.
    """

    t0_s: float
    submit_s: np.ndarray
    duration_s: np.ndarray
    gpus: np.ndarray
    tenant: pa.Array | None
    hour_start: np.ndarray
    stratum_hours: np.ndarray
    stratum_start: np.ndarray
    rate_per_hour: float
    stratum_mean: np.ndarray
    stratum_var: np.ndarray

    @property
    def n_source(self) -> int:
        """Jobs in the source table."""
        return int(self.submit_s.size)

    @property
    def n_hours(self) -> int:
        """Clock hours H from the first submission's hour to the last one's."""
        return int(self.hour_start.size - 1)


def strata(t0_s: float, n_hours: int) -> np.ndarray:
    """Local hour of the week (0 = Monday 00:00) of hours ``t0_s + 3600 k``, k < n_hours."""
    start = pd.to_datetime(t0_s + HOUR_S * np.arange(n_hours), unit="s", utc=True)
    local = start.tz_convert(TZ)
    return np.asarray(local.day_of_week * 24 + local.hour, dtype=np.int64)


@functools.cache
def _model(path: str, mtime_ns: int) -> SourceModel:
    jobs = load_trace(path).jobs  # checked, sorted by submit time
    submit = jobs["submit_time_s"].to_numpy(dtype=np.float64)
    t0 = float(np.floor(submit[0] / HOUR_S) * HOUR_S)
    hour = ((submit - t0) // HOUR_S).astype(np.int64)
    n_hours = int(hour[-1]) + 1
    counts = np.bincount(hour, minlength=n_hours)
    hour_start = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    st = strata(t0, n_hours)
    order = np.argsort(st, kind="stable")
    stratum_start = np.searchsorted(st[order], np.arange(HOURS_PER_WEEK + 1)).astype(np.int64)
    sizes = np.diff(stratum_start)
    if (sizes == 0).any():
        raise InvalidInputError(
            f"source {path}: spans less than a week ({n_hours} hours); need every hour "
            "of the week"
        )
    by_stratum = counts[order].astype(np.float64)
    mean = np.add.reduceat(by_stratum, stratum_start[:-1]) / sizes
    var = np.add.reduceat(by_stratum**2, stratum_start[:-1]) / sizes - mean**2
    tenant = (
        pa.array(jobs["tenant"].to_numpy(dtype=object), type=pa.string())
        if "tenant" in jobs.columns
        else None
    )
    return SourceModel(
        t0_s=t0,
        submit_s=submit,
        duration_s=jobs["duration_s"].to_numpy(dtype=np.float64),
        gpus=jobs["gpus"].to_numpy(dtype=np.int64),
        tenant=tenant,
        hour_start=hour_start,
        stratum_hours=order.astype(np.int64),
        stratum_start=stratum_start,
        rate_per_hour=float(mean.mean()),
        stratum_mean=mean,
        stratum_var=np.maximum(var, 0.0),
    )


def source_model(source: str | os.PathLike[str] = PHILLY_CSV) -> SourceModel:
    """The hour model of a Philly-format table (cached per path and modification time).

    Raises
    ------
    InvalidInputError
        The file does not exist, or spans less than a week.
    TraceFormatError
        A bad row (from :func:`aryl.traces.load_trace`, naming the line).
    """
    path = Path(source).expanduser()
    if not os.fspath(source) or not path.is_file():
        raise InvalidInputError(
            f"source: Philly table not found at {os.fspath(source)!r} (set ARYL_PHILLY_CSV "
            "to its path, or pass source=)"
        )
    return _model(str(path.resolve()), path.stat().st_mtime_ns)


def generate(
    n_jobs: int, seed: int = 0, source: str | os.PathLike[str] = PHILLY_CSV
) -> pd.DataFrame:
    """A Philly-shaped canonical job table of ``n_jobs`` jobs (module docstring).

    Parameters
    ----------
    n_jobs : int
        Jobs to generate, ``>= 1``.
    seed : int
        Seed of the one random stream (``>= 0``); same seed, same table.
    source : path
        The Philly table (``timestamp,duration,num_gpus[,gpu_time,cluster]``).

    Returns
    -------
    pandas.DataFrame
        ``job_id`` (str, ``ps<seed>-<row>``), ``submit_time_s`` (float64, seconds
        since the epoch, UTC, starting in the source's first hour; sorted),
        ``duration_s`` (float64), ``gpus`` (int64), ``tenant`` (str): the
        canonical columns of :mod:`aryl.traces.schema` (``tenant`` only if the source
        has ``cluster``), ready for
        :func:`aryl.simulate` or :func:`aryl.traces.write_trace`.

    Raises
    ------
    InvalidInputError
        ``n_jobs`` or ``seed`` not a non-negative integer (``n_jobs >= 1``), or a
        bad ``source`` (see :func:`source_model`).

    Notes
    -----
    O(n_jobs + hours) time and memory after the source is loaded.
    """
    for name, value, low in (("n_jobs", n_jobs, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise InvalidInputError(f"{name} must be an integer >= {low}, got {value!r}")
    n = int(n_jobs)
    m = source_model(source)
    rng = np.random.default_rng(int(seed))
    counts = np.diff(m.hour_start)
    # Output hours, in chunks until they hold n arrivals (about 5% spare per chunk).
    picked: list[np.ndarray] = []
    total = 0
    n_slots = 0
    while total < n:
        chunk = int((n - total) / m.rate_per_hour * 1.05) + HOURS_PER_WEEK
        st = strata(m.t0_s + HOUR_S * n_slots, chunk)
        size = m.stratum_start[st + 1] - m.stratum_start[st]
        draw = m.stratum_start[st] + (rng.random(chunk) * size).astype(np.int64)
        src = m.stratum_hours[draw]
        picked.append(src)
        total += int(counts[src].sum())
        n_slots += chunk
    src_hour = np.concatenate(picked)
    c = counts[src_hour]
    last = int(np.searchsorted(np.cumsum(c), n))  # the hour holding the n-th arrival
    src_hour, c = src_hour[: last + 1], c[: last + 1]
    # rows of the chosen source hours, back to back: row = start of its hour + rank
    first = np.cumsum(c) - c
    rank = np.arange(int(c.sum()), dtype=np.int64) - np.repeat(first, c)
    rows = np.repeat(m.hour_start[src_hour], c) + rank
    slot = np.repeat(np.arange(last + 1, dtype=np.int64), c)
    offset = m.submit_s[rows] - (m.t0_s + HOUR_S * np.repeat(src_hour, c))
    submit = (m.t0_s + HOUR_S * slot + offset)[:n]
    pick = rng.integers(0, m.n_source, size=n)
    ids = pc.binary_join_element_wise(
        f"ps{int(seed)}-", pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string()), ""
    )
    str_dtype = pd.StringDtype("pyarrow", na_value=np.nan)  # the canonical "str"
    columns = {
        "job_id": pd.Series(ids, dtype=str_dtype),
        "submit_time_s": submit,
        "duration_s": m.duration_s[pick],
        "gpus": m.gpus[pick],
    }
    if m.tenant is not None:
        columns["tenant"] = pd.Series(m.tenant.take(pa.array(pick)), dtype=str_dtype)
    return pd.DataFrame(columns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/philly_shaped.py",
        description="Write a seeded Philly-shaped trace (canonical CSV or Parquet, atomically).",
    )
    parser.add_argument("--jobs", type=int, required=True, help="number of jobs (>= 1)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--out", required=True, help="output .parquet, .csv or .csv.gz")
    parser.add_argument("--source", default=PHILLY_CSV,
                        help="Philly table (default: $ARYL_PHILLY_CSV)")
    args = parser.parse_args(argv)
    t = time.perf_counter()
    try:
        jobs = generate(args.jobs, args.seed, args.source)
    except InvalidInputError as exc:
        parser.error(str(exc))
    took = time.perf_counter() - t
    meta = {
        "generator": "bench/philly_shaped.py",
        "n_jobs": args.jobs,
        "seed": args.seed,
        "rate_per_hour": source_model(args.source).rate_per_hour,
    }
    out = write_trace(Trace(jobs=jobs, source=str(args.source), meta=meta), args.out)
    span_h = (jobs["submit_time_s"].iloc[-1] - jobs["submit_time_s"].iloc[0]) / HOUR_S
    print(f"{out}: {len(jobs)} jobs over {span_h:.0f} h, generated in {took:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
