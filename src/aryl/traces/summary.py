"""Descriptive figures of a trace (what ``aryl trace inspect`` prints)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError
from aryl.traces.schema import Trace

__all__ = ["gpu_histogram", "offered_load", "summarize"]

PERCENTILES = (50.0, 90.0, 95.0, 99.0)


def gpu_histogram(trace: Trace) -> pd.DataFrame:
    """Jobs per GPU size: columns ``gpus`` (int64), ``n_jobs`` (int64), ``share``
    (float64), ascending by ``gpus``."""
    counts = trace.jobs["gpus"].value_counts().sort_index()
    n = max(1, len(trace.jobs))
    return pd.DataFrame({
        "gpus": counts.index.to_numpy(dtype=np.int64),
        "n_jobs": counts.to_numpy(dtype=np.int64),
        "share": counts.to_numpy(dtype=np.float64) / n,
    })


def offered_load(trace: Trace, n_bins: int = 12) -> pd.DataFrame:
    """Offered load in GPUs over time.

    The load of a bin is the GPU-seconds that jobs would use in it if each ran
    at its traced size from its submit time (no queuing), divided by the bin
    length.  Bins split ``[first submit, last submit]`` evenly.

    Parameters
    ----------
    trace : Trace
    n_bins : int, default 12
        Number of bins (>= 1).

    Returns
    -------
    pandas.DataFrame
        ``start_s``, ``end_s``, ``gpus`` (float64), one row per bin.

    Raises
    ------
    InvalidInputError
        If ``n_bins`` is not an integer >= 1.

    Notes
    -----
    O(n_jobs * n_bins) memory-light: one pass per bin.
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise InvalidInputError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    jobs = trace.jobs
    if len(jobs) == 0:
        return pd.DataFrame({"start_s": [], "end_s": [], "gpus": []}, dtype=np.float64)
    t = jobs["submit_time_s"].to_numpy(dtype=np.float64)
    end = t + jobs["duration_s"].to_numpy(dtype=np.float64)
    g = jobs["gpus"].to_numpy(dtype=np.float64)
    lo, hi = _window(t)
    edges = np.linspace(lo, hi, n_bins + 1)
    load = np.empty(n_bins)
    for k in range(n_bins):
        a, b = edges[k], edges[k + 1]
        overlap = np.clip(np.minimum(end, b) - np.maximum(t, a), 0.0, None)
        load[k] = float(np.dot(overlap, g)) / (b - a)
    return pd.DataFrame({"start_s": edges[:-1], "end_s": edges[1:], "gpus": load})


def _window(t: np.ndarray) -> tuple[float, float]:
    """The interval that :func:`offered_load` splits into bins: first to last submit
    (one second long when they coincide)."""
    lo, hi = float(t.min()), float(t.max())
    return (lo, hi) if hi > lo else (lo, lo + 1.0)


def summarize(trace: Trace) -> dict[str, Any]:
    """Headline figures of a trace.

    Returns
    -------
    dict
        ``n_jobs``, ``span_s`` (last - first submit), ``gpu_hours`` (traced
        duration x GPUs, summed), duration mean, percentiles and max,
        ``mean_offered_load_gpus``: the GPU-seconds that fall between the
        first and the last submit (each job run at its traced size from its
        submit, no queue) / that span, i.e. the mean of the
        :func:`offered_load` table for any number of bins;
        ``submitted_load_gpus``: all of the trace's GPU-seconds / the span,
        larger by the work that runs past the last submit
        (``gpu_hours_after_last_submit``); ``dropped`` rows by kind.
    """
    jobs = trace.jobs
    d = jobs["duration_s"].to_numpy(dtype=np.float64)
    g = jobs["gpus"].to_numpy(dtype=np.float64)
    span = trace.span_s
    nan = float("nan")
    inside = nan
    if len(jobs):
        t = jobs["submit_time_s"].to_numpy(dtype=np.float64)
        lo, hi = _window(t)
        overlap = np.clip(np.minimum(t + d, hi) - np.maximum(t, lo), 0.0, None)
        inside = float(np.dot(overlap, g))
        mean_load = inside / (hi - lo)
    else:
        mean_load = nan
    out: dict[str, Any] = {
        "source": trace.source,
        "format": trace.format,
        "n_jobs": len(jobs),
        "first_submit_s": float(jobs["submit_time_s"].iloc[0]) if len(jobs) else float("nan"),
        "last_submit_s": float(jobs["submit_time_s"].iloc[-1]) if len(jobs) else float("nan"),
        "span_s": span,
        "gpu_hours": float(np.dot(d, g)) / 3600.0,
        "mean_offered_load_gpus": mean_load,
        "submitted_load_gpus": float(np.dot(d, g)) / span if span > 0 else nan,
        "gpu_hours_after_last_submit": (
            (float(np.dot(d, g)) - inside) / 3600.0 if len(jobs) else nan),
        "duration_mean_s": float(d.mean()) if len(d) else float("nan"),
        "duration_max_s": float(d.max()) if len(d) else float("nan"),
        "dropped": dict(trace.dropped),
    }
    for q in PERCENTILES:
        out[f"duration_p{q:g}_s"] = float(np.percentile(d, q)) if len(d) else float("nan")
    if "elastic" in jobs.columns:
        out["n_elastic"] = int(jobs["elastic"].sum())
    return out
