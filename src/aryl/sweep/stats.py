"""Statistics over seeds: means, Student-t 95% intervals, ratios paired by seed.

For ``n`` finite values ``x_1..x_n`` (one per seed) of a measure:

* mean ``m = sum(x) / n``;
* 95% confidence interval ``m ± t(0.975, n - 1) * s / sqrt(n)`` with ``s``
  the sample standard deviation (``ddof = 1``) and ``t`` Student's
  distribution (:func:`scipy.stats.t.ppf`).  It assumes the per-seed values are
  independent draws from a distribution whose mean is estimated; with ``n = 1``
  the half-width is undefined (NaN, shown as "–"); with identical values it is 0.

**Ratios to a baseline** are paired by seed: for each seed ``k`` present in both
the run's scenario and the baseline's, ``r_k = x_k / b_k``; the mean and
interval above are then taken over the ``r_k``.  This is the mean of per-seed
ratios, not the ratio of means (the two differ when the values vary a lot
between seeds), and pairing removes the variation both share (same trace
sample, same inference noise for the same seed).  A pair with a zero or
non-finite denominator, or a non-finite value, is left out, and ``n`` counts
the pairs used.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

__all__ = ["CONFIDENCE", "mean_ci", "paired_ratios"]

CONFIDENCE = 0.95


def mean_ci(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float, float, int]:
    """Mean, interval half-width and count of the finite values.

    Parameters
    ----------
    values : iterable of float
        One value per seed; NaN and infinities are left out.
    confidence : float in (0, 1)

    Returns
    -------
    (float, float, int)
        ``(mean, half_width, n)``; ``(nan, nan, 0)`` when nothing is finite,
        ``(x, nan, 1)`` for one value.

    Notes
    -----
    Student-t interval (module docstring).  O(n).
    """
    from scipy import stats

    x = np.asarray([float(v) for v in values], dtype=np.float64)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    if np.all(x == x[0]):  # identical values (a seed-independent policy): exactly, no rounding
        return float(x[0]), (0.0 if n > 1 else math.nan), n
    m = float(x.mean())
    s = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1)) * s / math.sqrt(n)
    return m, half, n


def paired_ratios(
    values: dict[int, float], baseline: dict[int, float]
) -> list[float]:
    """Per-seed ratios ``values[k] / baseline[k]`` over the seeds both have.

    Pairs with a non-finite value or a zero or non-finite denominator are left
    out.  Sorted by seed.
    """
    out = []
    for k in sorted(set(values) & set(baseline)):
        a, b = float(values[k]), float(baseline[k])
        if math.isfinite(a) and math.isfinite(b) and b != 0.0:
            out.append(a / b)
    return out
