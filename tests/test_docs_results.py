"""docs/results.md and the README quote the tables that `aryl experiment paper` wrote,
not stale ones."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from aryl.experiment import _fmt, markdown_table

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = DOCS / "results"
TABLES = ["headline", "baselines", "ablations", "knapsack", "reclaim_choice", "hetero",
          "hetero_pools", "loaned_speed", "reclaim"]

pytestmark = pytest.mark.skipif(not RESULTS.is_dir() or not (ROOT / "README.md").is_file(),
                                reason="docs not present")


def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(RESULTS / f"{name}.csv", keep_default_na=False, na_values=[""])


@pytest.mark.parametrize("name", TABLES)
def test_results_page_quotes_the_generated_tables(name: str) -> None:
    rendered = markdown_table(_csv(name))
    assert rendered in (DOCS / "results.md").read_text(encoding="utf-8")
    assert rendered in (RESULTS / "results.md").read_text(encoding="utf-8")


def _ratio(v: float) -> str:
    return f"{_fmt(v)}x"


def _gain(v: float) -> str:
    return f"{100 * v:+.1f}%"


def _readme_results() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]


def test_readme_results_table_is_the_generated_one() -> None:
    section = _readme_results()
    head = _csv("headline").set_index("trace")
    base = _csv("baselines").set_index("trace")
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and "---" not in ln]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header == ["trace", "jobs", "mean JCT, fifo / aryl", "mean queuing delay, fifo / aryl",
                      "mean queuing delay, fifo-backfill / aryl", "usage gain", "goodput gain"]
    seen = set()
    for line in rows[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        trace = cells[0]
        if trace.startswith("paper"):
            paper = head.loc["paper [Aryl]"]
            assert cells[2:4] == [_ratio(paper["JCT ratio"]), _ratio(paper["qd ratio"])]
            assert cells[5] == f"up to {_gain(paper['usage gain'])}"
            continue
        h, b = head.loc[trace], base.loc[trace]
        assert cells[1] == f"{int(h['jobs']):,}", trace
        assert cells[2] == _ratio(h["JCT ratio"]), trace
        assert cells[3] == _ratio(h["qd ratio"]), trace
        assert cells[4] == _ratio(b["backfill/aryl qd"]), trace
        assert cells[5] == _gain(h["usage gain"]), trace
        assert cells[6] == _gain(h["goodput gain"]), trace
        seen.add(trace)
    assert seen == {t for t in head.index if not t.startswith("paper")}


def test_readme_figures_come_from_the_generated_tables() -> None:
    """Every ratio (``1.36x``) and percentage gain (``+10.5%``) the README's results
    section quotes is a cell of a generated table, in the README's format."""
    ratios: set[str] = set()
    gains: set[str] = set()
    for name in [*TABLES, "sensitivity"]:
        for col in (df := _csv(name)).columns:
            if pd.api.types.is_numeric_dtype(df[col]):
                for v in df[col].dropna():
                    ratios.add(_ratio(float(v)))
                    gains.add(_gain(float(v)))
    section = _readme_results()
    quoted_ratios = re.findall(r"(?<![\w.])\d[\d,]*(?:\.\d+)?x\b", section)
    quoted_gains = re.findall(r"[+-]\d+\.\d%", section)
    assert quoted_ratios
    assert quoted_gains
    assert not {q for q in quoted_ratios if q not in ratios}, "README ratios not in the tables"
    assert not {q for q in quoted_gains if q not in gains}, "README gains not in the tables"
