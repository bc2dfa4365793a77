"""Cluster sizing that cannot explode (issue 9 item 5): ``size_cluster`` and ``auto``."""

from __future__ import annotations

import gc
import pickle
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.sim.sizing import SIZING_RULES, ClusterSize, _servers_alone, size_cluster


def three_close_jobs() -> pd.DataFrame:
    """Three 8-GPU jobs of 86,400 s submitted 1 ms apart (the load estimate is ~10^8)."""
    return pd.DataFrame({"job_id": ["a", "b", "c"],
                         "submit_time_s": [1000.000, 1000.001, 1000.002],
                         "duration_s": [86_400.0] * 3, "gpus": [8, 8, 8]})


def test_three_close_jobs_size_to_two_servers_without_exploding() -> None:
    calls: list[tuple[int, int, int, float]] = []
    size = size_cluster(three_close_jobs(), progress=lambda *a: calls.append(a))
    # 1 server: b waits for a, c for a and b: (0 + 86,399.999 + 172,799.998) / 3 = 86,399.999
    # 2 servers: only c waits, until a ends at 87,400: 86,399.998 / 3 = 28,799.9993 >= 4,000
    # 3 servers: nobody waits: 0 < 4,000  => 2 servers; inference max(4, round(2 * 16/46)) = 4
    assert size == (2, 4)
    assert (size.n_training_servers, size.n_inference_servers) == (2, 4)
    assert size.rule == "target-delay"
    assert set(size.mean_queuing_delay_s) == {1, 2, 3}  # never probed past every-job-at-once
    assert size.mean_queuing_delay_s[1] == pytest.approx(86_399.999, abs=1e-6)
    assert size.mean_queuing_delay_s[2] == pytest.approx(86_399.998 / 3, abs=1e-6)
    assert size.mean_queuing_delay_s[3] == 0.0
    assert "28,800 s on 2 servers, 0 s on 3" in size.reason
    # progress: one call per probe, done counts up to the final total
    assert [c[0] for c in calls] == [1, 2, 3]
    assert [c[2] for c in calls] == [1, 3, 2]  # lo = 1, capped guess = 3, bisection 2
    assert calls[-1][1] == 3
    assert all(done <= total for done, total, _, _ in calls)


def test_largest_job_must_fit_names_the_rule_and_the_job() -> None:
    # a 16-GPU job needs 2 servers; the other jobs are 10,000 s apart and short, so
    # nothing queues on 2 servers: 0 < 4,000, the cluster is the 2 that hold "big"
    jobs = pd.DataFrame({"job_id": ["s1", "big", "s2"],
                         "submit_time_s": [0.0, 10_000.0, 20_000.0],
                         "duration_s": [100.0, 100.0, 100.0], "gpus": [1, 16, 2]})
    size = size_cluster(jobs)
    assert size == (2, 4)
    assert size.rule == "largest-job"
    assert size.reason.startswith("the largest job must fit: job 'big' needs 2 server(s)")
    assert set(size.mean_queuing_delay_s) == {2}


def test_cap_at_every_job_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # a fifo that always queues 10^6 s: the search must stop at the cluster that runs
    # every job at once, here 1 + 2 + 3 = 6 servers (8, 16 and 15 GPUs: 15 = 3 workers
    # of 5, one per 8-GPU server), probing O(log) sizes
    import aryl.sim

    probed: list[int] = []

    class Fake:
        def __init__(self) -> None:
            self.summary = {"queuing_delay_s": {"mean": 1e6}}

    def fake(jobs: Any, *, config: Any, **kw: Any) -> Fake:
        probed.append(config.n_training_servers)
        return Fake()

    monkeypatch.setattr(aryl.sim, "simulate", fake)
    jobs = pd.DataFrame({"job_id": ["a", "b", "c"], "submit_time_s": [0.0, 0.001, 0.002],
                         "duration_s": [1e5] * 3, "gpus": [8, 16, 15]})
    size = size_cluster(jobs)
    assert size[0] == 6
    assert size.rule == "every-job-at-once"
    assert max(probed) == 6
    assert probed == [3, 6]  # lo = 3 (the 15-GPU job), then the capped guess
    assert "enough to run every job at once" in size.reason


@pytest.mark.parametrize(
    ("gpus", "servers"),
    # 8 -> one 8-GPU worker; 16 -> two; 7 -> one 7-GPU worker; 9 -> three 3-GPU workers,
    # two per server -> 2; 15 -> three 5-GPU workers, one per server -> 3; 12 -> two 6-GPU
    # workers -> 2; 1 -> 1; 24 -> 3
    [(8, 1), (16, 2), (7, 1), (9, 2), (15, 3), (12, 2), (1, 1), (24, 3)],
)
def test_servers_a_job_needs_alone(gpus: int, servers: int) -> None:
    assert _servers_alone(np.array([gpus]), 8).tolist() == [servers]


def test_probes_free_their_replay_before_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    # the peak memory of sizing is one replay's only if each probe's engine is gone
    # before the next probe starts (engines hold reference cycles)
    from aryl.sim import engine as engine_mod
    from aryl.sim import native as native_mod

    alive: list[weakref.ref[Any]] = []
    for cls in (engine_mod.Engine, native_mod.NativeEngine):  # either engine
        def tracking_init(self: Any, *a: Any, _init: Any = cls.__init__, **k: Any) -> None:
            _init(self, *a, **k)
            alive.append(weakref.ref(self))

        monkeypatch.setattr(cls, "__init__", tracking_init)
    live_at_call: list[int] = []
    jobs = pd.DataFrame({"job_id": [f"j{i}" for i in range(40)],
                         "submit_time_s": np.arange(40) * 50.0,
                         "duration_s": [5000.0] * 40, "gpus": [8, 4] * 20})
    gc.disable()  # the collector must not be what frees them
    try:
        size_cluster(jobs, progress=lambda *a: live_at_call.append(
            sum(r() is not None for r in alive)))
    finally:
        gc.enable()
    assert len(alive) == len(live_at_call) >= 3
    assert live_at_call == [0] * len(live_at_call)


def test_sizing_result_is_a_picklable_tuple() -> None:
    size = size_cluster(three_close_jobs())
    again = pickle.loads(pickle.dumps(size))
    assert isinstance(again, ClusterSize)
    assert again == (2, 4)
    assert (again.rule, again.reason) == (size.rule, size.reason)
    assert set(SIZING_RULES) == {"target-delay", "largest-job", "every-job-at-once"}


def test_bad_arguments_name_the_field() -> None:
    jobs = three_close_jobs()
    for kwargs, field in (({"target_queuing_delay_s": float("inf")}, "target_queuing_delay_s"),
                          ({"gpus_per_server": 0}, "gpus_per_server"),
                          ({"inference_ratio": float("nan")}, "inference_ratio")):
        with pytest.raises(ValueError, match=f"^{field}: "):
            size_cluster(jobs, **kwargs)
    bad = jobs.astype({"gpus": float})
    bad.loc[1, "gpus"] = 2.7
    with pytest.raises(ValueError, match="index 1, column 'gpus': not a whole number"):
        size_cluster(bad)


def test_cli_auto_prints_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "three.csv"
    three_close_jobs().to_csv(path, index=False)
    r = CliRunner().invoke(main, ["replay", "--trace", str(path), "--training-servers",
                                  "auto", "--policy", "fifo", "--inference", "none"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "auto-sized cluster: 2 training + 16 inference servers" in flat
    assert ("the largest training cluster on which strict fifo's mean queuing delay is still "
            ">= 4,000 s: 28,800 s on 2 servers, 0 s on 3") in flat
