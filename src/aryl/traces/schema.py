"""The canonical job trace: columns, units, dtypes and the :class:`Trace` container.

Canonical schema (one row per job, ``[Aryl]`` §2 job model)
-----------------------------------------------------------

==================  =========  ======================================================
column              dtype      meaning (unit)
==================  =========  ======================================================
``job_id``          str        unique job identifier
``submit_time_s``   float64    submission time, seconds.  For timestamp formats
                               (Philly, Helios with dates) seconds since the Unix
                               epoch in UTC; for relative formats (ITP, PAI, pods)
                               the traced relative seconds.
``duration_s``      float64    run time at the traced size, seconds (> 0)
``gpus``            int64      GPUs at the traced size (>= 1)
``gpus_per_worker`` int64      optional: GPUs per worker ``g`` (>= 1)
``min_workers``     int64      optional: base workers ``b`` (>= 1)
``max_workers``     int64      optional: maximum workers ``m`` (>= ``b``)
``elastic``         bool       optional: the job may run with ``b..m`` workers
                               (a rigid job has ``b == m``)
``alpha``           float64    optional: scaling parameter of
                               ``T(w) = w / (1 + alpha (w - 1))`` (in [0, 1])
``tenant``          str        optional: virtual cluster / queue / user group
``priority``        int64      optional: larger is more important
``gpu_type``        str        optional: GPU model (or ``|``-separated allowed models)
==================  =========  ======================================================

The five scaling columns (``gpus_per_worker`` .. ``alpha``) come as a set: a
trace has all of them or none.  Rows are sorted by ``submit_time_s``; ties keep
the input order (stable sort), so a trace whose rows are shuffled but whose
submit times are distinct loads to the same table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CANONICAL_COLUMNS",
    "DTYPES",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "SCALING_COLUMNS",
    "Trace",
    "canonical_frame",
]

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time_s", "duration_s", "gpus")
SCALING_COLUMNS: tuple[str, ...] = (
    "gpus_per_worker",
    "min_workers",
    "max_workers",
    "elastic",
    "alpha",
)
OPTIONAL_COLUMNS: tuple[str, ...] = (
    *SCALING_COLUMNS, "tenant", "priority", "gpu_type", "model",
)
CANONICAL_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS

# column -> "str" | "float64" | "int64" | "bool"
DTYPES: dict[str, str] = {
    "job_id": "str",
    "submit_time_s": "float64",
    "duration_s": "float64",
    "gpus": "int64",
    "gpus_per_worker": "int64",
    "min_workers": "int64",
    "max_workers": "int64",
    "elastic": "bool",
    "alpha": "float64",
    "tenant": "str",
    "priority": "int64",
    "gpu_type": "str",
    "model": "str",
}


def canonical_frame(
    columns: Mapping[str, Any], *, sort: bool = True, copy: bool = True
) -> pd.DataFrame:
    """Build a canonical job table from column arrays.

    Parameters
    ----------
    columns : mapping of str to array-like
        Canonical column name -> values (equal lengths).  Unknown names are an
        error; missing optional columns are simply absent.
    sort : bool, default True
        Sort rows by ``submit_time_s`` with a stable sort (ties keep the given
        order).  O(n log n).
    copy : bool, default True
        Copy columns that already have their canonical dtype.  ``False`` lets
        the frame hold the given arrays (for a caller that owns them and lets
        them go: one copy of a large trace, not two).

    Returns
    -------
    pandas.DataFrame
        Columns in canonical order with the canonical dtypes and a fresh
        ``RangeIndex``.

    Raises
    ------
    KeyError
        If a required column is missing or an unknown one is given.
    """
    unknown = set(columns) - set(CANONICAL_COLUMNS)
    if unknown:
        raise KeyError(f"unknown trace columns: {sorted(unknown)}")
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise KeyError(f"missing trace columns: {missing}")
    data: dict[str, Any] = {}
    for name in CANONICAL_COLUMNS:
        if name not in columns:
            continue
        kind = DTYPES[name]
        values = columns[name]
        if kind == "str":
            if isinstance(values, pd.api.extensions.ExtensionArray) and values.dtype == "str":
                data[name] = values  # already the canonical dtype (no object round trip)
            else:
                data[name] = pd.array(np.asarray(values, dtype=object).astype(str), dtype="str")
        else:
            data[name] = np.asarray(values, dtype=kind)
    df = pd.DataFrame(data, copy=copy)
    if sort and len(df):
        submit = df["submit_time_s"].to_numpy()
        # a sorted table (NaN-free and non-decreasing) stays as it is: no copy
        if not bool(np.all(submit[1:] >= submit[:-1])):
            order = np.argsort(submit, kind="stable")
            df = df.iloc[order].reset_index(drop=True)
    return df


@dataclasses.dataclass(frozen=True)
class Trace:
    """A validated job trace in canonical form ``[Aryl]``.

    Attributes
    ----------
    jobs : pandas.DataFrame
        One row per job, canonical columns and dtypes (see the module
        docstring), sorted by ``submit_time_s`` (stable on input order).
    source : str
        Where it came from (a path or a preset name).
    format : str
        The reader that produced it (``canonical``, ``philly``, ``itp``,
        ``helios``, ``pai2020``, ``alibaba2023``).
    dropped : dict of str to int
        Rows dropped, by kind (see :mod:`aryl.traces.validate`); empty when
        nothing was dropped.
    meta : dict
        Provenance: time zone, window, synthesis parameters and seed, rounding
        counts, and so on.
    """

    jobs: pd.DataFrame
    source: str = ""
    format: str = "canonical"
    dropped: dict[str, int] = dataclasses.field(default_factory=dict)
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def n_jobs(self) -> int:
        """Number of jobs (rows)."""
        return len(self.jobs)

    @property
    def span_s(self) -> float:
        """Last minus first submit time, seconds (0.0 for fewer than two jobs)."""
        if len(self.jobs) < 2:
            return 0.0
        t = self.jobs["submit_time_s"].to_numpy()
        return float(t[-1] - t[0])

    @property
    def has_scaling(self) -> bool:
        """Whether the five scaling columns are present."""
        return all(c in self.jobs.columns for c in SCALING_COLUMNS)

    def replace(self, **changes: Any) -> Trace:
        """Return a copy with some fields replaced (:func:`dataclasses.replace`)."""
        return dataclasses.replace(self, **changes)
