"""Paired benchmark comparison: a git ref against the working tree, run alternately.

Usage::

    python bench/compare.py --base REF [-k EXPR] [--bench-path bench/FILE.py]
                            [--pairs N] [--threshold 0.05] [--fail-on-slower]
                            [--json OUT] [--save-runs DIR] [--new-wheel WHEEL]
                            [--base-wheel WHEEL] [-- EXTRA PYTEST ARGS]

Each side (``REF`` and the working tree as it is on disk, uncommitted changes
and untracked, not ignored files included) is built once into a wheel
(``pip wheel --no-deps --no-build-isolation`` of a ``git archive`` of its tree;
the wheels are cached under ``--cache-dir`` keyed by a hash of the tree without
the folders that put no code into the wheel, :data:`NOT_BUILT`, so a side
already built, or two sides that differ only in benchmarks, tests or docs,
are not built again) and installed into its own temporary virtual
environment.  ``--new-wheel WHEEL`` / ``--base-wheel WHEEL`` hand over a wheel
already built from that side's tree (CI's ``pip wheel .`` of its clean checkout):
it is used instead of a build once its ``aryl`` files are checked against the
tree (:func:`check_wheel`); when the two sides share one build, one given wheel
serves both.  The environments reuse this interpreter's dependencies (a
``.pth`` file listing its ``sys.path`` entries), and their own ``aryl`` comes
first on ``sys.path``: it is checked before any run.

The same pytest-benchmark selection (the working tree's ``bench/`` files, or the
base's with ``--bench-from base``) then runs ``--pairs`` times in each
environment, alternating, the order swapped every pair (base, new; new, base;
base, new; ...) so that a load that drifts over the comparison weighs on both
sides alike.  For each benchmark and each pair, the ratio new/old of the two
runs' median round times (``--stat min`` or ``mean``: that statistic) is one
paired observation; the reported ratio is their geometric mean, with a Student
t interval (``--confidence``, default 95%) on the mean of the log ratios over
the pairs.  Verdict against the threshold
``t`` (``--threshold``, default 0.05):

* ``slower``: the ratio is above ``1 + t`` and the interval lies above 1;
* ``faster``: the ratio is below ``1 / (1 + t)`` and the interval lies below 1;
* ``same``: the whole interval lies within ``[1 / (1 + t), 1 + t]``;
* ``unclear``: anything else (the interval is too wide to tell, or the change is
  significant but smaller than the threshold while the interval reaches past it).

Exit status: 0; 1 when ``--fail-on-slower`` is given and a benchmark is
``slower``; 2 for a bad argument (an unknown ref, fewer than 2 pairs, a
selection that matches no benchmark, a given wheel that is not of its side's
tree); 3 when a build or a benchmark run fails.
``--save-runs DIR`` keeps each run's pytest-benchmark JSON
(``base-1.json``, ``new-1.json``, ...), which ``pytest-benchmark compare DIR/*.json``
tabulates run by run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SIDES = ("base", "new")
VERDICTS = ("faster", "slower", "same", "unclear")
STATS = ("median", "min", "mean")


class CompareError(Exception):
    """A failure with a message for the user and the exit status to leave with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Comparison:
    """One benchmark's paired comparison (times in seconds, ratios new/old)."""

    name: str
    n_pairs: int
    base_median_s: float  #: median over the pairs of the base runs' median round times
    new_median_s: float
    ratio: float  #: geometric mean over the pairs of new median / base median
    ratio_lo: float  #: lower end of the t interval of the ratio
    ratio_hi: float
    verdict: str


def run_order(n_pairs: int) -> list[tuple[str, str]]:
    """The order of the two sides in each pair: ``base, new``, then swapped, alternately.

    Parameters
    ----------
    n_pairs : int
        Number of pairs, at least 1.

    Returns
    -------
    list of (str, str)
        ``[("base", "new"), ("new", "base"), ("base", "new"), ...]``, ``n_pairs`` long.
    """
    return [("base", "new") if i % 2 == 0 else ("new", "base") for i in range(n_pairs)]


def read_run(doc: Mapping[str, Any], source: str, stat: str = "median") -> dict[str, float]:
    """One statistic of the round times of each benchmark in a pytest-benchmark JSON document.

    Parameters
    ----------
    doc : mapping
        The document ``pytest --benchmark-json`` writes (a ``benchmarks`` list whose
        entries have ``fullname`` and ``stats.median``, seconds).
    source : str
        Where the document came from, for error messages.
    stat : {"median", "min", "mean"}
        Which of the document's per-benchmark statistics (seconds per round).

    Returns
    -------
    dict
        ``fullname -> seconds``.

    Raises
    ------
    CompareError
        (status 3) the document lacks a field, or a median is not a positive finite number.
    """
    try:
        benches = doc["benchmarks"]
        out: dict[str, float] = {}
        for b in benches:
            name = str(b["fullname"])
            med = float(b["stats"][stat])
            if not (math.isfinite(med) and med > 0):
                raise CompareError(f"{source}: {name}: {stat} {med!r} is not a positive time", 3)
            out[name] = med
    except (KeyError, TypeError) as exc:
        raise CompareError(f"{source}: not a pytest-benchmark JSON document "
                           f"(missing or malformed field {exc})", 3) from None
    return out


def t_quantile(confidence: float, dof: int) -> float:
    """Two-sided Student t quantile: ``P(|T| <= q) = confidence`` for ``dof`` degrees of freedom."""
    from scipy.stats import t as student_t

    return float(student_t.ppf(0.5 + confidence / 2.0, dof))


def verdict(ratio: float, lo: float, hi: float, threshold: float) -> str:
    """Verdict of a ratio new/old and its interval against a relative threshold.

    ``slower`` when ``ratio > 1 + threshold`` and ``lo > 1``; ``faster`` when
    ``ratio < 1 / (1 + threshold)`` and ``hi < 1``; ``same`` when
    ``[lo, hi]`` lies within ``[1 / (1 + threshold), 1 + threshold]`` (ends
    included); otherwise ``unclear``.
    """
    up, down = 1.0 + threshold, 1.0 / (1.0 + threshold)
    if ratio > up and lo > 1.0:
        return "slower"
    if ratio < down and hi < 1.0:
        return "faster"
    if down <= lo and hi <= up:
        return "same"
    return "unclear"


def compare_runs(base_runs: Sequence[Mapping[str, float]], new_runs: Sequence[Mapping[str, float]],
                 *, threshold: float = 0.05, confidence: float = 0.95) -> list[Comparison]:
    """Paired ratios new/old per benchmark, with a t interval over the pairs and a verdict.

    Parameters
    ----------
    base_runs, new_runs : sequence of mapping
        One ``fullname -> median seconds`` mapping per run (:func:`read_run`); run
        ``i`` of each side form pair ``i``.  Both the same length, at least 2.
    threshold : float
        Relative change that counts (0.05: 5%), > 0.
    confidence : float
        Level of the interval, in (0, 1).

    Returns
    -------
    list of Comparison
        Sorted by benchmark name.  With pairs ``i = 1..n`` and ``x_i = log(new_i / base_i)``:
        ``ratio = exp(mean x)``, interval ``exp(mean x -+ q * sd(x) / sqrt(n))`` with
        ``sd`` the sample standard deviation (``n - 1``) and ``q`` the t quantile with
        ``n - 1`` degrees of freedom.

    Raises
    ------
    CompareError
        (status 2) fewer than 2 pairs, unequal numbers of runs, a bad threshold or
        confidence; (status 3) the runs do not hold the same benchmarks (names listed).
    """
    if len(base_runs) != len(new_runs):
        raise CompareError(f"{len(base_runs)} base runs but {len(new_runs)} new runs", 2)
    n = len(base_runs)
    if n < 2:
        raise CompareError(f"need at least 2 pairs of runs for an interval, got {n}", 2)
    if not (threshold > 0 and math.isfinite(threshold)):
        raise CompareError(f"threshold must be a positive number, got {threshold!r}", 2)
    if not (0 < confidence < 1):
        raise CompareError(f"confidence must be in (0, 1), got {confidence!r}", 2)
    names = set(base_runs[0])
    for side, runs in (("base", base_runs), ("new", new_runs)):
        for i, run in enumerate(runs, start=1):
            if set(run) != names:
                missing = sorted(names - set(run))
                extra = sorted(set(run) - names)
                raise CompareError(
                    f"run {side}-{i} does not hold the same benchmarks as base-1: "
                    f"missing {missing}, extra {extra}", 3)
    q = t_quantile(confidence, n - 1)
    out = []
    for name in sorted(names):
        base = [r[name] for r in base_runs]
        new = [r[name] for r in new_runs]
        x = [math.log(b_new / b_old) for b_new, b_old in zip(new, base, strict=True)]
        mean = math.fsum(x) / n
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in x) / (n - 1))
        half = q * sd / math.sqrt(n)
        ratio, lo, hi = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
        out.append(Comparison(name=name, n_pairs=n, base_median_s=_median(base),
                              new_median_s=_median(new), ratio=ratio, ratio_lo=lo,
                              ratio_hi=hi, verdict=verdict(ratio, lo, hi, threshold)))
    return out


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2.0


def format_time(seconds: float) -> str:
    """A time with 3 significant digits in s, ms, us or ns (``0.00123 -> '1.23 ms'``)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_table(rows: Sequence[Comparison], confidence: float) -> str:
    """The comparison as a markdown table (one row per benchmark)."""
    pct = f"{confidence * 100:g}%"
    lines = [f"| benchmark | base | new | new/old | {pct} interval | verdict |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r.name}` | {format_time(r.base_median_s)} | "
                     f"{format_time(r.new_median_s)} | {r.ratio:.3f} | "
                     f"{r.ratio_lo:.3f} to {r.ratio_hi:.3f} | {r.verdict} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- builds


def _git(*args: str, env: Mapping[str, str] | None = None) -> str:
    proc = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                          env=None if env is None else dict(env), check=False)
    if proc.returncode != 0:
        raise CompareError(f"git {' '.join(args)}: {proc.stderr.strip()}", 2)
    return proc.stdout.strip()


def ref_tree(ref: str) -> tuple[str, str]:
    """``(commit, tree)`` hashes of a git ref; CompareError (status 2) for an unknown ref."""
    try:
        commit = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except CompareError:
        raise CompareError(f"--base {ref!r}: not a commit of this repository", 2) from None
    return commit, _git("rev-parse", f"{commit}^{{tree}}")


def working_tree() -> str:
    """Git tree hash of the working tree as on disk (tracked and untracked, not ignored, files).

    Written with a temporary index, so the repository's own index is untouched.
    Equal to ``HEAD^{tree}`` when the working tree is clean.
    """
    with tempfile.TemporaryDirectory(prefix="aryl-compare-index-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git("read-tree", "HEAD", env=env)
        _git("add", "--all", env=env)
        return _git("write-tree", env=env)


#: top-level entries of the repository that put no code into the wheel (the README is
#: only its long description): a change there (a benchmark, a test, a page) reuses it
NOT_BUILT = ("bench", "tests", "docs", "scripts", ".ci", ".github", "README.md")


def build_key(tree: str) -> str:
    """What a tree's wheel depends on: a hash of its top-level entries but :data:`NOT_BUILT`.

    Two trees that differ only under ``bench/``, ``tests/``, ``docs/``, ``scripts/``,
    ``.ci/``, ``.github/`` or in ``README.md`` have the same key (and share one
    build); any other difference changes it.
    """
    import hashlib

    listing = _git("ls-tree", "--full-tree", tree)
    kept = [line for line in listing.splitlines() if line.split("\t", 1)[1] not in NOT_BUILT]
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()[:40]


def _cache_key(key: str) -> str:
    return f"{key}-{sys.implementation.cache_tag}-{platform.machine()}"


def missing_build_requirements(pyproject: Path) -> list[str]:
    """The ``[build-system] requires`` entries of ``pyproject`` that this environment lacks.

    A requirement counts as present when its distribution is installed at a version its
    specifier admits (markers are not evaluated).
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement

    requires = tomllib.loads(pyproject.read_text()).get("build-system", {}).get("requires", [])
    missing = []
    for text in requires:
        req = Requirement(text)
        try:
            have = version(req.name)
        except PackageNotFoundError:
            missing.append(text)
            continue
        if not req.specifier.contains(have, prereleases=True):
            missing.append(text)
    return missing


def build_wheel(tree: str, cache_dir: Path, scratch: Path, log: Any) -> Path:
    """The wheel of git tree ``tree``: from the cache (by :func:`build_key`), or built and cached.

    The cache entry is a folder renamed into place once the wheel is in it (atomic).

    Raises
    ------
    CompareError
        (status 3) the build failed (the tail of pip's output in the message).
    """
    final = cache_dir / _cache_key(build_key(tree))
    wheels = sorted(final.glob("aryl-*.whl")) if final.is_dir() else []
    if wheels:
        print(f"  tree {tree[:10]}: cached wheel {wheels[0].name}", file=log)
        return wheels[0]
    src = scratch / f"src-{tree[:10]}"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", tree],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise CompareError(f"git archive {tree}: {archive.stderr.decode().strip()}", 3)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    part = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=cache_dir))
    print(f"  tree {tree[:10]}: building the wheel (a few minutes) ...", file=log, flush=True)
    t0 = time.perf_counter()
    missing = missing_build_requirements(src / "pyproject.toml")
    if missing:  # e.g. CI's environment, installed with build isolation
        print(f"  tree {tree[:10]}: {', '.join(missing)} not installed here: an isolated build",
              file=log)
    isolation = [] if missing else ["--no-build-isolation"]
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation,
                           "-q", "-w", str(part), str(src)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not list(part.glob("aryl-*.whl")):
        shutil.rmtree(part, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise CompareError(f"building tree {tree[:10]} failed:\n{tail}", 3)
    try:
        part.rename(final)
    except OSError:  # another comparison cached the same tree meanwhile
        shutil.rmtree(part, ignore_errors=True)
    print(f"  tree {tree[:10]}: built in {time.perf_counter() - t0:.0f} s", file=log)
    return sorted(final.glob("aryl-*.whl"))[0]


def check_wheel(wheel: Path, tree: str, option: str) -> None:
    """Refuse a wheel that was not built from git tree ``tree``.

    Every file of the wheel under ``aryl/`` that the tree holds under ``src/aryl/``
    must be byte for byte the tree's (compared by git blob hash), and every
    ``src/aryl/**.py`` of the tree must be in the wheel.  The compiled modules
    cannot be compared with their sources; the sources are, where the wheel ships
    them (this project's carries ``_core/*.cpp``, ``_mckp.pyx`` and the headers),
    but not the build's own files (``setup.py``, ``pyproject.toml``): a wheel built
    with other compiler flags from the same sources passes.

    Parameters
    ----------
    wheel : Path
        An ``aryl-*.whl`` file.
    tree : str
        Git tree hash of the side the wheel stands for.
    option : str
        The option that named it (``--new-wheel``), for messages.

    Raises
    ------
    CompareError
        (status 2) not an aryl wheel file, or a file that differs or is missing
        (the first one, by path, named).
    """
    import hashlib
    import zipfile

    if not (wheel.is_file() and wheel.name.startswith("aryl-") and wheel.name.endswith(".whl")):
        raise CompareError(f"{option} {wheel}: not an aryl-*.whl file", 2)
    algo = _git("rev-parse", "--show-object-format")  # sha1 or sha256
    listing = _git("ls-tree", "-r", "--full-tree", tree, "src/aryl")
    blobs: dict[str, str] = {}
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        blobs[path.removeprefix("src/")] = meta.split()[2]
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = {n: zf.read(n) for n in zf.namelist() if n.startswith("aryl/")}
    except (zipfile.BadZipFile, OSError) as exc:
        raise CompareError(f"{option} {wheel}: not a wheel ({exc})", 2) from None
    for name in sorted(members):
        if name in blobs:
            data = members[name]
            digest = hashlib.new(algo, b"blob %d\0" % len(data) + data).hexdigest()
            if digest != blobs[name]:
                raise CompareError(f"{option} {wheel.name}: {name} differs from src/{name} "
                                   f"of tree {tree[:10]} (a wheel of another tree?)", 2)
    lacking = sorted(n for n in blobs if n.endswith(".py") and n not in members)
    if lacking:
        raise CompareError(f"{option} {wheel.name}: lacks {lacking[0]} of tree {tree[:10]} "
                           "(a wheel of another tree?)", 2)


def _parent_paths() -> list[str]:
    """This interpreter's ``sys.path`` entries past the standard library, minus a source checkout.

    A development install's ``src`` folder is left out; the installed ``aryl`` of a
    temporary environment precedes every entry in any case.
    """
    script_dir = os.path.realpath(sys.path[0]) if sys.path and sys.path[0] else ""
    # The base interpreter's standard library (inside a venv, sysconfig's platstdlib
    # is the venv's own lib/pythonX.Y, which holds its site-packages: not that).
    std = os.path.realpath(os.path.dirname(os.__file__))
    out = []
    for p in sys.path:
        if not p or os.path.realpath(p) == script_dir or not os.path.isdir(p):
            continue
        real = os.path.realpath(p)
        site_dir = os.path.basename(real) in ("site-packages", "dist-packages")
        if not site_dir and (real == std or real.startswith(std + os.sep)):
            continue
        if os.path.isfile(os.path.join(p, "aryl", "__init__.py")) and \
                os.path.basename(real) not in ("site-packages", "dist-packages"):
            continue  # an editable install's source folder
        out.append(p)
    return out


def make_env(where: Path, wheel: Path, log: Any) -> Path:
    """A virtual environment at ``where`` with ``wheel`` installed; returns its python.

    Raises
    ------
    CompareError
        (status 3) the install failed, or ``import aryl`` does not load the installed copy.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    py = where / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The wheel first, then the parent's packages: with them already visible, pip would
    # take the parent's own aryl for this one and install nothing.
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
                           "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompareError(f"installing {wheel.name} into {where}: {proc.stderr.strip()}", 3)
    Path(site, "_aryl_compare_parent.pth").write_text("\n".join(_parent_paths()) + "\n")
    where_aryl = subprocess.run([str(py), "-c", "import aryl, aryl._core._sched; "
                                 "print(aryl.__file__)"], capture_output=True, text=True,
                                check=False, env=_env())
    loaded = where_aryl.stdout.strip()
    if where_aryl.returncode != 0 or not Path(loaded).resolve().is_relative_to(where.resolve()):
        raise CompareError(f"{where}: `import aryl` loads {loaded or where_aryl.stderr.strip()!r},"
                           " not the installed wheel", 3)
    print(f"  {where.name}: aryl from {wheel.name}", file=log)
    return py


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # nothing may shadow the environment's own aryl
    # run from a pytest-xdist worker (its tests), the child would take itself for one:
    # pytest-benchmark then disables every benchmark and writes no JSON
    for k in [k for k in env if k.startswith("PYTEST_XDIST_")]:
        del env[k]
    return env


def run_benchmarks(py: Path, bench_root: Path, paths: Sequence[str], select: str | None,
                   extra: Sequence[str], out_json: Path, stat: str = "median") -> dict[str, float]:
    """One pytest-benchmark run of ``paths`` (relative to ``bench_root``) with ``py``; its medians.

    Raises
    ------
    CompareError
        (status 2) the selection matched no benchmark; (status 3) the run failed.
    """
    cmd = [str(py), "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", "--benchmark-only",
           f"--benchmark-json={out_json}"]
    if select:
        cmd += ["-k", select]
    cmd += list(extra)
    proc = subprocess.run(cmd, cwd=bench_root, capture_output=True, text=True, check=False,
                          env=_env())
    if proc.returncode == 5 or (proc.returncode == 0 and not out_json.exists()):
        raise CompareError(f"the selection {select!r} matched no benchmark", 2)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
        raise CompareError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{tail}", 3)
    medians = read_run(json.loads(out_json.read_text()), str(out_json), stat)
    if not medians:
        raise CompareError(f"the selection {select!r} matched no benchmark", 2)
    return medians


# --------------------------------------------------------------------------- main


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="git ref of the old side (e.g. HEAD, a hash)")
    ap.add_argument("-k", dest="select", default=None, help="pytest -k expression")
    ap.add_argument("--pairs", type=int, default=5, help="pairs of runs (default 5, at least 2)")
    ap.add_argument("--threshold", type=float, default=0.05,
                    help="relative change that counts (default 0.05)")
    ap.add_argument("--stat", choices=STATS, default="median",
                    help="each run's statistic of a benchmark's round times (default median; "
                         "min is steadier for short benchmarks on a loaded machine)")
    ap.add_argument("--confidence", type=float, default=0.95, help="interval level (0.95)")
    ap.add_argument("--fail-on-slower", action="store_true",
                    help="exit 1 when a benchmark is slower")
    ap.add_argument("--bench-from", choices=SIDES, default="new",
                    help="whose bench/ files both sides run (default: the working tree's)")
    ap.add_argument("--bench-path", action="append", default=None, metavar="PATH",
                    help="what pytest collects, under bench/ (repeatable; default: bench)")
    ap.add_argument("--json", type=Path, default=None, help="write the comparison as JSON here")
    ap.add_argument("--save-runs", type=Path, default=None,
                    help="keep each run's pytest-benchmark JSON in this folder")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    ap.add_argument("--cache-dir", type=Path, default=cache / "aryl" / "bench-compare",
                    help="wheel cache (default: $XDG_CACHE_HOME/aryl/bench-compare)")
    for side in SIDES:
        ap.add_argument(f"--{side}-wheel", type=Path, default=None, metavar="WHEEL",
                        help=f"a wheel built from the {side} side's tree, used instead of "
                             "building it (checked against the tree)")
    ap.add_argument("extra", nargs="*", help="after --: more pytest arguments")
    args = ap.parse_args(argv)
    args.bench_path = args.bench_path or ["bench"]
    for p in args.bench_path:
        parts = Path(p).parts
        if not parts or parts[0] != "bench" or ".." in parts:
            ap.error(f"--bench-path {p!r} is not under bench/")
    if args.json is not None and not args.json.resolve().parent.is_dir():
        ap.error(f"--json {args.json}: folder {args.json.resolve().parent} does not exist")
    if args.pairs < 2:
        ap.error(f"--pairs must be at least 2, got {args.pairs}")
    if not (args.threshold > 0 and math.isfinite(args.threshold)):
        ap.error(f"--threshold must be a positive number, got {args.threshold}")
    if not (0 < args.confidence < 1):
        ap.error(f"--confidence must be in (0, 1), got {args.confidence}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison; returns the exit status (see the module docstring)."""
    args = _parse(argv)
    log = sys.stderr
    try:
        base_commit, base_tree = ref_tree(args.base)
        new_tree = working_tree()
        one_build = build_key(new_tree) == build_key(base_tree)
        same = ("; the same tree: one build" if new_tree == base_tree else
                "; they differ only in folders no build reads: one build" if one_build else "")
        print(f"base {args.base} = {base_commit[:10]} (tree {base_tree[:10]}), "
              f"new = working tree (tree {new_tree[:10]}){same}", file=log)
        bench_tree = base_tree if args.bench_from == "base" else new_tree
        for p in args.bench_path:  # before any build
            if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e",
                               f"{bench_tree}:{Path(p).as_posix().rstrip('/')}"],
                              capture_output=True, check=False).returncode != 0:
                raise CompareError(f"--bench-path {p!r}: not in the {args.bench_from} "
                                   "side's tree", 2)
        trees = {"base": base_tree, "new": new_tree}
        given: dict[str, Path] = {}
        for side in SIDES:  # before any build
            wheel = getattr(args, f"{side}_wheel")
            if wheel is not None:
                check_wheel(wheel, trees[side], f"--{side}-wheel")
                given[side] = wheel
                print(f"  {side}: the given wheel {wheel.name}", file=log)
        if one_build and len(given) == 1:  # one build serves both sides
            given = dict.fromkeys(SIDES, next(iter(given.values())))
        with tempfile.TemporaryDirectory(prefix="aryl-compare-") as tmp:
            scratch = Path(tmp)
            wheels = dict(given)
            if "base" not in wheels:
                wheels["base"] = build_wheel(base_tree, args.cache_dir, scratch, log)
            if "new" not in wheels:
                wheels["new"] = (wheels["base"] if one_build else
                                 build_wheel(new_tree, args.cache_dir, scratch, log))
            pys = {side: make_env(scratch / f"venv-{side}", wheels[side], log) for side in SIDES}
            bench_root = scratch / "bench-src"
            bench_root.mkdir()
            # the benchmarks and what they import from the docs (the guide's example
            # policies, bench_policies.py), where the tree has them
            paths = ["bench", "pyproject.toml"] + [
                p for p in ("docs/examples",)
                if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{bench_tree}:{p}"],
                                  capture_output=True, check=False).returncode == 0]
            archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar",
                                      bench_tree, *paths],
                                     capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(bench_root)], input=archive.stdout,
                           check=True)
            runs: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
            for i, order in enumerate(run_order(args.pairs), start=1):
                for side in order:
                    out = scratch / f"{side}-{i}.json"
                    t0 = time.perf_counter()
                    runs[side].append(run_benchmarks(pys[side], bench_root, args.bench_path,
                                                     args.select, args.extra, out, args.stat))
                    print(f"  pair {i}/{args.pairs}: {side} run in "
                          f"{time.perf_counter() - t0:.0f} s", file=log, flush=True)
                    if args.save_runs is not None:
                        args.save_runs.mkdir(parents=True, exist_ok=True)
                        shutil.copy(out, args.save_runs / out.name)
        rows = compare_runs(runs["base"], runs["new"], threshold=args.threshold,
                            confidence=args.confidence)
    except CompareError as exc:
        print(f"compare: {exc}", file=log)
        return exc.status
    print(f"new = working tree {new_tree[:10]} against base {args.base} ({base_commit[:10]}); "
          f"{args.pairs} pairs, order alternating; ratio new/old of {args.stat} round times; "
          f"threshold {args.threshold:g}")
    print(format_table(rows, args.confidence))
    if args.json is not None:
        doc = {"base": {"ref": args.base, "commit": base_commit, "tree": base_tree},
               "new": {"tree": new_tree}, "pairs": args.pairs, "threshold": args.threshold,
               "confidence": args.confidence, "select": args.select, "stat": args.stat,
               "benchmarks": [asdict(r) for r in rows]}
        tmp_json = args.json.with_name(f".{args.json.name}.tmp")
        tmp_json.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp_json, args.json)
    if args.fail_on_slower and any(r.verdict == "slower" for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
