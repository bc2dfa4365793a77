"""A Python policy's options on the command line (``--set policy.NAME.OPTION``,
``[policy.NAME]`` tables): checked before any trace is read, an option for no
policy of the run is an error (it used to be dropped unseen), and
``--show-config`` prints the ``[policy.NAME]`` tables so that ``--config`` reads
the same run back."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main

pytestmark = pytest.mark.skipif(
    not __import__("aryl.sim.native", fromlist=["native_available"]).native_available(),
    reason="needs the compiled engine")

# FIFO that starts at most `max_starts` jobs per pass, first fit on the training servers
_MOD = '''
import aryl


class FewStarts(aryl.Policy):
    name = "few-starts"
    defaults = {"max_starts": 100}

    def decide(self, v):
        d = aryl.Decision()
        free = v.free_gpus.copy()
        n = 0
        for j in v.queue.tolist():
            if n == self.options["max_starts"]:
                break
            need = int(v.ref_workers[j] * v.gpus_per_worker[j])
            for s in range(v.n_training):
                if free[s] >= need:
                    free[s] -= need
                    d.start(j, {s: int(v.ref_workers[j])})
                    n += 1
                    break
        return d
'''


@pytest.fixture
def mod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    root = tmp_path / "site"
    root.mkdir()
    (root / "fewstarts.py").write_text(_MOD)
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    yield "fewstarts:FewStarts"
    sys.modules.pop("fewstarts", None)


def _trace(tmp_path: Path) -> Path:
    # two 1-GPU jobs arriving together at 0, 100 s each, on one 8-GPU server
    p = tmp_path / "t.csv"
    pd.DataFrame({"job_id": ["a", "b"], "submit_time_s": [0.0, 0.0],
                  "duration_s": [100.0, 100.0], "gpus": [1, 1]}).to_csv(p, index=False)
    return p


_SMALL = ["--training-servers", "1", "--inference-servers", "0", "--inference", "none",
          "--no-progress"]


@pytest.mark.parametrize(("setting", "expected"), [
    ("policy.few-starts.nope=1", "unknown option(s) ['nope']"),
    ("policy.few-starts.max_starts=abc", "option max_starts must be of type int"),
])
def test_a_bad_option_is_refused_before_the_trace_is_read(
        mod: str, tmp_path: Path, setting: str, expected: str) -> None:
    # the trace does not exist: the option's error comes first (before the fix the
    # trace was read, the run described, and only then was the option checked)
    r = CliRunner().invoke(main, ["replay", "--policy", mod, "--trace",
                                  str(tmp_path / "missing.csv"), "--set", setting, *_SMALL])
    assert r.exit_code == 2, r.output
    assert expected in r.output
    assert "does not exist" not in r.output
    assert "Traceback" not in r.output


@pytest.mark.parametrize(("setting", "expected"), [
    ("policy.aryl.foo=1", "policy.aryl.foo (from --set): 'aryl' is a registered policy"),
    ("policy.nosuch.max_starts=1",
     "policy.nosuch.max_starts (from --set): no Python policy of this run is named 'nosuch'"),
])
def test_an_option_for_no_policy_of_the_run_is_an_error(
        mod: str, tmp_path: Path, setting: str, expected: str) -> None:
    r = CliRunner().invoke(main, ["compare", "--policies", f"fifo,{mod}", "--trace",
                                  str(_trace(tmp_path)), "--set", setting, *_SMALL])
    assert r.exit_code == 2, r.output
    assert expected in r.output


def test_a_toml_table_for_no_policy_of_the_run_is_an_error(mod: str, tmp_path: Path) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text("[policy.few-start]\nmax_starts = 1\n")  # a typo of the name
    r = CliRunner().invoke(main, ["replay", "--policy", mod, "--trace", str(_trace(tmp_path)),
                                  "--config", str(cfg), *_SMALL])
    assert r.exit_code == 2, r.output
    assert f"policy.few-start.max_starts (from {cfg})" in r.output
    assert "no Python policy of this run is named 'few-start'" in r.output


def test_show_config_keeps_the_policy_options_and_reads_back(mod: str, tmp_path: Path) -> None:
    trace = str(_trace(tmp_path))
    r = CliRunner().invoke(main, ["replay", "--policy", mod, "--trace", trace,
                                  "--set", "policy.few-starts.max_starts=1", "--show-config",
                                  *_SMALL])
    assert r.exit_code == 0, r.output
    assert "[policy.few-starts]\nmax_starts = 1  # --set\n" in r.stdout
    cfg = tmp_path / "shown.toml"
    cfg.write_text(r.stdout)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["replay", "--policy", mod, "--trace", trace, "--config",
                                  str(cfg), "--out", str(out), *_SMALL])
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["user_policy"] == {"few-starts": {"max_starts": 1}}
    # one start per pass: a starts at the arrival pass (0); b at the next pass, a's
    # finish at 100 (the one server has room for both, the option allows one)
    first = pd.read_csv(out / "jobs.csv").set_index("job_id")["first_start_s"]
    assert first.tolist() == [0.0, 100.0]


@pytest.mark.parametrize(("policies", "entry"), [("fifo,,aryl", 2), ("fifo,aryl,", 3),
                                                  (",fifo", 1)])
def test_compare_refuses_an_empty_policy_entry(tmp_path: Path, policies: str, entry: int) -> None:
    # "fifo,,aryl" used to run fifo and aryl as if the left-out name had not been meant
    r = CliRunner().invoke(main, ["compare", "--policies", policies, "--trace",
                                  str(_trace(tmp_path)), *_SMALL])
    assert r.exit_code == 2, r.output
    assert f"entry {entry} is empty" in r.output
    assert "aryl compare (" not in r.output


def test_plan_help_lists_every_registered_policy() -> None:
    from aryl.scheduling import available_policies

    r = CliRunner().invoke(main, ["plan", "--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    listed = r.output.split("--policy TEXT", 1)[1].split("[default", 1)[0]
    names = [p.strip(" .") for p in listed.split(";", 1)[0].split(",")]
    assert names == sorted(available_policies())  # fifo-backfill was left out
    assert "module:Class" in listed
