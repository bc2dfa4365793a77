"""``aryl sweep report``: means, 95% intervals and paired ratios over seeds.

Runs are grouped into **scenarios**: runs whose parameters are all equal except
the seed.  For each scenario and each measure, the mean over seeds and its
Student-t 95% interval (:mod:`aryl.sweep.stats`); with a baseline policy, the
ratio ``baseline's measure / measure`` paired by seed (the convention of every
aryl table: baseline / this, so above 1 means this scenario's value is lower,
e.g. a shorter queuing delay; docs/sweep.md).  The **baseline scenario**
of a scenario is the scenario of the baseline policy (without options) on the
same trace that differs from it in the fewest other parameters (0 when the
sweep ran the baseline with the same parameters; 1 for an ablation that
changes one knob the baseline never saw); when two are equally close there is
no ratio (it would be ambiguous).  The ``baseline`` column names the one used.

Output: ``summary.csv`` (every measure, long format), ``summary.md`` (the
shown measures) and one figure per shown measure with 95% error bars, written
to a folder that replaces the previous report as a whole.
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aryl._io import atomic_directory, atomic_write_bytes, atomic_write_dataframe, atomic_write_text
from aryl.errors import InvalidInputError
from aryl.sweep import store
from aryl.sweep.execute import param_columns
from aryl.sweep.spec import _check_measures
from aryl.sweep.stats import CONFIDENCE, mean_ci, paired_ratios

__all__ = [
    "DEFAULT_MEASURES",
    "Report",
    "SweepData",
    "format_ci",
    "load_sweep",
    "measure_table",
    "scenario_labels",
    "shown_measures",
    "summarize",
    "write_report",
]

#: Shown by default (with the spec's own ``[measures]``), when present.
DEFAULT_MEASURES = (
    "mean_queuing_delay_s",
    "mean_jct_s",
    "cluster_usage",
    "preemptions_per_1000_jobs",
)

#: Parameters that say which policy runs (a baseline run differs only in these).
POLICY_COLUMNS = ("policy", "policy_options", "variant")


@dataclasses.dataclass
class SweepData:
    """A sweep folder's finished runs, ready for statistics.

    Attributes
    ----------
    root : Path
    meta : dict
        ``sweep.json``.
    runs : DataFrame
        One row per finished run of the plan (plan order), with the spec's
        expression measures added.
    n_planned : int
    params : list of str
        Parameter columns; a scenario is a combination of their values.
    measures : list of str
        Numeric measure columns (timings included).
    spec_measures : list of str
        Names of the spec's ``[measures]``.
    """

    root: Path
    meta: dict[str, Any]
    runs: pd.DataFrame
    n_planned: int
    params: list[str]
    measures: list[str]
    spec_measures: list[str]


def load_sweep(root: str | os.PathLike[str]) -> SweepData:
    """Read a sweep folder (``sweep.json`` and the finished runs of its plan).

    Raises
    ------
    InvalidInputError
        Not a sweep folder, or a ``[measures]`` expression naming an unknown
        measure (with the closest name).
    """
    base = Path(root)
    meta_path = base / "sweep.json"
    if not meta_path.is_file():
        raise InvalidInputError(f"{base}: not a sweep folder (no sweep.json; run `aryl sweep`)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        keys = [r["key"] for r in meta["runs"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"{meta_path}: unreadable ({exc})") from None
    runs = store.read_runs(base, keys)
    spec = meta.get("spec", {})
    exprs = _check_measures(f"{meta_path}: spec [measures]", spec.get("measures", {}))
    known = set(param_columns()) | {"seed"}
    params = [c for c in param_columns() if c in runs.columns and c not in ("key", "seed")]
    for name, expr in exprs.items():
        try:
            runs[name] = runs.eval(expr, engine="python") if len(runs) else np.nan
        except (NameError, KeyError) as exc:
            cols = [c for c in runs.columns if c not in known]
            missing = str(exc)
            hint = difflib.get_close_matches(missing.split("'")[1] if "'" in missing else "",
                                             cols, n=1)
            raise InvalidInputError(
                f"[measures].{name}: {missing}"
                + (f"; did you mean {hint[0]!r}?" if hint else "")
            ) from None
        if name in runs.columns:
            runs[name] = pd.to_numeric(runs[name], errors="coerce").astype(np.float64)
    measures = [
        c for c in runs.columns
        if c not in known and c not in params and pd.api.types.is_numeric_dtype(runs[c])
        and not pd.api.types.is_bool_dtype(runs[c])
    ]
    return SweepData(base, meta, runs, len(keys), params, measures, list(exprs))


def _norm(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


def scenario_labels(runs: pd.DataFrame, params: Sequence[str]) -> tuple[list[str], list[str]]:
    """A label per run naming what varies across the sweep, and the varying columns.

    The label is the trace (if several), the policy variant, then ``name=value``
    for each other parameter that takes more than one value.
    """
    skip = {"trace_source", "trace_window", "policy", "policy_options", "variant", "seed"}
    varying = [c for c in params if c not in skip
               and runs[c].map(_norm).astype(str).nunique() > 1]
    labels = []
    for _, r in runs.iterrows():
        parts = []
        if "trace" in varying:
            parts.append(str(r["trace"]))
        parts.append(str(r.get("variant", r.get("policy", ""))))
        for c in varying:
            if c == "trace":
                continue
            v = _norm(r[c])
            parts.append(f"{c}={v:g}" if isinstance(v, float) else f"{c}={v}")
        labels.append(" ".join(parts))
    return labels, varying


def summarize(
    data: SweepData, *, baseline: str | None = None, measures: Sequence[str] | None = None
) -> pd.DataFrame:
    """Mean and 95% interval of each measure per scenario, and ratios to a baseline.

    Parameters
    ----------
    data : SweepData
    baseline : str, optional
        Policy (without options) that ratios are taken against.
    measures : sequence of str, optional
        Default: every measure.

    Returns
    -------
    DataFrame
        Long format, one row per (scenario, measure), scenarios in plan order:
        ``scenario`` (label), the varying parameters, ``measure``, ``n`` (seeds
        with a finite value), ``mean``, ``ci95`` (half-width), ``ci_low``,
        ``ci_high``; with a baseline also ``ratio_n``, ``ratio_mean``,
        ``ratio_ci95`` and ``baseline`` (the baseline scenario's label; NaN
        and None where there is none, see the module doc).

    Raises
    ------
    InvalidInputError
        An unknown measure or baseline policy (with the closest name).

    Notes
    -----
    Statistics in :mod:`aryl.sweep.stats`.  O(runs x measures).
    """
    runs = data.runs
    wanted = list(measures) if measures is not None else list(data.measures)
    for m in wanted:
        if m not in data.measures:
            raise InvalidInputError(f"measure: unknown measure {m!r}{_hint(m, data.measures)}")
    if baseline is not None and len(runs) and baseline not in set(runs["policy"]):
        raise InvalidInputError(
            f"baseline: no run of policy {baseline!r} in the sweep"
            f"{_hint(baseline, sorted(set(runs['policy'])))}"
        )
    if not len(runs):
        return pd.DataFrame(columns=["scenario", "measure", "n", "mean", "ci95"])
    labels, varying = scenario_labels(runs, data.params)
    scen_key = [tuple(_norm(v) for v in row) for row in runs[data.params].itertuples(index=False)]
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, k in enumerate(scen_key):
        groups.setdefault(k, []).append(i)
    base_of = _baselines(runs, data.params, groups, baseline) if baseline is not None else {}
    seeds = runs["seed"].to_numpy()
    rows = []
    for k, idx in groups.items():
        first = runs.iloc[idx[0]]
        base_key = base_of.get(k)
        base_idx = groups[base_key] if base_key is not None else None
        for m in wanted:
            col = runs[m].to_numpy(dtype=np.float64)
            vals = {int(seeds[i]): float(col[i]) for i in idx}
            mean, half, n = mean_ci(vals.values())
            row: dict[str, Any] = {"scenario": labels[idx[0]]}
            row.update({c: _norm(first[c]) for c in varying})
            row.update(measure=m, n=n, mean=mean, ci95=half, ci_low=mean - half,
                       ci_high=mean + half)
            if baseline is not None:
                if base_idx is None:
                    rm, rh, rn = math.nan, math.nan, 0
                else:
                    bvals = {int(seeds[i]): float(col[i]) for i in base_idx}
                    # baseline / this, as every aryl table: > 1 = this one is lower
                    rm, rh, rn = mean_ci(paired_ratios(bvals, vals))
                row.update(ratio_n=rn, ratio_mean=rm, ratio_ci95=rh,
                           baseline=labels[base_idx[0]] if base_idx is not None else None)
            rows.append(row)
    return pd.DataFrame(rows)


def _baselines(
    runs: pd.DataFrame,
    params: Sequence[str],
    groups: dict[tuple[Any, ...], list[int]],
    baseline: str,
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Scenario -> its baseline scenario (see :func:`summarize`)."""
    pol = params.index("policy")
    opts = params.index("policy_options") if "policy_options" in params else None
    same = [i for i, c in enumerate(params) if c in ("trace", "trace_source", "trace_window")]
    ctx = [i for i, c in enumerate(params) if c not in POLICY_COLUMNS]
    bases = [k for k in groups
             if k[pol] == baseline and (opts is None or k[opts] in ("{}", None))]
    out: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for k in groups:
        best: list[tuple[Any, ...]] = []
        best_d = None
        for b in bases:
            if any(k[i] != b[i] for i in same):
                continue
            d = sum(k[i] != b[i] for i in ctx)
            if best_d is None or d < best_d:
                best, best_d = [b], d
            elif d == best_d:
                best.append(b)
        if len(best) == 1:
            out[k] = best[0]
    return out


def _hint(name: str, known: Sequence[str]) -> str:
    m = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return f"; did you mean {m[0]!r}?" if m else ""


def shown_measures(data: SweepData, requested: Sequence[str] | None = None) -> list[str]:
    """Measures for tables and figures: ``requested``, else the spec's
    ``[report].measures``, else :data:`DEFAULT_MEASURES` and the spec's
    ``[measures]``.

    Raises
    ------
    InvalidInputError
        An unknown measure (with the closest name).
    """
    if requested:
        names = list(requested)
    else:
        names = data.meta.get("spec", {}).get("report", {}).get("measures") or [
            *(m for m in DEFAULT_MEASURES if m in data.measures), *data.spec_measures
        ]
    for m in names:
        if m not in data.measures:
            raise InvalidInputError(f"measure: unknown measure {m!r}{_hint(m, data.measures)}")
    return list(dict.fromkeys(names))


def format_ci(mean: float, half: float) -> str:
    """``"mean ± half"`` with the number format of the experiment tables."""
    from aryl._format import fmt_number as _fmt

    if not math.isfinite(half):
        return _fmt(mean)
    return f"{_fmt(mean)} ± {_fmt(half)}"


def measure_table(summary: pd.DataFrame, measure: str, baseline: str | None) -> pd.DataFrame:
    """One measure's rows as display strings: scenario, seeds, mean ± CI, ratio ± CI."""
    d = summary[summary["measure"] == measure]
    out = pd.DataFrame({
        "scenario": d["scenario"].to_numpy(),
        "seeds": d["n"].astype(int).to_numpy(),
        "mean ± 95% CI": [format_ci(m, h) for m, h in zip(d["mean"], d["ci95"], strict=True)],
    })
    if baseline is not None and "ratio_mean" in d:
        out[f"{baseline} / this ± 95% CI"] = [
            format_ci(m, h) for m, h in zip(d["ratio_mean"], d["ratio_ci95"], strict=True)
        ]
    return out


def _markdown(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v) for v in row) + " |")
    return "\n".join(lines)


def _figure(summary: pd.DataFrame, measure: str, baseline: str | None) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = summary[summary["measure"] == measure]
    n = len(d)
    ratio = baseline is not None and "ratio_mean" in d and d["ratio_mean"].notna().any()
    ncols = 2 if ratio else 1
    fig, axes = plt.subplots(1, ncols, figsize=(5.0 * ncols + 2.5, 0.32 * n + 1.4),
                             squeeze=False, sharey=True)
    y = np.arange(n)
    ax = axes[0][0]
    ax.errorbar(d["mean"], y, xerr=d["ci95"].fillna(0.0), fmt="o", capsize=3)
    ax.set_yticks(y)
    ax.set_yticklabels(d["scenario"], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"{measure} (mean, {int(CONFIDENCE * 100)}% CI over seeds)")
    ax.grid(alpha=0.3)
    if ratio:
        ax2 = axes[0][1]
        ax2.errorbar(d["ratio_mean"], y, xerr=d["ratio_ci95"].fillna(0.0), fmt="s",
                     color="C1", capsize=3)
        ax2.axvline(1.0, color="grey", lw=0.8)
        ax2.set_xlabel(f"{baseline}'s {measure} / this (paired by seed; > 1: this is lower)")
        ax2.grid(alpha=0.3)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


@dataclasses.dataclass
class Report:
    """What :func:`write_report` wrote.

    Attributes
    ----------
    data : SweepData
    summary : DataFrame
        :func:`summarize` over every measure.
    shown : list of str
        Measures in ``summary.md``, the figures and the terminal.
    baseline : str or None
    out_dir : Path
    files : list of str
    """

    data: SweepData
    summary: pd.DataFrame
    shown: list[str]
    baseline: str | None
    out_dir: Path
    files: list[str]


def write_report(
    root: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    baseline: str | None = None,
    measures: Sequence[str] | None = None,
) -> Report:
    """Aggregate a sweep folder and write ``summary.csv``, ``summary.md`` and figures.

    Parameters
    ----------
    root : path
        Sweep folder (``aryl sweep ... --out root``).
    out_dir : path, optional
        Report folder (default ``root/report``), replaced as a whole.
    baseline : str, optional
        Policy for ratios (default: the spec's ``[report].baseline``; none if
        neither is set).
    measures : sequence of str, optional
        Measures shown (see :func:`shown_measures`); ``summary.csv`` has all.

    Returns
    -------
    Report

    Raises
    ------
    InvalidInputError
        Not a sweep folder, no finished run, an unknown measure or baseline.
    """
    data = load_sweep(root)
    if not len(data.runs):
        raise InvalidInputError(f"{data.root}: no finished run yet")
    if baseline is None:
        baseline = data.meta.get("spec", {}).get("report", {}).get("baseline")
    shown = shown_measures(data, measures)
    summary = summarize(data, baseline=baseline)
    out = Path(out_dir) if out_dir is not None else data.root / "report"
    files = ["summary.csv", "summary.md"]
    lines = [
        f"# Sweep report: {data.meta.get('name', data.root.name)}",
        "",
        f"{len(data.runs)} of {data.n_planned} runs finished; aryl {data.meta.get('aryl')}. "
        f"Each cell: mean over seeds ± half-width of the {int(CONFIDENCE * 100)}% Student-t "
        "confidence interval (– with one seed)."
        + (f" Ratios (`{baseline} / this`): {baseline}'s value over the run's for the same "
           "seed and parameters, averaged over seeds; above 1 the run's value is lower "
           f"than {baseline}'s (a shorter delay, but also a lower usage)." if baseline else ""),
        "",
    ]
    with atomic_directory(out, marker="manifest.json") as tmp:
        atomic_write_dataframe(summary, tmp / "summary.csv")
        for m in shown:
            lines += [f"## {m}", "", _markdown(measure_table(summary, m, baseline)), ""]
            name = f"{m}.png"
            lines += [f"![{m}]({name})", ""]
            atomic_write_bytes(tmp / name, _figure(summary, m, baseline))
            files.append(name)
        atomic_write_text(tmp / "summary.md", "\n".join(lines))
        manifest = {"command": "aryl sweep report", "sweep": str(data.root),
                    "baseline": baseline, "measures": shown, "n_runs": len(data.runs),
                    "n_planned": data.n_planned}
        atomic_write_text(tmp / "manifest.json", json.dumps(manifest, indent=2) + "\n")
        files.append("manifest.json")
    return Report(data, summary, shown, baseline, out, files)

