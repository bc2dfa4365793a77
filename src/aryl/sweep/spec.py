"""Sweep specifications: a TOML file naming the replays of a study.

A spec has up to five tables (docs/sweep.md has the full reference)::

    [sweep]                       # optional: name, description
    name = "reclaim"

    [grid]                        # the product of every list below
    trace = ["itp-c10", {source = "jobs.csv", window = "busiest-15d", label = "mine"}]
    policy = ["fifo", "aryl"]
    seed = [0, 1, 2, 3, 4]
    reclaim_policy = ["aryl", "random"]      # any SimConfig field
    policy_options = {return_idle_loans = [true, false]}

    [[run]]                       # extra runs: keys replace the [grid]'s, lists multiply
    policy = "elastic-greedy"
    tags = {section = "peers"}

    [measures]                    # extra measures, computed at report time
    gpu_hours = "gpu_s_allocated / 3600"

    [report]
    baseline = "fifo"
    measures = ["mean_queuing_delay_s", "mean_jct_s", "cluster_usage", "gpu_hours"]

Every key of ``[grid]`` or ``[[run]]`` holds one value or a list of values; the
runs of a table are the product of its lists.  A ``[[run]]`` table starts from
the ``[grid]``'s keys (lists included) and replaces those it names.  Keys are
the run axes of :data:`AXES` and every field of :class:`aryl.sim.SimConfig`
(read from the dataclass, so new fields are sweepable at once).

Validation happens here, before anything runs: every error names the file, the
table and the key (an unknown key gets the closest known name).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import itertools
import math
import os
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aryl.errors import InvalidInputError

if sys.version_info >= (3, 11):  # pragma: no cover - version dependent
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "AXES",
    "MAX_SWEEP_RUNS",
    "RunRequest",
    "SweepSpec",
    "TraceRef",
    "bundled_spec",
    "load_spec",
    "parse_spec",
    "read_spec_data",
]

#: Run axes that are not :class:`~aryl.sim.SimConfig` fields, with their defaults
#: (``trace`` and ``policy`` are required).  ``tags`` labels runs for reports and is
#: not part of a run.
AXES: dict[str, Any] = {
    "trace": None,
    "policy": None,
    "seed": 0,
    "policy_options": {},
    "elastic_fraction": 0.5,
    "elastic_worker_gpus": "one",
    "peak_utilisation": 0.9,
    "inference": "bundled",
    "training_servers_x": 1.0,
    "inference_ratio": None,
    "tags": {},
}

#: Most runs a spec may expand to (its grids' sizes are checked before they are
#: built: a few long axes multiply to more runs than memory holds).
MAX_SWEEP_RUNS = 100_000

#: SimConfig fields with a different default in a sweep (the event log is not kept).
SWEEP_CONFIG_DEFAULTS: dict[str, Any] = {"record_events": False}

#: SimConfig fields that are axes of their own or resolved by the sweep.
_NOT_CONFIG = {"seed"}
_REQUIRED = ("trace", "policy")
_AUTO_FIELDS = {"n_training_servers", "n_inference_servers"}

_TOP_KEYS = ("sweep", "grid", "run", "measures", "report")
_SWEEP_KEYS = ("name", "description")
_REPORT_KEYS = ("baseline", "measures")
_TRACE_KEYS = ("source", "window", "label")
_INFERENCE = ("bundled", "none")


@dataclasses.dataclass(frozen=True)
class TraceRef:
    """A trace of a sweep.

    Attributes
    ----------
    label : str
        Name in tables (default: the preset name or the file's stem).
    source : str
        Preset name, or an absolute path (relative paths in a spec are taken
        from the spec file's folder).
    window : str or None
        Passed to :func:`aryl.traces.load_trace`.
    """

    label: str
    source: str
    window: str | None = None


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """One point of a table's product, before cluster sizes are resolved.

    Attributes
    ----------
    group : int
        0 for ``[grid]``, ``i`` for the ``i``-th ``[[run]]`` table.
    tags : tuple of (str, scalar)
    trace : TraceRef
    policy : str
    policy_options : tuple of (str, Any), sorted by name
    seed : int
    elastic_fraction : float
        Share of jobs made elastic by :func:`aryl.traces.synthesize_elastic`.
    elastic_worker_gpus : {"one", "split"}
        GPUs per worker of an elastic job
        (:func:`aryl.traces.elastic.elastic_gpus_per_worker`).
    peak_utilisation : float
        Peak of the bundled inference profile, as a share of inference servers.
    inference : {"bundled", "none"}
    training_servers_x : float
        Multiplies the training servers (after ``auto`` sizing).
    inference_ratio : float or None
        Inference servers per training server, instead of ``n_inference_servers``.
    config : tuple of (str, Any)
        :class:`~aryl.sim.SimConfig` values (``n_*_servers`` may be ``"auto"``),
        the sweep defaults included.
    explicit : tuple of str
        Keys the spec set for this run (for labels).
    serving : tuple of (str, Any)
        :class:`~aryl.sim.serving.ServingOptions` values the spec set (request-level
        inference; empty: the run has none), sorted by name.
    """

    group: int
    tags: tuple[tuple[str, Any], ...]
    trace: TraceRef
    policy: str
    policy_options: tuple[tuple[str, Any], ...]
    seed: int
    elastic_fraction: float
    peak_utilisation: float
    inference: str
    training_servers_x: float
    inference_ratio: float | None
    config: tuple[tuple[str, Any], ...]
    explicit: tuple[str, ...] = ()
    elastic_worker_gpus: str = "one"
    serving: tuple[tuple[str, Any], ...] = ()


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A validated sweep specification.

    Attributes
    ----------
    name : str
    description : str
    origin : str
        File the spec came from (for messages).
    data : dict
        The spec as read (JSON-serialisable), kept with the results.
    requests : list of RunRequest
        Every run of every table, in spec order (duplicates kept).
    measures : dict of str to str
        Extra measures: name -> expression over the measures of a run.
    report_measures : list of str or None
        Measures shown by ``aryl sweep report`` (None: a default set).
    baseline : str or None
        Policy that ratios are taken against.
    """

    name: str
    description: str
    origin: str
    data: dict[str, Any]
    requests: list[RunRequest]
    measures: dict[str, str]
    report_measures: list[str] | None
    baseline: str | None


# --------------------------------------------------------------------------- reading


def read_spec_data(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The TOML of a spec file as a dict.

    Raises
    ------
    InvalidInputError
        Missing file or a TOML syntax error (with the line and column).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InvalidInputError(f"{p}: no such sweep spec") from None
    except OSError as exc:
        raise InvalidInputError(f"{p}: cannot read the sweep spec ({exc.strerror})") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInputError(f"{p}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"{p}: not valid TOML: {exc}") from None


def load_spec(path: str | os.PathLike[str]) -> SweepSpec:
    """Read and validate a sweep spec file.

    Parameters
    ----------
    path : str or os.PathLike
        TOML file; relative trace paths inside are taken from its folder.

    Returns
    -------
    SweepSpec

    Raises
    ------
    InvalidInputError
        Bad TOML, an unknown key (the message names the closest known key),
        a value of the wrong type or out of range, an unknown policy or trace.
    """
    p = Path(path)
    return parse_spec(read_spec_data(p), origin=str(p), base_dir=p.resolve().parent)


def bundled_spec(name: str) -> Path:
    """Path of a spec shipped with the package (``aryl/data/sweeps/NAME.toml``).

    Raises
    ------
    InvalidInputError
        No such bundled spec (the message lists them).
    """
    from importlib import resources

    root = Path(str(resources.files("aryl") / "data" / "sweeps"))
    path = root / f"{name}.toml"
    if not path.is_file():
        known = sorted(q.stem for q in root.glob("*.toml"))
        raise InvalidInputError(f"spec: no bundled sweep {name!r}; bundled: {known}")
    return path


def _closest(name: str, known: Sequence[str]) -> str:
    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else f"; known keys: {', '.join(known)}"


def _unknown(where: str, name: str, known: Sequence[str]) -> InvalidInputError:
    return InvalidInputError(f"{where}.{name}: unknown key{_closest(name, known)}")


def _request_path(v: str, base_dir: Path) -> str:
    """A request or load-latency file relative to the spec's folder (a preset as is)."""
    from aryl.traces.requests import REQUEST_PRESETS

    if v in REQUEST_PRESETS or Path(v).is_absolute():
        return v
    return str((base_dir / v).resolve())


def serving_types() -> dict[str, Any]:
    """Sweep keys of request-level inference: the fields of ``ServingOptions``."""
    from aryl.sim.serving import ServingOptions

    hints = typing.get_type_hints(ServingOptions)
    return {f.name: hints[f.name] for f in dataclasses.fields(ServingOptions)}


def _config_types() -> dict[str, Any]:
    from aryl.sim.config import SimConfig

    hints = typing.get_type_hints(SimConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(SimConfig)}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _check_typed(where: str, value: Any, tp: Any) -> Any:
    """``value`` checked against a type annotation (int, float, str, bool, X | None)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if type(None) in args:
            if isinstance(value, str) and value.lower() == "none":
                return None
            rest = [a for a in args if a is not type(None)]
            if len(rest) == 1:
                return _check_typed(where, value, rest[0])
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise InvalidInputError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if not _is_int(value):
            raise InvalidInputError(f"{where}: expected an integer, got {value!r}")
        return int(value)
    if tp is float:
        if not _is_number(value):
            raise InvalidInputError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise InvalidInputError(f"{where}: expected a string, got {value!r}")
        return value
    return value  # other annotations: SimConfig's own checks decide


def _alternatives(where: str, value: Any) -> list[Any]:
    """A key's values: a list is a list of alternatives, anything else one value."""
    if isinstance(value, list):
        if not value:
            raise InvalidInputError(f"{where}: empty list (nothing to run)")
        return list(value)
    return [value]


def _float_in(where: str, v: Any, lo: float, hi: float, *, lo_open: bool = False) -> float:
    if not _is_number(v) or not math.isfinite(float(v)):
        raise InvalidInputError(f"{where}: expected a finite number, got {v!r}")
    x = float(v)
    if x < lo or x > hi or (lo_open and x == lo):
        left = "(" if lo_open else "["
        raise InvalidInputError(f"{where}: must be in {left}{lo:g}, {hi:g}], got {v!r}")
    return x


def _trace_ref(where: str, v: Any, base_dir: Path) -> TraceRef:
    from aryl.traces import PRESETS

    if isinstance(v, str):
        v = {"source": v}
    if not isinstance(v, dict):
        raise InvalidInputError(
            f"{where}: expected a preset name, a path or a table {{source, window, label}}, "
            f"got {v!r}"
        )
    for k in v:
        if k not in _TRACE_KEYS:
            raise _unknown(where, k, _TRACE_KEYS)
    source = v.get("source")
    if not isinstance(source, str) or not source:
        raise InvalidInputError(f"{where}.source: required (a preset name or a path)")
    window = v.get("window")
    if window is not None and not isinstance(window, str):
        raise InvalidInputError(f"{where}.window: expected a string, got {window!r}")
    label = v.get("label")
    if label is not None and (not isinstance(label, str) or not label):
        raise InvalidInputError(f"{where}.label: expected a non-empty string, got {label!r}")
    if source in PRESETS:
        return TraceRef(label or source, source, window)
    path = Path(source).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        raise InvalidInputError(
            f"{where}: {source!r} is neither a preset ({_closest_preset(source)}) "
            f"nor a file (looked for {path})"
        )
    name = path.name
    for suffix in (".gz", ".csv", ".parquet", ".pq"):
        name = name.removesuffix(suffix)
    return TraceRef(label or name, str(path.resolve()), window)


def _closest_preset(source: str) -> str:
    from aryl.traces import PRESETS

    m = difflib.get_close_matches(source, sorted(PRESETS), n=1, cutoff=0.6)
    return f"did you mean {m[0]!r}?" if m else f"presets: {', '.join(sorted(PRESETS))}"


def _scalar_table(where: str, v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise InvalidInputError(f"{where}: expected a table, got {v!r}")
    for k, x in v.items():
        if not isinstance(x, str | int | float | bool):
            raise InvalidInputError(f"{where}.{k}: expected a string, number or boolean")
    return dict(v)


def _check_measures(where: str, v: Any) -> dict[str, str]:
    if not isinstance(v, dict):
        raise InvalidInputError(f"{where}: expected a table of name = \"expression\"")
    out: dict[str, str] = {}
    for name, expr in v.items():
        if not name.isidentifier():
            raise InvalidInputError(f"{where}.{name}: a measure name must be an identifier")
        if not isinstance(expr, str):
            raise InvalidInputError(f"{where}.{name}: expected an expression string")
        try:
            tree = ast.parse(expr, mode="eval")
        except SyntaxError as exc:
            raise InvalidInputError(
                f"{where}.{name}: bad expression {expr!r} ({exc.msg})"
            ) from None
        allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant,
                   ast.operator, ast.unaryop)
        for node in ast.walk(tree):
            if not isinstance(node, allowed):
                raise InvalidInputError(
                    f"{where}.{name}: only arithmetic (+ - * / ** and parentheses) on measure "
                    f"names and numbers is allowed in {expr!r}"
                )
        out[name] = expr
    return out


# --------------------------------------------------------------------------- expansion


def _expand(
    where: str,
    table: Mapping[str, Any],
    group: int,
    base_dir: Path,
    config_types: dict[str, Any],
    policies: Sequence[str],
    explicit: Sequence[str],
    own: Sequence[str],
    already: int = 0,
) -> list[RunRequest]:
    serving_keys = serving_types()
    known = [*AXES, *(f for f in config_types if f not in _NOT_CONFIG), *serving_keys]
    for k in table:
        if k not in known:
            raise _unknown(where, k, known)
    for k in _REQUIRED:
        if k not in table:
            raise InvalidInputError(f"{where}.{k}: required")
    tags = _scalar_table(f"{where}.tags", table.get("tags", {}))
    if "n_inference_servers" in own and "inference_ratio" in own:
        raise InvalidInputError(f"{where}: set n_inference_servers or inference_ratio, not both")
    axes: list[tuple[str, list[Any]]] = []
    ends = ("trace", "policy", "seed", "tags", "policy_options")
    middle = [k for k in table if k not in ends]
    middle += [k for k in AXES if k not in middle and k not in ends]
    for k in ["trace", "policy", *middle, "policy_options", "seed"]:
        raw = table.get(k, AXES.get(k))
        w = f"{where}.{k}"
        if k == "policy_options":
            axes.append((k, _option_alternatives(w, raw)))
            continue
        vals = []
        for i, v in enumerate(_alternatives(w, raw)):
            wi = f"{w}[{i}]" if isinstance(raw, list) else w
            if k in serving_keys:
                v = _check_typed(wi, v, serving_keys[k])
                if k in ("inference_requests", "cold_start_trace") and isinstance(v, str):
                    v = _request_path(v, base_dir)
                vals.append(v)
            else:
                vals.append(_check_axis(wi, k, v, base_dir, config_types, policies))
        axes.append((k, vals))
    defaults = {k: v for k, v in SWEEP_CONFIG_DEFAULTS.items() if k not in table}
    # the grid's size before it is built (a product of long axes is huge)
    n_runs = math.prod(len(vals) for _, vals in axes)
    if already + n_runs > MAX_SWEEP_RUNS:
        sizes = " x ".join(f"{k} {len(vals)}" for k, vals in axes if len(vals) > 1)
        raise InvalidInputError(
            f"{where}: {n_runs:,} runs ({sizes or 'one value per axis'})"
            + (f" after {already:,} of the tables before" if already else "")
            + f" exceed the {MAX_SWEEP_RUNS:,} runs a spec may hold; shorten an axis or split "
            "the spec")
    out = []
    names = [k for k, _ in axes]
    for combo in itertools.product(*(vals for _, vals in axes)):
        point = dict(zip(names, combo, strict=True))
        config = {**defaults, **{k: v for k, v in point.items() if k in config_types}}
        serving = {k: v for k, v in point.items() if k in serving_keys}
        if serving:
            from aryl.sim.serving import ServingOptions

            try:
                ServingOptions(**serving)
            except InvalidInputError as exc:
                raise InvalidInputError(f"{where}.{exc}") from None
            if "inference_requests" not in serving:
                raise InvalidInputError(
                    f"{where}: {', '.join(sorted(serving))} need inference_requests")
        out.append(
            RunRequest(
                group=group,
                tags=tuple(tags.items()),
                trace=point["trace"],
                policy=point["policy"],
                policy_options=tuple(sorted(point["policy_options"].items())),
                seed=point["seed"],
                elastic_fraction=point["elastic_fraction"],
                elastic_worker_gpus=point["elastic_worker_gpus"],
                peak_utilisation=point["peak_utilisation"],
                inference=point["inference"],
                training_servers_x=point["training_servers_x"],
                inference_ratio=point["inference_ratio"],
                config=tuple(config.items()),
                explicit=tuple(explicit),
                serving=tuple(sorted(serving.items())),
            )
        )
    return out


def _option_alternatives(where: str, raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, dict):
        raise InvalidInputError(
            f"{where}: expected a table of option = value or [values], got {raw!r}"
        )
    names = list(raw)
    lists = []
    for k in names:
        vals = _alternatives(f"{where}.{k}", raw[k])
        for v in vals:
            if isinstance(v, dict):
                raise InvalidInputError(f"{where}.{k}: expected a value or a list of values")
        lists.append(vals)
    n = math.prod(len(v) for v in lists)
    if n > MAX_SWEEP_RUNS:
        raise InvalidInputError(
            f"{where}: {n:,} combinations of options exceed the {MAX_SWEEP_RUNS:,} runs a "
            "spec may hold; shorten a list")
    return [dict(zip(names, c, strict=True)) for c in itertools.product(*lists)]


def _entry_points() -> dict[str, Any]:
    from aryl.scheduling.registry import entry_point_policies

    return entry_point_policies()


def _check_axis(
    where: str,
    key: str,
    v: Any,
    base_dir: Path,
    config_types: dict[str, Any],
    policies: Sequence[str],
) -> Any:
    if key == "trace":
        return _trace_ref(where, v, base_dir)
    if key == "policy":
        if not isinstance(v, str):
            raise InvalidInputError(f"{where}: expected a policy name, got {v!r}")
        if v not in policies and (":" in v or v in _entry_points()):
            from aryl.scheduling.registry import load_policy_class

            try:  # a Python policy: importable now (docs/policies.md)
                load_policy_class(v)
            except InvalidInputError as exc:
                raise InvalidInputError(f"{where}: {exc}") from None
            return v
        if v not in policies:
            m = difflib.get_close_matches(v, list(policies), n=1, cutoff=0.6)
            hint = f"did you mean {m[0]!r}?" if m else f"choose from {', '.join(policies)}"
            raise InvalidInputError(f"{where}: unknown policy {v!r}; {hint}")
        return v
    if key == "seed":
        if not _is_int(v) or v < 0:
            raise InvalidInputError(f"{where}: expected an integer >= 0, got {v!r}")
        return int(v)
    if key == "elastic_fraction":
        return _float_in(where, v, 0.0, 1.0)
    if key == "elastic_worker_gpus":
        from aryl.traces.elastic import ELASTIC_WORKER_GPUS

        if v not in ELASTIC_WORKER_GPUS:
            raise InvalidInputError(
                f"{where}: expected one of {list(ELASTIC_WORKER_GPUS)}, got {v!r}")
        return v
    if key == "peak_utilisation":
        return _float_in(where, v, 0.0, 1.0, lo_open=True)
    if key == "inference":
        if v not in _INFERENCE:
            raise InvalidInputError(f"{where}: expected one of {list(_INFERENCE)}, got {v!r}")
        return v
    if key == "training_servers_x":
        return _float_in(where, v, 0.0, 1e6, lo_open=True)
    if key == "inference_ratio":
        if v is None or (isinstance(v, str) and v.lower() == "none"):
            return None
        return _float_in(where, v, 0.0, 1e6)
    if key in _AUTO_FIELDS:
        if v == "auto":
            return "auto"
        lo = 1 if key == "n_training_servers" else 0
        if not _is_int(v) or v < lo:
            raise InvalidInputError(f"{where}: expected \"auto\" or an integer >= {lo}, got {v!r}")
        return int(v)
    return _check_typed(where, v, config_types[key])


def parse_spec(
    data: Mapping[str, Any],
    *,
    origin: str = "<spec>",
    base_dir: str | os.PathLike[str] | None = None,
) -> SweepSpec:
    """Validate a spec given as a dict (the TOML's content).

    Parameters
    ----------
    data : mapping
        Tables ``sweep``, ``grid``, ``run`` (a list of tables), ``measures``,
        ``report``.
    origin : str
        Named in every error message.
    base_dir : path, optional
        Folder that relative trace paths are taken from (default: the working
        directory).

    Returns
    -------
    SweepSpec

    Raises
    ------
    InvalidInputError
        The message starts with ``origin`` and the table and key at fault.

    Notes
    -----
    Every value is checked, and a :class:`~aryl.sim.SimConfig` is built for
    every combination of configuration values (so a range error names the
    field), before any replay runs.  O(number of runs).
    """
    from aryl.scheduling import available_policies
    from aryl.scheduling.registry import twin_policies
    from aryl.sim.config import SimConfig

    where0 = f"{origin}:"
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{where0} expected a table")
    for k in data:
        if k not in _TOP_KEYS:
            raise InvalidInputError(f"{origin}: [{k}]: unknown table{_closest(k, _TOP_KEYS)}")
    meta = data.get("sweep", {})
    if not isinstance(meta, dict):
        raise InvalidInputError(f"{origin}: [sweep]: expected a table")
    for k in meta:
        if k not in _SWEEP_KEYS:
            raise _unknown(f"{origin}: [sweep]", k, _SWEEP_KEYS)
    for k in _SWEEP_KEYS:
        if k in meta and not isinstance(meta[k], str):
            raise InvalidInputError(f"{origin}: [sweep].{k}: expected a string")
    config_types = _config_types()
    # the registered names and their Python twins through the callback (aryl-twin...):
    # the names `aryl replay/compare --policies` take
    policies = [*available_policies(), *twin_policies()]
    grid = data.get("grid")
    runs = data.get("run", [])
    if grid is not None and not isinstance(grid, dict):
        raise InvalidInputError(f"{origin}: [grid]: expected a table")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise InvalidInputError(f"{origin}: [[run]]: expected an array of tables")
    if grid is None and not runs:
        raise InvalidInputError(f"{origin}: no [grid] and no [[run]] table: nothing to run")
    requests: list[RunRequest] = []
    def varying(table: Mapping[str, Any]) -> list[str]:
        return [k for k, v in table.items() if isinstance(v, list) and len(v) > 1]

    if grid is not None:
        requests += _expand(f"{origin}: [grid]", grid, 0, base, config_types, policies,
                            varying(grid), list(grid), len(requests))
    for i, run in enumerate(runs, start=1):
        merged = {**(grid or {}), **run}
        explicit = [*run, *(k for k in varying(merged) if k not in run)]
        # a run's inference_ratio replaces the grid's server count, and the other way round
        if "inference_ratio" in run and "n_inference_servers" not in run:
            merged.pop("n_inference_servers", None)
        if "n_inference_servers" in run and "inference_ratio" not in run:
            merged.pop("inference_ratio", None)
        requests += _expand(f"{origin}: [[run]] #{i}", merged, i, base, config_types,
                            policies, explicit, list(run), len(requests))
    # every configuration must build (range checks name the field)
    seen: set[tuple[tuple[str, Any], ...]] = set()
    for r in requests:
        if r.config in seen:
            continue
        seen.add(r.config)
        # "auto" stands for a size >= 1 here; with a cluster spec, for the spec's own counts
        clustered = dict(r.config).get("cluster") is not None
        cfg: dict[str, Any] = {
            k: ((getattr(SimConfig, k) if clustered else 1)
                if v == "auto" and k in _AUTO_FIELDS else v)
            for k, v in r.config}
        try:
            SimConfig(**cfg)
        except InvalidInputError as exc:
            table = "[grid]" if r.group == 0 else f"[[run]] #{r.group}"
            raise InvalidInputError(f"{origin}: {table}.{exc}") from None
    measures = _check_measures(f"{origin}: [measures]", data.get("measures", {}))
    report = data.get("report", {})
    if not isinstance(report, dict):
        raise InvalidInputError(f"{origin}: [report]: expected a table")
    for k in report:
        if k not in _REPORT_KEYS:
            raise _unknown(f"{origin}: [report]", k, _REPORT_KEYS)
    baseline = report.get("baseline")
    if baseline is not None and baseline not in policies and not (
            isinstance(baseline, str) and baseline in {r.policy for r in requests}):
        raise InvalidInputError(
            f"{origin}: [report].baseline: unknown policy {baseline!r}"
            f"{_closest(str(baseline), policies)}"
        )
    report_measures = report.get("measures")
    if report_measures is not None and (
        not isinstance(report_measures, list)
        or not all(isinstance(m, str) for m in report_measures)
    ):
        raise InvalidInputError(f"{origin}: [report].measures: expected a list of names")
    return SweepSpec(
        name=str(meta.get("name", Path(origin).stem)),
        description=str(meta.get("description", "")),
        origin=origin,
        data=_jsonable(data),
        requests=requests,
        measures=measures,
        report_measures=report_measures,
        baseline=baseline,
    )


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, str | int | float | bool) or v is None:
        return v
    return str(v)  # TOML dates and times
