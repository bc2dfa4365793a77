"""A Python policy that leaves jobs waiting for good: a PolicyError naming the
policy (was a bare ``RuntimeError`` from the stall watchdog, and a traceback on the
command line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from click.testing import CliRunner

import aryl
from aryl import SimConfig, simulate
from aryl.cli import main
from aryl.errors import PolicyError


class Lazy(aryl.Policy):
    """Starts the first queued job at t = 0 and nothing after."""

    name: ClassVar[str] = "lazy"

    def decide(self, view: Any) -> aryl.Decision:
        d = aryl.Decision()
        if view.now_s == 0 and len(view.queue):
            d.start(int(view.queue[0]), {0: 1})
        return d


def _two_jobs() -> pd.DataFrame:
    # w and x (1 GPU each) arrive at 0; Lazy starts w only; w finishes at 40 s, that
    # pass starts nothing (now_s != 0) and no event is left while x waits.
    return pd.DataFrame([("w", 0.0, 40.0, 1), ("x", 0.0, 40.0, 1)],
                        columns=["job_id", "submit_time_s", "duration_s", "gpus"])


def test_a_python_policy_that_strands_a_job_gets_a_policy_error() -> None:
    cfg = SimConfig(n_training_servers=1, n_inference_servers=0)
    with pytest.raises(PolicyError) as info:
        simulate(_two_jobs(), policy=Lazy(), config=cfg, inference=False)
    msg = str(info.value)
    assert msg.startswith("policy 'lazy' left jobs waiting with nothing left to call it again")
    assert "simulation stalled" in msg
    assert "uses_tick" in msg


def test_a_builtin_policy_never_strands_those_jobs() -> None:
    # the same trace under fifo: the 8-GPU server holds both 1-GPU jobs from t = 0
    cfg = SimConfig(n_training_servers=1, n_inference_servers=0)
    res = simulate(_two_jobs(), policy="fifo", config=cfg, inference=False)
    ends = dict(zip(res.jobs["job_id"], res.jobs["finish_s"], strict=True))
    assert ends == {"w": 40.0, "x": 40.0}


def test_the_cli_names_the_policy_without_a_traceback(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lazymod.py").write_text(
        "import aryl\n"
        "class Lazy(aryl.Policy):\n"
        "    name = 'lazy'\n"
        "    def decide(self, v):\n"
        "        d = aryl.Decision()\n"
        "        if v.now_s == 0 and len(v.queue):\n"
        "            d.start(int(v.queue[0]), {0: 1})\n"
        "        return d\n")
    _two_jobs().to_csv(tmp_path / "two.csv", index=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    r = CliRunner().invoke(main, ["replay", "--trace", str(tmp_path / "two.csv"),
                                  "--policy", "lazymod:Lazy", "--training-servers", "1",
                                  "--inference-servers", "0", "--inference", "none",
                                  "--out", str(tmp_path / "out")])
    assert r.exit_code == 1, r.output
    assert "policy 'lazy' left jobs waiting" in r.output
    assert "Traceback" not in r.output
    assert not (tmp_path / "out").exists()
