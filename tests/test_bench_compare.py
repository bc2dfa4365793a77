"""bench/compare.py: the paired statistics, the verdicts, the JSON reader and the git trees.

Each piece is checked on values worked out by hand or taken from an independent source
(a real pytest-benchmark run, git itself); the whole run (builds, the cache, given wheels,
two environments, alternating runs, the verdict) on a tiny package built in a second, and
CI's smoke step (``.ci/run``: HEAD against HEAD) on the real one.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "bench" / "compare.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_compare"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


cmp = _load()


def test_run_order_swaps_every_pair():
    assert cmp.run_order(4) == [("base", "new"), ("new", "base"), ("base", "new"),
                                ("new", "base")]
    assert cmp.run_order(1) == [("base", "new")]


def test_constant_ratio_has_a_point_interval_and_is_slower():
    # new = 1.25 x base in every pair: log ratios all log 1.25, sd 0, interval [1.25, 1.25];
    # 1.25 > 1 + 0.05 and 1.25 > 1: slower.
    base = [{"b": 1.0e-3}, {"b": 1.1e-3}, {"b": 0.9e-3}]
    new = [{"b": 1.25e-3}, {"b": 1.375e-3}, {"b": 1.125e-3}]
    (row,) = cmp.compare_runs(base, new, threshold=0.05)
    assert row.name == "b"
    assert row.n_pairs == 3
    assert row.ratio == pytest.approx(1.25, rel=1e-12)
    assert row.ratio_lo == pytest.approx(1.25, rel=1e-12)
    assert row.ratio_hi == pytest.approx(1.25, rel=1e-12)
    assert row.base_median_s == 1.0e-3  # median of 1.0, 1.1, 0.9 ms
    assert row.new_median_s == 1.25e-3
    assert row.verdict == "slower"


def test_t_interval_by_hand():
    # log ratios 0.1, 0.2, 0.3: mean 0.2, sd sqrt((0.01 + 0 + 0.01) / 2) = 0.1;
    # t(0.975, 2 dof) = 4.302653 (tables), half width 4.302653 * 0.1 / sqrt(3) = 0.248414;
    # ratio e^0.2 = 1.221403, interval e^-0.048414 = 0.952739 to e^0.448414 = 1.565826.
    base = [{"b": 1.0}, {"b": 1.0}, {"b": 1.0}]
    new = [{"b": math.exp(0.1)}, {"b": math.exp(0.2)}, {"b": math.exp(0.3)}]
    (row,) = cmp.compare_runs(base, new, threshold=0.05, confidence=0.95)
    assert row.ratio == pytest.approx(1.221403, abs=1e-6)
    assert row.ratio_lo == pytest.approx(0.952739, abs=1e-6)
    assert row.ratio_hi == pytest.approx(1.565826, abs=1e-6)
    # above 1.05 but the interval reaches below 1: not a significant slow-down
    assert row.verdict == "unclear"
    # at 50%: t(0.75, 2) = 0.816497, half width 0.816497 * 0.1 / sqrt(3) = 0.0471405:
    # interval e^0.1528595 = 1.165161 to e^0.2471405 = 1.280359: above 1, ratio above 1.05
    (row50,) = cmp.compare_runs(base, new, threshold=0.05, confidence=0.5)
    assert row50.ratio_lo == pytest.approx(1.165161, abs=1e-6)
    assert row50.ratio_hi == pytest.approx(1.280359, abs=1e-6)
    assert row50.verdict == "slower"


def test_t_quantile_matches_tables():
    assert cmp.t_quantile(0.95, 2) == pytest.approx(4.302653, abs=1e-6)
    assert cmp.t_quantile(0.95, 4) == pytest.approx(2.776445, abs=1e-6)
    assert cmp.t_quantile(0.99, 9) == pytest.approx(3.249836, abs=1e-6)


@pytest.mark.parametrize(("ratio", "lo", "hi", "expected"), [
    (1.01, 0.98, 1.04, "same"),           # inside [1/1.05, 1.05] = [0.952381, 1.05]
    (1.0, 1 / 1.05, 1.05, "same"),        # both ends included
    (1.0, 0.95, 1.05, "unclear"),         # 0.95 < 1/1.05: could be 5.3% faster
    (1.2, 1.01, 1.4, "slower"),
    (1.2, 1.0, 1.4, "unclear"),           # the interval reaches 1
    (1.04, 1.01, 1.07, "unclear"),        # significant, below the threshold, reaches past it
    (0.8, 0.7, 0.9, "faster"),
    (0.96, 0.93, 0.99, "unclear"),        # 0.96 > 1/1.05: not faster by the threshold
    (0.94, 0.93, 0.95, "faster"),         # 0.94 < 0.952381 and 0.95 < 1
])
def test_verdicts(ratio, lo, hi, expected):
    assert cmp.verdict(ratio, lo, hi, 0.05) == expected


def test_two_benchmarks_each_their_own_pairs():
    # "a": 2x slower in both pairs; "b": 0.5x then 2x, log ratios -log 2, +log 2: ratio 1,
    # sd = log 2 * sqrt(2), t(0.975, 1) = 12.706205: interval far wider than the threshold.
    base = [{"a": 1.0, "b": 1.0}, {"a": 3.0, "b": 1.0}]
    new = [{"a": 2.0, "b": 0.5}, {"a": 6.0, "b": 2.0}]
    a, b = cmp.compare_runs(base, new)
    assert (a.name, b.name) == ("a", "b")
    assert a.ratio == pytest.approx(2.0, rel=1e-12)
    assert a.verdict == "slower"
    assert b.ratio == pytest.approx(1.0, abs=1e-12)
    half = 12.706205 * math.log(2) * math.sqrt(2) / math.sqrt(2)
    assert b.ratio_hi == pytest.approx(math.exp(half), rel=1e-6)
    assert b.verdict == "unclear"
    assert a.base_median_s == 2.0  # (1 + 3) / 2


def test_refusals_name_the_problem():
    with pytest.raises(cmp.CompareError, match="at least 2 pairs") as e:
        cmp.compare_runs([{"a": 1.0}], [{"a": 1.0}])
    assert e.value.status == 2
    with pytest.raises(cmp.CompareError, match="2 base runs but 3 new runs"):
        cmp.compare_runs([{"a": 1.0}] * 2, [{"a": 1.0}] * 3)
    with pytest.raises(cmp.CompareError,
                       match=r"run new-2 does not hold the same benchmarks as base-1: "
                             r"missing \['b'\], extra \['c'\]") as e:
        cmp.compare_runs([{"a": 1.0, "b": 1.0}] * 2,
                         [{"a": 1.0, "b": 1.0}, {"a": 1.0, "c": 1.0}])
    assert e.value.status == 3
    with pytest.raises(cmp.CompareError, match="threshold must be a positive number"):
        cmp.compare_runs([{"a": 1.0}] * 2, [{"a": 1.0}] * 2, threshold=0.0)


def test_read_run_of_a_real_pytest_benchmark_json(tmp_path):
    # A real pytest-benchmark run of a 2 ms sleep: the median is at least 2 ms.
    (tmp_path / "test_sleep.py").write_text(
        "import time\n\n"
        "def test_sleep(benchmark):\n"
        "    benchmark.pedantic(time.sleep, args=(0.002,), rounds=3, iterations=1)\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_sleep.py", f"--benchmark-json={out}"],
                          cwd=tmp_path, capture_output=True, text=True, check=False,
                          env=cmp._env())  # the child is no xdist worker, as compare.py runs it
    assert proc.returncode == 0, proc.stdout + proc.stderr
    medians = cmp.read_run(json.loads(out.read_text()), str(out))
    assert list(medians) == ["test_sleep.py::test_sleep"]
    assert 0.002 <= medians["test_sleep.py::test_sleep"] < 1.0


def test_read_run_refusals():
    with pytest.raises(cmp.CompareError, match=r"x.json: not a pytest-benchmark JSON document "
                                               r"\(missing or malformed field 'benchmarks'\)"):
        cmp.read_run({}, "x.json")
    doc = {"benchmarks": [{"fullname": "f::t", "stats": {"median": 0.0}}]}
    with pytest.raises(cmp.CompareError, match=r"x.json: f::t: median 0.0 is not a positive time"):
        cmp.read_run(doc, "x.json")


def test_format_time():
    assert cmp.format_time(0.00123) == "1.23 ms"
    assert cmp.format_time(2.5) == "2.5 s"
    assert cmp.format_time(4.2e-7) == "420 ns"
    assert cmp.format_time(3.456e-5) == "34.6 us"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def test_working_tree_hash_is_gits_own(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".gitignore").write_text("*.so\n")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    monkeypatch.setattr(cmp, "REPO", repo)
    head_tree = _git(repo, "rev-parse", "HEAD^{tree}")
    assert cmp.working_tree() == head_tree  # clean: HEAD's tree
    (repo / "built.so").write_text("ignored\n")
    assert cmp.working_tree() == head_tree  # ignored files are not part of it
    (repo / "a.py").write_text("x = 2\n")
    (repo / "b.py").write_text("y = 1\n")
    dirty = cmp.working_tree()
    # the repository's own index is untouched: nothing staged
    staged = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--quiet"], check=False)
    assert staged.returncode == 0
    assert dirty != head_tree
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "two")
    assert dirty == _git(repo, "rev-parse", "HEAD^{tree}")  # what committing it gives
    assert cmp.ref_tree("HEAD~1")[1] == head_tree
    with pytest.raises(cmp.CompareError, match="--base 'nope': not a commit") as e:
        cmp.ref_tree("nope")
    assert e.value.status == 2


def test_parent_paths_leave_out_a_source_checkout(tmp_path, monkeypatch):
    src = tmp_path / "checkout" / "src"
    site = tmp_path / "env" / "lib" / "site-packages"
    other = tmp_path / "deps"
    for d in (src / "aryl", site / "aryl", other):
        d.mkdir(parents=True)
    (src / "aryl" / "__init__.py").write_text("")
    (site / "aryl" / "__init__.py").write_text("")
    script = tmp_path / "bench"
    script.mkdir()
    monkeypatch.setattr(sys, "path", [str(script), str(site), str(src), str(other),
                                      str(tmp_path / "missing")])
    assert cmp._parent_paths() == [str(site), str(other)]


def test_main_refuses_an_unknown_ref(capsys):
    assert cmp.main(["--base", "no-such-ref-xyz"]) == 2
    assert "compare: --base 'no-such-ref-xyz': not a commit of this repository" in \
        capsys.readouterr().err


def test_main_refuses_one_pair(capsys):
    with pytest.raises(SystemExit) as e:
        cmp.main(["--base", "HEAD", "--pairs", "1"])
    assert e.value.code == 2
    assert "--pairs must be at least 2, got 1" in capsys.readouterr().err


def test_missing_build_requirements(tmp_path):
    # pytest runs this test, so some pytest is installed, at a version >= 1 and not < 1
    py = tmp_path / "pyproject.toml"
    py.write_text('[build-system]\nrequires = ["pytest>=1", "no-such-dist-xyz", "pytest<1"]\n')
    assert cmp.missing_build_requirements(py) == ["no-such-dist-xyz", "pytest<1"]
    py.write_text("[project]\nname = 'x'\n")
    assert cmp.missing_build_requirements(py) == []


def test_read_run_takes_the_chosen_statistic():
    doc = {"benchmarks": [{"fullname": "f::t",
                           "stats": {"median": 2e-3, "min": 1e-3, "mean": 3e-3}}]}
    assert cmp.read_run(doc, "x") == {"f::t": 2e-3}
    assert cmp.read_run(doc, "x", "min") == {"f::t": 1e-3}
    assert cmp.read_run(doc, "x", "mean") == {"f::t": 3e-3}


def test_report_page_renders_a_comparison():
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    assert spec is not None
    assert spec.loader is not None
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    doc = {"base": {"ref": "abc", "commit": "0123456789abcdef"}, "pairs": 5, "select": None,
           "threshold": 0.05, "stat": "min",
           "benchmarks": [{"name": "bench/b.py::t", "base_median_s": 0.0112,
                           "new_median_s": 0.00561, "ratio": 0.5, "ratio_lo": 0.45,
                           "ratio_hi": 0.556, "verdict": "faster"}]}
    lines = report.paired_section(doc)
    assert lines[1] == "## Paired comparisons (`bench/compare.py`)"
    assert ("Working tree against `abc` (0123456789), 5 pairs, selection `all`, min round "
            "times, threshold 0.05:") in lines
    # 0.0112 s = 11.2 ms, 0.00561 s = 5.61 ms
    assert lines[-1] == ("| `bench/b.py::t` | 11.2 ms | 5.61 ms | 0.500 | 0.450 to 0.556 | "
                         "faster |")
    assert report.paired_section(None)[-1].startswith("A change's effect on speed")


def test_build_key_ignores_folders_no_build_reads(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    for d in ("src/pkg", "bench", "tests", "docs"):
        (repo / d).mkdir(parents=True)
    (repo / "src" / "pkg" / "m.py").write_text("x = 1\n")
    (repo / "bench" / "b.py").write_text("b = 1\n")
    (repo / "tests" / "t.py").write_text("t = 1\n")
    (repo / "docs" / "d.md").write_text("d\n")
    (repo / "setup.py").write_text("s = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    monkeypatch.setattr(cmp, "REPO", repo)
    key0 = cmp.build_key(_git(repo, "rev-parse", "HEAD^{tree}"))
    # a benchmark, a test and a page changed: another tree, the same build
    for f in ("bench/b.py", "tests/t.py", "docs/d.md"):
        (repo / f).write_text("changed\n")
    tree1 = cmp.working_tree()
    assert tree1 != _git(repo, "rev-parse", "HEAD^{tree}")
    assert cmp.build_key(tree1) == key0
    # the package or the build script changed: another build
    (repo / "src" / "pkg" / "m.py").write_text("x = 2\n")
    key2 = cmp.build_key(cmp.working_tree())
    (repo / "src" / "pkg" / "m.py").write_text("x = 1\n")
    (repo / "setup.py").write_text("s = 2\n")
    key3 = cmp.build_key(cmp.working_tree())
    assert len({key0, key2, key3}) == 3


def test_main_refuses_a_bench_path_before_building(capsys, tmp_path):
    # refused at once (no build): the path is not in the working tree's bench/
    assert cmp.main(["--base", "HEAD", "--bench-path", "bench/no_such_file.py",
                     "--cache-dir", str(tmp_path / "cache")]) == 2
    assert "compare: --bench-path 'bench/no_such_file.py': not in the new side's tree" in \
        capsys.readouterr().err
    assert not (tmp_path / "cache").exists()
    with pytest.raises(SystemExit) as e:
        cmp.main(["--base", "HEAD", "--bench-path", "src/aryl"])
    assert e.value.code == 2
    assert "--bench-path 'src/aryl' is not under bench/" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cmp.main(["--base", "HEAD", "--json", str(tmp_path / "nope" / "x.json")])
    assert "does not exist" in capsys.readouterr().err


# ----------------------------------------------------------------- end to end, a tiny package
# A package named aryl (src/aryl, the layout compare.py reads) built by an in-tree PEP 517
# backend that needs nothing installed: pip builds it in a second, so the whole path (git
# archive, build, cache, the two environments, the alternating runs, the verdict) runs here
# on two different trees; CI's HEAD-against-HEAD step runs it on the real package.

_BACKEND = '''\
import base64, hashlib, pathlib, zipfile

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {p.relative_to("src").as_posix(): p.read_bytes()
             for p in sorted(pathlib.Path("src").rglob("*.py"))}
    dist = "aryl-0.0.1.dist-info/"
    files[dist + "METADATA"] = b"Metadata-Version: 2.1\\nName: aryl\\nVersion: 0.0.1\\n"
    files[dist + "WHEEL"] = (b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\n"
                             b"Tag: py3-none-any\\n")
    def b64(d):
        return base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
    rows = [f"{n},sha256={b64(d)},{len(d)}" for n, d in files.items()]
    files[dist + "RECORD"] = ("\\n".join([*rows, dist + "RECORD,,"]) + "\\n").encode()
    name = "aryl-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / name, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return name
'''

_PYPROJECT = """\
[build-system]
requires = []
build-backend = "fakebackend"
backend-path = ["."]

[tool.pytest.ini_options]
python_files = ["bench_*.py"]
"""

# one sleep of aryl.DELAY_S per round: the benchmark's time is the installed package's
_BENCH = """\
import time

import aryl


def test_sleep(benchmark):
    benchmark.pedantic(time.sleep, args=(aryl.DELAY_S,), rounds=3, iterations=1)
"""


@pytest.fixture
def tiny_repo(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    for d in ("src/aryl/_core", "bench"):
        (repo / d).mkdir(parents=True)
    (repo / "src" / "aryl" / "__init__.py").write_text("DELAY_S = 0.001\n")
    (repo / "src" / "aryl" / "_core" / "__init__.py").write_text("")
    (repo / "src" / "aryl" / "_core" / "_sched.py").write_text("")  # make_env imports it
    (repo / "fakebackend.py").write_text(_BACKEND)
    (repo / "pyproject.toml").write_text(_PYPROJECT)
    (repo / "bench" / "bench_sleep.py").write_text(_BENCH)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    monkeypatch.setattr(cmp, "REPO", repo)
    return repo


def _pip_wheel(repo: Path, out: Path) -> Path:
    # what CI does with its clean checkout: pip wheel . --no-deps
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(out), str(repo)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("aryl-*.whl")
    return wheel


def test_two_trees_run_alternately_and_the_slower_side_found(tiny_repo, tmp_path, capsys):
    # HEAD sleeps 1 ms a round, its wheel given (built as CI builds its own); the working
    # tree sleeps 30 ms and is built here: by min round time the ratio is about 30, only
    # if each side's environment runs its own tree's code
    wheel = _pip_wheel(tiny_repo, tmp_path / "wheels")
    (tiny_repo / "src" / "aryl" / "__init__.py").write_text("DELAY_S = 0.03\n")
    cache, out = tmp_path / "cache", tmp_path / "cmp.json"
    assert cmp.main(["--base", "HEAD", "--base-wheel", str(wheel), "--pairs", "3",
                     "--stat", "min", "--fail-on-slower", "--cache-dir", str(cache),
                     "--json", str(out)]) == 1
    err = capsys.readouterr().err
    assert "base: the given wheel aryl-0.0.1-py3-none-any.whl" in err
    assert err.count("building the wheel") == 1  # the working tree's only
    assert "pair 3/3: new run" in err
    (row,) = json.loads(out.read_text())["benchmarks"]
    assert row["name"] == "bench/bench_sleep.py::test_sleep"
    assert 0.001 <= row["base_median_s"] < 0.03 <= row["new_median_s"]
    assert row["ratio"] > 5
    assert row["verdict"] == "slower"
    (built,) = cache.glob("*/aryl-*.whl")  # the working tree's, cached by its build key
    assert built.parent.name.startswith(cmp.build_key(cmp.working_tree()))
    assert cmp.build_wheel(cmp.working_tree(), cache, tmp_path / "scratch", sys.stderr) == built
    assert "cached wheel" in capsys.readouterr().err


def test_a_given_wheel_serves_both_sides_without_a_build(tiny_repo, tmp_path, capsys):
    # HEAD against its own clean tree (CI's step): one given wheel in both environments;
    # a selection that matches nothing ends it after the environments, before any pair
    wheel = _pip_wheel(tiny_repo, tmp_path / "wheels")
    cache = tmp_path / "cache"
    assert cmp.main(["--base", "HEAD", "--new-wheel", str(wheel), "-k", "no_such_benchmark",
                     "--cache-dir", str(cache)]) == 2
    err = capsys.readouterr().err
    assert "new: the given wheel aryl-0.0.1-py3-none-any.whl" in err
    assert "venv-base: aryl from aryl-0.0.1-py3-none-any.whl" in err
    assert "venv-new: aryl from aryl-0.0.1-py3-none-any.whl" in err
    assert "compare: the selection 'no_such_benchmark' matched no benchmark" in err
    assert "building" not in err
    assert not cache.exists()  # nothing built, nothing cached


def test_a_given_wheel_of_another_tree_is_refused(tiny_repo, tmp_path, capsys):
    wheel = _pip_wheel(tiny_repo, tmp_path / "wheels")  # HEAD's
    head = cmp.ref_tree("HEAD")[1]
    cmp.check_wheel(wheel, head, "--base-wheel")  # its own tree: accepted
    init = tiny_repo / "src" / "aryl" / "__init__.py"
    init.write_text("DELAY_S = 0.002\n")
    cache = tmp_path / "cache"
    assert cmp.main(["--base", "HEAD", "--new-wheel", str(wheel),
                     "--cache-dir", str(cache)]) == 2
    assert ("compare: --new-wheel aryl-0.0.1-py3-none-any.whl: aryl/__init__.py differs from "
            "src/aryl/__init__.py of tree") in capsys.readouterr().err
    assert not cache.exists()  # refused before any build
    init.write_text("DELAY_S = 0.001\n")
    (tiny_repo / "src" / "aryl" / "extra.py").write_text("")  # untracked: part of the tree
    with pytest.raises(cmp.CompareError, match=r"--new-wheel aryl-0.0.1-py3-none-any.whl: "
                                               r"lacks aryl/extra.py of tree") as e:
        cmp.check_wheel(wheel, cmp.working_tree(), "--new-wheel")
    assert e.value.status == 2
    with pytest.raises(cmp.CompareError, match=r"--new-wheel .*notes.txt: not an aryl-\*.whl"):
        cmp.check_wheel(tmp_path / "notes.txt", head, "--new-wheel")
    fake = tmp_path / "aryl-0.0.1-py3-none-any.whl"
    fake.write_text("not a zip")
    with pytest.raises(cmp.CompareError, match=r"--new-wheel .*: not a wheel \("):
        cmp.check_wheel(fake, head, "--new-wheel")
