"""The package's import graph has no cycle, and layers point one way.

Every ``import`` and ``from ... import`` statement of every module under
``src/aryl`` counts — at module level, inside functions (lazy imports) and under
``TYPE_CHECKING`` — because a lazy import that closes a loop is still a loop in
the design.  ``from aryl.x import y`` is an edge to ``aryl.x.y`` when that is a
module, else to ``aryl.x``.  (A package's ``__init__`` being run on the way to a
submodule is not counted: it is how Python imports, not a dependency.)

Layers, bottom to top (an arrow may only point down or sideways within a layer):
kernels and models (``aryl.errors``, ``aryl._limits``, ``aryl._core``, ``aryl._reference``,
``aryl.elastic``, ``aryl.reclaiming``, ``aryl._io``, ``aryl.speeds``, ``aryl.cluster``) <-
the scheduling pass (``aryl.scheduling``) <-
the simulator (``aryl.sim``) <- the Kubernetes controller (``aryl.k8s``) <- experiments and
the command line.  Nothing but the command line imports ``aryl.k8s`` (its ``kubernetes``
dependency is optional).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import aryl

SRC = Path(aryl.__file__).resolve().parent
# the installed package may be the wheel's copy: read the sources next to this test
# when they exist (an editable install or a checkout)
_CHECKOUT = Path(__file__).resolve().parents[1] / "src" / "aryl"
if _CHECKOUT.is_dir():
    SRC = _CHECKOUT


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


@functools.cache  # parsed once for the module's tests, which only read it
def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        package = mod if is_pkg else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                targets = [
                    f"{origin}.{a.name}" if f"{origin}.{a.name}" in mods else origin
                    for a in node.names
                ]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod and t.startswith("aryl"):
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(g) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle() -> None:
    graph = _graph()
    assert len(graph) > 40  # the whole package was read
    assert _cycles(graph) == []


_LAYERS = [
    ("kernels", ("aryl.errors", "aryl._limits", "aryl._core", "aryl._reference", "aryl.elastic",
                 "aryl.reclaiming", "aryl._io", "aryl._format", "aryl.speeds", "aryl.cluster")),
    ("scheduling", ("aryl.scheduling",)),
    ("traces", ("aryl.traces",)),
    ("simulator", ("aryl.sim",)),
    ("kubernetes", ("aryl.k8s",)),
    ("top", ("aryl.experiment", "aryl.sweep", "aryl.cli", "aryl")),
]


def _layer(mod: str) -> int:
    best = -1
    best_len = -1
    for i, (_, prefixes) in enumerate(_LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def test_layers_point_down() -> None:
    graph = _graph()
    wrong = []
    for mod, deps in graph.items():
        lm = _layer(mod)
        assert lm >= 0, f"{mod} belongs to no layer"
        for d in deps:
            if _layer(d) > lm:
                wrong.append(f"{mod} -> {d}")
    assert wrong == []


def test_only_the_cli_imports_the_kubernetes_controller() -> None:
    graph = _graph()
    users = sorted(m for m, deps in graph.items() if not m.startswith("aryl.k8s")
                   and any(d == "aryl.k8s" or d.startswith("aryl.k8s.") for d in deps))
    assert all(m == "aryl.cli.k8s" for m in users), users


def test_the_kubernetes_client_is_imported_lazily() -> None:
    """No module of aryl imports ``kubernetes`` at module level (it is an optional extra)."""
    bad = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n == "kubernetes" or n.startswith("kubernetes.") for n in names):
                bad.append(str(path.relative_to(SRC)))
    assert bad == []
