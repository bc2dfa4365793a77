"""The simulator's contact points with the trace layer.

Each call into ``aryl.traces`` lives in one function here, so that an interface
change there is a local edit: :func:`load_jobs`, :func:`synthesize`,
:func:`inference_schedule`, :func:`default_inference`,
:func:`load_inference_spec`.  (The kernels are called by the scheduling pass,
:mod:`aryl.scheduling.kernels`.)
"""

from __future__ import annotations

import functools
import logging
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError

if TYPE_CHECKING:
    from aryl.sim.engine import InferenceSchedule

log = logging.getLogger(__name__)

__all__ = [
    "default_inference",
    "inference_schedule",
    "load_inference_spec",
    "load_jobs",
    "synthesize",
]

# ----------------------------------------------------------------- traces


def load_jobs(source: Any) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Canonical job DataFrame and trace meta from a path, preset name, ``Trace`` or DataFrame."""
    if isinstance(source, pd.DataFrame):
        return source, {"source": "DataFrame"}
    if hasattr(source, "jobs") and isinstance(source.jobs, pd.DataFrame):
        return source.jobs, dict(getattr(source, "meta", {}) or {})
    from aryl.traces import load_trace

    trace = load_trace(source)
    return trace.jobs, dict(getattr(trace, "meta", {}) or {})


def synthesize(
    jobs: pd.DataFrame, meta: dict[str, Any], *, elastic_fraction: float, seed: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Fill the scaling columns (docs/model.md) with ``aryl.traces.synthesize_elastic``."""
    from aryl.traces import Trace, synthesize_elastic

    tr = synthesize_elastic(
        Trace(jobs=jobs, meta=meta), elastic_fraction=elastic_fraction, seed=seed
    )
    return tr.jobs, dict(getattr(tr, "meta", {}) or {})


def inference_schedule(demand: Any, n_inference_servers: int, t0: float) -> InferenceSchedule:
    """Turn an ``InferenceDemand`` (``times_s``, ``servers_needed``) into the engine's series.

    ``times_s`` are absolute, in the trace's time base; the value of the last
    step at or before the clock start ``t0`` holds from ``t0`` (0 servers if no
    step is that early), the last value holds forever.  Values are clipped to
    ``[0, n_inference_servers]``.
    """
    from aryl.sim.engine import InferenceSchedule

    t = np.asarray(demand.times_s, dtype=np.float64)
    v = np.asarray(demand.servers_needed, dtype=np.int64)
    if t.ndim != 1 or t.shape != v.shape or t.size == 0:
        raise InvalidInputError("inference: times_s and servers_needed must be equal-length 1-D")
    if np.any(np.diff(t) <= 0):
        raise InvalidInputError("inference: times_s must be strictly increasing")
    off = t - t0
    k = int(np.searchsorted(off, 0.0, side="right"))  # steps at or before t0: [0, k)
    first = int(v[k - 1]) if k > 0 else 0
    offs = np.concatenate([[0.0], off[k:]])
    vals = np.concatenate([[first], v[k:]])
    vals = np.clip(vals, 0, n_inference_servers)
    return InferenceSchedule(offs, vals, math.inf)


def default_inference(
    n_inference_servers: int, seed: int = 0, *, peak_utilisation: float = 0.9
) -> InferenceSchedule | None:
    """The bundled inference profile scaled to ``n_inference_servers``, tiled daily.

    One day of ``aryl.traces.inference.load_inference("bundled", ...)`` (48
    half-hour steps, slot 0 at the clock start, ``peak_utilisation`` of the
    servers needed at the daily peak) repeated with a 24 h period.
    """
    from aryl.sim.engine import InferenceSchedule

    if n_inference_servers <= 0:
        return None
    t, v = _bundled_day(int(n_inference_servers), int(seed), float(peak_utilisation))
    return InferenceSchedule(np.asarray(t), np.asarray(v), 86400.0)


@functools.lru_cache(maxsize=64)
def _bundled_day(
    n_inference_servers: int, seed: int, peak_utilisation: float
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """One day of the bundled profile (offsets from its start, servers needed), cached:
    a sweep replays it many times and the profile file does not change."""
    from aryl.traces.inference import load_inference

    day = 86400.0
    demand = load_inference(
        "bundled",
        n_servers=n_inference_servers,
        span_s=day,
        seed=seed,
        peak_utilisation=peak_utilisation,
    )
    t = np.asarray(demand.times_s, dtype=np.float64)
    v = np.clip(np.asarray(demand.servers_needed, dtype=np.int64), 0, n_inference_servers)
    return tuple((t - t[0]).tolist()), tuple(v.tolist())


def load_inference_spec(
    spec: str, n_inference_servers: int, t0: float, span_s: float, seed: int,
    *, peak_utilisation: float = 0.9,
) -> InferenceSchedule | None:
    """Inference demand from a CLI spec: ``bundled`` (tiled daily), ``none``,
    ``diurnal`` or a CSV path (``aryl.traces.inference.load_inference``);
    ``peak_utilisation`` scales ``bundled`` and ``diurnal``."""
    if spec == "none" or n_inference_servers <= 0:
        return None
    if spec == "bundled":
        return default_inference(n_inference_servers, seed, peak_utilisation=peak_utilisation)
    from aryl.traces.inference import load_inference

    demand = load_inference(
        spec, n_servers=n_inference_servers, span_s=max(span_s, 86400.0), start_s=t0, seed=seed,
        peak_utilisation=peak_utilisation,
    )
    return inference_schedule(demand, n_inference_servers, t0)
