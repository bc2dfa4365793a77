"""Request-level inference coupled to a training replay: the autoscaler's demand
drives either engine, the serving capacity read back from the event log matches
the engine's own loaned-server count, both engines give the same request
measures, and the CLI flags (`aryl replay --inference-requests ...`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.sim import SimConfig, simulate
from aryl.sim.serving import (
    ServingOptions,
    demand_from_requests,
    inference_server_gpus,
    serve_result,
    serving_capacity,
)
from aryl.sim.setup import resolve_cluster
from aryl.traces.requests import RequestTrace


@pytest.fixture(scope="module")
def jobs() -> pd.DataFrame:
    return pd.DataFrame([
        {"job_id": f"j{i}", "submit_time_s": 120.0 * i, "duration_s": 900.0 + 61 * (i % 5),
         "gpus": [1, 2, 2, 4][i % 4]}
        for i in range(50)
    ])


def _requests(seed: int = 0, n: int = 3000, span_s: float = 6000.0) -> RequestTrace:
    # a day-like swing: arrivals thinned by a sine, services exponential (mean 3.1 s)
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, span_s, 3 * n))
    keep = rng.random(len(t)) < 0.5 * (1 + np.sin(2 * np.pi * t / span_s))
    t = t[keep][:n]
    return RequestTrace(pd.DataFrame({"arrival_time_s": t - t[0],
                                      "service_s": rng.exponential(3.0, len(t)) + 0.1,
                                      "model": [""] * len(t)}))


def _config(**kw) -> SimConfig:
    return SimConfig(n_training_servers=2, n_inference_servers=4, gpus_per_server=2, **kw)


def test_capacity_from_the_log_matches_the_engines_loaned_servers(jobs) -> None:
    cfg = _config(timeseries_step_s=10.0)
    reqs = _requests()
    opt = ServingOptions(autoscaler="utilisation", autoscaler_target=0.7)
    demand = demand_from_requests(reqs, opt, n_servers=4, gpus_per_server=2, start_s=0.0)
    res = simulate(jobs, policy="aryl", config=cfg, inference=demand)
    assert res.summary["n_loans"] > 0  # the case is not vacuous
    gpus = inference_server_gpus(resolve_cluster(cfg))
    assert gpus == {2: 2, 3: 2, 4: 2, 5: 2}
    cap = serving_capacity(res.events, server_gpus=gpus, start_s=0.0, cold_start_s=0.0)
    ts = res.timeseries
    k = np.searchsorted(cap.times_s, ts["time_s"].to_numpy(), side="right") - 1
    assert np.array_equal(cap.gpus[k], 2 * (4 - ts["loaned_servers"].to_numpy()))


def test_both_engines_give_the_same_request_measures(jobs) -> None:
    reqs = _requests(1, n=1500)
    opt = ServingOptions(slo_s=30.0, cold_start_s=25.0, reclaim_lead_s=60.0)
    demand = demand_from_requests(reqs, opt, n_servers=4, gpus_per_server=2, start_s=0.0)
    out = {}
    for engine in ("native", "python"):
        res = simulate(jobs, policy="aryl", config=_config(engine=engine), inference=demand)
        out[engine] = serve_result(res, reqs, opt, demand=demand)
    a, b = out["native"], out["python"]
    assert a.summary == b.summary
    assert a.requests.equals(b.requests)
    assert a.summary["n_cold_starts"] > 0  # loans came back: not vacuous
    assert a.summary["n_delayed_by_loans"] > 0
    # the reference queue gives the same per-request table
    res = simulate(jobs, policy="aryl", config=_config(), inference=demand)
    ref = serve_result(res, reqs, opt, demand=demand, backend="reference")
    assert ref.requests.equals(a.requests)


def test_no_loans_means_no_loan_delay(jobs) -> None:
    reqs = _requests(2, n=1500)
    opt = ServingOptions(cold_start_s=30.0)
    demand = demand_from_requests(reqs, opt, n_servers=4, gpus_per_server=2, start_s=0.0)
    res = simulate(jobs, policy="aryl-no-loan", config=_config(), inference=demand)
    sv = serve_result(res, reqs, opt, demand=demand)
    assert res.summary["n_loans"] == 0
    assert sv.summary["n_delayed_by_loans"] == 0
    assert sv.summary["slo_attainment"] == sv.summary["slo_attainment_no_loans"]
    assert (sv.requests["loan_delay_s"] == 0).all()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, jobs) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("serving")
    jobs.to_csv(d / "jobs.csv", index=False)
    reqs = _requests(3, n=800).requests[["arrival_time_s", "service_s"]]
    reqs.to_csv(d / "requests.csv", index=False)
    return d / "jobs.csv", d / "requests.csv"


def test_cli_replay_with_requests(files, tmp_path: Path) -> None:
    jobs_csv, req_csv = files
    r = CliRunner().invoke(main, [
        "replay", "--trace", str(jobs_csv), "--training-servers", "2",
        "--inference-servers", "4", "--gpus-per-server", "2",
        "--inference-requests", str(req_csv), "--autoscaler", "erlang-c", "--slo-s", "60",
        "--request-rate-scale", "2", "--cold-start-s", "20", "--out", str(tmp_path / "o"),
        "--request-table", "--json",
    ])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    sv = s["serving"]
    # 800 requests at rate scale 2: exactly 1,600
    assert sv["n_requests"] == 1600
    assert sv["request_rate_scale"] == 2.0
    assert sv["options"]["slo_s"] == 60.0
    assert s["run"]["serving"]["autoscaler"] == "erlang-c"
    table = pd.read_parquet(tmp_path / "o" / "requests.parquet")
    assert len(table) == 1600
    assert np.allclose(table["latency_s"], table["wait_s"] + table["service_s"])


def test_cli_bad_request_row_is_located(files, tmp_path: Path) -> None:
    jobs_csv, _ = files
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_time_s,service_s\n0,1\n5,-2\n", encoding="utf-8")
    r = CliRunner().invoke(main, [
        "replay", "--trace", str(jobs_csv), "--training-servers", "2",
        "--inference-servers", "4", "--inference-requests", str(bad),
    ])
    assert r.exit_code != 0
    assert "bad.csv, line 3, column 'service_s'" in r.output
    assert "negative_duration" in r.output
    assert "Traceback" not in r.output
    r2 = CliRunner().invoke(main, [
        "replay", "--trace", str(jobs_csv), "--set", "autoscaler_target=1.5",
        "--inference-requests", "azure-code",
    ])
    assert r2.exit_code == 2
    assert "target" in r2.output
    # a missing load-latency file is named before the replay runs
    r3 = CliRunner().invoke(main, [
        "replay", "--trace", str(jobs_csv), "--training-servers", "2",
        "--inference-servers", "4", "--inference-requests", "azure-code",
        "--cold-start-trace", str(tmp_path / "none.csv"),
    ])
    assert r3.exit_code != 0
    assert "none.csv' does not exist" in r3.output
    assert "aryl replay: policy" not in r3.output  # nothing was replayed


def test_aryl_config_lists_the_serving_knobs() -> None:
    r = CliRunner().invoke(main, ["config"])
    assert r.exit_code == 0
    for name in ("serving.inference_requests", "serving.autoscaler", "serving.slo_s",
                 "serving.cold_start_s", "serving.request_rate_scale"):
        assert name in r.output


def test_sweep_keys_of_request_level_inference(files, tmp_path: Path) -> None:
    from aryl.errors import InvalidInputError
    from aryl.sweep import load_spec, read_runs, run_sweep

    jobs_csv, req_csv = files
    spec = tmp_path / "s.toml"
    spec.write_text(f"""
[grid]
trace = "{jobs_csv}"
policy = ["aryl", "aryl-no-loan"]
n_training_servers = 2
n_inference_servers = 4
gpus_per_server = 2
inference_requests = "{req_csv.name}"
autoscaler_headroom = [0.0, 0.5]
cold_start_s = 20.0
seed = [0]
""", encoding="utf-8")
    # the request file is relative to the spec's folder: put a copy there
    (tmp_path / req_csv.name).write_bytes(req_csv.read_bytes())
    out = run_sweep(load_spec(spec), tmp_path / "out", n_procs=1)
    assert out.n_done == 4
    runs = read_runs(tmp_path / "out").sort_values(["policy", "autoscaler_headroom"])
    assert runs["autoscaler_headroom"].tolist() == [0.0, 0.5, 0.0, 0.5]
    assert runs["n_requests_serving"].tolist() == [800] * 4
    no_loan = runs[runs["policy"] == "aryl-no-loan"]
    assert no_loan["n_delayed_by_loans_serving"].tolist() == [0, 0]
    # the row equals the library's replay of the same run
    from aryl.sim.serving import load_serving_requests
    from aryl.traces import load_trace, synthesize_elastic

    opt = ServingOptions(inference_requests=str(tmp_path / req_csv.name),
                         autoscaler_headroom=0.5, cold_start_s=20.0)
    reqs = load_serving_requests(opt, seed=0)
    cfg = SimConfig(n_training_servers=2, n_inference_servers=4, gpus_per_server=2,
                    record_events=True)
    demand = demand_from_requests(reqs, opt, n_servers=4, gpus_per_server=2, start_s=0.0)
    tr = synthesize_elastic(load_trace(jobs_csv), elastic_fraction=0.5, seed=0)
    res = simulate(tr, policy="aryl", config=cfg, inference=demand)
    sv = serve_result(res, reqs, opt, demand=demand).summary
    row = runs[(runs["policy"] == "aryl") & (runs["autoscaler_headroom"] == 0.5)].iloc[0]
    assert row["slo_attainment_serving"] == sv["slo_attainment"]
    assert row["latency_p99_s_serving"] == sv["latency_p99_s"]
    assert row["n_delayed_by_loans_serving"] == sv["n_delayed_by_loans"]
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[grid]\ntrace = "{jobs_csv}"\npolicy = "aryl"\nslo_s = 30.0\n',
                   encoding="utf-8")
    with pytest.raises(InvalidInputError, match="need inference_requests"):
        load_spec(bad)


def test_results_page_quotes_the_serving_table() -> None:
    import importlib.util

    from aryl.experiment import markdown_table

    root = Path(__file__).resolve().parents[1]
    folder = root / "docs" / "results" / "serving"
    if not (folder / "runs.csv").is_file():
        pytest.skip("docs not present")
    spec = importlib.util.spec_from_file_location("serving_results",
                                                  root / "scripts" / "serving_results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # the table re-derived from the per-run measures is the one on the page
    table = mod.tradeoff_table(pd.read_csv(folder / "runs.csv"))
    saved = pd.read_csv(folder / "tradeoff.csv", keep_default_na=False, na_values=[""])
    assert markdown_table(table) == markdown_table(saved)
    assert markdown_table(saved) in (root / "docs" / "results.md").read_text(encoding="utf-8")
    # 5 seeds per setting, 20 settings
    assert (saved["seeds"] == 5).all()
    assert len(saved) == 20
