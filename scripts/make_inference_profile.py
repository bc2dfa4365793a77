"""Derive the bundled inference day profile from the Alibaba GenAI serving QPS.

Usage::

    python scripts/make_inference_profile.py [QPS_CSV] [OUT_CSV]

defaults: ``../shared/traces/alibaba-genai-serving-2026/qps.csv`` (relative to
the repository) and ``src/aryl/data/inference_profile.csv``.

Method (deterministic):

1. Sum ``value`` (scaled QPS) over all containers and request types.
2. Cut time into 48 half-hour slots from the first sample (slot 0 starts at
   the first ``timestamp_anon``; the trace's time of day is anonymised, so slot
   0 is "trace start", not midnight).  Load of a slot = summed value / minutes
   of the slot inside the sampled span (a per-minute rate; minutes without a
   row count as zero load).
3. The trace covers ~22.3 h, so the slots after its end are filled by linear
   interpolation between the last covered slot and slot 0 of the next day
   (cyclic), and a partially covered last slot is kept as measured.
4. Normalise: divide by the maximum (peak = 1).

Only the 48 fitted numbers are written, with an attribution header.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from aryl._io import atomic_write_text
from aryl.errors import InvalidInputError

SLOT_S = 1800.0
N_SLOTS = 48


def profile(qps_csv: Path) -> tuple[np.ndarray, int]:
    """Return (48 normalised slot values, number of slots covered by data)."""
    qps = pd.read_csv(qps_csv, dtype={"timestamp_anon": "float64", "value": "float64"})
    t = qps["timestamp_anon"].to_numpy()
    v = qps["value"].to_numpy()
    t0, t1 = float(t.min()), float(t.max())
    slot = ((t - t0) // SLOT_S).astype(np.int64)
    sums = np.bincount(slot, weights=v, minlength=N_SLOTS)[:N_SLOTS]
    n_covered = int(slot.max()) + 1
    span_end = t1 + 60.0  # the last sample stands for its minute
    minutes = np.array(
        [max(0.0, min(span_end, t0 + (k + 1) * SLOT_S) - (t0 + k * SLOT_S)) / 60.0
         for k in range(N_SLOTS)]
    )
    rate = np.zeros(N_SLOTS)
    rate[:n_covered] = sums[:n_covered] / minutes[:n_covered]
    if n_covered < N_SLOTS:  # cyclic linear fill of the uncovered tail
        last, first = rate[n_covered - 1], rate[0]
        gap = N_SLOTS - n_covered + 1
        for j, k in enumerate(range(n_covered, N_SLOTS), start=1):
            rate[k] = last + (first - last) * j / gap
    return rate / rate.max(), n_covered


def main(argv: list[str]) -> int:
    repo = Path(__file__).resolve().parent.parent
    src = Path(argv[1]) if len(argv) > 1 else (
        repo.parent / "shared" / "traces" / "alibaba-genai-serving-2026" / "qps.csv")
    default_out = repo / "src" / "aryl" / "data" / "inference_profile.csv"
    out = Path(argv[2]) if len(argv) > 2 else default_out
    if not src.is_file():
        print(f"error: QPS_CSV {str(src)!r} does not exist", file=sys.stderr)
        return 2
    values, n_covered = profile(src)
    header = (
        "# aryl inference day profile: 48 half-hour slots, load normalised to peak = 1.\n"
        "# Derived (scripts/make_inference_profile.py) from qps.csv of the Alibaba GenAI\n"
        "# serving trace (github.com/alibaba/clusterdata, cluster-trace-v2026-GenAI,\n"
        "# commit 7a6c496e4f4b6ce6150be8f881cb051bf2abff42). Research use; cite\n"
        "# \"Understanding Diffusion Model Serving in Production\" (SoCC'25).\n"
        f"# Slots 0..{n_covered - 1} measured; slots {n_covered}..47 linearly interpolated\n"
        "# (cyclic) because the trace covers ~22.3 h. Slot 0 = trace start (time of day\n"
        "# anonymised). Only these fitted numbers are shipped, not the raw series.\n"
    )
    rows = "".join(f"{k * int(SLOT_S)},{x:.6f}\n" for k, x in enumerate(values))
    try:
        atomic_write_text(out, header + "offset_s,load\n" + rows)
    except (InvalidInputError, OSError) as exc:
        print(f"error: cannot write OUT_CSV {str(out)!r}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {N_SLOTS} slots, {n_covered} measured, min {values.min():.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
