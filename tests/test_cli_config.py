"""Every knob from the command line: ``--set``, ``--config``, ``--show-config``, ``aryl config``.

Each replay through the CLI is checked against the same replay made directly
with ``aryl.simulate`` and the configuration the test builds itself.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.cli.config import (
    InputOptions,
    PolicyOptions,
    _default_text,
    _parse_text,
    knobs,
    render_markdown,
)
from aryl.sim import SimConfig, simulate
from aryl.traces import load_trace, synthesize_elastic

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(scope="module")
def trace_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [
        {"job_id": f"j{i}", "submit_time_s": 60.0 * i, "duration_s": 600.0 + 37 * (i % 7),
         "gpus": [1, 2, 4, 8][i % 4]}
        for i in range(60)
    ]
    path = tmp_path_factory.mktemp("t") / "t.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _cli(trace: Path, out: Path, *args: str, policy: str = "aryl") -> dict[str, Any]:
    r = CliRunner().invoke(main, [
        "replay", "--trace", str(trace), "--policy", policy, "--training-servers", "1",
        "--inference-servers", "2", "--inference", "none", "--out", str(out), *args,
    ])
    assert r.exit_code == 0, r.output
    return dict(json.loads((out / "summary.json").read_text()))


def _direct(trace: Path, policy: str = "aryl", *, alpha_high: float = 0.2,
            options: dict[str, Any] | None = None, **cfg: Any) -> dict[str, Any]:
    t = synthesize_elastic(load_trace(str(trace)), elastic_fraction=0.5, seed=0,
                           alpha_high=alpha_high)
    res = simulate(t, policy=policy, inference=False, policy_options=options,
                   config=SimConfig(n_training_servers=1, n_inference_servers=2, **cfg))
    return res.summary


def test_set_reaches_the_simulator_and_is_recorded(trace_csv: Path, tmp_path: Path) -> None:
    s = _cli(trace_csv, tmp_path / "a", "--set", "rescale_pause_s=300",
             "--set", "sim.checkpoint_interval_s=120")
    ref = _direct(trace_csv, rescale_pause_s=300.0, checkpoint_interval_s=120.0)
    default = _direct(trace_csv)
    assert s["jct_s"] == ref["jct_s"]
    assert s["jct_s"] != default["jct_s"]  # the knobs matter in this scenario
    assert s["config"]["rescale_pause_s"] == 300.0
    assert s["config"]["checkpoint_interval_s"] == 120.0
    assert s["run"]["sources"]["sim.rescale_pause_s"] == "--set"
    assert s["run"]["input"]["elastic_fraction"] == 0.5


def test_config_file_set_and_options_in_documented_precedence(
    trace_csv: Path, tmp_path: Path
) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text('seed = 3\nrescale_pause_s = 5\n\n[sim]\nrestart_cost_s = 7\n\n'
                    '[input]\nalpha_high = 0.3\n\n[policy]\nreturn_idle_loans = false\n')
    s = _cli(trace_csv, tmp_path / "a", "--config", str(toml), "--set", "seed=4")
    assert s["config"]["seed"] == 4  # --set beats the file
    assert s["config"]["rescale_pause_s"] == 5.0  # the file beats the default
    assert s["config"]["restart_cost_s"] == 7.0
    src = s["run"]["sources"]
    assert src["sim.seed"] == "--set"
    assert src["sim.rescale_pause_s"] == str(toml)
    assert "sim.tick_s" not in src  # defaults are not listed
    assert s["trace"]["elastic_synthesis"]["alpha_high"] == 0.3
    assert s["run"]["policy"]["return_idle_loans"] is False
    s2 = _cli(trace_csv, tmp_path / "b", "--config", str(toml), "--set", "seed=4",
              "--seed", "5")
    assert s2["config"]["seed"] == 5  # a dedicated option beats --set
    assert s2["run"]["sources"]["sim.seed"] == "--seed"
    t = synthesize_elastic(load_trace(str(trace_csv)), elastic_fraction=0.5, seed=4,
                           alpha_high=0.3)
    ref = simulate(t, policy="aryl", inference=False,
                   policy_options={"return_idle_loans": False},
                   config=SimConfig(n_training_servers=1, n_inference_servers=2, seed=4,
                                    rescale_pause_s=5.0, restart_cost_s=7.0)).summary
    assert s["jct_s"] == ref["jct_s"]
    assert s["n_loans"] == ref["n_loans"]


def test_policy_options_from_the_command_line(trace_csv: Path, tmp_path: Path) -> None:
    flag = _cli(trace_csv, tmp_path / "a", "--keep-idle-loans")
    via_set = _cli(trace_csv, tmp_path / "b", "--set", "policy.return_idle_loans=no")
    assert via_set["n_loans"] == flag["n_loans"]
    assert via_set["jct_s"] == flag["jct_s"]
    tir = _cli(trace_csv, tmp_path / "c", "--set", "las_thresholds_gpu_s=60,600",
               policy="tiresias")
    ref = _direct(trace_csv, "tiresias", options={"las_thresholds_gpu_s": (60.0, 600.0)})
    default = _direct(trace_csv, "tiresias")
    assert tir["n_preemptions"] == ref["n_preemptions"]
    assert tir["jct_s"] == ref["jct_s"]
    assert tir["jct_s"] != default["jct_s"]


def test_policy_option_defaults_are_the_policies_defaults() -> None:
    import inspect

    from aryl.scheduling.policy import Policy
    from aryl.scheduling.tiresias import TiresiasPolicy

    assert PolicyOptions().return_idle_loans is Policy.return_idle_loans
    src = inspect.getsource(TiresiasPolicy.__init__)
    assert "(3600.0, 36000.0)" in src
    assert PolicyOptions().las_thresholds_gpu_s == (3600.0, 36000.0)


def test_peak_utilisation_scales_the_bundled_demand(trace_csv: Path, tmp_path: Path) -> None:
    from aryl.sim.adapters import default_inference

    r = CliRunner().invoke(main, [
        "replay", "--trace", str(trace_csv), "--training-servers", "1",
        "--inference-servers", "4", "--out", str(tmp_path / "a"), "--set",
        "peak_utilisation=0.4",
    ])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    t = synthesize_elastic(load_trace(str(trace_csv)), elastic_fraction=0.5, seed=0)
    cfg = SimConfig(n_training_servers=1, n_inference_servers=4)
    ref = simulate(t, policy="aryl", config=cfg,
                   inference=default_inference(4, 0, peak_utilisation=0.4)).summary
    default = simulate(t, policy="aryl", config=cfg).summary
    assert s["inference_utilisation"] == ref["inference_utilisation"]
    assert s["inference_utilisation"] != default["inference_utilisation"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "rescale_pause=10"], "unknown field 'rescale_pause'; did you mean "
                                        "'rescale_pause_s'?"),
        (["--set", "sim.chekpoint_interval_s=10"], "did you mean 'sim.checkpoint_interval_s'?"),
        (["--set", "gpus_per_server=1.5"], "gpus_per_server: expected a whole number"),
        (["--set", "check=maybe"], "check: expected true or false"),
        (["--set", "rescale_pause_s=-1"],
         "rescale_pause_s: must be a finite number of seconds in [0, 1e+09], got -1.0 "
         "(from --set)"),
        (["--set", "tick_s=0"], "tick_s: must be a finite number of seconds in [1, 1e+09], got 0"),
        (["--set", "alpha_low=0.5"], "alpha_low: must be <= alpha_high"),
        (["--set", "reclaim_policy=greedy"], "reclaim_policy: unknown 'greedy'; choose from"),
        (["--set", "rescale_pause_s"], "expected NAME=VALUE"),
        (["--config", "missing.toml"], "--config: missing.toml: no such file"),
    ],
)
def test_bad_settings_name_the_field(trace_csv: Path, args: list[str], message: str) -> None:
    r = CliRunner().invoke(main, ["replay", "--trace", str(trace_csv), *args])
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split()), r.output


def test_bad_config_file_names_file_and_field(trace_csv: Path, tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    for text, message in (
        ('[sim]\ncheckpoint_interval_s = "soon"\n', "checkpoint_interval_s: expected a number"),
        ("[sim]\nrescale_pauses = 3\n", "[sim] rescale_pauses: unknown field"),
        ("check = 1\n", "check: expected true or false"),
        ("seed = \n", "not valid TOML"),
        ("[sim]\nelastic_fraction = 0.3\n", "unknown field 'sim.elastic_fraction'"),
    ):
        toml.write_text(text)
        r = CliRunner().invoke(main, ["compare", "--trace", str(trace_csv),
                                      "--config", str(toml)])
        assert r.exit_code == 2, r.output
        flat = " ".join(r.output.split())
        assert f"--config: {toml}" in flat, r.output
        assert message in flat, r.output


def test_show_config_round_trips_and_runs_nothing(trace_csv: Path, tmp_path: Path) -> None:
    args = ["--trace", str(trace_csv), "--training-servers", "auto", "--set",
            "horizon_s=none", "--set", "las_thresholds_gpu_s=10,20", "--set",
            "rescale_pause_s=12.5", "--inference", "none"]
    r = CliRunner().invoke(main, ["replay", *args, "--show-config", "--out",
                                  str(tmp_path / "never")])
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "never").exists()
    data = tomllib.loads(r.stdout)
    assert data["sim"]["rescale_pause_s"] == 12.5
    assert data["sim"]["n_training_servers"] >= 1  # auto resolved to a number
    assert data["policy"]["las_thresholds_gpu_s"] == [10.0, 20.0]
    assert data["input"]["inference"] == "none"
    assert "# --set" in r.stdout
    assert "(auto)" in r.stdout
    # read back: the same effective configuration
    toml = tmp_path / "eff.toml"
    toml.write_text(r.stdout)
    r2 = CliRunner().invoke(main, ["replay", "--trace", str(trace_csv), "--config", str(toml),
                                   "--show-config"])
    assert r2.exit_code == 0, r2.output
    assert tomllib.loads(r2.stdout) == data


def test_every_field_is_a_documented_knob() -> None:
    ks = knobs()
    names = [k.name for k in ks]
    assert len(names) == len(set(names))  # bare names are unambiguous
    for cls, section in ((SimConfig, "sim"), (InputOptions, "input"),
                         (PolicyOptions, "policy")):
        fields = [f.name for f in dataclasses.fields(cls)]
        assert [k.name for k in ks if k.section == section] == fields
    for k in ks:
        assert len(k.doc) > 20, f"{k.qualified} has no description in its class docstring"
        # the documented default, written as on the command line, parses back to it
        assert _parse_text(_default_text(k), k) == k.default, k.qualified


def test_configuration_page_is_generated_and_lists_every_field() -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert page == render_markdown(), (
        "docs/configuration.md is stale: run `aryl config --markdown > docs/configuration.md`")
    for k in knobs():
        assert f"| `{k.name}` |" in page
    r = CliRunner().invoke(main, ["config", "--markdown"])
    assert r.exit_code == 0
    assert r.output == page
    r = CliRunner().invoke(main, ["config"], env={"COLUMNS": "80"})
    assert r.exit_code == 0
    for k in knobs():
        assert k.qualified in r.output


def test_help_points_to_the_knobs() -> None:
    for cmd in (["replay"], ["compare"], ["experiment", "paper"]):
        r = CliRunner().invoke(main, [*cmd, "--help"], env={"COLUMNS": "100"})
        flat = " ".join(r.output.split())
        assert "--set NAME=VALUE" in flat
        assert "--config" in flat
        assert "--show-config" in flat
        assert "aryl config" in flat


def test_experiment_takes_common_settings_but_not_the_cluster_shape(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["experiment", "paper", "--quick", "--out", str(tmp_path / "x"),
                                  "--set", "n_training_servers=3"])
    assert r.exit_code == 2
    assert "n_training_servers is sized per trace" in " ".join(r.output.split())
    assert not (tmp_path / "x").exists()
    r = CliRunner().invoke(main, ["experiment", "paper", "--set", "peak_utilisation=0.5"])
    assert r.exit_code == 2  # the evaluation sweeps it; not a common setting
    assert "unknown field 'peak_utilisation'" in r.output
    r = CliRunner().invoke(main, ["experiment", "paper", "--set", "restart_cost_s=9",
                                  "--set", "return_idle_loans=false", "--show-config"])
    assert r.exit_code == 0, r.output
    data = tomllib.loads(r.stdout)
    assert data["sim"]["restart_cost_s"] == 9.0
    assert data["policy"]["return_idle_loans"] is False


def test_paper_spec_applies_common_settings_under_each_runs_own() -> None:
    import io

    from aryl.experiment import paper_spec
    from aryl.sweep import execute_run, plan_sweep

    spec = paper_spec(quick=True, config={"rescale_pause_s": 0.0, "seed": 2},
                      policy_options={"return_idle_loans": False})
    plan = plan_sweep(spec)
    assert {r.seed for r in plan.runs} == {2}
    tagged = [(dict(e.tags), next(r for r in plan.runs if r.key == e.key))
              for e in plan.entries]
    pauses = {dict(r.config)["rescale_pause_s"] for t, r in tagged
              if t.get("sweep") != "rescale_pause_s"}
    assert pauses == {0.0}
    swept = [dict(r.config)["rescale_pause_s"] for t, r in tagged
             if t.get("sweep") == "rescale_pause_s"]
    assert swept == [0.0]  # quick: the sweep's own value, 0 s
    # the keep-idle-loans ablation keeps its own option; every other run gets the common one
    assert {dict(r.policy_options)["return_idle_loans"] for _, r in tagged} == {False}
    head = next(r for t, r in tagged if t["section"] == "headline" and r.policy == "aryl")
    out = execute_run(head, plan.traces[head.trace_id])
    row = pd.read_parquet(io.BytesIO(out.row)).iloc[0]
    t = synthesize_elastic(load_trace("itp-c10"), elastic_fraction=0.5, seed=2)
    from aryl.sim.adapters import default_inference

    cfg = dict(head.config)
    n_train, n_inf = cfg["n_training_servers"], cfg["n_inference_servers"]
    ref = simulate(t, policy="aryl", policy_options={"return_idle_loans": False},
                   inference=default_inference(n_inf, 2, peak_utilisation=0.9),
                   config=SimConfig(n_training_servers=n_train, n_inference_servers=n_inf,
                                    seed=2, rescale_pause_s=0.0, record_events=False)).summary
    assert row["mean_jct_s"] == ref["jct_s"]["mean"]
    assert row["n_loans"] == ref["n_loans"]
    assert row["rescale_pause_s"] == 0.0


def test_the_documented_example_file_works(tmp_path: Path) -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```toml\n(.*?)```", page, flags=re.S)
    toml = tmp_path / "run.toml"
    toml.write_text(block)
    r = CliRunner().invoke(main, ["replay", "--config", str(toml), "--show-config"])
    assert r.exit_code == 0, r.output
    data = tomllib.loads(r.stdout)
    assert data["sim"]["rescale_pause_s"] == 10.0
    assert data["sim"]["checkpoint_interval_s"] == 600.0
    assert data["input"]["peak_utilisation"] == 0.7
    assert data["policy"]["return_idle_loans"] is False
