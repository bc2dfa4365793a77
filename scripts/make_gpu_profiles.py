"""Derive the bundled per-GPU-type speed table from the Sia / Pollux profiles.

Usage::

    python scripts/make_gpu_profiles.py PROFILES_DIR [OUT_CSV]

``PROFILES_DIR`` is the ``sia-simulator/traces/`` folder of
github.com/siasosp23/artifacts (commit ``aaf7a0d``): one sub-folder per model with
``placements-<type>.csv`` and ``scalability-<type>.csv``.  ``OUT_CSV`` defaults to
``src/aryl/data/gpu_speeds.csv``.  The raw files are research data without a
licence: they are read from the given path and never copied; only the derived
numbers below are written (with attribution).

Method (deterministic; the choices are argued in ``src/aryl/data/README.md``)
------------------------------------------------------------------------------
1. GPU types: ``aws`` -> ``T4``, ``azure`` -> ``V100``, ``dgx`` -> ``A100``,
   ``rtx`` -> ``RTX2080Ti``, ``quad`` -> ``QuadroRTX6000``.  ``dgx-ext`` (the same
   A100 machines, more batch sizes) is only a cross-check, printed, not written.
   Families written: ``bert``, ``cifar10``, ``deepspeech2``, ``imagenet``,
   ``yolov3``.  Left out (printed with the reason): ``ncf`` (its V100 profile is
   10-20x slower than every other GPU: a host bottleneck, not GPU speed) and
   ``gpt_pmp`` (model parallel, no V100/T4 profile, no single-GPU run).
2. Replica counts: ``w`` = 1, 2, 4, 8, ... (powers of two).  A ``placements``
   row's ``w`` is the sum of the digits of ``placement`` and its node count the
   number of digits; a ``scalability`` row gives ``num_replicas`` and
   ``num_nodes``.
3. Per-replica batch size ``B`` of a family: the largest ``local_bsz`` that the
   ``placements`` file of *every* type profiles at *every* power-of-two ``w``
   it covers (1..16; 1..4 for the single 4-GPU Quadro node).  So the speed
   ratios and the whole scaling curve are measured at one ``B``.
4. Throughput of ``(family, type, w)``: among the rows of both files with
   ``local_bsz == B`` and ``w`` replicas, the fastest placement (shortest
   ``step_time``; ties: fewer nodes, then the placement string);
   ``samples_per_s = w * B / step_time``.  (The fewest-nodes rule is printed
   for comparison.)
5. ``relative_speed`` = ``samples_per_s(type, 1) / samples_per_s(V100, 1)``.
   ``scaling_measured`` = ``samples_per_s(type, w) / samples_per_s(type, 1)``;
   ``scaling`` = its running maximum over ``w`` capped at ``w`` (non-decreasing,
   never above linear), the curve :mod:`aryl.speeds` uses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from aryl._io import atomic_write_text
from aryl.errors import InvalidInputError

#: file suffix -> GPU type name, in output order
TYPES: dict[str, str] = {
    "aws": "T4",
    "azure": "V100",
    "dgx": "A100",
    "rtx": "RTX2080Ti",
    "quad": "QuadroRTX6000",
}
REFERENCE = "V100"
FAMILIES: tuple[str, ...] = ("bert", "cifar10", "deepspeech2", "imagenet", "yolov3")
#: profiled but not written, and why
EXCLUDED: dict[str, str] = {
    "ncf": "its V100 (azure) step times are 10-20x those of every other type at every "
           "batch size, a host bottleneck of those runs, not GPU speed (Sia's own workload "
           "generator leaves ncf out)",
    "gpt_pmp": "pipeline/model parallel, profiled only on A100 (dgx-ext) and RTX 2080 Ti, "
               "with no single-GPU run and no V100 or T4 profile",
}
CROSS_CHECK = ("dgx-ext", "A100")
OUT_COLUMNS = (
    "family", "gpu_type", "local_bsz", "replicas", "n_nodes", "source",
    "step_time_s", "samples_per_s", "relative_speed", "scaling_measured", "scaling",
)


def _pow2(w: int) -> bool:
    return w >= 1 and (w & (w - 1)) == 0


def read_rows(folder: Path, suffix: str) -> pd.DataFrame:
    """Rows of ``placements-<suffix>.csv`` and ``scalability-<suffix>.csv`` of one model.

    Returns columns ``local_bsz`` (int64), ``replicas`` (int64), ``n_nodes``
    (int64), ``step_time_s`` (float64), ``source`` (str: ``placement:<digits>`` or
    ``scalability:<nodes>n``).  Column order in the files varies; the header
    is read.
    """
    parts = []
    pfile = folder / f"placements-{suffix}.csv"
    p = pd.read_csv(pfile, dtype={"placement": str})
    missing = {"placement", "local_bsz", "step_time"} - set(p.columns)
    if missing:
        raise InvalidInputError(f"{pfile}: missing columns {sorted(missing)}")
    if not p["placement"].str.fullmatch(r"[1-9]+").all():
        bad = p.index[~p["placement"].str.fullmatch(r"[1-9]+")][0]
        raise InvalidInputError(f"{pfile}: line {bad + 2}: bad placement {p['placement'][bad]!r}")
    parts.append(pd.DataFrame({
        "local_bsz": p["local_bsz"].astype(np.int64),
        "replicas": p["placement"].map(lambda s: sum(int(c) for c in s)).astype(np.int64),
        "n_nodes": p["placement"].str.len().astype(np.int64),
        "step_time_s": p["step_time"].astype(np.float64),
        "source": "placement:" + p["placement"],
        "file": "placements",
    }))
    sfile = folder / f"scalability-{suffix}.csv"
    if sfile.is_file():
        s = pd.read_csv(sfile)
        missing = {"num_nodes", "num_replicas", "local_bsz", "step_time"} - set(s.columns)
        if missing:
            raise InvalidInputError(f"{sfile}: missing columns {sorted(missing)}")
        parts.append(pd.DataFrame({
            "local_bsz": s["local_bsz"].astype(np.int64),
            "replicas": s["num_replicas"].astype(np.int64),
            "n_nodes": s["num_nodes"].astype(np.int64),
            "step_time_s": s["step_time"].astype(np.float64),
            "source": "scalability:" + s["num_nodes"].astype(str) + "n",
            "file": "scalability",
        }))
    out = pd.concat(parts, ignore_index=True)
    if not (out["step_time_s"] > 0).all():
        raise InvalidInputError(f"{folder}: non-positive step_time for {suffix}")
    return out


def choose_bsz(rows: dict[str, pd.DataFrame]) -> int:
    """Largest ``local_bsz`` in every type's placements at every power-of-two ``w`` it covers."""
    common: set[int] | None = None
    for df in rows.values():
        pl = df[df["file"] == "placements"]
        ws = sorted(w for w in pl["replicas"].unique() if _pow2(int(w)))
        for w in ws:
            b = set(pl.loc[pl["replicas"] == w, "local_bsz"].astype(int))
            common = b if common is None else common & b
    if not common:
        raise InvalidInputError("no local_bsz is profiled on every type at every replica count")
    return max(common)


def best_rows(df: pd.DataFrame, bsz: int, *, compact: bool = False) -> pd.DataFrame:
    """One row per power-of-two ``w`` at ``local_bsz == bsz``.

    Default: the fastest placement (shortest step time; ties: fewer nodes, then
    the ``source`` string).  ``compact=True``: the fewest nodes, then the fastest
    (printed for comparison only).
    """
    d = df[(df["local_bsz"] == bsz) & df["replicas"].map(lambda w: _pow2(int(w)))]
    keys = ["n_nodes", "step_time_s"] if compact else ["step_time_s", "n_nodes"]
    d = d.sort_values(["replicas", *keys, "source"], kind="stable")
    return d.groupby("replicas", sort=True).head(1).reset_index(drop=True)


def derive_family(folder: Path, *, compact: bool = False) -> tuple[pd.DataFrame, int]:
    """Rows of one family (every type and power-of-two replica count) and its batch size."""
    rows = {t: read_rows(folder, sfx) for sfx, t in TYPES.items()}
    bsz = choose_bsz(rows)
    per_type = []
    for t, df in rows.items():
        b = best_rows(df, bsz, compact=compact)
        if len(b) == 0 or int(b["replicas"].iloc[0]) != 1:
            raise InvalidInputError(f"{folder.name}/{t}: no single-replica row at local_bsz {bsz}")
        b["samples_per_s"] = b["replicas"] * bsz / b["step_time_s"]
        one = float(b["samples_per_s"].iloc[0])
        b["scaling_measured"] = b["samples_per_s"] / one
        env = np.maximum.accumulate(b["scaling_measured"].to_numpy())
        env = np.minimum(env, b["replicas"].to_numpy().astype(np.float64))
        env[0] = 1.0
        b["scaling"] = env
        b.insert(0, "gpu_type", t)
        b.insert(0, "family", folder.name)
        b["local_bsz"] = bsz
        per_type.append(b)
    out = pd.concat(per_type, ignore_index=True)
    ref_1 = float(out.loc[(out["gpu_type"] == REFERENCE) & (out["replicas"] == 1),
                          "samples_per_s"].iloc[0])
    one = out[out["replicas"] == 1].set_index("gpu_type")["samples_per_s"]
    out["relative_speed"] = out["gpu_type"].map(one) / ref_1
    return out[list(OUT_COLUMNS)], bsz


def _notes(profiles: Path, fam: str, table: pd.DataFrame, bsz: int) -> list[str]:
    """Cross-checks printed with the summary (not written)."""
    folder = profiles / fam
    notes = []
    # (1) dgx-ext: the same A100 machines profiled again, at the same placement
    ext = read_rows(folder, CROSS_CHECK[0])
    ext = ext[(ext["file"] == "placements") & (ext["local_bsz"] == bsz)]
    a100 = table[table["gpu_type"] == CROSS_CHECK[1]]
    ratios = [float(ext.loc[ext["source"] == r.source, "step_time_s"].min()) / r.step_time_s
              for r in a100.itertuples() if (ext["source"] == r.source).any()]
    if ratios:
        notes.append(f"  dgx-ext/dgx step time at the chosen A100 placements "
                     f"{min(ratios):.3f}..{max(ratios):.3f} ({len(ratios)} placements)")
    # (2) the fewest-nodes rule instead of the fastest placement, at 8 replicas
    comp, _ = derive_family(folder, compact=True)
    c8 = comp[comp["replicas"] == 8].set_index("gpu_type")["scaling_measured"]
    b8 = table[table["replicas"] == 8].set_index("gpu_type")["scaling_measured"]
    notes.append("  scaling_measured at 8 replicas, fastest vs fewest-nodes placement: "
                 + ", ".join(f"{t} {b8[t]:.2f} vs {c8[t]:.2f}" for t in b8.index))
    # (3) single-GPU speed at the smallest batch profiled on every type
    rows = {t: read_rows(folder, sfx) for sfx, t in TYPES.items()}
    common = set.intersection(*[set(df.loc[(df["file"] == "placements") & (df["replicas"] == 1),
                                           "local_bsz"].astype(int)) for df in rows.values()])
    small = min(common)
    st = {t: float(df.loc[(df["file"] == "placements") & (df["source"] == "placement:1")
                          & (df["local_bsz"] == small), "step_time_s"].min())
          for t, df in rows.items()}
    notes.append(f"  relative speed at local_bsz {small} instead of {bsz}: "
                 + ", ".join(f"{t} {st[REFERENCE] / st[t]:.3f}" for t in st))
    # (4) extrapolation beyond 16 replicas, checked where more was profiled
    for t, g in table.groupby("gpu_type", sort=False):
        g = g.set_index("replicas")["scaling"]
        if 16 in g.index and g.index.max() > 16:
            beta = min(max(float(np.log2(g[16] / g[8])), 0.0), 1.0)
            checks = [f"{r}: measured {g[r]:.2f}, doubling rule {g[16] * (r / 16) ** beta:.2f}, "
                      f"efficiency rule {g[16] * r / 16:.2f}, flat rule {g[16]:.2f}"
                      for r in g.index if r > 16]
            notes.append(f"  {t} beyond 16 replicas from the 16-replica point: "
                         + "; ".join(checks))
    return notes


def derive(profiles: Path) -> tuple[pd.DataFrame, dict[str, int], list[str]]:
    """The speed table, the chosen batch size per family, and cross-check notes."""
    tables = []
    chosen: dict[str, int] = {}
    notes: list[str] = []
    for fam in FAMILIES:
        t, bsz = derive_family(profiles / fam)
        tables.append(t)
        chosen[fam] = bsz
        notes.append(f"{fam} (local_bsz {bsz}):")
        notes.extend(_notes(profiles, fam, t, bsz))
    for fam, why in EXCLUDED.items():
        notes.append(f"not bundled: {fam}: {why}")
        if fam == "ncf" and (profiles / fam).is_dir():
            t, bsz = derive_family(profiles / fam)
            one = t[t["replicas"] == 1].set_index("gpu_type")["relative_speed"]
            notes.append(f"  ncf relative speed at local_bsz {bsz} would be: "
                         + ", ".join(f"{k} {v:.2f}" for k, v in one.items()))
    return pd.concat(tables, ignore_index=True), chosen, notes


def render(table: pd.DataFrame, chosen: dict[str, int]) -> str:
    """CSV text with an attribution header (``#`` lines)."""
    bsz = ", ".join(f"{f} {b}" for f, b in chosen.items())
    header = (
        "# aryl GPU speed table: per model family and GPU type, training throughput at a\n"
        "# fixed per-replica batch (local_bsz), its single-GPU speed relative to V100\n"
        "# (relative_speed) and its scaling over data-parallel replicas (throughput at w\n"
        "# replicas / at 1; scaling = running max capped at w). Derived by\n"
        "# scripts/make_gpu_profiles.py from the measured step times of the Sia artifact\n"
        "# (github.com/siasosp23/artifacts, commit aaf7a0d, sia-simulator/traces/), which\n"
        "# builds on the Pollux artifact (petuum/adaptdl). Cite: Jayaram Subramanya et al.,\n"
        "# \"Sia: Heterogeneity-aware, goodput-optimized ML-cluster scheduling\", SOSP'23;\n"
        "# Qiao et al., \"Pollux: Co-adaptive cluster scheduling for goodput-optimized deep\n"
        "# learning\", OSDI'21. Only derived numbers are shipped, not the raw profiles.\n"
        f"# local_bsz per family: {bsz}.\n"
    )
    body = table.to_csv(index=False, lineterminator="\n", float_format="%.6g")
    return header + body


def summary(table: pd.DataFrame) -> str:
    """Headline numbers: relative speed per type and scaling at 8 replicas."""
    rel = table[table["replicas"] == 1].pivot(index="family", columns="gpu_type",
                                              values="relative_speed")
    s8 = table[table["replicas"] == 8].pivot(index="family", columns="gpu_type",
                                             values="scaling")
    cols = [t for t in TYPES.values() if t in rel.columns]
    lines = ["relative single-GPU speed (V100 = 1):", rel[cols].round(3).to_string(),
             "scaling at 8 replicas (throughput / 1 replica):",
             s8[[c for c in cols if c in s8.columns]].round(2).to_string()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: make_gpu_profiles.py PROFILES_DIR [OUT_CSV]", file=sys.stderr)
        return 2
    repo = Path(__file__).resolve().parent.parent
    profiles = Path(argv[1])
    out = Path(argv[2]) if len(argv) > 2 else repo / "src" / "aryl" / "data" / "gpu_speeds.csv"
    missing = [f for f in FAMILIES if not (profiles / f).is_dir()]
    if missing:
        print(f"error: PROFILES_DIR {str(profiles)!r} lacks the model folders {missing}",
              file=sys.stderr)
        return 2
    try:
        table, chosen, notes = derive(profiles)
    except (InvalidInputError, OSError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        atomic_write_text(out, render(table, chosen))
    except (InvalidInputError, OSError) as exc:
        print(f"error: cannot write OUT_CSV {str(out)!r}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {len(table)} rows")
    print(summary(table))
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
