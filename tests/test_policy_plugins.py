"""Python policies from outside the repository: a package on a temporary path with
a dist-info (its ``entry_points.txt`` registers ``aryl.policies``), listed by
``aryl policies``, run by ``aryl compare`` and ``aryl sweep``; options through
``--set policy.NAME.OPTION``; sweep run keys that change with the package's
version and with a local module's source."""

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

# strict FIFO, first fit over the training servers; option min_start_s delays
# every start to at least that time (so an option visibly changes the replay)
_PKG = '''
import aryl


class ExtFifo(aryl.Policy):
    name = "ext-fifo"
    defaults = {"min_start_s": 0.0}

    def decide(self, v):
        if v.now_s < self.options["min_start_s"]:
            return None
        d = aryl.Decision()
        free = v.free_gpus.copy()
        for j in v.queue.tolist():
            need = int(v.ref_workers[j] * v.gpus_per_worker[j])
            s = next((s for s in range(v.n_training) if free[s] >= need), None)
            if s is None:
                break
            free[s] -= need
            d.start(j, {s: int(v.ref_workers[j])})
        return d
'''


def _install(root: Path, version: str = "1.2.0") -> None:
    pkg = root / "extpol"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(_PKG)
    for old in root.glob("extpol-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    dist = root / f"extpol-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: extpol\nVersion: {version}\n")
    (dist / "top_level.txt").write_text("extpol\n")
    (dist / "entry_points.txt").write_text("[aryl.policies]\next-fifo = extpol:ExtFifo\n")


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    _install(root)
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    yield root
    sys.modules.pop("extpol", None)


def _trace(tmp_path: Path) -> Path:
    # one 8-GPU server in the runs below: 4 jobs of 8 GPUs, 100 s each, every 10 s
    p = tmp_path / "t.csv"
    pd.DataFrame({"job_id": ["a", "b", "c", "d"], "submit_time_s": [0.0, 10.0, 20.0, 30.0],
                  "duration_s": [100.0] * 4, "gpus": [8] * 4}).to_csv(p, index=False)
    return p


def test_policies_lists_the_entry_point(plugin: Path) -> None:
    r = CliRunner().invoke(main, ["policies", "--json"])
    assert r.exit_code == 0, r.output
    rows = {x["name"]: x for x in json.loads(r.output)}
    assert rows["ext-fifo"]["version"] == "extpol==1.2.0"
    assert rows["ext-fifo"]["options"] == {"return_idle_loans": True, "min_start_s": 0.0}
    assert rows["ext-fifo"]["source"] == "entry point (extpol:ExtFifo)"
    assert rows["fifo"]["source"] == "registered"
    # the table shows every default, None as null (sjf's starvation bound is off)
    r = CliRunner().invoke(main, ["policies"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    (sjf,) = [ln for ln in r.output.splitlines() if ln.startswith("│ sjf ")]
    assert "return_idle_loans=true, starvation_bound_s=null" in sjf, sjf
    (ext,) = [ln for ln in r.output.splitlines() if ln.startswith("│ ext-fifo ")]
    assert "return_idle_loans=true, min_start_s=0.0" in ext, ext


def test_compare_runs_the_entry_point_with_options(plugin: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(main, [
        "compare", "--trace", str(_trace(tmp_path)), "--policies", "fifo,ext-fifo",
        "--training-servers", "1", "--inference-servers", "0", "--inference", "none",
        "--set", "policy.ext-fifo.min_start_s=25", "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    fifo = pd.read_csv(out / "fifo" / "jobs.csv").set_index("job_id")["first_start_s"]
    ext = pd.read_csv(out / "ext-fifo" / "jobs.csv").set_index("job_id")["first_start_s"]
    # fifo: back to back on the one server: 0, 100, 200, 300.  ext-fifo starts nothing
    # before t = 25: the passes at the arrivals 0, 10, 20 decide nothing; at 30 (d
    # arrives) a starts (30..130), then b, c, d back to back: 30, 130, 230, 330
    assert fifo.tolist() == [0.0, 100.0, 200.0, 300.0]
    assert ext.tolist() == [30.0, 130.0, 230.0, 330.0]
    summary = json.loads((out / "ext-fifo" / "summary.json").read_text())
    assert summary["policy"] == "ext-fifo"
    assert summary["run"]["user_policy"] == {"ext-fifo": {"min_start_s": 25}}


def test_sweep_runs_the_entry_point_and_keys_its_version(plugin: Path, tmp_path: Path) -> None:
    from aryl.sweep import load_spec, plan_sweep

    trace = _trace(tmp_path)
    spec = tmp_path / "s.toml"
    spec.write_text(f"[grid]\ntrace = '{trace.name}'\npolicy = ['fifo', 'ext-fifo']\n"
                    "seed = 0\nn_training_servers = 1\nn_inference_servers = 0\n"
                    "inference = 'none'\n")
    keys1 = {r.policy: r.key for r in plan_sweep(load_spec(spec)).runs}
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(tmp_path / "o"), "-j", "1"])
    assert r.exit_code == 0, r.output
    from aryl.sweep import read_runs

    runs = read_runs(tmp_path / "o")
    assert sorted(runs["policy"]) == ["ext-fifo", "fifo"]
    # a new version of the package: a new key for its runs only
    sys.modules.pop("extpol", None)
    _install(plugin, "1.3.0")
    importlib.invalidate_caches()
    keys2 = {r.policy: r.key for r in plan_sweep(load_spec(spec)).runs}
    assert keys2["fifo"] == keys1["fifo"]
    assert keys2["ext-fifo"] != keys1["ext-fifo"]
