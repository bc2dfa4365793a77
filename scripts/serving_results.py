"""The tables and figure of docs/results.md, "Training gain against inference latency".

Reads the dataset of ``aryl sweep docs/results/serving/spec.toml --out DIR`` (or
its ``runs.csv``) and writes ``docs/results/serving/runs.csv`` (the measures of
every run), ``tradeoff.csv`` (one row per setting: means over the seeds with 95%
Student-t half-widths) and ``tradeoff.png``::

    python scripts/serving_results.py DIR [--out docs/results/serving]

The training gain of a setting is, per seed, ``aryl-no-loan``'s mean JCT (and
mean queuing delay) divided by the setting's, then averaged over the seeds
(paired by seed).  Deterministic given the dataset.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from aryl._io import atomic_write_dataframe
from aryl.experiment import markdown_table
from aryl.sweep import read_runs
from aryl.sweep.stats import mean_ci, paired_ratios

SETTING = ["policy", "loan_reserve_servers", "reclaim_grace_s", "autoscaler_headroom",
           "reclaim_lead_s"]


def tradeoff_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per setting of :data:`SETTING` (see the module docstring)."""
    base = runs[runs["policy"] == "aryl-no-loan"]
    jct0 = dict(zip(base["seed"], base["mean_jct_s"], strict=True))
    qd0 = dict(zip(base["seed"], base["mean_queuing_delay_s"], strict=True))
    rows = []
    for key, g in runs.groupby(SETTING, sort=True):
        row = dict(zip(["policy", "reserve", "grace (s)", "headroom", "lead (s)"], key,
                       strict=True))
        jct = dict(zip(g["seed"], g["mean_jct_s"], strict=True))
        qd = dict(zip(g["seed"], g["mean_queuing_delay_s"], strict=True))
        cols = [
            ("JCT gain (x)", paired_ratios({k: jct0[k] for k in jct}, jct)),
            ("queuing-delay gain (x)", paired_ratios({k: qd0[k] for k in qd}, qd)),
            ("SLO attainment (%)", 100 * g["slo_attainment_serving"]),
            ("p99 latency (s)", g["latency_p99_s_serving"]),
            ("p99 wait (s)", g["wait_p99_s_serving"]),
            ("requests delayed by loans", g["n_delayed_by_loans_serving"]),
            ("max delay by a loan (s)", g["loan_delay_max_s_serving"]),
        ]
        for name, vals in cols:
            m, h, _ = mean_ci(vals)
            row[name] = m
            row[f"{name} ±"] = h
        row["seeds"] = len(g)
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.sort_values(["policy", "reserve", "grace (s)", "headroom", "lead (s)"],
                           kind="stable").reset_index(drop=True)


def plot(table: pd.DataFrame, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    aryl = table[table["policy"] == "aryl"]
    lead = aryl[aryl["lead (s)"] > 0]
    for (reserve, grace), g in aryl[aryl["lead (s)"] == 0].groupby(["reserve", "grace (s)"]):
        ax.errorbar(g["JCT gain (x)"], g["SLO attainment (%)"],
                    xerr=g["JCT gain (x) ±"], yerr=g["SLO attainment (%) ±"],
                    marker="o", capsize=3, linestyle="-",
                    label=f"reserve {reserve}, grace {grace:g} s")
        for _, r in g.iterrows():
            ax.annotate(f"h={r['headroom']:g}", (r["JCT gain (x)"], r["SLO attainment (%)"]),
                        fontsize=7, textcoords="offset points", xytext=(4, 3))
    for _, r in lead.iterrows():
        ax.errorbar([r["JCT gain (x)"]], [r["SLO attainment (%)"]], xerr=[r["JCT gain (x) ±"]],
                    yerr=[r["SLO attainment (%) ±"]], marker="s", color="black", capsize=3,
                    label=f"reserve {r['reserve']}, grace {r['grace (s)']:g} s, "
                          f"h={r['headroom']:g}, lead {r['lead (s)']:g} s")
    ref = table[table["policy"] == "aryl-no-loan"].iloc[0]
    ax.axhline(ref["SLO attainment (%)"], color="grey", linestyle="--",
               label="aryl-no-loan (no loans)")
    ax.set_xlabel("training gain: mean JCT of aryl-no-loan / mean JCT (x)")
    ax.set_ylabel("requests waiting <= 60 s (%)")
    ax.set_title("Aryl's training gain against the inference SLO (5 seeds, 95% intervals)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--out", default="docs/results/serving")
    a = ap.parse_args(argv)
    src = Path(a.dataset)
    runs = pd.read_csv(src) if src.suffix == ".csv" else read_runs(src)
    table = tradeoff_table(runs)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if src.suffix != ".csv":  # the measures of every run, to re-derive the table
        cols = ["key", *SETTING, "seed", "mean_jct_s", "mean_queuing_delay_s", "n_loans",
                "n_reclaims", "mean_loaned_servers",
                *sorted(c for c in runs.columns if c.endswith("_serving"))]
        atomic_write_dataframe(runs[cols].sort_values([*SETTING, "seed"], kind="stable"),
                               out / "runs.csv")
    atomic_write_dataframe(table, out / "tradeoff.csv")
    plot(table, out / "tradeoff.png")
    print(markdown_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
