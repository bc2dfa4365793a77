"""The simulator's configuration and set-up, refusal by refusal (whole messages).

* :class:`SimConfig`: every field's refusal and the accepted edges of its range;
* the time-series size guard;
* :mod:`aryl.sim.setup`: the cluster of a replay (preset, TOML file, counts),
  the speed model (parametric / measured, the loaned-GPU speed), the model
  families, the GPU types a measured table must know;
* :mod:`aryl.sim.jobs`: the rigid job's worker size, the throughput curve, the
  job table's order.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl.cluster import ClusterSpec, cluster_preset
from aryl.errors import InvalidInputError
from aryl.sim import SimConfig
from aryl.sim.config import MAX_TIMESERIES_POINTS, check_timeseries_size
from aryl.sim.jobs import build_job_table, largest_divisor_at_most, throughput
from aryl.sim.setup import (
    check_types,
    describe,
    job_families,
    resolve_cluster,
    speed_kind,
    speed_model,
)


def refusal(**kwargs: Any) -> str:
    with pytest.raises(InvalidInputError) as info:
        SimConfig(**kwargs)
    return str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"n_training_servers": 2.0}, "n_training_servers: expected an integer, got 2.0"),
        ({"n_inference_servers": True}, "n_inference_servers: expected an integer, got True"),
        ({"n_training_servers": -1}, "n_training_servers: must be in [0, 100,000], got -1"),
        ({"n_inference_servers": 100_001},
         "n_inference_servers: must be in [0, 100,000], got 100001"),
        ({"gpus_per_server": 0}, "gpus_per_server: must be in [1, 1,024], got 0"),
        ({"gpus_per_server": 1025}, "gpus_per_server: must be in [1, 1,024], got 1025"),
        ({"seed": -1}, "seed: must be in [0, 9,223,372,036,854,775,807], got -1"),
        ({"loan_reserve_servers": "1"}, "loan_reserve_servers: expected an integer, got '1'"),
        ({"tick_s": "60"}, "tick_s: expected a number of seconds, got '60'"),
        ({"tick_s": False}, "tick_s: expected a number of seconds, got False"),
        ({"tick_s": 0.5}, "tick_s: must be a finite number of seconds in [1, 1e+09], got 0.5"),
        ({"rescale_pause_s": -0.1},
         "rescale_pause_s: must be a finite number of seconds in [0, 1e+09], got -0.1"),
        ({"checkpoint_interval_s": 0.99},
         "checkpoint_interval_s: must be a finite number of seconds in [1, 1e+09], got 0.99"),
        ({"restart_cost_s": 1e9 + 1},
         "restart_cost_s: must be a finite number of seconds in [0, 1e+09], got 1000000001.0"),
        ({"reclaim_grace_s": math.nan},
         "reclaim_grace_s: must be a finite number of seconds in [0, 1e+09], got nan"),
        ({"loan_cooldown_s": -math.inf},
         "loan_cooldown_s: must be a finite number of seconds in [0, 1e+09], got -inf"),
        ({"starvation_bound_s": -1},
         "starvation_bound_s: must be a finite number of seconds in [0, 1e+09], got -1"),
        ({"timeseries_step_s": 0},
         "timeseries_step_s: must be a finite number of seconds in [1, 1e+09], got 0"),
        ({"start_time_s": "0"}, "start_time_s: expected a time in seconds or None, got '0'"),
        ({"horizon_s": True}, "horizon_s: expected a time in seconds or None, got True"),
        ({"start_time_s": math.inf}, "start_time_s: must be finite (or None), got inf"),
        ({"horizon_s": math.nan}, "horizon_s: must be finite (or None), got nan"),
        ({"start_time_s": 10.5, "horizon_s": 10.25},
         "horizon_s: 10.25 is before start_time_s 10.5"),
        ({"default_alpha": "0.1"}, "default_alpha: expected a number, got '0.1'"),
        ({"default_alpha": True}, "default_alpha: expected a number, got True"),
        ({"default_alpha": -0.01}, "default_alpha: must be in [0, 1], got -0.01"),
        ({"default_alpha": 1.01}, "default_alpha: must be in [0, 1], got 1.01"),
        ({"check": "no"}, "check: expected True or False, got 'no'"),
        ({"record_events": 0}, "record_events: expected True or False, got 0"),
        ({"mix_gpu_types": None}, "mix_gpu_types: expected True or False, got None"),
        ({"backend": "cuda"}, "backend: must be 'native' or 'reference', got 'cuda'"),
        ({"speed_model": "fast"},
         "speed_model: must be 'auto', 'parametric' or 'measured', got 'fast'"),
        ({"loaned_gpu_speed": "1"}, "loaned_gpu_speed: expected a number or None, got '1'"),
        ({"loaned_gpu_speed": False}, "loaned_gpu_speed: expected a number or None, got False"),
        ({"loaned_gpu_speed": 0.0}, "loaned_gpu_speed: must be in (0, 10], got 0.0"),
        ({"loaned_gpu_speed": 10.5}, "loaned_gpu_speed: must be in (0, 10], got 10.5"),
        ({"cluster": ""}, "cluster: expected a preset name or a TOML path, got ''"),
        ({"cluster": 3}, "cluster: expected a preset name or a TOML path, got 3"),
        ({"cluster": "lyra", "n_training_servers": 4},
         "cluster: 'lyra' gives the server counts; do not also set n_training_servers"),
        ({"cluster": "lyra", "n_inference_servers": 4, "gpus_per_server": 4},
         "cluster: 'lyra' gives the server counts; do not also set n_inference_servers, "
         "gpus_per_server"),
        ({"reclaim_policy": "cheap"},
         "reclaim_policy: unknown 'cheap'; choose from ['aryl', 'exact', 'fewest-jobs', "
         "'most-idle', 'random']"),
        ({"reclaim_policy": 1},
         "reclaim_policy: unknown 1; choose from ['aryl', 'exact', 'fewest-jobs', "
         "'most-idle', 'random']"),
    ],
)
def test_every_refusal_names_the_field_and_the_range(kwargs: dict[str, Any],
                                                     expected: str) -> None:
    assert refusal(**kwargs) == expected


def test_the_edges_of_every_range_are_accepted() -> None:
    cfg = SimConfig(n_training_servers=0, n_inference_servers=100_000, gpus_per_server=1,
                    seed=2**63 - 1, loan_reserve_servers=0, tick_s=1, rescale_pause_s=0,
                    checkpoint_interval_s=1e9, restart_cost_s=0, reclaim_grace_s=1e9,
                    loan_cooldown_s=0, starvation_bound_s=0, timeseries_step_s=1,
                    default_alpha=1, start_time_s=5, horizon_s=5, loaned_gpu_speed=10,
                    speed_model="measured", backend="reference", check=np.bool_(False),
                    mix_gpu_types=True)
    d = cfg.to_dict()
    assert d["tick_s"] == 1.0
    assert type(d["tick_s"]) is float
    assert d["default_alpha"] == 1.0
    assert type(d["default_alpha"]) is float
    assert d["start_time_s"] == 5.0
    assert type(d["start_time_s"]) is float
    assert d["loaned_gpu_speed"] == 10.0
    assert type(d["loaned_gpu_speed"]) is float
    assert d["check"] is False
    assert SimConfig(default_alpha=0, gpus_per_server=1024, loaned_gpu_speed=1e-9).to_dict()[
        "default_alpha"] == 0.0
    # a preset with the default counts is fine; a cluster name is kept as given
    assert SimConfig(cluster=" lyra ").cluster == " lyra "
    for policy in ("aryl", "random", "fewest-jobs", "most-idle", "exact"):
        assert SimConfig(reclaim_policy=policy).reclaim_policy == policy


def test_the_time_series_guard() -> None:
    # span / step + 1 rows: 4,999,999 x 1 s + 1 = 5,000,000 rows is the limit
    check_timeseries_size(MAX_TIMESERIES_POINTS - 1.0, 1.0)
    with pytest.raises(InvalidInputError) as info:
        check_timeseries_size(float(MAX_TIMESERIES_POINTS), 1.0)
    assert str(info.value) == (
        "timeseries_step_s: 1 s over a run of 5e+06 s gives more than 5,000,000 time-series "
        "rows; use a step of at least 1 s")
    with pytest.raises(InvalidInputError) as info:
        check_timeseries_size(1e8, 2.0)
    # 1e8 / 4,999,999 = 20.000004 -> "20"
    assert str(info.value) == (
        "timeseries_step_s: 2 s over a run of 1e+08 s gives more than 5,000,000 time-series "
        "rows; use a step of at least 20 s")


# ------------------------------------------------------------------ set-up

def test_the_cluster_of_a_replay(tmp_path: Path) -> None:
    spec = resolve_cluster(SimConfig(n_training_servers=3, n_inference_servers=2,
                                     gpus_per_server=4))
    assert spec == ClusterSpec.from_counts(3, 2, 4, "V100")
    assert resolve_cluster(SimConfig(cluster="lyra")) == cluster_preset("lyra")
    assert resolve_cluster(SimConfig(cluster=" default ")) == cluster_preset("default")
    toml = tmp_path / "c.TOML"
    toml.write_text(cluster_preset("lyra").to_toml())
    assert resolve_cluster(SimConfig(cluster=str(toml))) == cluster_preset("lyra")
    plain = tmp_path / "cluster-file"  # an existing file without the suffix
    plain.write_text(ClusterSpec.from_counts(2, 1, 8, "A100").to_toml())
    assert resolve_cluster(SimConfig(cluster=str(plain))) == ClusterSpec.from_counts(
        2, 1, 8, "A100")
    with pytest.raises(InvalidInputError) as info:
        resolve_cluster(SimConfig(cluster="lyre"))
    assert "unknown cluster preset 'lyre'" in str(info.value)
    assert "did you mean 'lyra'" in str(info.value)
    with pytest.raises(InvalidInputError) as info:
        resolve_cluster(SimConfig(cluster=str(tmp_path / "missing.toml")))
    assert "missing.toml" in str(info.value)


def test_the_speed_model_of_a_replay() -> None:
    homog = ClusterSpec.from_counts(2, 2, 8, "V100")
    lyra = cluster_preset("lyra")
    assert speed_kind(SimConfig(), homog) == "parametric"
    assert speed_kind(SimConfig(), lyra) == "measured"
    assert speed_kind(SimConfig(speed_model="parametric"), lyra) == "parametric"
    assert speed_kind(SimConfig(speed_model="measured"), homog) == "measured"
    m = speed_model(SimConfig(), homog)
    assert (m.reference_gpu_type, m.factors, m.table) == ("V100", {}, None)
    assert m.is_trivial
    # the loaned GPUs' speed sets the inference pools' type (not the reference type)
    t4 = ClusterSpec.from_dict({"pools": [
        {"name": "tr", "role": "training", "n_servers": 1, "gpus_per_server": 8,
         "gpu_type": "A100"},
        {"name": "in", "role": "inference", "n_servers": 1, "gpus_per_server": 4,
         "gpu_type": "T4"},
        {"name": "in2", "role": "inference", "n_servers": 1, "gpus_per_server": 4,
         "gpu_type": "A100"}]})
    m = speed_model(SimConfig(speed_model="parametric", loaned_gpu_speed=0.5), t4)
    assert (m.reference_gpu_type, m.factors) == ("A100", {"T4": 0.5})
    m = speed_model(SimConfig(speed_model="measured", loaned_gpu_speed=0.5), t4)
    assert m.reference_gpu_type == "V100"  # the measured table's reference
    assert m.table is not None
    assert m.override == {"T4": 0.5, "A100": 0.5}
    m = speed_model(SimConfig(speed_model="measured"), t4)
    assert m.override == {}
    # the inference type is the (measured table's) reference: the speed cannot differ
    with pytest.raises(InvalidInputError, match=r"^loaned_gpu_speed: the inference servers "
                       r"are of the reference GPU type \(V100\)"):
        speed_model(SimConfig(speed_model="measured", loaned_gpu_speed=2.0),
                    ClusterSpec.from_counts(1, 1, 8, "V100"))
    assert describe(homog, speed_model(SimConfig(), homog)) == {
        **homog.to_dict(), "speed_model": {"reference_gpu_type": "V100", "factors": {},
                                           "table": None, "relative_speed_override": {}}}
    # a cluster without training pools reads durations on V100
    only_inf = ClusterSpec.from_dict({"pools": [
        {"name": "in", "role": "inference", "n_servers": 1, "gpus_per_server": 4,
         "gpu_type": "T4"}]})
    assert speed_model(SimConfig(speed_model="parametric"), only_inf).reference_gpu_type == (
        "V100")


def test_a_measured_table_must_know_every_gpu_type() -> None:
    odd = ClusterSpec.from_counts(1, 1, 8, "Z80")
    model = speed_model(SimConfig(speed_model="measured"), odd)
    with pytest.raises(InvalidInputError) as info:
        check_types(odd, model)
    known = sorted(model.table.gpu_types)
    assert str(info.value) == (
        f"cluster: GPU type(s) ['Z80'] have no measured speeds; known: {known} "
        "(use speed_model='parametric', or loaned_gpu_speed for an inference type)")
    check_types(odd, speed_model(SimConfig(speed_model="parametric"), odd))  # no table: fine
    check_types(cluster_preset("lyra"), speed_model(SimConfig(), cluster_preset("lyra")))


def test_model_families_only_for_measured_speeds() -> None:
    jobs = pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [0.0, 1.0],
                         "duration_s": [10.0, 20.0], "gpus": [1, 8]})
    assert job_families(jobs, SimConfig(), ClusterSpec.from_counts(1, 1)) is None
    fams = job_families(jobs, SimConfig(speed_model="measured"), ClusterSpec.from_counts(1, 1))
    assert fams is not None
    assert len(fams) == 2
    assert all(isinstance(f, str) and f for f in fams)
    from aryl.speeds import assign_families

    assert fams == [str(x) for x in assign_families(jobs, 0).tolist()]


# ------------------------------------------------------------------ job table

@pytest.mark.parametrize(("n", "limit", "d"), [(12, 8, 6), (7, 8, 7), (16, 8, 8), (13, 8, 1),
                                               (9, 4, 3), (1, 8, 1), (10, 5, 5), (8, 3, 2)])
def test_largest_divisor_at_most(n: int, limit: int, d: int) -> None:
    assert largest_divisor_at_most(n, limit) == d
    # brute force
    assert d == max(x for x in range(1, min(n, limit) + 1) if n % x == 0)


def test_throughput_curve() -> None:
    assert throughput(1, 0.3) == 1.0
    assert throughput(4, 0.0) == 4.0
    assert throughput(4, 1.0) == 1.0
    # T(3) at alpha 0.5 = 3 / (1 + 0.5 x 2) = 1.5
    assert np.allclose(throughput(np.array([1.0, 3.0]), np.array([0.5, 0.5])), [1.0, 1.5])


def test_the_job_table_is_in_arrival_then_row_order() -> None:
    jobs = pd.DataFrame({"job_id": ["x", "y", "z", "w"], "submit_time_s": [5.0, 1.0, 5.0, 1.0],
                         "duration_s": [1.0, 2.0, 3.0, 4.0], "gpus": [12, 3, 16, 1]})
    t = build_job_table(jobs, gpus_per_server=8, default_alpha=0.25)
    assert t.job_id.tolist() == ["y", "w", "x", "z"]
    assert t.input_row.tolist() == [1, 3, 0, 2]
    assert t.submit_time_s.tolist() == [1.0, 1.0, 5.0, 5.0]
    assert t.duration_s.tolist() == [2.0, 4.0, 1.0, 3.0]
    # rigid: g = the largest divisor <= 8: 3 -> 3, 1 -> 1, 12 -> 6, 16 -> 8
    assert t.gpus_per_worker.tolist() == [3, 1, 6, 8]
    assert t.traced_workers.tolist() == [1, 1, 2, 2]
    assert t.min_workers.tolist() == [1, 1, 2, 2]
    assert t.max_workers.tolist() == [1, 1, 2, 2]
    assert t.elastic.tolist() == [False] * 4
    assert t.alpha.tolist() == [0.25] * 4
    assert t.gpus.tolist() == [3, 1, 12, 16]
    assert t.n_jobs == 4
    for col in (t.gpus, t.gpus_per_worker, t.min_workers, t.max_workers, t.traced_workers,
                t.input_row):
        assert col.dtype == np.int64
    with pytest.raises(InvalidInputError) as info:
        build_job_table(jobs, gpus_per_server=8, default_alpha=1.5)
    assert str(info.value) == "default_alpha: must be in [0, 1], got 1.5"
    with pytest.raises(InvalidInputError):
        build_job_table(jobs, gpus_per_server=8, default_alpha=math.nan)


def test_the_job_table_keeps_given_scaling_columns() -> None:
    jobs = pd.DataFrame({"job_id": ["e"], "submit_time_s": [0.0], "duration_s": [9.0],
                         "gpus": [8], "gpus_per_worker": [2], "min_workers": [1],
                         "max_workers": [6], "elastic": [True], "alpha": [0.125]})
    t = build_job_table(jobs, gpus_per_server=8, default_alpha=0.5)
    assert (t.gpus_per_worker.tolist(), t.traced_workers.tolist()) == ([2], [4])
    assert (t.min_workers.tolist(), t.max_workers.tolist()) == ([1], [6])
    assert (t.elastic.tolist(), t.alpha.tolist()) == ([True], [0.125])


# ------------------------------------------------------------------ trace adapters

def test_the_adapters_pass_the_trace_layer_through(tmp_path: Path) -> None:
    from aryl.sim.adapters import default_inference, load_inference_spec, load_jobs, synthesize
    from aryl.traces import Trace, load_trace, synthesize_elastic
    from aryl.traces.inference import load_inference

    df = pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [0.0, 60.0],
                       "duration_s": [100.0, 200.0], "gpus": [1, 8]})
    jobs, meta = load_jobs(df)
    assert jobs is df
    assert meta == {"source": "DataFrame"}
    tr = Trace(jobs=df, meta={"source": "mine", "n": 2})
    jobs, meta = load_jobs(tr)
    assert jobs is df
    assert meta == {"source": "mine", "n": 2}
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    jobs, meta = load_jobs(str(path))
    ref = load_trace(str(path))
    assert jobs.equals(ref.jobs)
    assert meta == dict(ref.meta)
    out, meta2 = synthesize(df, {"source": "x"}, elastic_fraction=0.5, seed=3)
    expect = synthesize_elastic(Trace(jobs=df, meta={"source": "x"}), elastic_fraction=0.5,
                                seed=3)
    assert out.equals(expect.jobs)
    assert meta2 == dict(expect.meta)
    # the bundled profile: one day of 48 half-hour steps for 5 servers, repeated daily
    assert default_inference(0) is None
    day = default_inference(5, seed=2, peak_utilisation=0.6)
    assert day is not None
    raw = load_inference("bundled", n_servers=5, span_s=86400.0, seed=2, peak_utilisation=0.6)
    assert day.offsets_s == [float(t - raw.times_s[0]) for t in raw.times_s]
    assert day.servers_needed == [int(v) for v in np.clip(raw.servers_needed, 0, 5)]
    assert day.period_s == 86400.0
    # a diurnal spec: the demand over max(span, 1 day) from the clock start, step series
    # shifted to the clock start
    spec = load_inference_spec("diurnal", 4, 1000.0, 3600.0, 7, peak_utilisation=0.5)
    raw = load_inference("diurnal", n_servers=4, span_s=86400.0, start_s=1000.0, seed=7,
                         peak_utilisation=0.5)
    assert spec is not None
    assert spec.period_s == math.inf
    assert spec.offsets_s[0] == 0.0
    assert spec.servers_needed[0] == int(raw.servers_needed[0])
    assert spec.offsets_s[1:] == [float(t - 1000.0) for t in raw.times_s[1:]]
    assert load_inference_spec("diurnal", 0, 0.0, 1.0, 0) is None
    bundled = load_inference_spec("bundled", 5, 0.0, 1.0, 2, peak_utilisation=0.6)
    assert bundled is not None
    assert bundled.servers_needed == day.servers_needed


# ------------------------------------------------------------------ cluster sizing

def _fake_fifo(monkeypatch: pytest.MonkeyPatch, delay: Any) -> list[int]:
    """Replace the fifo probes by ``delay(n_servers)`` (mean queuing delay, s)."""
    import aryl.sim

    probed: list[int] = []

    class Result:
        def __init__(self, mean: float | None) -> None:
            self.summary = {"queuing_delay_s": {"mean": mean}}

    def fake(jobs: Any, *, config: Any, **kw: Any) -> Result:
        assert config.n_inference_servers == 0
        assert config.record_events is False
        probed.append(config.n_training_servers)
        return Result(delay(config.n_training_servers))

    monkeypatch.setattr(aryl.sim, "simulate", fake)
    return probed


def _jobs(n: int, gpus: int = 8, span_s: float = 1000.0, dur: float = 1000.0) -> pd.DataFrame:
    return pd.DataFrame({"job_id": [f"j{i}" for i in range(n)],
                         "submit_time_s": np.linspace(0.0, span_s, n),
                         "duration_s": [dur] * n, "gpus": [gpus] * n})


@pytest.mark.parametrize("knee", [1, 2, 3, 5, 8, 13, 20, 39])
def test_size_cluster_finds_the_largest_size_at_the_target_by_bisection(
    monkeypatch: pytest.MonkeyPatch, knee: int
) -> None:
    from aryl.sim.sizing import size_cluster

    # 40 one-server jobs: 1 .. 40 servers; a fifo whose mean delay falls with the size
    # and stays >= 4,000 s up to ``knee`` servers.  Brute force: the answer is the knee
    # (or 1 if even 1 server queues less: never here, knee >= 1).
    def delay(n: int) -> float:
        return 4000.0 + 10.0 * (knee - n) if n <= knee else 3999.0 - n

    calls: list[tuple[int, int, int, float]] = []
    probed = _fake_fifo(monkeypatch, delay)
    # offered load: 40 jobs x 8 GPUs x 1,000 s over 1,000 s / 8 GPUs = 40 servers
    size = size_cluster(_jobs(40), progress=lambda *a: calls.append(a))
    expect = max(n for n in range(1, 41) if delay(n) >= 4000.0)
    assert size.n_training_servers == expect == knee
    assert size.n_inference_servers == max(4, round(knee * 16 / 46))
    assert size.rule == "target-delay"
    assert len(probed) == len(set(probed))  # no size probed twice
    assert len(probed) <= 2 + math.ceil(math.log2(40)) + 1
    assert size.mean_queuing_delay_s == {n: delay(n) for n in sorted(probed)}
    # progress: one call per probe, in order; done counts 1, 2, ...; the last total is
    # the number of probes; never done > total
    assert [c[0] for c in calls] == list(range(1, len(probed) + 1))
    assert [c[2] for c in calls] == probed
    assert [c[3] for c in calls] == [delay(n) for n in probed]
    assert calls[-1][1] == len(probed)
    assert all(done <= total for done, total, _, _ in calls)
    above = size.mean_queuing_delay_s.get(knee + 1, math.nan)
    assert size.reason == (
        f"the largest training cluster on which strict fifo's mean queuing delay is still "
        f">= 4,000 s: {delay(knee):,.0f} s on {knee} servers, {above:,.0f} s on {knee + 1} "
        f"({len(probed)} fifo replays)")


def test_size_cluster_rules_and_their_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    from aryl.sim.sizing import size_cluster

    # every size queues more than the target: capped at 40 servers (every job at once)
    probed = _fake_fifo(monkeypatch, lambda n: 5000.0)
    size = size_cluster(_jobs(40))
    assert size.n_training_servers == 40
    assert size.rule == "every-job-at-once"
    assert size.reason == (
        "capped at 40 servers, enough to run every job at once; strict fifo's mean queuing "
        f"delay there is still 5,000 s >= the target 4,000 s ({len(probed)} fifo replays)")
    # a mean of None (no job finished) counts as an infinite delay: capped again
    probed = _fake_fifo(monkeypatch, lambda n: None)
    size = size_cluster(_jobs(3, gpus=16))
    assert size.rule == "every-job-at-once"
    assert size.mean_queuing_delay_s[size.n_training_servers] == math.inf
    # nothing queues: the smallest cluster that holds the largest job (2 servers for
    # 16 GPUs); 2 x 2 = 4 inference servers
    probed = _fake_fifo(monkeypatch, lambda n: 0.0)
    size = size_cluster(_jobs(3, gpus=16), target_queuing_delay_s=10.0, inference_ratio=2.0)
    assert size == (2, 4)
    assert size.rule == "largest-job"
    assert probed == [2]
    assert size.reason == (
        "the largest job must fit: job 'j0' needs 2 server(s) of 8 GPUs, and strict fifo's "
        "mean queuing delay there is 0 s, already below the target 10 s (1 fifo replays)")
    # one job: the smallest size is already every job at once
    probed = _fake_fifo(monkeypatch, lambda n: 50_000.0)
    size = size_cluster(_jobs(1, gpus=24))
    assert size.rule == "every-job-at-once"
    assert size.n_training_servers == 3
    assert probed == [3]
    # the inference cluster: the ratio, at least 4
    probed = _fake_fifo(monkeypatch, lambda n: 4000.0 if n <= 20 else 0.0)
    size = size_cluster(_jobs(40), inference_ratio=0.5)
    assert size == (20, 10)
    size = size_cluster(_jobs(40), inference_ratio=0.0)
    assert size == (20, 4)


def test_size_cluster_refusals() -> None:
    from aryl.sim.sizing import size_cluster

    jobs = _jobs(2)
    for kwargs, expected in (
        ({"target_queuing_delay_s": 0.0}, "target_queuing_delay_s: must be a finite number > 0"),
        ({"target_queuing_delay_s": math.nan},
         "target_queuing_delay_s: must be a finite number > 0"),
        ({"gpus_per_server": 0}, "gpus_per_server: must be an integer >= 1, got 0"),
        ({"gpus_per_server": 8.0}, "gpus_per_server: must be an integer >= 1, got 8.0"),
        ({"gpus_per_server": True}, "gpus_per_server: must be an integer >= 1, got True"),
        ({"inference_ratio": -0.5}, "inference_ratio: must be a finite number >= 0, got -0.5"),
        ({"inference_ratio": math.inf}, "inference_ratio: must be a finite number >= 0, got inf"),
    ):
        with pytest.raises(InvalidInputError) as info:
            size_cluster(jobs, **kwargs)
        assert str(info.value) == expected
    with pytest.raises(InvalidInputError) as info:
        size_cluster(jobs.iloc[:0])
    assert str(info.value) == "jobs: the trace is empty, nothing to size"
