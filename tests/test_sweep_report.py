"""`aryl sweep report`: means and Student-t 95% intervals over seeds, ratios to a baseline
paired by seed, expression measures, and the tables and figures it writes."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.errors import InvalidInputError
from aryl.sweep import load_sweep, mean_ci, paired_ratios, parse_spec, read_runs, run_sweep
from aryl.sweep.report import summarize, write_report
from aryl.sweep.store import finished_keys

# Student-t quantiles t(0.975, df) from printed tables
T975 = {1: 12.706204736174707, 3: 3.182446305284263}

TINY = {
    "sweep": {"name": "tiny"},
    "grid": {"trace": "itp-c10", "policy": ["fifo", "aryl"], "seed": [0, 1],
             "n_training_servers": 2, "n_inference_servers": 2},
    "run": [{"policy": "aryl", "seed": 0, "reclaim_policy": "random",
             "elastic_fraction": 1.0, "peak_utilisation": 0.6}],
    "measures": {"gpu_hours": "gpu_s_allocated / 3600"},
    "report": {"baseline": "fifo"},
}


def test_mean_ci_hand_computed() -> None:
    # 1, 2, 3, 4: mean 2.5; sample sd sqrt(((1.5)^2 + (0.5)^2) * 2 / 3) = sqrt(5/3);
    # half-width t(0.975, 3) * sd / sqrt(4)
    m, h, n = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert (m, n) == (2.5, 4)
    assert h == pytest.approx(T975[3] * math.sqrt(5 / 3) / 2, rel=1e-12)
    # non-finite values are left out; one value has no interval; none has no mean
    m, h, n = mean_ci([7.0, math.nan, math.inf])
    assert (m, n) == (7.0, 1)
    assert math.isnan(h)
    m, h, n = mean_ci([])
    assert n == 0
    assert math.isnan(m)
    # identical values: a zero-width interval
    assert mean_ci([3.0, 3.0, 3.0])[:2] == (3.0, 0.0)


def test_paired_ratios_pair_by_seed_and_skip_zero_denominators() -> None:
    # seed 1's baseline is 0 (no ratio), seed 3 has no run, seed 4 no baseline
    assert paired_ratios({0: 2.0, 1: 3.0, 2: 4.0, 4: 1.0},
                         {0: 1.0, 1: 0.0, 2: 2.0, 3: 5.0}) == [2.0, 2.0]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "sweep"
    run_sweep(parse_spec(TINY), out, n_procs=1)
    return out


def test_summary_is_recomputed_from_the_runs(sweep_dir: Path) -> None:
    runs = read_runs(sweep_dir)
    grid = runs[runs["reclaim_policy"] == "aryl"]
    fifo = grid[grid["policy"] == "fifo"].set_index("seed").sort_index()
    aryl = grid[grid["policy"] == "aryl"].set_index("seed").sort_index()
    data = load_sweep(sweep_dir)
    summary = summarize(data, baseline="fifo")
    # the two grid scenarios and the [[run]] one, in plan order
    assert list(dict.fromkeys(summary["scenario"])) == [
        "fifo elastic_fraction=0.5 peak_utilisation=0.9 reclaim_policy=aryl",
        "aryl elastic_fraction=0.5 peak_utilisation=0.9 reclaim_policy=aryl",
        "aryl elastic_fraction=1 peak_utilisation=0.6 reclaim_policy=random",
    ]
    row = summary[(summary["scenario"].str.startswith("aryl elastic_fraction=0.5"))
                  & (summary["measure"] == "mean_jct_s")].iloc[0]
    x = aryl["mean_jct_s"].to_numpy()
    assert row["n"] == 2
    assert row["mean"] == pytest.approx(x.mean(), rel=1e-12)
    assert row["ci95"] == pytest.approx(T975[1] * x.std(ddof=1) / math.sqrt(2), rel=1e-9)
    assert row["ci_low"] == pytest.approx(row["mean"] - row["ci95"])
    r = (fifo["mean_jct_s"] / aryl["mean_jct_s"]).to_numpy()  # baseline / this, by seed
    assert row["ratio_mean"] == pytest.approx(r.mean(), rel=1e-12)
    assert row["ratio_ci95"] == pytest.approx(T975[1] * r.std(ddof=1) / math.sqrt(2), rel=1e-9)
    assert row["baseline"].startswith("fifo ")
    # the [[run]] scenario (seed 0 only) is paired with the closest fifo scenario, seed 0
    one = summary[summary["scenario"].str.contains("random")
                  & (summary["measure"] == "mean_jct_s")].iloc[0]
    single = runs[runs["reclaim_policy"] == "random"].iloc[0]
    assert one["n"] == 1
    assert math.isnan(one["ci95"])
    assert one["ratio_mean"] == pytest.approx(fifo.loc[0, "mean_jct_s"] / single["mean_jct_s"])
    # an expression measure from the spec, at report time
    gh = summary[(summary["measure"] == "gpu_hours")
                 & summary["scenario"].str.startswith("aryl elastic_fraction=0.5")].iloc[0]
    assert gh["mean"] == pytest.approx(aryl["gpu_s_allocated"].mean() / 3600, rel=1e-12)


def test_an_ambiguous_baseline_gives_no_ratio(tmp_path: Path) -> None:
    spec = parse_spec({"grid": {"trace": "itp-c10", "policy": "fifo", "seed": 0,
                                "n_training_servers": 2, "n_inference_servers": 2,
                                "reclaim_policy": ["aryl", "random"]},
                       "run": [{"policy": "aryl", "reclaim_policy": "most-idle"}]})
    run_sweep(spec, tmp_path / "s", n_procs=1)
    summary = summarize(load_sweep(tmp_path / "s"), baseline="fifo",
                        measures=["mean_jct_s"])
    aryl = summary[summary["scenario"].str.startswith("aryl")].iloc[0]
    # two fifo scenarios differ from it in one parameter each: no ratio rather than a guess
    assert aryl["ratio_n"] == 0
    assert pd.isna(aryl["baseline"])
    fifo = summary[summary["scenario"].str.startswith("fifo")]
    assert (fifo["ratio_mean"] == 1.0).all()


def test_unknown_names_get_the_closest(sweep_dir: Path) -> None:
    data = load_sweep(sweep_dir)
    with pytest.raises(InvalidInputError, match="unknown measure 'mean_jct'; did you mean"):
        summarize(data, measures=["mean_jct"])
    with pytest.raises(InvalidInputError,
                       match="no run of policy 'fifoo' in the sweep; did you mean 'fifo'"):
        summarize(data, baseline="fifoo")
    with pytest.raises(InvalidInputError, match="not a sweep folder"):
        load_sweep(sweep_dir / "runs")


def test_report_files_and_the_80_column_terminal(sweep_dir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["sweep", "report", str(sweep_dir), "--out",
                                       str(tmp_path / "rep")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "mean ± 95% CI" in result.output
    assert "fifo / this ± 95% CI" in result.output
    names = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert names == sorted(["summary.csv", "summary.md", "manifest.json", "cluster_usage.png",
                            "mean_jct_s.png", "mean_queuing_delay_s.png", "gpu_hours.png",
                            "preemptions_per_1000_jobs.png"])
    assert (tmp_path / "rep" / "mean_jct_s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "rep" / "summary.md").read_text()
    assert "## gpu_hours" in md
    # a second report with one measure replaces the folder as a whole
    result = CliRunner().invoke(main, ["sweep", "report", str(sweep_dir), "--out",
                                       str(tmp_path / "rep"), "--measure", "n_loans",
                                       "--baseline", "aryl"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "rep").iterdir()) == [
        "manifest.json", "n_loans.png", "summary.csv", "summary.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_cli_runs_a_spec_and_reports_bad_ones(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text("[grid]\ntrace = 'itp-c10'\npolicy = 'fifo'\nseed = [0, 1]\n"
                    "n_training_servers = 2\nn_inference_servers = 2\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    assert "2 runs done, 0 already finished (serial" in result.output
    result = CliRunner().invoke(main, ["sweep", "run", str(spec), "--out", str(out),
                                       "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.output.count("yes") == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("[grid]\ntrace = 'itp-c10'\npolicy = 'fifo'\ncheckpoint_intervall_s = 5\n")
    result = CliRunner().invoke(main, ["sweep", str(bad), "--out", str(tmp_path / "o2")])
    assert result.exit_code == 2
    assert "[grid].checkpoint_intervall_s: unknown key; did you mean 'checkpoint_interval_s'?" \
        in result.output
    assert not (tmp_path / "o2").exists()
    result = CliRunner().invoke(main, ["sweep", "report", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a sweep folder" in result.output


def _fails(run: object, trace: object) -> object:
    raise RuntimeError("no replay today")


def test_write_report_needs_finished_runs(tmp_path: Path) -> None:
    spec = parse_spec({"grid": {"trace": "itp-c10", "policy": "fifo"}})
    outcome = run_sweep(spec, tmp_path / "s", n_procs=1, run_fn=_fails)  # type: ignore[arg-type]
    assert outcome.failures == [("itp-c10 fifo seed=0", "RuntimeError: no replay today")]
    with pytest.raises(InvalidInputError, match="no finished run yet"):
        write_report(tmp_path / "s")
    assert not (tmp_path / "s" / "report").exists()


def test_an_option_a_policy_does_not_take_is_refused_before_any_run(tmp_path: Path) -> None:
    # policy_options of [grid] apply to every policy of the grid: 'fifo' takes no
    # starvation_bound_s.  The dry run used to list the runs and the sweep to fail
    # each fifo run at run time (exit 1 after running the others).
    spec = tmp_path / "s.toml"
    spec.write_text("[grid]\ntrace = 'itp-c10'\npolicy = ['sjf', 'fifo']\nseed = 0\n"
                    "n_training_servers = 2\nn_inference_servers = 2\n"
                    "policy_options = {starvation_bound_s = [600.0, 3600.0]}\n")
    out = tmp_path / "out"
    for extra in (["--dry-run"], ["-j", "1"]):
        result = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out), *extra])
        assert result.exit_code == 2, result.output
        assert ("s.toml: [grid].policy_options: policy 'fifo': unknown option(s) "
                "['starvation_bound_s']; known: ['return_idle_loans']") \
            in " ".join(result.output.split()), result.output
        assert finished_keys(out) == set()  # no run ran (the sjf ones neither)
        assert not out.exists()  # nor is a folder left behind (it held only .lock)
    # a folder that was there stays, as it was
    out.mkdir()
    (out / "mine.txt").write_text("kept")
    result = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out), "-j", "1"])
    assert result.exit_code == 2, result.output
    assert sorted(p.name for p in out.iterdir()) == [".lock", "mine.txt"]
    (out / "mine.txt").unlink()
    (out / ".lock").unlink()
    out.rmdir()
    # the same options on the policy that takes them: a [[run]] of its own
    spec.write_text("[grid]\ntrace = 'itp-c10'\npolicy = 'fifo'\nseed = 0\n"
                    "n_training_servers = 2\nn_inference_servers = 2\n"
                    "[[run]]\npolicy = 'sjf'\n"
                    "policy_options = {starvation_bound_s = [600.0, 3600.0]}\n")
    result = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "sjf starvation_bound_s=600" in result.output, result.output
    assert "sjf starvation_bound_s=3600" in result.output, result.output
