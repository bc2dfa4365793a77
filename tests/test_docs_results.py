"""docs/results.md quotes the tables that `aryl experiment paper` wrote, not stale ones."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from aryl.experiment import markdown_table

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.skipif(not (DOCS / "results").is_dir(), reason="docs not present")
@pytest.mark.parametrize("name", ["headline", "ablations", "reclaim"])
def test_results_page_quotes_the_generated_tables(name: str) -> None:
    table = pd.read_csv(DOCS / "results" / f"{name}.csv", keep_default_na=False, na_values=[""])
    rendered = markdown_table(table)
    assert rendered in (DOCS / "results.md").read_text(encoding="utf-8")
    assert rendered in (DOCS / "results" / "results.md").read_text(encoding="utf-8")
