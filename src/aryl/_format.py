"""The one number format of the CLI tables, results.md and sweep reports."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["fmt_number"]


def fmt_number(v: Any) -> str:
    """Number format shared by the CLI tables and results.md.

    Integers (counts) print whole with thousands separators; floats with 0, 2
    or 3 decimals by magnitude; missing values (None, NaN, ``pd.NA``) as "–".
    """
    if v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and not math.isfinite(v)):
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else ""
    if isinstance(v, (int, float, np.integer, np.floating)) and v == 0:
        return "0"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 1:
            return f"{v:.2f}"
        return f"{v:.3f}"
    return str(v)


