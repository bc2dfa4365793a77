"""Mutation testing of the scheduler, simulator and report code, one command.

Mutates ``src/aryl/sim/``, ``src/aryl/scheduling/``, ``src/aryl/experiment.py``,
``src/aryl/elastic.py`` and ``src/aryl/reclaiming.py`` with mutmut (3.x) and
writes a Markdown report of the score per module and of every surviving
mutant with its diff::

    pip install -e ".[test,mutation]"
    python scripts/mutation.py                     # every group (about 1 h on 2 cores)
    python scripts/mutation.py --group scheduling  # one group
    python scripts/mutation.py --survivors         # re-test only last run's survivors
    python scripts/mutation.py --sample-digit 3    # a ~10% sample (repeat: 3 and 7 ~20%)

How it runs (see docs/testing.md):

* One **group** = the modules mutated together and the test files that test
  them (``GROUPS``).  Each group runs in its own scratch folder
  ``.mutation/<group>/`` (git-ignored) holding a link to ``src/`` and
  ``tests/`` and a ``pyproject.toml`` with the group's ``[tool.mutmut]``
  section, so groups never share mutmut state and the repository's own
  ``pyproject.toml`` carries no mutmut configuration.
* mutmut copies ``src/`` into ``mutants/src`` (every file, so the Cython and
  pybind11 extensions built in place come along) and puts ``mutants/src``
  first on ``sys.path`` while removing ``src/`` — which is where the editable
  install points — so the tests import the mutated copy.  The tests import
  ``aryl`` by its package name, so pytest's ``--import-mode=importlib``
  (from the copied ``pyproject.toml``) is fine.
* mutmut 3 mutates code inside functions and methods only (module constants
  and class bodies are not mutated); per mutant it runs only the group's tests
  that executed the mutated function in a clean run (``-x``: the first failure
  kills it).
* ``--survivors`` re-tests the mutants that survived the previous run of the
  group (after new tests were added) instead of starting afresh.

Scores: *killed* = a test failed (or the mutant timed out, as mutmut counts
it); *survived* = every test passed; *no tests* = no test of the group ran the
function (counted as not killed).  ``scripts/mutation_equivalent.txt`` lists
mutants judged equivalent (same behaviour as the original); they are
reported apart and the score is given with and without them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
EQUIVALENT_FILE = ROOT / "scripts" / "mutation_equivalent.txt"


@dataclass(frozen=True)
class Group:
    """Modules mutated together and the test files that exercise them."""

    name: str
    modules: tuple[str, ...]  # globs relative to the repository root
    tests: tuple[str, ...]
    deselect: tuple[str, ...] = ()  # test node ids (or prefixes) left out, see _SLOW_REPLAYS
    python_engine: bool = False  # replays on the Python engine (mutation_python_engine.py)


_SIM_TESTS = (
    "tests/test_sim_engine.py",
    "tests/test_policy_choices.py",
    "tests/test_sim_keep_pass.py",
    "tests/test_sim_cli.py",
    "tests/test_replay_cli_fixes.py",
    "tests/test_schedule_api.py",
    "tests/test_schedule_client.py",
    "tests/test_hetero.py",
    "tests/test_fifo_backfill.py",
    "tests/test_sim_extras_placement.py",
    "tests/test_sim_faults.py",
    "tests/test_sizing.py",
    "tests/test_input_validation.py",
    "tests/test_cluster_spec.py",
    "tests/test_speeds.py",
    "tests/test_schedule_state.py",
    "tests/test_schedule_jsonio.py",
    "tests/test_schedule_policies.py",
    "tests/test_sim_accounting.py",
    "tests/test_timed_rules.py",
)

#: Whole-trace replays left out of the simulator groups (the files
#: test_sim_determinism.py and test_sim_properties.py are not listed above, and
#: these tests are deselected): under mutmut's trampolines
#: (every call of a mutated module goes through a dispatcher) each takes 15-80 s, so
#: every surviving mutant of the engine or the pass would cost 5-8 minutes of tests.
#: They are integration tests (determinism on real traces, random traces with the
#: invariant checker, the JSON round trip of a 500-job replay, every speed ratio one
#: equal to the homogeneous replay); the scenario tests carry the oracles for the
#: mutants.  Leaving them out can only lower the score (a lower bound).
_SLOW_REPLAYS = (
    "tests/test_hetero.py::test_every_speed_ratio_one_reproduces_the_homogeneous_replay",
    "tests/test_hetero.py::test_the_default_preset_is_the_homogeneous_default",
    "tests/test_hetero.py::test_lyra_replays_with_checks",
    "tests/test_schedule_client.py::test_states_and_plans_round_trip_through_json",
)

#: module -> test files.  Groups are run in this order.
GROUPS: tuple[Group, ...] = (
    Group("elastic", ("src/aryl/elastic.py",),
          ("tests/test_elastic_solve.py", "tests/test_mckp.py", "tests/test_elastic_errors.py")),
    Group("reclaiming", ("src/aryl/reclaiming.py",),
          ("tests/test_reclaim.py", "tests/test_reclaim_properties.py",
           "tests/test_reclaim_errors.py")),
    Group("scheduling", ("src/aryl/scheduling/*",), _SIM_TESTS, _SLOW_REPLAYS, True),
    # the keep-pass oracle compares two code paths of the scheduling pass (slow: two
    # replays of a real trace), not the simulator's own code
    Group("sim", ("src/aryl/sim/*",),
          (*(t for t in _SIM_TESTS if t != "tests/test_sim_keep_pass.py"),
           "tests/test_sim_config.py", "tests/test_cli_text.py",
           # request-level inference (aryl.sim.autoscale, aryl.sim.serving)
           "tests/test_serving.py", "tests/test_autoscale.py", "tests/test_serving_replay.py"),
          _SLOW_REPLAYS, True),
    Group("experiment", ("src/aryl/experiment.py",),
          ("tests/test_experiment.py", "tests/test_report_values.py")),
)

#: Repository files the tests read (docs pages, README, scripts, bench): mutmut copies
#: them next to its copy of tests/ (``mutants/``), where ``Path(__file__).parents[1]``
#: of a test points.
_ALSO_COPY = ("docs", "README.md", "scripts", "bench")

#: Lines never mutated: debug logging (not behaviour; nothing reads it).
DO_NOT_MUTATE_PATTERNS = (r"^\s*(log|logger)\.debug\(",)

_STATUS_KILLED = {"killed", "timeout"}
_RESULT_LINE = re.compile(r"^\s+(\S+): (.+)$")


def _mutmut() -> str:
    exe = Path(sys.executable).parent / "mutmut"
    if not exe.exists():
        found = shutil.which("mutmut")
        if found is None:
            sys.exit("mutmut is not installed: pip install -e '.[mutation]'")
        return found
    return str(exe)


def _toml_list(items: list[str]) -> str:
    quoted = ('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' for s in items)
    return "[" + ", ".join(quoted) + "]"


def _prepare(group: Group, fresh: bool) -> Path:
    """The group's scratch folder: links to src/ and tests/, pyproject with [tool.mutmut]."""
    wd = WORK / group.name
    if fresh and wd.exists():
        shutil.rmtree(wd)
    wd.mkdir(parents=True, exist_ok=True)
    for name in ("src", "tests", *_ALSO_COPY):
        link = wd / name
        if not link.exists() and (ROOT / name).exists():
            link.symlink_to(ROOT / name, target_is_directory=(ROOT / name).is_dir())
    tests = [t for t in group.tests if (ROOT / t).exists()]
    text = (ROOT / "pyproject.toml").read_text()
    cfg = [
        "",
        "[tool.mutmut]",
        'source_paths = ["src"]',
        f"only_mutate = {_toml_list(list(group.modules))}",
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}",
        "pytest_add_cli_args = "
        + _toml_list(["-p", "no:cacheprovider",
                      *(("-p", "mutation_python_engine") if group.python_engine else ()),
                      *(a for d in group.deselect for a in ("--deselect", d))]),
        f"do_not_mutate_patterns = {_toml_list(list(DO_NOT_MUTATE_PATTERNS))}",
        "use_git_change_detection = false",
        # workers fork from a server that only collected the tests: forked from the
        # process that ran them (mutmut's default), module caches filled by the clean
        # run (the policy instances of aryl.scheduling.registry) would hide mutants
        # of the code that fills them
        'process_isolation = "forkserver"',
        f"also_copy = {_toml_list([n for n in _ALSO_COPY if (ROOT / n).exists()])}",
        "",
    ]
    (wd / "pyproject.toml").write_text(text + "\n".join(cfg))
    return wd


def _results(wd: Path) -> dict[str, str]:
    """mutant name -> status, from ``mutmut results --all true``."""
    out = subprocess.run(
        [_mutmut(), "results", "--all", "true"], cwd=wd, capture_output=True, text=True,
        check=True,
    ).stdout
    res: dict[str, str] = {}
    for line in out.splitlines():
        m = _RESULT_LINE.match(line)
        if m:
            res[m.group(1)] = m.group(2).strip()
    return res


def _diff(wd: Path, name: str) -> str:
    out = subprocess.run([_mutmut(), "show", name], cwd=wd, capture_output=True, text=True)
    return out.stdout.strip()


def _module_of(name: str) -> str:
    """``aryl.sim.engine.xǁEngineǁrun__mutmut_3`` -> ``aryl.sim.engine``."""
    head = name.split("__mutmut_")[0]
    parts = head.split(".")
    return ".".join(p for p in parts[:-1] if not p.startswith("x"))


def _load_equivalent() -> dict[str, str]:
    """mutant name -> reason (``name  # reason`` lines; ``#`` starts a comment line)."""
    eq: dict[str, str] = {}
    if EQUIVALENT_FILE.exists():
        for raw in EQUIVALENT_FILE.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            eq[name.strip()] = reason.strip()
    return eq


def _selected(name: str, args: argparse.Namespace) -> bool:
    """Whether mutant ``name`` is in this run's selection (``--sample-digit``)."""
    return not args.sample_digit or name.endswith(tuple(str(d) for d in args.sample_digit))


def _mutmut_run(group: Group, wd: Path, names: list[str], args: argparse.Namespace) -> float:
    cmd = [_mutmut(), "run", "--max-children", str(args.max_children), *names]
    print(f"[{group.name}] {' '.join(cmd[1:4])} ... ({len(names)} names) in {wd}", flush=True)
    t0 = time.perf_counter()
    log = wd / "mutmut-run.log"
    with log.open("a") as fh:
        proc = subprocess.run(cmd, cwd=wd, stdout=fh, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTHONHASHSEED": "0",
                                   # the engine plugin (mutation_python_engine.py)
                                   "PYTHONPATH": os.pathsep.join(
                                       p for p in (str(ROOT / "scripts"),
                                                   os.environ.get("PYTHONPATH")) if p)})
    if proc.returncode != 0:
        tail = log.read_text().splitlines()[-30:]
        sys.exit(f"[{group.name}] mutmut failed (exit {proc.returncode}); log {log}:\n"
                 + "\n".join(tail))
    return time.perf_counter() - t0


def _run_group(group: Group, args: argparse.Namespace) -> tuple[dict[str, str], float, Path]:
    fresh = not (args.survivors or args.keep)
    wd = _prepare(group, fresh)
    if fresh:
        (wd / "mutmut-run.log").unlink(missing_ok=True)
    elapsed = 0.0
    if args.survivors:
        if not (wd / "mutants").exists():
            sys.exit(f"{group.name}: no previous run to take survivors from")
        names = [n for n, s in _results(wd).items() if s == "survived" and _selected(n, args)]
        if names:
            elapsed += _mutmut_run(group, wd, names, args)
        # mutmut regenerates the mutants of edited functions and forgets their results:
        # test those of the selection too (a second run, now that they exist)
        fresh_names = [n for n, s in _results(wd).items()
                       if s == "not checked" and _selected(n, args)]
        if fresh_names:
            elapsed += _mutmut_run(group, wd, fresh_names, args)
        if not names and not fresh_names:
            print(f"[{group.name}] nothing to re-test")
    else:
        # about a tenth of the mutants per digit: those whose number ends in it
        names = [f"*__mutmut_*{d}" for d in sorted(set(args.sample_digit or ()))]
        elapsed += _mutmut_run(group, wd, names, args)
    res = {n: s for n, s in _results(wd).items() if _selected(n, args)}
    return res, elapsed, wd


def _report(rows: list[tuple[Group, dict[str, str], float, Path]], out: Path,
            equivalent: dict[str, str], command: str) -> str:
    lines = [
        "# Mutation testing report",
        "",
        f"Generated by `{command}` on {_dt.date.today().isoformat()} (mutmut "
        f"{_version()}). Killed includes timeouts; *no tests* counts as not killed; "
        "equivalent = listed in scripts/mutation_equivalent.txt with a reason.",
        "",
        "| module | mutants | killed | survived | no tests | equivalent | score | "
        "score w/o equivalent | run time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    survivors: list[tuple[str, Path]] = []
    total = [0, 0, 0, 0, 0]
    for _group, res, elapsed, wd in rows:
        by_mod: dict[str, list[tuple[str, str]]] = {}
        for name, status in res.items():
            by_mod.setdefault(_module_of(name), []).append((name, status))
        for i, (mod, items) in enumerate(sorted(by_mod.items())):
            n = len(items)
            killed = sum(s in _STATUS_KILLED for _, s in items)
            eq = sum(s not in _STATUS_KILLED and nm in equivalent for nm, s in items)
            surv = sum(s == "survived" for _, s in items)
            notest = sum(s == "no tests" for _, s in items)
            for nm, s in items:
                if s not in _STATUS_KILLED and s not in ("not checked",):
                    survivors.append((nm, wd))
            score = killed / n if n else 1.0
            score_eq = killed / (n - eq) if n - eq else 1.0
            t = f"{elapsed:.0f}" if i == 0 else "(group)"
            lines.append(f"| {mod} | {n} | {killed} | {surv} | {notest} | {eq} | "
                         f"{100 * score:.1f}% | {100 * score_eq:.1f}% | {t} |")
            for k, v in enumerate((n, killed, surv, notest, eq)):
                total[k] += v
    n, killed, surv, notest, eq = total
    if n:
        lines.append(f"| **all** | {n} | {killed} | {surv} | {notest} | {eq} | "
                     f"{100 * killed / n:.1f}% | {100 * killed / max(1, n - eq):.1f}% | "
                     f"{sum(r[2] for r in rows):.0f} |")
    lines += ["", "## Mutants not killed", ""]
    for name, wd in sorted(survivors):
        reason = equivalent.get(name)
        head = f"### `{name}`" + (f" — equivalent: {reason}" if reason else "")
        lines += [head, "", "```diff", _diff(wd, name), "```", ""]
    text = "\n".join(lines) + "\n"
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(out)
    return text


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mutmut")
    except Exception:  # pragma: no cover - not installed
        return "?"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--group", action="append", choices=[g.name for g in GROUPS],
                   help="run only this group (repeatable); default every group")
    p.add_argument("--survivors", action="store_true",
                   help="re-test only the survivors of the previous run of each group")
    p.add_argument("--keep", action="store_true",
                   help="reuse the previous mutmut state (results of unchanged functions)")
    p.add_argument("--sample-digit", type=int, choices=range(10), action="append",
                   help="test only the mutants whose number ends in this digit (~10%%)")
    p.add_argument("--max-children", type=int, default=2, help="parallel mutant workers")
    p.add_argument("--report", type=Path, default=WORK / "report.md",
                   help="Markdown report (default .mutation/report.md)")
    p.add_argument("--min-score", type=float, default=None,
                   help="exit 1 if the overall score (without equivalents) is below this (0-1)")
    args = p.parse_args(argv)
    groups = [g for g in GROUPS if not args.group or g.name in args.group]
    rows = []
    for g in groups:
        res, elapsed, wd = _run_group(g, args)
        rows.append((g, res, elapsed, wd))
        k = sum(s in _STATUS_KILLED for s in res.values())
        print(f"[{g.name}] {k}/{len(res)} killed in {elapsed:.0f} s", flush=True)
    command = "python scripts/mutation.py " + " ".join(argv if argv is not None else sys.argv[1:])
    equivalent = _load_equivalent()
    _report(rows, args.report, equivalent, command.strip())
    print(f"report: {args.report}")
    if args.min_score is not None:
        n = sum(len(r[1]) for r in rows)
        killed = sum(s in _STATUS_KILLED for r in rows for s in r[1].values())
        eq = sum(s not in _STATUS_KILLED and nm in equivalent
                 for r in rows for nm, s in r[1].items())
        score = killed / max(1, n - eq)
        if score < args.min_score:
            print(f"score {score:.3f} below {args.min_score}")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
