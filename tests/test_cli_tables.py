"""Tables that fit the terminal: compare, replay and experiment read whole at 60, 80, 200 columns.

Each test renders a command at a given width, parses the rich tables back
(groups of columns, the key column repeated) and checks every cell against the
value computed independently from the run's own JSON/CSV output: a cut name
(``ary…``) or a cut or folded number (``4,1…``) would not match.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from rich.console import Console

from aryl.cli import main
from aryl.cli._tables import Col, fit_tables

POLICIES = ["fifo", "aryl", "aryl-no-loan", "aryl-no-elastic", "sjf", "tiresias",
            "elastic-greedy"]


def parse_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header cells, body rows) of every rich table (heavy-head box) in ``text``.

    A header or a row that continues on a second line (a wrapped cell) fails.
    """
    tables: list[tuple[list[str], list[list[str]]]] = []
    prev = ""
    for line in text.splitlines():
        if line.startswith("┃"):
            assert not prev.startswith("┃"), f"a header wrapped: {line!r}"
            tables.append(([c.strip() for c in line.strip().strip("┃").split("┃")], []))
        elif line.startswith("│"):
            row = [c.strip() for c in line.strip().strip("│").split("│")]
            assert row[0], f"a row continued on a second line: {line!r}"
            tables[-1][1].append(row)
        prev = line
    return tables


def cells_by_key(text: str) -> dict[tuple[str, str], str]:
    """``(row key, column header) -> cell`` over every group; a pair seen twice must agree."""
    out: dict[tuple[str, str], str] = {}
    for header, rows in parse_tables(text):
        for row in rows:
            assert len(row) == len(header), (header, row)
            for h, c in zip(header[1:], row[1:], strict=True):
                key = (row[0], h)
                assert out.setdefault(key, c) == c, key
    return out


def _trace(tmp_path: Path) -> Path:
    rows = [
        {"job_id": f"j{i}", "submit_time_s": 60.0 * i, "duration_s": 600.0 + 37 * (i % 7),
         "gpus": [1, 2, 4, 8][i % 4]}
        for i in range(60)
    ]
    path = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def trace_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _trace(tmp_path_factory.mktemp("trace"))


def _num(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.0f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


@pytest.mark.parametrize("width", [60, 80, 200])
def test_compare_of_seven_policies_reads_whole(trace_csv: Path, tmp_path: Path,
                                               width: int) -> None:
    out = tmp_path / "cmp"
    r = CliRunner().invoke(main, [
        "compare", "--trace", str(trace_csv), "--policies", ",".join(POLICIES),
        "--training-servers", "1", "--inference-servers", "3", "--inference", "none",
        "--out", str(out),
    ], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(len(ln) for ln in lines) <= width
    assert "…" not in r.output
    cells = cells_by_key(r.output)
    headers = [h for header, _ in parse_tables(r.output) for h in header[1:]]
    assert sorted(headers) == sorted(POLICIES)  # every name whole, each once
    if width >= 200:
        assert len(parse_tables(r.output)) == 1  # one table when it fits
    s = {p: {**json.loads((out / p / "summary.json").read_text()),
             **json.loads((out / p / "timing.json").read_text())} for p in POLICIES}
    f = s["fifo"]
    for p in POLICIES:
        x = s[p]
        qd = x["queuing_delay_s"]["mean"]
        expected = {
            "mean QD (s)": _num(qd),
            "p95 QD (s)": _num(x["queuing_delay_s"]["p95"]),
            "waited": _pct(x["share_jobs_waited"]),
            "mean wait (s)": _num(x["wait_s"]["mean"]),
            "mean JCT (s)": _num(x["jct_s"]["mean"]),
            "p95 JCT (s)": _num(x["jct_s"]["p95"]),
            "usage": _pct(x["cluster_usage"]),
            "QD ratio": "-" if not qd else f"{f['queuing_delay_s']['mean'] / qd:,.2f}x",
            "JCT ratio": f"{f['jct_s']['mean'] / x['jct_s']['mean']:,.2f}x",
            "usage gain": f"{100 * (x['cluster_usage'] / f['cluster_usage'] - 1):+.1f}%",
            "preemptions": f"{x['n_preemptions']:,}",
            "scale-ins": f"{x['n_scale_in']:,}",
            "scale-outs": f"{x['n_scale_out']:,}",
            "loans": f"{x['n_loans']:,}",
            "reclaims": f"{x['n_reclaims']:,}",
            "ms/decision": f"{x['scheduler_ms_per_decision']:.3f}",
        }
        for measure, value in expected.items():
            assert cells[(measure, p)] == value, (measure, p)
    assert s["aryl"]["n_loans"] > 0  # the scenario exercises loans
    assert f["queuing_delay_s"]["mean"] >= 1000  # and numbers with a thousands separator


@pytest.mark.parametrize("width", [60, 80])
def test_replay_tables_read_whole(trace_csv: Path, tmp_path: Path, width: int) -> None:
    out = tmp_path / "r"
    r = CliRunner().invoke(main, [
        "replay", "--trace", str(trace_csv), "--policy", "aryl", "--training-servers", "2",
        "--inference-servers", "2", "--out", str(out),
    ], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    assert max(len(ln) for ln in r.output.splitlines()) <= width
    assert "…" not in r.output
    s = {**json.loads((out / "summary.json").read_text()),
         **json.loads((out / "timing.json").read_text())}
    cells = cells_by_key(r.output)
    for key, label in (("queuing_delay_s", "queuing delay (s)"), ("jct_s", "JCT (s)"),
                       ("wait_s", "total wait (s)")):
        for stat in ("mean", "p50", "p95", "p99"):
            assert cells[(label, stat)] == _num(s[key][stat])
    assert cells[("preemptions", "value")] == f"{s['n_preemptions']:,}"
    assert cells[("loans", "value")] == f"{s['n_loans']:,}"
    assert cells[("cluster usage (training + loaned)", "value")] == _pct(s["cluster_usage"])
    assert cells[("scheduler time per decision (ms)", "value")] == \
        f"{s['scheduler_ms_per_decision']:.3f}"


def test_fit_tables_packs_greedily_and_keeps_order() -> None:
    # key column "k" (1 char + 2 padding + 2 borders = 5 wide); each value column
    # "cNN" with 10-digit cells: 10 + 2 padding + 1 border = 13.  At width 40:
    # 5 + 13 = 18, 31, 44 > 40 -> two columns per group: 5 groups of 2 for 10 columns.
    cols = [Col("k", "left"), *(Col(f"c{i:02d}") for i in range(10))]
    rows = [["a", *(f"{i:010d}" for i in range(10))]]
    tables = fit_tables(Console(width=40), cols, rows)
    assert [len(t.columns) for t in tables] == [3, 3, 3, 3, 3]
    assert [str(t.columns[1].header) for t in tables] == ["c00", "c02", "c04", "c06", "c08"]
    assert all(str(t.columns[0].header) == "k" for t in tables)
    # wide enough: one table
    assert len(fit_tables(Console(width=5 + 13 * 10), cols, rows)) == 1
    assert len(fit_tables(Console(width=5 + 13 * 10 - 1), cols, rows)) == 2
    with pytest.raises(ValueError, match="one cell per column"):
        fit_tables(Console(width=80), cols, [["a"]])


@pytest.mark.parametrize("width", [60, 80])
def test_experiment_tables_read_whole(width: int) -> None:
    # the experiment's printer on tables shaped like the real ones (long variant names)
    from aryl.cli.experiment import print_frame
    from aryl.experiment import _fmt

    ablations = pd.DataFrame({
        "policy": ["fifo", "aryl", "aryl (reclaim fewest-jobs)", "aryl keep-idle-loans"],
        "reclaim": ["–", "aryl", "fewest-jobs", "aryl"],
        "qd": [4138.8, 401.2, 411.9, 410.6],
        "qd ratio": [1.0, 10.3157, 10.05, 10.06],
        "usage": [0.6931, 0.7661, 0.766, 0.686],
        "scale-ins": [0, 6287, 6186, 6838],
    })
    sens = pd.DataFrame({
        "sweep": ["elastic_fraction", "checkpoint_interval_s"], "value": [0.25, 1800.0],
        "default": [False, True], "servers": ["46+16", "46+16"], "aryl qd": [700.5, 401.2],
        "aryl JCT": [25000.1, 21997.4], "qd ratio": [5.9, 10.3], "JCT ratio": [1.2, 1.36],
        "usage": [0.7, 0.766], "preempt/1k jobs": [3.1, 8.66], "mean loaned": [2.9, 3.5],
    })
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    print_frame(console, "Ablations", ablations, transpose=True)
    print_frame(console, "Sensitivity", sens, keys=2)
    text = console.export_text()
    console.file.close()
    assert max(len(ln) for ln in text.splitlines()) <= width
    assert "…" not in text
    cells = cells_by_key(text)
    for i, name in enumerate(ablations["policy"]):
        for col in ablations.columns[1:]:
            assert cells[(col, name)] == _fmt(ablations[col].tolist()[i]), (col, name)
    assert cells[("scale-ins", "aryl")] == "6,287"  # an integer count stays whole
    # sensitivity: rows keyed by the sweep name (the first key column)
    for header, rows in parse_tables(text.split("Sensitivity", 1)[1]):
        assert header[:2] == ["sweep", "value"]
        for row in rows:
            i = sens.index[sens["sweep"] == row[0]][0]
            for h, c in zip(header[1:], row[1:], strict=True):
                assert c == _fmt(sens[h].tolist()[i]), (h, row[0])
