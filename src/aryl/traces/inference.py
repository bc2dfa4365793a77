"""Inference demand: how many inference servers are needed over time ``[Aryl]`` §2.

The inference cluster has ``n_servers`` whole servers; ``servers_needed(t)``
is a step series (the value at ``times_s[i]`` holds until ``times_s[i+1]``, the
last one forever).  Servers above demand (minus the simulator's safety reserve)
may be loaned to training.

Sources (``load_inference(spec=...)``):

``"bundled"``
    The day profile derived from the Alibaba GenAI serving QPS
    (``aryl/data/inference_profile.csv``: 48 half-hour loads in [0, 1], peak
    1; see ``scripts/make_inference_profile.py``).  The profile is read as a
    cyclic piecewise-linear curve through the slot centres, tiled over the
    replay from ``start_s`` (slot 0 begins at ``start_s``) and sampled at the
    midpoint of each step, so with the default ``step_s = 1800`` the steps are
    exactly the 48 slot values.  Then
    ``servers_needed = ceil(n_servers * peak_utilisation * load)``.
``"diurnal"``
    Synthetic: ``load(t) = trough + (1 - trough) * (1 - cos(2 pi (t - trough_time_s) / 86400)) / 2``
    with ``t`` in seconds since ``start_s`` (``trough`` = ``trough_fraction``,
    default 0.2; ``trough_time_s`` default 4 h, so the peak is 12 h later),
    sampled at step midpoints, times ``(1 + noise_sigma * e_k)`` with
    ``e_k ~ N(0, 1)`` i.i.d. from ``numpy.random.default_rng(seed)`` (default
    ``noise_sigma = 0.05``), clipped to [0, 1], and scaled as above.
a path
    A CSV ``time_s,servers_needed`` (strictly increasing times; whole
    non-negative counts not above ``n_servers``), used as is (``span_s`` and
    ``step_s`` are ignored).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError, TraceFormatError
from aryl.traces.readers import read_raw
from aryl.traces.validate import RowChecker, check_seed

__all__ = ["InferenceDemand", "bundled_profile", "load_inference", "servers_needed_at"]

logger = logging.getLogger(__name__)

DAY_S = 86400.0
MAX_STEPS = 10_000_000
"""Most steps a generated demand curve may have (``span_s / step_s``)."""


@dataclasses.dataclass(frozen=True)
class InferenceDemand:
    """Inference servers needed, as a step series.

    Attributes
    ----------
    times_s : numpy.ndarray of float64, shape (n,)
        Step start times, strictly increasing.
    servers_needed : numpy.ndarray of int64, shape (n,)
        Servers needed from ``times_s[i]`` until ``times_s[i + 1]``; each in
        ``[0, n_servers]``.
    n_servers : int
        Size of the inference cluster.
    source : str
        ``"bundled"``, ``"diurnal"`` or the CSV path.
    meta : dict
        Parameters (peak utilisation, step, seed, formula ...).
    """

    times_s: np.ndarray
    servers_needed: np.ndarray
    n_servers: int
    source: str = ""
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)

    def servers_needed_at(self, t: float | np.ndarray) -> np.ndarray | int:
        """Servers needed at time(s) ``t`` (step lookup; before the first step,
        the first value).  O(log n) per query."""
        return servers_needed_at(self, t)

    @property
    def mean_utilisation(self) -> float:
        """Time-weighted mean of ``servers_needed / n_servers`` over the steps
        (the last step weighted like the one before it)."""
        if len(self.times_s) == 0 or self.n_servers == 0:
            return 0.0
        if len(self.times_s) == 1:
            return float(self.servers_needed[0]) / self.n_servers
        dt = np.diff(self.times_s)
        dt = np.append(dt, dt[-1])
        return float(np.sum(dt * self.servers_needed) / (np.sum(dt) * self.n_servers))


def servers_needed_at(demand: InferenceDemand, t: float | np.ndarray) -> np.ndarray | int:
    """Servers needed at time(s) ``t`` for a step series.

    Parameters
    ----------
    demand : InferenceDemand
    t : float or numpy.ndarray of float64

    Returns
    -------
    int or numpy.ndarray of int64
        ``servers_needed[i]`` with ``i`` the last step with ``times_s[i] <= t``
        (``i = 0`` for ``t`` before the first step).
    """
    idx = np.searchsorted(demand.times_s, np.asarray(t, dtype=np.float64), side="right") - 1
    idx = np.clip(idx, 0, len(demand.times_s) - 1)
    out = demand.servers_needed[idx]
    if np.ndim(out) == 0:
        return int(out)
    return np.asarray(out, dtype=np.int64)


def bundled_profile() -> pd.DataFrame:
    """The bundled day profile: columns ``offset_s`` (float64), ``load`` (float64)."""
    path = Path(str(resources.files("aryl") / "data" / "inference_profile.csv"))
    df = pd.read_csv(path, comment="#", dtype={"offset_s": "float64", "load": "float64"})
    return df


def _scale(load: np.ndarray, n_servers: int, peak_utilisation: float) -> np.ndarray:
    # round to 9 decimals first so that e.g. 10 * 0.9 * 1.0 is 9, not 10
    raw = np.round(n_servers * peak_utilisation * np.clip(load, 0.0, 1.0), 9)
    return np.clip(np.ceil(raw), 0, n_servers).astype(np.int64)


def _read_csv_demand(path: Path, n_servers: int) -> tuple[np.ndarray, np.ndarray]:
    # strict reader: real file lines (comments and blank lines counted), no
    # column shift on extra fields, clear errors for non-UTF-8 bytes
    raw, lines, label = read_raw(path, comment="#")
    for col in ("time_s", "servers_needed"):
        if col not in raw.columns:
            raise TraceFormatError("inference CSV lacks a column", path=str(path), line=1,
                                   column=col)
    ck = RowChecker(str(path), lines, "raise", line_label=label, drop_hint=None)
    times = ck.number(raw["time_s"], "time_s")
    need = ck.integer(raw["servers_needed"], "servers_needed")
    with np.errstate(invalid="ignore"):
        ck.flag(need < 0, "negative_count", "servers_needed", "negative server count",
                values=need)
        ck.flag(need > n_servers, "exceeds_cluster", "servers_needed",
                f"more servers than the inference cluster has ({n_servers})", values=need)
        back = np.zeros(len(times), dtype=bool)
        back[1:] = ~(times[1:] > times[:-1])
    ck.flag(back, "not_increasing", "time_s", "times must be strictly increasing",
            values=times)
    ck.finish()
    if len(times) == 0:
        raise TraceFormatError("inference CSV has no rows", path=str(path), line=1)
    return times.astype(np.float64), need.astype(np.int64)


def load_inference(
    spec: str | os.PathLike[str] = "bundled",
    *,
    n_servers: int,
    span_s: float,
    start_s: float = 0.0,
    peak_utilisation: float = 0.9,
    step_s: float = 1800.0,
    seed: int = 0,
    trough_fraction: float = 0.2,
    trough_time_s: float = 4 * 3600.0,
    noise_sigma: float = 0.05,
) -> InferenceDemand:
    """Build the inference cluster's ``servers_needed(t)`` ``[Aryl]``.

    Parameters
    ----------
    spec : {"bundled", "diurnal"} or path, default "bundled"
        Source of the curve (see the module docstring).
    n_servers : int
        Inference cluster size (>= 0).
    span_s : float
        Length of the replay to cover, seconds (> 0).
    start_s : float, default 0.0
        Time of the first step (same time base as the job trace).
    peak_utilisation : float in (0, 1], default 0.9
        Fraction of the servers needed at the profile's peak.
    step_s : float, default 1800.0
        Step length, seconds (> 0).
    seed : int, default 0
        Noise seed (``"diurnal"`` only).
    trough_fraction, trough_time_s, noise_sigma : float
        Parameters of ``"diurnal"``.

    Returns
    -------
    InferenceDemand
        ``ceil(span_s / step_s)`` steps from ``start_s`` (CSV: as in the file).

    Raises
    ------
    InvalidInputError
        Bad parameter or unknown spec.
    TraceFormatError
        Bad CSV row (names file, line, column).

    Notes
    -----
    O(span_s / step_s).
    """
    if int(n_servers) < 0:
        raise InvalidInputError(f"n_servers must be >= 0, got {n_servers}")
    n_servers = int(n_servers)
    if not (0.0 < peak_utilisation <= 1.0):
        raise InvalidInputError(f"peak_utilisation must be in (0, 1], got {peak_utilisation}")
    name = os.fspath(spec)
    meta: dict[str, Any] = {"peak_utilisation": float(peak_utilisation)}
    if name not in ("bundled", "diurnal"):
        path = Path(name)
        if not path.is_file():
            raise InvalidInputError(
                f"spec: expected 'bundled', 'diurnal' or a CSV path, got {name!r}"
            )
        times, need = _read_csv_demand(path, n_servers)
        return InferenceDemand(times, need, n_servers, name, {"csv": name})
    if not (span_s > 0 and math.isfinite(span_s)):
        raise InvalidInputError(f"span_s must be finite and > 0, got {span_s}")
    if not (step_s > 0 and math.isfinite(step_s)):
        raise InvalidInputError(f"step_s must be finite and > 0, got {step_s}")
    if not math.isfinite(start_s):
        raise InvalidInputError(f"start_s must be finite, got {start_s}")
    n_steps = math.ceil(span_s / step_s)
    if n_steps > MAX_STEPS:
        raise InvalidInputError(
            f"span_s / step_s = {n_steps:,} steps, more than {MAX_STEPS:,} "
            f"(span_s {span_s}, step_s {step_s})"
        )
    offsets = np.arange(n_steps, dtype=np.float64) * step_s
    mid = offsets + step_s / 2.0
    if name == "bundled":
        prof = bundled_profile()
        slot_s = float(prof["offset_s"].iloc[1] - prof["offset_s"].iloc[0])
        centres = prof["offset_s"].to_numpy() + slot_s / 2.0
        load = np.interp(np.mod(mid, DAY_S), centres, prof["load"].to_numpy(), period=DAY_S)
        meta.update({"profile": "aryl/data/inference_profile.csv", "slot_s": slot_s,
                     "origin": "Alibaba GenAI serving trace 2026 (qps.csv), normalised"})
    else:
        if not 0.0 <= trough_fraction <= 1.0:
            raise InvalidInputError(f"trough_fraction must be in [0, 1], got {trough_fraction}")
        if not (noise_sigma >= 0 and math.isfinite(noise_sigma)):
            raise InvalidInputError(f"noise_sigma must be finite and >= 0, got {noise_sigma}")
        if not math.isfinite(trough_time_s):
            raise InvalidInputError(f"trough_time_s must be finite, got {trough_time_s}")
        check_seed(seed)
        phase = 2.0 * np.pi * (mid - trough_time_s) / DAY_S
        load = trough_fraction + (1.0 - trough_fraction) * 0.5 * (1.0 - np.cos(phase))
        rng = np.random.default_rng(seed)
        load = np.clip(load * (1.0 + noise_sigma * rng.standard_normal(n_steps)), 0.0, 1.0)
        meta.update({
            "formula": "trough + (1 - trough) * (1 - cos(2 pi (t - trough_time_s) / 86400)) / 2"
                       " * (1 + noise_sigma * N(0,1)), clipped to [0, 1]",
            "trough_fraction": float(trough_fraction), "trough_time_s": float(trough_time_s),
            "noise_sigma": float(noise_sigma), "seed": int(seed),
        })
    meta.update({"step_s": float(step_s), "start_s": float(start_s), "span_s": float(span_s)})
    need = _scale(load, n_servers, peak_utilisation)
    return InferenceDemand(offsets + float(start_s), need, n_servers, name, meta)
