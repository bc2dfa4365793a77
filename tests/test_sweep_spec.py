"""Sweep specs: the product of their lists, errors that name the key, and run keys that
are the SHA-256 of the documented identity (so results are reused exactly when they can be)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

import aryl
from aryl.errors import InvalidInputError
from aryl.sim.config import SimConfig
from aryl.sweep import code_digest, load_spec, parse_spec, plan_sweep

TRACE_CSV = "job_id,submit_time_s,duration_s,gpus\na,0,100,8\nb,10,50,4\nc,20,300,2\n"


def spec_file(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_grid_is_the_product_and_runs_inherit_it() -> None:
    spec = parse_spec({
        "grid": {"trace": "itp-c10", "policy": ["fifo", "aryl"], "seed": [0, 1, 2],
                 "reclaim_policy": ["aryl", "random"]},
        "run": [{"policy": "sjf", "tags": {"section": "peer"}},
                {"policy": "aryl", "seed": 7, "reclaim_policy": "most-idle"}],
    })
    grid = [r for r in spec.requests if r.group == 0]
    # 1 trace x 2 policies x 3 seeds x 2 reclaim policies
    assert len(grid) == 12
    assert {(r.policy, r.seed, dict(r.config)["reclaim_policy"]) for r in grid} == {
        (p, s, rp) for p in ("fifo", "aryl") for s in (0, 1, 2) for rp in ("aryl", "random")
    }
    # [[run]] 1 keeps the grid's seed and reclaim lists: 3 x 2; [[run]] 2 replaces both: 1
    run1 = [r for r in spec.requests if r.group == 1]
    assert len(run1) == 6
    assert {r.policy for r in run1} == {"sjf"}
    assert all(dict(r.tags) == {"section": "peer"} for r in run1)
    run2 = [r for r in spec.requests if r.group == 2]
    assert [(r.policy, r.seed, dict(r.config)["reclaim_policy"]) for r in run2] == [
        ("aryl", 7, "most-idle")]
    # the sweep default: no event log
    assert all(dict(r.config)["record_events"] is False for r in spec.requests)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"gird": {}}, "[gird]: unknown table; did you mean 'grid'?"),
        ({"grid": {"trace": "itp-c10", "policy": "aryl", "reclaim_polcy": "random"}},
         "[grid].reclaim_polcy: unknown key; did you mean 'reclaim_policy'?"),
        ({"grid": {"trace": "itp-c10", "policy": "arly"}},
         "[grid].policy: unknown policy 'arly'; did you mean 'aryl'?"),
        ({"grid": {"trace": "itp-c7", "policy": "aryl"}},
         "[grid].trace: 'itp-c7' is neither a preset (did you mean 'itp-c07'?)"),
        ({"grid": {"trace": {"source": "itp-c10", "windo": "x"}, "policy": "aryl"}},
         "[grid].trace.windo: unknown key; did you mean 'window'?"),
        ({"grid": {"trace": "itp-c10", "policy": "aryl", "seed": [0, -1]}},
         "[grid].seed[1]: expected an integer >= 0, got -1"),
        ({"grid": {"trace": "itp-c10", "policy": "aryl", "elastic_fraction": 1.5}},
         "[grid].elastic_fraction: must be in [0, 1], got 1.5"),
        ({"grid": {"trace": "itp-c10", "policy": "aryl", "n_training_servers": 0}},
         "[grid].n_training_servers: expected \"auto\" or an integer >= 1, got 0"),
        ({"grid": {"trace": "itp-c10", "policy": "aryl", "tick_s": "fast"}},
         "[grid].tick_s: expected a number, got 'fast'"),
        ({"grid": {"trace": "itp-c10", "policy": "aryl", "tick_s": -5.0}},
         "[grid].tick_s: must be"),  # SimConfig's own range check, located by the spec
        ({"grid": {"trace": "itp-c10", "policy": "aryl", "seed": []}},
         "[grid].seed: empty list (nothing to run)"),
        ({"grid": {"trace": "itp-c10"}}, "[grid].policy: required"),
        ({"run": [{"policy": "aryl"}]}, "[[run]] #1.trace: required"),
        ({"grid": {"trace": "itp-c10", "policy": "aryl", "n_inference_servers": 3,
                   "inference_ratio": 0.5}},
         "[grid]: set n_inference_servers or inference_ratio, not both"),
        ({"grid": {"trace": "itp-c10", "policy": "aryl"}, "report": {"baseline": "fifoo"}},
         "[report].baseline: unknown policy 'fifoo'; did you mean 'fifo'?"),
        ({"grid": {"trace": "itp-c10", "policy": "aryl"},
          "measures": {"x": "__import__('os')"}},
         "[measures].x: only arithmetic"),
        ({}, "no [grid] and no [[run]] table: nothing to run"),
    ],
)
def test_errors_name_the_table_and_key(data: dict, message: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        parse_spec(data, origin="study.toml")
    assert str(err.value).startswith("study.toml: ")
    assert message in str(err.value)


def test_toml_errors_name_the_file_and_line(tmp_path: Path) -> None:
    p = spec_file(tmp_path, "[grid]\ntrace = 'itp-c10'\npolicy = = 'aryl'\nseed = 1\n")
    with pytest.raises(InvalidInputError, match=r"s\.toml: not valid TOML: .*line 3"):
        load_spec(p)
    with pytest.raises(InvalidInputError, match="no such sweep spec"):
        load_spec(tmp_path / "missing.toml")


def test_a_run_table_may_trade_the_grid_server_count_for_a_ratio() -> None:
    spec = parse_spec({
        "grid": {"trace": "itp-c10", "policy": "aryl", "n_training_servers": 4,
                 "n_inference_servers": 4},
        "run": [{"inference_ratio": [0.5, 2.0]}],
    })
    plan = plan_sweep(spec)
    # 4 training servers: round(4 * 0.5) = 2 and round(4 * 2.0) = 8 inference servers
    sizes = [(dict(r.config)["n_training_servers"], dict(r.config)["n_inference_servers"])
             for r in plan.runs]
    assert sizes == [(4, 4), (4, 2), (4, 8)]


def test_every_simconfig_field_is_a_sweep_key_including_new_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every field of the dataclass as it is today ...
    for f in dataclasses.fields(SimConfig):
        if f.name == "seed":
            continue  # the run axis of the same name
        value = getattr(SimConfig(), f.name)
        spec = parse_spec({"grid": {"trace": "itp-c10", "policy": "aryl",
                                    f.name: "none" if value is None else value}})
        assert dict(spec.requests[0].config)[f.name] == value, f.name
    # ... and a field another engineer adds tomorrow, with no change to the sweep code
    extended = dataclasses.make_dataclass(
        "SimConfig", [("warmup_s", float, dataclasses.field(default=0.0))],
        bases=(SimConfig,), frozen=True,
    )
    monkeypatch.setattr("aryl.sim.config.SimConfig", extended)
    spec = parse_spec({"grid": {"trace": "itp-c10", "policy": "aryl", "warmup_s": [5, 60.0]}})
    assert [dict(r.config)["warmup_s"] for r in spec.requests] == [5.0, 60.0]
    with pytest.raises(InvalidInputError, match="warmup_z: unknown key; did you mean 'warmup_s'"):
        parse_spec({"grid": {"trace": "itp-c10", "policy": "aryl", "warmup_z": 1.0}})


def _key(identity: dict) -> str:
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_key_is_the_sha256_of_the_documented_identity(tmp_path: Path) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text(TRACE_CSV)
    p = spec_file(tmp_path, """
[grid]
trace = {source = "jobs.csv", label = "mine"}
policy = "aryl"
seed = 3
n_training_servers = 2
n_inference_servers = 1
reclaim_policy = "random"
policy_options = {return_idle_loans = false}
""")
    run = plan_sweep(load_spec(p)).runs[0]
    # the identity, rebuilt from docs/sweep.md: version, code digest, trace content, run
    file_sha = hashlib.sha256(TRACE_CSV.encode()).hexdigest()
    config = dataclasses.asdict(SimConfig(n_training_servers=2, n_inference_servers=1, seed=3,
                                          reclaim_policy="random", record_events=False))
    identity = {
        "aryl": aryl.__version__,
        "code": code_digest(),
        "trace": {"preset": None, "sha256": hashlib.sha256(file_sha.encode()).hexdigest(),
                  "window": None},
        "policy": "aryl",
        "policy_options": {"return_idle_loans": False},
        "seed": 3,
        "elastic_fraction": 0.5,
        "peak_utilisation": 0.9,
        "inference": "bundled",
        "config": config,
    }
    assert run.key == _key(identity)
    assert run.label == "mine aryl keep-idle-loans seed=3"

    # labels, tags and the file's location are not part of the key; its content is
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "copy.csv").write_text(TRACE_CSV)
    p2 = spec_file(tmp_path, p.read_text().replace('source = "jobs.csv", label = "mine"',
                                                   'source = "elsewhere/copy.csv"')
                   + "tags = {section = 'x'}\n", "s2.toml")
    assert plan_sweep(load_spec(p2)).runs[0].key == run.key
    (moved / "copy.csv").write_text(TRACE_CSV.replace("300", "301"))
    assert plan_sweep(load_spec(p2)).runs[0].key != run.key
    # any configuration value changes it
    p3 = spec_file(tmp_path, p.read_text().replace("seed = 3", "seed = 3\ntick_s = 61"), "s3.toml")
    assert plan_sweep(load_spec(p3)).runs[0].key != run.key


def test_relative_trace_paths_are_taken_from_the_spec_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "jobs.csv").write_text(TRACE_CSV)
    p = spec_file(tmp_path / "study", "[grid]\ntrace = 'jobs.csv'\npolicy = 'fifo'\n")
    monkeypatch.chdir(tmp_path)  # not the spec's folder
    spec = load_spec(p)
    assert spec.requests[0].trace.source == str((tmp_path / "study" / "jobs.csv").resolve())
    assert spec.requests[0].trace.label == "jobs"


def test_a_run_asked_for_twice_runs_once_with_both_tags() -> None:
    spec = parse_spec({
        "grid": {"trace": "itp-c10", "policy": ["fifo", "aryl"], "n_training_servers": 2,
                 "n_inference_servers": 1, "tags": {"section": "headline"}},
        "run": [{"policy": "aryl", "tags": {"section": "ablation"}}],
    })
    plan = plan_sweep(spec)
    assert len(spec.requests) == 3
    assert len(plan.runs) == 2  # fifo, aryl
    aryl_key = plan.runs[1].key
    assert [dict(e.tags)["section"] for e in plan.entries if e.key == aryl_key] == [
        "headline", "ablation"]


def test_auto_sizes_follow_the_documented_rule(tmp_path: Path) -> None:
    from aryl.experiment import size_cluster
    from aryl.traces import load_trace

    spec = parse_spec({"grid": {"trace": "itp-c10", "policy": "aryl",
                                "n_training_servers": "auto", "n_inference_servers": "auto",
                                "training_servers_x": [1.0, 0.75]}})
    plan = plan_sweep(spec, cache_dir=tmp_path / "sizing")
    n_train, n_inf = size_cluster(load_trace("itp-c10").jobs)
    # x = 0.75 scales the training count (half to even) and keeps the inference count
    assert [(dict(r.config)["n_training_servers"], dict(r.config)["n_inference_servers"])
            for r in plan.runs] == [(n_train, n_inf), (max(1, round(n_train * 0.75)), n_inf)]
    cached = list((tmp_path / "sizing").glob("*.json"))
    assert len(cached) == 1
    assert json.loads(cached[0].read_text())["n_training_servers"] == n_train


def test_the_documented_example_spec_parses(tmp_path: Path) -> None:
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "sweep.md").read_text()
    (block,) = re.findall(r"```toml\n(.*?)```", page, flags=re.S)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "jobs.csv").write_text(TRACE_CSV)
    spec = load_spec(spec_file(tmp_path, block))
    # [grid]: 2 traces x 2 policies x 5 seeds x 2 reclaim policies x 2 option values;
    # [[run]]: elastic-greedy with reclaim aryl, on the grid's traces, seeds and options
    assert len([r for r in spec.requests if r.group == 0]) == 2 * 2 * 5 * 2 * 2
    run = [r for r in spec.requests if r.group == 1]
    assert len(run) == 2 * 5 * 2
    assert {(r.policy, dict(r.config)["reclaim_policy"]) for r in run} == {
        ("elastic-greedy", "aryl")}
    assert spec.measures == {"gpu_hours": "gpu_s_allocated / 3600"}
    assert spec.baseline == "fifo"
    assert {r.trace.label for r in spec.requests} == {"itp-c07", "mine"}


def test_elastic_worker_gpus_is_a_key_and_only_split_enters_the_identity(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text(TRACE_CSV)
    base = {"trace": str(trace), "policy": "aryl", "n_training_servers": 2,
            "n_inference_servers": 1}
    one, split = plan_sweep(parse_spec({"grid": {**base, "elastic_worker_gpus": ["one",
                                                                                 "split"]}})).runs
    default = plan_sweep(parse_spec({"grid": base})).runs[0]
    # "one" is the default: a spec that does not name the key reuses the same runs
    assert one.key == default.key
    assert (one.elastic_worker_gpus, split.elastic_worker_gpus) == ("one", "split")
    assert split.key != one.key
    # the identity of a split run is the documented one plus the rule
    config = dataclasses.asdict(SimConfig(n_training_servers=2, n_inference_servers=1,
                                          record_events=False))
    file_sha = hashlib.sha256(TRACE_CSV.encode()).hexdigest()
    identity = {
        "aryl": aryl.__version__, "code": code_digest(),
        "trace": {"preset": None, "sha256": hashlib.sha256(file_sha.encode()).hexdigest(),
                  "window": None},
        "policy": "aryl", "policy_options": {}, "seed": 0, "elastic_fraction": 0.5,
        "elastic_worker_gpus": "split", "peak_utilisation": 0.9, "inference": "bundled",
        "config": config,
    }
    assert split.key == _key(identity)
    assert split.params()["elastic_worker_gpus"] == "split"
    assert "elastic_worker_gpus=split" in split.label
    with pytest.raises(InvalidInputError,
                       match=r"study\.toml: \[grid\]\.elastic_worker_gpus\[1\]: expected one "
                             r"of \['one', 'split'\], got 'halves'"):
        parse_spec({"grid": {**base, "elastic_worker_gpus": ["one", "halves"]}},
                   origin="study.toml")


def test_a_cluster_spec_gives_the_server_counts() -> None:
    from aryl.cluster import cluster_preset

    lyra = cluster_preset("lyra")
    spec = parse_spec({"grid": {"trace": "itp-c10", "policy": "aryl",
                                "n_training_servers": "auto", "n_inference_servers": "auto"},
                       "run": [{"cluster": "lyra"}]})
    plan = plan_sweep(spec)
    home, het = (dict(r.config) for r in plan.runs)
    # auto on the default shape sizes the cluster; with a cluster spec it means the spec's
    # own counts (SimConfig keeps its defaults, which the spec replaces)
    assert het["cluster"] == "lyra"
    assert (het["n_training_servers"], het["n_inference_servers"]) == (
        SimConfig.n_training_servers, SimConfig.n_inference_servers)
    assert home["cluster"] is None
    assert (lyra.n_training_servers, lyra.n_inference_servers) == (42, 32)
    for key, value in (("training_servers_x", 1.1), ("inference_ratio", 0.5)):
        bad = parse_spec({"grid": {"trace": "itp-c10", "policy": "aryl", "cluster": "lyra",
                                   key: value}}, origin="study.toml")
        with pytest.raises(InvalidInputError,
                           match=rf"study\.toml: \[grid\]\.{key}: cannot be used with "
                                 r"cluster 'lyra'"):
            plan_sweep(bad)


def test_the_paper_spec_loads_with_its_designed_experiments() -> None:
    from aryl.sweep import bundled_spec

    spec = load_spec(bundled_spec("paper"))

    def cfg(r: object, k: str) -> object:  # a request names only the fields its table set
        return dict(r.config).get(k, getattr(SimConfig, k))  # type: ignore[attr-defined]

    by: dict[tuple[str, str], list] = {}
    for r in spec.requests:
        tags = dict(r.tags)
        by.setdefault((tags["section"], tags.get("sweep", "")), []).append(r)
    seeds = [0, 1, 2, 3, 4]
    # headline: 3 traces x (fifo, fifo-backfill, aryl) x 5 seeds
    head = by["headline", ""]
    assert len(head) == 3 * 3 * 5
    assert sorted({r.policy for r in head}) == ["aryl", "fifo", "fifo-backfill"]
    # sjf with and without its starvation bound
    sjf = [cfg(r, "starvation_bound_s") for r in by["ablation", ""] if r.policy == "sjf"]
    assert sorted(set(sjf)) == [SimConfig.starvation_bound_s, 1e9]
    # knapsack: split workers, half and all jobs elastic, 4 policies, 5 seeds
    knap = by["knapsack", ""]
    assert {(r.elastic_worker_gpus, r.elastic_fraction) for r in knap} == {
        ("split", 0.5), ("split", 1.0)}
    assert sorted({r.policy for r in knap}) == ["aryl", "aryl-no-loan", "elastic-greedy",
                                                "fifo"]
    assert len(knap) == 2 * 4 * 5
    # reclaim: 4 cells x 4 reclaim policies, aryl only
    rec = by["reclaim", ""]
    cells = {(r.inference_ratio, dict(r.config).get("n_inference_servers"),
              cfg(r, "restart_cost_s"), cfg(r, "checkpoint_interval_s")) for r in rec}
    assert cells == {(None, "auto", 60.0, 1800.0), (1.0, None, 60.0, 1800.0),
                     (None, "auto", 600.0, 7200.0), (1.0, None, 600.0, 7200.0)}
    assert sorted({cfg(r, "reclaim_policy") for r in rec}) == [
        "aryl", "fewest-jobs", "most-idle", "random"]
    assert {r.policy for r in rec} == {"aryl"}
    assert len(rec) == 4 * 4 * 5
    # heterogeneous: fifo, aryl-no-loan, aryl on lyra; aryl at 5 loaned speeds
    het = by["hetero", ""]
    assert sorted({r.policy for r in het}) == ["aryl", "aryl-no-loan", "fifo"]
    assert {cfg(r, "cluster") for r in het} == {"lyra"}
    speed = by["hetero", "loaned_gpu_speed"]
    assert sorted({cfg(r, "loaned_gpu_speed") for r in speed}) == [0.2, 0.4, 0.6, 0.8, 1.0]
    assert {r.policy for r in speed} == {"aryl"}
    assert all(sorted({r.seed for r in rs}) == seeds for rs in by.values())
    assert all(r.trace.label == "itp-c07" for k, rs in by.items() if k[0] != "headline"
               for r in rs)


def test_a_cluster_file_is_keyed_by_its_content(tmp_path: Path) -> None:
    from aryl.cluster import cluster_preset

    f = tmp_path / "c.toml"
    f.write_text(cluster_preset("lyra").to_toml())
    spec = parse_spec({"grid": {"trace": "itp-c10", "policy": "fifo", "cluster": str(f)}})
    key = plan_sweep(spec).runs[0].key
    assert plan_sweep(spec).runs[0].key == key
    f.write_text(f.read_text().replace("n_servers = 12", "n_servers = 13"))
    assert plan_sweep(spec).runs[0].key != key
    missing = parse_spec({"grid": {"trace": "itp-c10", "policy": "fifo",
                                   "cluster": str(tmp_path / "none.toml")}}, origin="s.toml")
    with pytest.raises(InvalidInputError, match=r"s\.toml: \[grid\]\.cluster: .* is neither a "
                                                r"preset \(default, lyra\) nor a file"):
        plan_sweep(missing)
