"""Every printed or rendered number equals the data file it comes from.

The kind of fault closed here: a table cell (terminal, Markdown, JSON, a
figure) that shows a different number than the CSV/JSON written beside it
(a wrong key, a swapped column, a ratio inverted in the printer only, a
stale format) with no test noticing.  Each test renders a command, parses
*every* cell of *every* table back into a number (``4,057`` / ``3.6%`` /
``1.53x`` / ``+10.5%`` / ``86.12 ± 291``), and compares it with the value in
the run's own data file, within the resolution the cell shows (half a unit of
its last digit).  A printed row or column that the test does not know fails
too, so a new measure cannot be added without a check.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main

WIDE = {"COLUMNS": "250"}  # one group per table: each row whole on one line


# ------------------------------------------------------------------ parsing


def parse_tables(text: str, *, continued: Callable[[list[str]], bool] | None = None
                 ) -> list[tuple[list[str], list[list[str]]]]:
    """(header, rows) of every rich table in ``text`` (header ``[]`` when it has none).

    A body line for which ``continued(cells)`` is true (default: the first
    cell is empty) continues the previous row (a folded cell); its cells are
    appended to the previous row's with a space.
    """
    is_cont = continued or (lambda cells: cells[0] == "")
    out: list[tuple[list[str], list[list[str]]]] = []
    for line in text.splitlines():
        s = line.strip()
        if s[:1] in ("┏", "┌"):
            out.append(([], []))
        elif s[:1] == "┃" and out:
            cells = [c.strip() for c in s.strip("┃").split("┃")]
            header = out[-1][0]
            if header:
                header[:] = [f"{a} {b}".strip() for a, b in zip(header, cells, strict=True)]
            else:
                header.extend(cells)
        elif s[:1] == "│" and out:
            cells = [c.strip() for c in s.strip("│").split("│")]
            rows = out[-1][1]
            if rows and is_cont(cells):
                rows[-1][:] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
            else:
                rows.append(cells)
    return out


def number(cell: str) -> tuple[float, float]:
    """(value, tolerance) of a printed number; NaN for '-' / '–' / ''."""
    c = cell.strip().replace(" ", "")
    if c in ("-", "–", ""):
        return math.nan, 0.0
    scale = 1.0
    if c.endswith("%"):
        c, scale = c[:-1], 0.01
    elif c.endswith("x"):
        c = c[:-1]
    c = c.replace(",", "")
    decimals = len(c.split(".")[1]) if "." in c else 0
    return float(c) * scale, 0.5 * 10.0 ** -decimals * scale


def matches(cell: str, value: Any) -> bool:
    """The cell shows ``value`` (None / NaN: a dash)."""
    shown, tol = number(cell)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.isnan(shown)
    return abs(shown - float(value)) <= tol * (1 + 1e-9) + 1e-12


def mean_pm(cell: str) -> tuple[str, str | None]:
    """``"a ± h"`` -> ("a", "h"); a plain number -> (it, None)."""
    if "±" in cell:
        a, h = cell.split("±")
        return a.strip(), h.strip()
    return cell.strip(), None


def check(cell: str, value: Any, where: Any) -> None:
    assert matches(cell, value), f"{where}: printed {cell!r}, data {value!r}"


# ------------------------------------------------------------------ replay


def _trace(tmp_path: Path, n: int = 80) -> Path:
    rows = [{"job_id": f"j{i}", "submit_time_s": 45.0 * i, "duration_s": 900.0 + 53 * (i % 11),
             "gpus": [1, 2, 4, 8, 16][i % 5]} for i in range(n)]
    path = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _replay_args(trace: Path, *extra: str) -> list[str]:
    # a small cluster under load: jobs wait, the aryl policy borrows and reclaims servers
    return ["--trace", str(trace), "--training-servers", "3", "--inference-servers", "3",
            "--no-progress", *extra]


#: replay's counts table: row label -> value from summary.json / timing.json
def _counts(s: dict[str, Any], t: dict[str, Any]) -> dict[str, Any]:
    return {
        "jobs finished": s["n_finished"],
        "jobs unfinished": s["n_unfinished"],
        "jobs infeasible": s["n_infeasible"],
        "jobs not arrived by the horizon": s.get("n_not_arrived"),
        "cluster usage (training + loaned)": s["cluster_usage"],
        "goodput (useful work / GPU-s available)": s["goodput"],
        "inference utilisation": s["inference_utilisation"],
        "inference utilisation with loans": s["inference_utilisation_with_loans"],
        "preemptions": s["n_preemptions"],
        "preemptions by reclaims": s["n_reclaim_preemptions"],
        "scale-ins": s["n_scale_in"],
        "scale-outs": s["n_scale_out"],
        "moves": s["n_moves"],
        "loans": s["n_loans"],
        "reclaims": s["n_reclaims"],
        "loan returns": s["n_loan_returns"],
        "makespan (days)": s["makespan_s"] / 86400,
        "scheduling decisions": t["n_decisions"],
        "scheduler time (s)": t["scheduler_time_s"],
        "scheduler time per decision (ms)": t["scheduler_ms_per_decision"],
    }


def test_replay_tables_and_json_equal_summary_json(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    out = tmp_path / "r"
    r = CliRunner().invoke(main, ["replay", *_replay_args(trace, "--out", str(out))], env=WIDE)
    assert r.exit_code == 0, r.output
    s = json.loads((out / "summary.json").read_text())
    t = json.loads((out / "timing.json").read_text())
    if "n_decisions" not in t:
        t["n_decisions"] = s["n_decisions"]
    tables = parse_tables(r.output)
    delay, counts = tables[0], tables[1]
    # the delay table: every cell
    assert delay[0] == ["measure", "mean", "p50", "p95", "p99", "jobs with > 0"]
    keys = {"queuing delay (s)": ("queuing_delay_s", "share_jobs_waited"),
            "JCT (s)": ("jct_s", None), "total wait (s)": ("wait_s", "share_jobs_waited_total")}
    assert [row[0] for row in delay[1]] == list(keys)
    for row in delay[1]:
        key, share = keys[row[0]]
        for stat, cell in zip(("mean", "p50", "p95", "p99"), row[1:5], strict=True):
            check(cell, s[key][stat], (row[0], stat))
        if share is None:
            assert row[5] == ""
        else:
            check(row[5], s[share], (row[0], "share"))
    # the counts table: every row known, every value from the files
    expected = _counts(s, t)
    assert counts[0] == ["count", "value"]
    for label, cell in counts[1]:
        assert label in expected, f"a printed row the test does not check: {label!r}"
        check(cell, expected[label], label)
    printed = {row[0] for row in counts[1]}
    assert printed == {k for k, v in expected.items()
                       if not (k == "jobs not arrived by the horizon" and not v)}
    assert s["n_loans"] > 0  # the scenario exercises loans
    assert s["n_reclaims"] > 0
    # the pools table
    pools = [p for p in s["pools"] if p["gpu_s_available"] > 0]
    assert len(tables) == 3
    head, rows = tables[2]
    assert head == ["pool", "GPU", "usage", "goodput", "jobs", "mean JCT (s)"]
    assert [row[0] for row in rows] == [p["pool"] for p in pools]
    for row, p in zip(rows, pools, strict=True):
        assert row[1] == p["gpu_type"]
        check(row[2], p["usage"], (p["pool"], "usage"))
        check(row[3], p["goodput"], (p["pool"], "goodput"))
        check(row[4], p["n_jobs_main"], (p["pool"], "jobs"))
        check(row[5], p["jct_s"]["mean"], (p["pool"], "JCT"))
    # --json prints summary.json (a rerun gives the same summary)
    r = CliRunner().invoke(main, ["replay", *_replay_args(trace, "--json")])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == s


# ------------------------------------------------------------------ compare

#: compare's rows: label -> compare.csv column ("timing" ones from timing.json)
COMPARE_ROWS = {
    "mean QD (s)": "mean_queuing_delay_s", "p95 QD (s)": "p95_queuing_delay_s",
    "waited": "share_jobs_waited", "mean wait (s)": "mean_wait_s",
    "mean JCT (s)": "mean_jct_s", "p95 JCT (s)": "p95_jct_s", "usage": "cluster_usage",
    "QD ratio": "queuing_delay_ratio", "JCT ratio": "jct_ratio", "usage gain": "usage_gain",
    "preemptions": "n_preemptions", "scale-ins": "n_scale_in", "scale-outs": "n_scale_out",
    "loans": "n_loans", "reclaims": "n_reclaims", "ms/decision": "timing",
}


def test_compare_table_and_json_equal_compare_csv(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    out = tmp_path / "c"
    policies = ["fifo", "aryl", "sjf"]
    r = CliRunner().invoke(main, ["compare", "--policies", ",".join(policies),
                                  *_replay_args(trace, "--out", str(out))], env=WIDE)
    assert r.exit_code == 0, r.output
    csv = pd.read_csv(out / "compare.csv").set_index("policy")
    (head, rows), = parse_tables(r.output)
    assert head == ["measure", *policies]
    assert [row[0] for row in rows] == list(COMPARE_ROWS)
    for row in rows:
        col = COMPARE_ROWS[row[0]]
        for p, cell in zip(policies, row[1:], strict=True):
            if col == "timing":
                value = json.loads((out / p / "timing.json").read_text())[
                    "scheduler_ms_per_decision"]
            else:
                value = csv.loc[p, col]
                if col == "usage_gain":  # printed as a signed percentage
                    assert cell.startswith("+") or cell.startswith("-"), cell
            check(cell, value, (row[0], p))
    # the direction the title states: ratios = fifo / policy, from the summaries
    fifo = json.loads((out / "fifo" / "summary.json").read_text())
    aryl = json.loads((out / "aryl" / "summary.json").read_text())
    assert csv.loc["aryl", "jct_ratio"] == pytest.approx(fifo["jct_s"]["mean"]
                                                         / aryl["jct_s"]["mean"])
    assert "ratios = fifo / policy (> 1: better than fifo)" in r.output
    # --json: the same rows as compare.csv (NaN as null)
    r = CliRunner().invoke(main, ["compare", "--policies", ",".join(policies),
                                  *_replay_args(trace, "--json")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [row["policy"] for row in doc["compare"]] == policies
    for row in doc["compare"]:
        for col, value in row.items():
            if col == "policy":
                continue
            data = csv.loc[row["policy"], col]
            if value is None:
                assert math.isnan(data), (row["policy"], col)
            else:
                assert value == pytest.approx(data, rel=1e-12), (row["policy"], col)


# ------------------------------------------------------------------ sweep report


@pytest.fixture(scope="module")
def sweep_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[Any]]:
    """A finished sweep, its report (terminal text) and the report's matplotlib figures."""
    import matplotlib.pyplot as plt

    root = tmp_path_factory.mktemp("sweep")
    trace = _trace(root, 60)
    spec = root / "s.toml"
    spec.write_text(f"[grid]\ntrace = '{trace}'\npolicy = ['fifo', 'aryl']\nseed = [0, 1, 2]\n"
                    "n_training_servers = 3\nn_inference_servers = 3\n"
                    "[report]\nbaseline = 'fifo'\n")
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(root / "sw"), "-j", "1"])
    assert r.exit_code == 0, r.output
    figures: list[Any] = []
    real_close = plt.close

    def keep(fig: Any = None) -> None:  # the report closes each figure after saving it
        figures.append(fig)

    mp = pytest.MonkeyPatch()
    mp.setattr(plt, "close", keep)
    try:
        r = CliRunner().invoke(main, ["sweep", "report", str(root / "sw")])
    finally:
        mp.undo()
    assert r.exit_code == 0, r.output
    yield root / "sw" / "report", r.output, figures
    for fig in figures:
        real_close(fig)


def _summary(report: Path) -> pd.DataFrame:
    return pd.read_csv(report / "summary.csv")


def _check_report_row(cells: Sequence[str], row: pd.Series, where: Any) -> None:
    """scenario | seeds | mean ± CI | fifo / this ± CI, against a summary.csv row."""
    assert cells[0].replace(" ", "") == str(row["scenario"]).replace(" ", ""), where
    check(cells[1], row["n"], (where, "seeds"))
    m, h = mean_pm(cells[2])
    check(m, row["mean"], (where, "mean"))
    check(h or "–", row["ci95"], (where, "ci95"))
    m, h = mean_pm(cells[3])
    check(m, row["ratio_mean"], (where, "ratio"))
    check(h or "–", row["ratio_ci95"], (where, "ratio ci95"))


def test_sweep_report_terminal_tables_equal_summary_csv(
    sweep_report: tuple[Path, str, list[Any]]
) -> None:
    report, text, _ = sweep_report
    summary = _summary(report)
    shown = json.loads((report / "manifest.json").read_text())["measures"]
    # a folded scenario name continues on lines whose seeds cell is empty
    tables = parse_tables(text, continued=lambda cells: cells[1] == "")
    assert len(tables) == len(shown)
    for measure, (head, rows) in zip(shown, tables, strict=True):
        assert [h.replace(" ", "") for h in head] == [
            "scenario", "seeds", "mean±95%CI", "fifo/this±95%CI"], head
        data = summary[summary["measure"] == measure]
        assert len(rows) == len(data)
        for cells, (_, row) in zip(rows, data.iterrows(), strict=True):
            _check_report_row(cells, row, measure)
    # aryl's ratio is fifo / aryl per seed: check one against the runs themselves
    from aryl.sweep import read_runs

    runs = read_runs(report.parent)
    f = runs[runs["policy"] == "fifo"].set_index("seed")["mean_jct_s"]
    a = runs[runs["policy"] == "aryl"].set_index("seed")["mean_jct_s"]
    row = summary[(summary["measure"] == "mean_jct_s")
                  & summary["scenario"].str.startswith("aryl")].iloc[0]
    assert row["ratio_mean"] == pytest.approx(float((f / a).mean()), rel=1e-12)


def test_sweep_report_markdown_equals_summary_csv(
    sweep_report: tuple[Path, str, list[Any]]
) -> None:
    report, _, _ = sweep_report
    summary = _summary(report)
    md = (report / "summary.md").read_text()
    sections = re.split(r"^## ", md, flags=re.M)[1:]
    shown = json.loads((report / "manifest.json").read_text())["measures"]
    assert [s.splitlines()[0] for s in sections] == shown
    for section in sections:
        measure = section.splitlines()[0]
        lines = [ln for ln in section.splitlines() if ln.startswith("|")]
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        assert header == ["scenario", "seeds", "mean ± 95% CI", "fifo / this ± 95% CI"]
        body = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]
        data = summary[summary["measure"] == measure]
        assert len(body) == len(data)
        for cells, (_, row) in zip(body, data.iterrows(), strict=True):
            _check_report_row(cells, row, measure)


def test_sweep_report_figures_plot_summary_csv(
    sweep_report: tuple[Path, str, list[Any]]
) -> None:
    report, _, figures = sweep_report
    summary = _summary(report)
    shown = json.loads((report / "manifest.json").read_text())["measures"]
    assert len(figures) == len(shown)
    for measure, fig in zip(shown, figures, strict=True):
        data = summary[summary["measure"] == measure]
        axes = fig.get_axes()
        assert measure in axes[0].get_xlabel()
        labels = [t.get_text() for t in axes[0].get_yticklabels()]
        assert labels == data["scenario"].tolist()
        for ax, col, half in ((axes[0], "mean", "ci95"), (axes[1], "ratio_mean", "ratio_ci95")):
            (container,) = ax.containers  # one errorbar per axes
            line = container.lines[0]
            x = np.asarray(line.get_xdata(), dtype=float)
            np.testing.assert_allclose(x, data[col].to_numpy(), rtol=1e-12)
            # the error bars: one segment per row, [mean - half, mean + half]; none at NaN
            bars = container.lines[2][0].get_segments()
            widths = np.array([(seg[1][0] - seg[0][0]) / 2 if len(seg) else np.nan
                               for seg in bars])
            want = np.where(data[col].isna(), np.nan, data[half].fillna(0.0))
            np.testing.assert_allclose(widths, want, rtol=1e-9, atol=1e-12)
        assert axes[1].get_xlabel().startswith(f"fifo's {measure} / this")


# ------------------------------------------------------------------ trace inspect


def test_trace_inspect_tables_equal_the_trace(tmp_path: Path) -> None:
    trace = _trace(tmp_path, 53)  # uneven sizes: shares 11/53 and 10/53, not round
    bins = 5
    r = CliRunner().invoke(main, ["trace", "inspect", str(trace), "--bins", str(bins)],
                           env=WIDE)
    assert r.exit_code == 0, r.output
    df = pd.read_csv(trace)
    t, d, g = (df[c].to_numpy(dtype=float) for c in ("submit_time_s", "duration_s", "gpus"))
    lo, hi = t.min(), t.max()
    # independent offered load: GPU-seconds inside [a, b) per bin, by a loop over jobs
    edges = np.linspace(lo, hi, bins + 1)
    jobs = list(zip(t, d, g, strict=True))
    load = [sum(gi * max(0.0, min(ti + di, b) - max(ti, a)) for ti, di, gi in jobs) / (b - a)
            for a, b in itertools.pairwise(edges)]
    inside = sum(gi * max(0.0, min(ti + di, hi) - max(ti, lo)) for ti, di, gi in jobs)
    tables = parse_tables(r.output)
    head = dict(tables[0][1])
    check(head["jobs"], len(df), "jobs")
    check(head["span"].split(" s ")[0], hi - lo, "span")
    check(head["GPU-hours"], float(np.dot(d, g)) / 3600, "GPU-hours")
    check(head["mean offered load"].split(" GPUs")[0], inside / (hi - lo), "mean load")
    assert np.mean(load) == pytest.approx(inside / (hi - lo))  # the table's mean
    work = head["work submitted / span"]
    check(work.split(" GPUs")[0], float(np.dot(d, g)) / (hi - lo), "submitted")
    after = re.search(r"counts the ([0-9.,]+) GPU-hours", work)
    assert after, work
    check(after.group(1), (float(np.dot(d, g)) - inside) / 3600, "after last submit")
    # GPU sizes
    hist_head, hist = tables[1]
    assert hist_head == ["GPUs", "jobs", "share"]
    counts = df["gpus"].value_counts().sort_index()
    assert [int(row[0]) for row in hist] == counts.index.tolist()
    for row, n in zip(hist, counts.tolist(), strict=True):
        check(row[1], n, ("jobs", row[0]))
        check(row[2], n / len(df), ("share", row[0]))
    # durations
    dur_head, (dur,) = tables[2]
    expected = {"mean": d.mean(), "max": d.max(),
                **{f"p{q}": np.percentile(d, q) for q in (50, 90, 95, 99)}}
    for name, cell in zip(dur_head, dur, strict=True):
        check(cell, expected[name], ("duration", name))
    # offered load bins
    load_head, rows = tables[3]
    assert load_head == ["from (s)", "to (s)", "GPUs"]
    assert len(rows) == bins
    for row, (a, b), value in zip(rows, itertools.pairwise(edges), load, strict=True):
        check(row[0], a, "from")
        check(row[1], b, "to")
        check(row[2], value, ("load", a))


# ------------------------------------------------------------------ experiment


# quick_experiment: the session's one quick run at 250 columns (tests/conftest.py)


def _csvs(out: Path) -> dict[str, pd.DataFrame]:
    return {p.stem: pd.read_csv(p, keep_default_na=False, na_values=[""])
            for p in out.glob("*.csv") if p.stem != "runs"}


def _shown_columns(df: pd.DataFrame) -> list[str]:
    return [str(c) for c in df.columns if not str(c).endswith(" ±")]


def _check_cell(cell: str, df: pd.DataFrame, i: int, col: str, where: Any) -> None:
    value = df[col].iloc[i]
    if isinstance(value, (bool, np.bool_)) or value in ("True", "False"):
        assert cell == ("yes" if value in (True, "True") else ""), (where, col, cell, value)
        return
    if isinstance(value, str):
        assert cell == value, (where, col, cell, value)
        return
    m, h = mean_pm(cell)
    check(m, value, (where, col))
    if h is not None:
        check(h, df[f"{col} ±"].iloc[i], (where, f"{col} ±"))


def test_experiment_results_md_equals_its_csvs(quick_experiment: tuple[Path, str]) -> None:
    out, _ = quick_experiment
    csvs = _csvs(out)
    md = (out / "results.md").read_text()
    blocks = re.findall(r"((?:^\|.*\|\n)+)", md, flags=re.M)
    matched = set()
    for block in blocks:
        lines = block.strip().splitlines()
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        names = [n for n, df in csvs.items() if _shown_columns(df) == header]
        assert names, f"a Markdown table without its CSV: {header}"
        df = csvs[names[0]]
        body = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]
        assert len(body) == len(df), names[0]
        for i, cells in enumerate(body):
            for col, cell in zip(header, cells, strict=True):
                _check_cell(cell, df, i, col, (names[0], i))
        matched.add(names[0])
    assert matched == set(csvs), set(csvs) - matched  # every CSV is shown


def test_experiment_terminal_tables_equal_its_csvs(quick_experiment: tuple[Path, str]) -> None:
    out, text = quick_experiment
    csvs = _csvs(out)
    tables = parse_tables(text)
    seen = set()
    for head, rows in tables:
        if head and head[0] == "measure":  # transposed: one column per trace / policy
            cands = [n for n, df in csvs.items()
                     if [str(v) for v in df.iloc[:, 0]] == head[1:]
                     and [r[0] for r in rows] == _shown_columns(df)[1:]]
            assert cands, head
            df = csvs[cands[0]]
            for row in rows:
                for i, cell in enumerate(row[1:]):
                    _check_cell(cell, df, i, row[0], (cands[0], row[0]))
            seen.add(cands[0])
        else:
            cands = [n for n, df in csvs.items() if _shown_columns(df) == head]
            assert cands, head
            df = csvs[cands[0]]
            assert len(rows) == len(df)
            for i, cells in enumerate(rows):
                for col, cell in zip(head, cells, strict=True):
                    _check_cell(cell, df, i, col, (cands[0], i))
            seen.add(cands[0])
    assert seen == set(csvs), set(csvs) - seen
