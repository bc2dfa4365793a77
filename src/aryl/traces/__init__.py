"""Job traces and inference demand for the simulator ``[Aryl]``.

* :func:`load_trace` reads a trace file (canonical CSV/Parquet, Microsoft
  Philly and ITP, Alibaba PAI 2020 and 2023, SenseTime Helios), a bundled
  preset or a canonical DataFrame into a validated canonical :class:`Trace`
  (bad rows: :class:`InvalidRowsError`); :func:`write_trace` writes
  one back (CSV or Parquet, atomically).
* :func:`synthesize_elastic` makes a seeded fraction of jobs elastic.
* :data:`PRESETS` / :func:`list_presets`: the bundled ITP clusters
  (``itp-c07`` is the default).
* :mod:`aryl.traces.inference`: the inference cluster's ``servers_needed(t)``.

Schema and units: :mod:`aryl.traces.schema`; readers and their mapping:
:mod:`aryl.traces.readers`; validation rules: :mod:`aryl.traces.validate`;
windows: :mod:`aryl.traces.window`.
"""

from __future__ import annotations

from aryl.traces.elastic import synthesize_elastic
from aryl.traces.loader import load_trace, write_trace
from aryl.traces.presets import DEFAULT_PRESET, PRESETS, Preset, list_presets
from aryl.traces.schema import CANONICAL_COLUMNS, Trace
from aryl.traces.validate import InvalidRowsError

__all__ = [
    "CANONICAL_COLUMNS",
    "DEFAULT_PRESET",
    "PRESETS",
    "InvalidRowsError",
    "Preset",
    "Trace",
    "list_presets",
    "load_trace",
    "synthesize_elastic",
    "write_trace",
]
