"""bench/report.py's million-job sections and its ``--only`` splice into a page."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _report() -> Any:
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROW = {"policy": "aryl", "jobs": 10_000_000, "wall_s": 171.5, "cpu_s": 160.25,
       "scheduler_s": 90.0, "generate_s": 12.0, "peak_rss_mb": 2900, "rss_loop_end_mb": 2500,
       "iterations": 21_000_000, "n_events": 31_800_000, "span_years": 36.2,
       "s_per_10k_iter_first_10pct": 0.081, "s_per_10k_iter_last_10pct": 0.0794,
       "cpu_s_per_10k_iter_first_10pct": 0.075, "cpu_s_per_10k_iter_last_10pct": 0.0746,
       "cpu_s_per_10k_iter": 0.0, "n_finished": 10_000_000, "load_before": "1.0, 2.0, 3.0",
       "load_after": "4.0, 5.0, 6.0", "png": "ten-million-time-per-10k.png"}


def test_ten_million_section_shows_the_row() -> None:
    lines = _report().ten_million_section(ROW)
    assert lines[1] == "## Ten million jobs"
    assert "| peak memory (the replay process) | 2,900 MB |" in lines
    # 0.081 s = 81 ms, 0.0794 s = 79 ms (rounded)
    assert "| wall per 10,000 iterations, first tenth / last tenth | 81 ms / 79 ms |" in lines
    assert "| CPU per 10,000 iterations, first tenth / last tenth | 75 ms / 75 ms |" in lines
    assert "| loop iterations (event instants) | 21,000,000 |" in lines
    assert lines[-1] == ("![time per 10,000 loop iterations, 10,000,000 jobs]"
                         "(ten-million-time-per-10k.png)")
    assert "load average 1.0, 2.0, 3.0 before and 4.0, 5.0, 6.0 after:" in " ".join(lines)
    assert _report().ten_million_section(None) == []


def test_splice_replaces_a_section_and_inserts_a_new_one() -> None:
    r = _report()
    page = ("# Title\n\nintro\n\n## A\n\nold a\n\n## A million jobs\n\nold m\n\n"
            "## Paired comparisons (`bench/compare.py`)\n\np\n\nCommand: `x`.\n")
    new = r.splice_sections(page, ["", "## A million jobs", "", "new m",
                                   "", "## Ten million jobs", "", "new t"])
    assert new == ("# Title\n\nintro\n\n## A\n\nold a\n\n## A million jobs\n\nnew m\n\n"
                   "## Ten million jobs\n\nnew t\n\n"
                   "## Paired comparisons (`bench/compare.py`)\n\np\n\nCommand: `x`.\n")
    # a second splice replaces the inserted section in place
    again = r.splice_sections(new, ["", "## Ten million jobs", "", "newer t"])
    assert again == new.replace("new t", "newer t")


@pytest.mark.parametrize(("argv", "message"), [
    (["--ten-million", "-5"], "argument --ten-million: must be >= 0, got -5"),
    (["--million", "lots"], "argument --million: not a whole number: 'lots'"),
    (["--repeats", "0"], "argument --repeats: must be >= 1, got 0"),
])
def test_bad_counts_are_refused_before_any_work(argv: list[str], message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # a negative --ten-million used to reach the child replay and end in a traceback
    with pytest.raises(SystemExit) as info:
        _report().main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_ratio_figures_are_medians_over_processes_with_the_range() -> None:
    runs = [
        {"aryl_simulate_ms": 42.0, "fifo_simulate_ms": 16.0, "simulate_ratio": 42.0 / 16.0},
        {"aryl_simulate_ms": 40.0, "fifo_simulate_ms": 15.0, "simulate_ratio": 40.0 / 15.0},
        {"aryl_simulate_ms": 41.0, "fifo_simulate_ms": 17.0, "simulate_ratio": 41.0 / 17.0},
    ]
    out = _report().median_over_processes(runs)
    assert out["aryl_simulate_ms"] == 41.0
    assert out["fifo_simulate_ms"] == 16.0
    # the median of the three ratios (2.625, 2.667, 2.412), not 41 / 16 = 2.5625
    assert out["simulate_ratio"] == 42.0 / 16.0
    assert out["simulate_ratio_min"] == 41.0 / 17.0
    assert out["simulate_ratio_max"] == 40.0 / 15.0
    assert out["ratio_processes"] == 3.0
    with pytest.raises(ValueError, match="no runs"):
        _report().median_over_processes([])
