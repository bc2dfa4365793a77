"""Time windows ``[start, end)`` over a canonical trace.

Rule (documented choice): a job is in the window when its **submit time** is in
``[start, end)``.  A job submitted before ``start`` is out even if it is still
running at ``start`` (it straddles the start edge); a job submitted before
``end`` is kept whole even if it runs past ``end`` (durations are never
clipped).  Times are not rebased: ``submit_time_s`` keeps its time base.

Window specs
------------
``"busiest-15d"`` (any ``busiest-<N>d`` or ``busiest-<N>h``)
    The ``N``-day window holding the most submissions, over all windows that
    start at a job's submit time; ties go to the earliest start.  O(n log n).
``"START,END"``
    Each bound is a number (seconds in the trace's time base) or a date-time
    (for timestamp formats; naive date-times are local times in the trace's
    ``tz``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError

__all__ = ["busiest_window", "parse_window", "window_mask"]

_BUSIEST = re.compile(r"^busiest-(\d+(?:\.\d+)?)([dh])$")


def busiest_window(submit_time_s: np.ndarray, length_s: float) -> tuple[float, float, int]:
    """The ``[start, start + length_s)`` window with the most submissions.

    Parameters
    ----------
    submit_time_s : numpy.ndarray of float64, shape (n,)
        Submit times (any order).
    length_s : float
        Window length, seconds (> 0).

    Returns
    -------
    start_s, end_s : float
        The window; ``start_s`` is a submit time.  Ties: earliest start.
    n_jobs : int
        Submissions in it.

    Notes
    -----
    O(n log n): sort, then one ``searchsorted`` for every candidate start.
    """
    if not length_s > 0:
        raise InvalidInputError(f"window: length must be > 0 s, got {length_s}")
    t = np.sort(np.asarray(submit_time_s, dtype=np.float64))
    if len(t) == 0:
        raise InvalidInputError("window: the trace has no jobs")
    counts = np.searchsorted(t, t + length_s, side="left") - np.arange(len(t))
    i = int(np.argmax(counts))  # first maximum = earliest start
    return float(t[i]), float(t[i] + length_s), int(counts[i])


def _bound(text: str, tz: str | None) -> float:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    if tz is None:
        raise InvalidInputError(
            f"window: {text!r} is not a number of seconds (date-times need a timestamp trace)"
        )
    try:
        stamp = pd.Timestamp(text)
    except ValueError as exc:
        raise InvalidInputError(f"window: cannot parse bound {text!r}") from exc
    if stamp.tzinfo is None:
        stamp = stamp.tz_localize(tz)
    return float((stamp - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1))


def parse_window(
    spec: str | Sequence[float], submit_time_s: np.ndarray, *, tz: str | None = None
) -> tuple[float, float, dict[str, Any]]:
    """Resolve a window spec to ``(start_s, end_s, meta)``.

    Raises
    ------
    InvalidInputError
        If the spec does not parse, a bound is not finite, or ``end <= start``.
    """
    if not isinstance(spec, str):
        try:
            pair = [float(x) for x in spec]
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"window: expected a string or a (start_s, end_s) pair of numbers, got {spec!r}"
            ) from exc
        if len(pair) != 2:
            raise InvalidInputError(
                f"window: expected a (start_s, end_s) pair, got {len(pair)} values"
            )
        spec = (pair[0], pair[1])
    meta: dict[str, Any] = {"spec": spec if isinstance(spec, str) else list(spec)}
    if isinstance(spec, tuple):
        start, end = spec
    else:
        match = _BUSIEST.match(spec.strip())
        if match:
            length = float(match.group(1)) * (86400.0 if match.group(2) == "d" else 3600.0)
            start, end, _ = busiest_window(submit_time_s, length)
            meta["rule"] = "most submissions; earliest start on ties"
        else:
            parts = spec.split(",")
            if len(parts) != 2:
                raise InvalidInputError(
                    f"window: expected 'busiest-<N>d' or 'START,END', got {spec!r}"
                )
            start, end = _bound(parts[0], tz), _bound(parts[1], tz)
    for name, value in (("start", start), ("end", end)):
        if not np.isfinite(value):
            raise InvalidInputError(f"window: {name} must be a finite time, got {value}")
    if not end > start:
        raise InvalidInputError(f"window: end ({end}) must be after start ({start})")
    meta.update({"start_s": start, "end_s": end, "edge_rule": "submit_time_s in [start, end)"})
    return start, end, meta


def window_mask(submit_time_s: np.ndarray, start_s: float, end_s: float) -> np.ndarray:
    """Boolean mask of jobs submitted in ``[start_s, end_s)``."""
    t = np.asarray(submit_time_s, dtype=np.float64)
    return (t >= start_s) & (t < end_s)
