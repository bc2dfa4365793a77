"""Helpers of the whole-replay identity tests: two replays that must agree bit for bit.

``elastic_slice`` cuts a bundled trace and makes half its jobs elastic; ``same_frame``
compares two tables column by column (floats by their bit patterns, NaN where NaN);
``scrub`` drops what differs by design (wall-clock timings, the given keys) from a
summary before it is compared.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from aryl.traces import load_trace, synthesize_elastic

TIMING_KEYS = ("sched", "wall", "time_per", "elapsed", "timing")


def elastic_slice(preset: str, n: int, seed: int) -> Any:
    """The first ``n`` jobs of ``preset``, half of them elastic (``seed``)."""
    tr = load_trace(preset)
    tr = tr.replace(jobs=tr.jobs.iloc[:n].reset_index(drop=True))
    return synthesize_elastic(tr, elastic_fraction=0.5, seed=seed)


def same_frame(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Assert the same columns, rows and values (float64 bit patterns for floats)."""
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for col in a.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype == object or y.dtype == object:
            assert x.tolist() == y.tolist(), col
        elif x.dtype.kind == "f":
            assert x.dtype == y.dtype, col
            assert np.array_equal(x.view(np.int64), y.view(np.int64)), col
        else:
            assert np.array_equal(x, y), col


def scrub(v: Any, drop: tuple[str, ...] = ("engine",)) -> Any:
    """``v`` without wall-clock timings and the keys ``drop``; NaN as ``"nan"``."""
    if isinstance(v, dict):
        return {k: scrub(x, drop) for k, x in v.items()
                if k not in drop and not any(t in str(k) for t in TIMING_KEYS)}
    if isinstance(v, list):
        return [scrub(x, drop) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v
