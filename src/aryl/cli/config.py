"""Every knob of a replay from the command line: ``--set``, ``--config``, ``--show-config``.

The knobs are the fields of three dataclasses, read generically (a field
added to one of them is settable, validated and documented with no other
change):

* ``sim`` — :class:`aryl.sim.SimConfig` (cluster, overheads, loans, reclaim, ...);
* ``input`` — :class:`InputOptions` (elastic synthesis and inference demand);
* ``policy`` — :class:`PolicyOptions` (options the policies read);
* ``serving`` — :class:`aryl.sim.serving.ServingOptions` (request-level
  inference: request trace, autoscaler, cold starts; replay and compare).

A knob is named by its field name (``rescale_pause_s``) or qualified by its
section (``sim.rescale_pause_s``); field names are unique across sections.
Values come from, in increasing precedence: the dataclass defaults, a TOML
file (``--config run.toml``: top-level keys, or ``[sim]`` / ``[input]`` /
``[policy]`` tables), ``--set NAME=VALUE`` (repeatable; the last one of a name
wins) and the dedicated options of a command (``--seed``,
``--training-servers``, ...) when they are given.  Every value is checked
against its field's type and range before any trace is read; an error names
the field and where the value came from, and an unknown name suggests the
closest known one.

``aryl config`` lists the knobs; ``aryl config --markdown`` writes
``docs/configuration.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import inspect
import json
import math
import sys
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from aryl.errors import InvalidInputError
from aryl.sim.config import SimConfig
from aryl.sim.serving import ServingOptions

__all__ = [
    "AUTO",
    "InputOptions",
    "Knob",
    "PolicyOptions",
    "RunConfig",
    "config_command",
    "knobs",
    "render_markdown",
    "resolve",
]

AUTO = "auto"
#: SimConfig fields that also take ``auto`` (sized from the trace, see docs/simulator.md).
AUTO_FIELDS = ("n_training_servers", "n_inference_servers")
INFERENCE_SPECS = ("bundled", "diurnal", "none")


@dataclass(frozen=True)
class InputOptions:
    """How the replay input is built from the trace (not part of :class:`SimConfig`).

    Attributes
    ----------
    elastic_fraction : float
        Share of the jobs made elastic (0 to 1, exact count, seeded by ``seed``):
        an elastic job runs between half and twice its traced GPUs, one GPU per
        worker unless ``elastic_worker_gpus`` says otherwise; the others keep
        their traced size (docs/model.md).
    elastic_worker_gpus : str
        GPUs per worker of an elastic job: ``one`` (every worker one GPU) or
        ``split`` (the traced GPUs split into at least two whole workers of 8, 4
        or 2 GPUs: the largest that divides them, so 4 -> 2 x 2, 8 -> 2 x 4,
        16 -> 2 x 8, and 1 or 2 GPUs stay one-GPU workers), so that the MCKP's
        extra workers weigh 1, 2, 4 or 8 GPUs (docs/model.md).
    alpha_low, alpha_high : float
        Each job's throughput parameter ``alpha`` is drawn uniformly from
        ``[alpha_low, alpha_high]`` (``T(w) = w / (1 + alpha (w - 1))``;
        ``0 <= alpha_low <= alpha_high <= 1``).
    inference : str
        Inference demand: ``bundled`` (the bundled day profile, tiled daily),
        ``diurnal`` (a seeded sine-like day), ``none`` (no demand: every
        inference server idle and loanable) or the path of a CSV
        ``time_s,servers_needed``.
    peak_utilisation : float
        Share of the inference servers that the ``bundled`` or ``diurnal``
        demand needs at its daily peak, in (0, 1].
    """

    elastic_fraction: float = 0.5
    elastic_worker_gpus: str = "one"
    alpha_low: float = 0.02
    alpha_high: float = 0.2
    inference: str = "bundled"
    peak_utilisation: float = 0.9

    def __post_init__(self) -> None:
        if not 0.0 <= self.elastic_fraction <= 1.0:
            raise InvalidInputError("elastic_fraction: must be in [0, 1]")
        from aryl.traces.elastic import ELASTIC_WORKER_GPUS

        if self.elastic_worker_gpus not in ELASTIC_WORKER_GPUS:
            raise InvalidInputError(
                f"elastic_worker_gpus: expected {' or '.join(map(repr, ELASTIC_WORKER_GPUS))}, "
                f"got {self.elastic_worker_gpus!r}")
        if not 0.0 <= self.alpha_low <= 1.0:
            raise InvalidInputError("alpha_low: must be in [0, 1]")
        if not 0.0 <= self.alpha_high <= 1.0:
            raise InvalidInputError("alpha_high: must be in [0, 1]")
        if self.alpha_low > self.alpha_high:
            raise InvalidInputError(
                f"alpha_low: must be <= alpha_high ({self.alpha_low:g} > {self.alpha_high:g})")
        if not 0.0 < self.peak_utilisation <= 1.0:
            raise InvalidInputError("peak_utilisation: must be in (0, 1]")
        if self.inference not in INFERENCE_SPECS and not Path(self.inference).is_file():
            raise InvalidInputError(
                f"inference: expected 'bundled', 'diurnal', 'none' or a CSV of "
                f"time_s,servers_needed, got {self.inference!r}")


@dataclass(frozen=True)
class PolicyOptions:
    """Options the policies read (each policy ignores the ones it does not use).

    Attributes
    ----------
    return_idle_loans : bool
        Loaning policies (``aryl``, ``aryl-no-elastic``) borrow only the idle
        inference servers a scheduling pass places a worker on and give back a
        loaned server as soon as no training worker is left on it; false keeps
        every borrowed server until it is reclaimed (``--keep-idle-loans``).
    las_thresholds_gpu_s : list of float
        ``tiresias``: attained-service thresholds (GPU-seconds) between its
        priority levels (default 1 and 10 GPU-hours).
    """

    return_idle_loans: bool = True
    las_thresholds_gpu_s: tuple[float, ...] = (3600.0, 36000.0)

    def __post_init__(self) -> None:
        th = self.las_thresholds_gpu_s
        if not th or not all(math.isfinite(x) and x > 0 for x in th):
            raise InvalidInputError("las_thresholds_gpu_s: must be one or more numbers > 0")
        if list(th) != sorted(th):
            raise InvalidInputError("las_thresholds_gpu_s: must be in increasing order")


SECTIONS: dict[str, type] = {"sim": SimConfig, "input": InputOptions, "policy": PolicyOptions,
                             "serving": ServingOptions}


@dataclass(frozen=True)
class Knob:
    """One settable field: section, name, type, default and its documentation."""

    section: str
    name: str
    type: Any
    default: Any
    doc: str

    @property
    def qualified(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def auto(self) -> bool:
        return self.section == "sim" and self.name in AUTO_FIELDS

    @property
    def type_text(self) -> str:
        text = _type_text(self.type)
        return f"{text} or auto" if self.auto else text


def _attribute_docs(cls: type) -> dict[str, str]:
    """Field name -> description, from the numpydoc ``Attributes`` section of ``cls``.

    An entry may document several fields (``a, b : float``); its description is
    the indented text below it, joined into one line.
    """
    doc = inspect.getdoc(cls) or ""
    lines = doc.splitlines()
    out: dict[str, str] = {}
    try:
        start = next(i for i, ln in enumerate(lines[:-1])
                     if ln.strip() == "Attributes" and set(lines[i + 1].strip()) == {"-"}) + 2
    except StopIteration:
        return out
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        for n in names:
            out[n] = " ".join(text)

    body = lines[start:]
    for i, ln in enumerate(body):
        if ln and not ln[0].isspace():
            if i + 1 < len(body) and body[i + 1].strip() and set(body[i + 1].strip()) == {"-"}:
                break  # the next section's title
            flush()
            names = [n.strip() for n in ln.split(" : ", 1)[0].split(",")]
            text = []
        elif ln.strip():
            text.append(ln.strip())
    flush()
    # one line each, with Markdown's single backquotes for code
    return {k: " ".join(v.split()).replace("``", "`") for k, v in out.items()}


def knobs() -> list[Knob]:
    """Every settable field of the three sections, in declaration order."""
    result = []
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        docs = _attribute_docs(cls)
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else None
            result.append(Knob(section, f.name, hints[f.name], default, docs.get(f.name, "")))
    return result


def _type_text(tp: Any) -> str:
    args = typing.get_args(tp)
    if _is_optional(tp):
        inner = [a for a in args if a is not type(None)]
        return f"{_type_text(inner[0])} or none"
    if typing.get_origin(tp) is tuple:
        return f"list of {_type_text(args[0])}"
    return getattr(tp, "__name__", str(tp))


def _is_optional(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return (origin is typing.Union or origin is types.UnionType) and \
        type(None) in typing.get_args(tp)


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def _parse_text(text: str, knob: Knob) -> Any:
    """Value of ``knob`` from a string (``--set``); ``ValueError`` says what was expected."""
    s = text.strip()
    if knob.auto and s.lower() == AUTO:
        return AUTO
    tp = knob.type
    if _is_optional(tp):
        if s.lower() in ("none", "null", ""):
            return None
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if tp is bool:
        if s.lower() in _TRUE:
            return True
        if s.lower() in _FALSE:
            return False
        raise ValueError(f"expected true or false, got {text!r}")
    if tp is int:
        try:
            return int(s)
        except ValueError:
            extra = " or 'auto'" if knob.auto else ""
            raise ValueError(f"expected a whole number{extra}, got {text!r}") from None
    if tp is float:
        try:
            return float(s)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
    if typing.get_origin(tp) is tuple:
        parts = [p for p in s.strip("[]()").split(",") if p.strip()]
        try:
            return tuple(float(p) for p in parts)
        except ValueError:
            raise ValueError(f"expected comma-separated numbers, got {text!r}") from None
    if tp is str:
        return s
    raise ValueError(f"unsupported type {tp!r}")  # pragma: no cover - a new field type


def _from_toml(value: Any, knob: Knob) -> Any:
    """Value of ``knob`` from a TOML value (strings are parsed as on the command line)."""
    tp = knob.type
    if isinstance(value, str) and tp is not str:
        return _parse_text(value, knob)
    if _is_optional(tp):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError(f"expected a whole number, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ValueError(f"expected a number, got {value!r}")
    if typing.get_origin(tp) is tuple:
        if isinstance(value, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
        ):
            return tuple(float(v) for v in value)
        raise ValueError(f"expected a list of numbers, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"expected a string, got {value!r}")
    raise ValueError(f"unsupported type {tp!r}")  # pragma: no cover


@dataclass
class RunConfig:
    """The effective configuration of a command and where each value came from.

    Attributes
    ----------
    values : dict
        ``section -> {field: value}`` for every field of every section in use
        (``n_training_servers`` / ``n_inference_servers`` may be ``"auto"``
        until the command sizes the cluster).
    sources : dict
        ``"section.field" -> "default" | file path | "--set" | option name``.
    """

    values: dict[str, dict[str, Any]]
    sources: dict[str, str] = field(default_factory=dict)
    #: options of Python policies (docs/policies.md): ``policy name -> {option: value}``,
    #: from ``--set policy.NAME.OPTION=VALUE`` and ``[policy.NAME]`` tables
    user_policy: dict[str, dict[str, Any]] = field(default_factory=dict)

    def set(self, section: str, name: str, value: Any, source: str) -> None:
        """Record ``value`` for ``section.name`` (replaces the earlier one)."""
        self.values[section][name] = value
        self.sources[f"{section}.{name}"] = source

    def get(self, section: str, name: str) -> Any:
        return self.values[section][name]

    def source(self, section: str, name: str) -> str:
        return self.sources.get(f"{section}.{name}", "default")

    def sim_config(self) -> SimConfig:
        """The :class:`SimConfig` (every ``auto`` must have been resolved)."""
        return SimConfig(**self.values["sim"])

    def input_options(self) -> InputOptions:
        return InputOptions(**self.values.get("input", {}))

    def serving_options(self) -> ServingOptions:
        """The ``serving`` section (defaults when the command does not use it)."""
        return ServingOptions(**self.values.get("serving", {}))

    def policy_options(self, *, only_set: bool = True) -> dict[str, Any]:
        """Policy options; by default only those not at their default source."""
        opts = self.values.get("policy", {})
        if not only_set:
            return dict(opts)
        return {k: v for k, v in opts.items() if self.source("policy", k) != "default"}

    def options_for(self, policy: str) -> dict[str, Any]:
        """The options of ``policy`` (a name, entry point or ``module:Class``):
        :meth:`policy_options` for a registered policy; for a Python policy its own
        (``--set policy.NAME.OPTION=VALUE`` with its entry-point name or its class's
        ``name``) and ``return_idle_loans`` if set."""
        from aryl.scheduling.registry import POLICIES, load_policy_class

        if policy in POLICIES:
            return self.policy_options()
        opts = {k: v for k, v in self.policy_options().items() if k == "return_idle_loans"}
        names = [policy]
        with contextlib.suppress(InvalidInputError):  # reported when the policy runs
            cls: Any = load_policy_class(policy)
            names.append(cls.policy_name())
        for n in names:
            opts.update(self.user_policy.get(n, {}))
        return opts

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable: ``{section: {field: value}}`` plus ``sources`` of non-defaults."""
        out: dict[str, Any] = {
            sec: {k: list(v) if isinstance(v, tuple) else v for k, v in vals.items()}
            for sec, vals in self.values.items()
        }
        out["sources"] = dict(sorted(self.sources.items()))
        if self.user_policy:  # Python policies' options (docs/policies.md)
            out["user_policy"] = {k: dict(v) for k, v in sorted(self.user_policy.items())}
        return out

    def to_toml(self, command: str) -> str:
        """The configuration as TOML, readable back by ``--config`` (sources as comments)."""
        lines = [
            f"# effective configuration of `{command}`",
            "# precedence (later wins): defaults < --config FILE < --set NAME=VALUE < "
            "dedicated options",
        ]
        for sec, vals in self.values.items():
            lines += ["", f"[{sec}]"]
            for k, v in vals.items():
                lines.append(f"{k} = {_toml_value(v)}  # {self.source(sec, k)}")
            if sec == "policy":  # a Python policy's options: [policy.NAME] tables
                for pname, opts in self.user_policy.items():
                    lines += ["", f"[policy.{_toml_key(pname)}]"]
                    for k, v in opts.items():
                        src = self.sources.get(f"policy.{pname}.{k}", "--set")
                        lines.append(f"{_toml_key(k)} = {_toml_value(v)}  # {src}")
        return "\n".join(lines) + "\n"


def _toml_key(k: str) -> str:
    """A TOML key: bare when it can be (letters, digits, ``_``, ``-``), else quoted."""
    return k if k and all(c.isascii() and (c.isalnum() or c in "_-") for c in k) \
        else json.dumps(k)


def _toml_value(v: Any) -> str:
    if v is None:
        return '"none"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):  # a Python policy's option given as a JSON object
        return "{" + ", ".join(f"{_toml_key(str(k))} = {_toml_value(x)}"
                               for k, x in v.items()) + "}"
    return json.dumps(str(v))


def _read_toml(path: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from aryl.cli._errors import decode_text

    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise click.UsageError(f"--config: {path}: no such file") from None
    except OSError as exc:
        raise click.UsageError(f"--config: {path}: cannot read: {exc.strerror or exc}") from None
    text = decode_text(raw, f"--config: {path}")  # non-UTF-8 bytes: exit 2, no traceback
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise click.UsageError(f"--config: {path}: not valid TOML: {exc}") from None
    return data


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else "; `aryl config` lists every field"


class _Resolver:
    def __init__(self, sections: Sequence[str], fixed: Mapping[str, str]) -> None:
        self.by_name: dict[str, Knob] = {}
        self.by_qualified: dict[str, Knob] = {}
        self.fixed = fixed
        for k in knobs():
            if k.section in sections:
                self.by_name[k.name] = k
                self.by_qualified[k.qualified] = k
        self.config = RunConfig({s: {} for s in sections})
        for k in self.by_qualified.values():
            self.config.values[k.section][k.name] = k.default

    def knob(self, name: str, where: str) -> Knob:
        knob = self.by_qualified.get(name) or self.by_name.get(name)
        if knob is None:
            all_names = [*self.by_name, *self.by_qualified]
            raise click.UsageError(f"{where}: unknown field {name!r}{_suggest(name, all_names)}")
        if knob.name in self.fixed:
            raise click.UsageError(f"{where}: {knob.name} {self.fixed[knob.name]}")
        return knob

    def user_option(self, pname: str, opt: str, value: Any, source: str) -> None:
        """An option of a Python policy (checked by its class when it is built)."""
        if not pname or not opt:
            raise click.UsageError(f"{source}: expected policy.NAME.OPTION")
        self.config.user_policy.setdefault(pname, {})[opt] = value
        self.config.sources[f"policy.{pname}.{opt}"] = source

    def apply_file(self, path: str) -> None:
        data = _read_toml(path)
        for key, value in data.items():
            if key in SECTIONS and isinstance(value, dict):
                if key not in self.config.values:
                    raise click.UsageError(
                        f"--config: {path}: section [{key}] does not apply to this command")
                if key == "policy":  # [policy.NAME] tables: a Python policy's options
                    for pname in [k for k, v in value.items() if isinstance(v, dict)]:
                        for opt, v in value[pname].items():
                            self.user_option(pname, opt, v, path)
                    value = {k: v for k, v in value.items() if not isinstance(v, dict)}
                items = [(f"{key}.{k}", v, f"[{key}] {k}") for k, v in value.items()]
            else:
                items = [(key, value, key)]
            for name, v, shown in items:
                knob = self.knob(name, f"--config: {path}: {shown}")
                try:
                    parsed = _from_toml(v, knob)
                except ValueError as exc:
                    raise click.UsageError(f"--config: {path}: {knob.name}: {exc}") from None
                self.config.set(knob.section, knob.name, parsed, path)

    def apply_set(self, item: str) -> None:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"--set {item!r}: expected NAME=VALUE, e.g. "
                                   "--set rescale_pause_s=10")
        parts = name.strip().split(".")
        if len(parts) >= 3 and parts[0] == "policy" and "policy" in self.config.values:
            # policy.NAME.OPTION: a Python policy's option; a JSON value, else a string
            try:
                v: Any = json.loads(text)
            except ValueError:
                v = text
            self.user_option(".".join(parts[1:-1]), parts[-1], v, "--set")
            return
        knob = self.knob(name.strip(), f"--set {item}")
        try:
            value = _parse_text(text, knob)
        except ValueError as exc:
            raise click.UsageError(f"--set {item}: {knob.name}: {exc}") from None
        self.config.set(knob.section, knob.name, value, "--set")

    def validate(self) -> None:
        """Build each section's dataclass (``auto`` as a placeholder) to check ranges."""
        for sec, vals in self.config.values.items():
            args = {k: (1 if v == AUTO and k in AUTO_FIELDS else v) for k, v in vals.items()}
            try:
                SECTIONS[sec](**args)
            except InvalidInputError as exc:
                msg = str(exc)
                name, _, rest = msg.partition(":")
                src = self.config.source(sec, name.strip()) if name.strip() in vals else ""
                if src.startswith("--") and src != "--set":  # a dedicated option: name it
                    raise click.UsageError(f"{src}:{rest}") from None
                where = f" (from {src})" if src and src != "default" else ""
                raise click.UsageError(f"{msg}{where}") from None


def resolve(
    *,
    sections: Sequence[str],
    config_file: str | None = None,
    sets: Sequence[str] = (),
    options: Mapping[str, tuple[str, Any]] | None = None,
    fixed: Mapping[str, str] | None = None,
) -> RunConfig:
    """Defaults, then ``config_file``, then ``sets``, then the dedicated ``options``.

    Parameters
    ----------
    sections : sequence of {"sim", "input", "policy"}
        Sections the command uses.
    config_file : str, optional
        TOML file.
    sets : sequence of str
        ``NAME=VALUE`` items, in command-line order.
    options : mapping ``"section.field" -> (option name, value)``, optional
        Dedicated options the user gave (only those given: an option at its
        default does not override the file or ``--set``).
    fixed : mapping ``field -> reason``, optional
        Fields the command does not let the user set (the reason is the error).

    Returns
    -------
    RunConfig

    Raises
    ------
    click.UsageError
        Unknown field (with the closest known name), a value of the wrong type
        or out of range (naming the field and its source), an unreadable file.
    """
    r = _Resolver(sections, fixed or {})
    if config_file is not None:
        r.apply_file(config_file)
    for item in sets:
        r.apply_set(item)
    for qualified, (opt, value) in (options or {}).items():
        sec, name = qualified.split(".", 1)
        r.config.set(sec, name, value, opt)
    r.validate()
    return r.config


def config_options(func: Any) -> Any:
    """``--config``, ``--set`` and ``--show-config`` (for replay, compare and experiment)."""
    options = [
        click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                     help="TOML file of settings (`aryl config` lists them; "
                          "docs/configuration.md)."),
        click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                     help="Set any field (repeatable), e.g. --set rescale_pause_s=10. "
                          "Precedence: defaults < --config < --set < dedicated options."),
        click.option("--show-config", is_flag=True,
                     help="Print the effective configuration as TOML (with the source of "
                          "each value) and exit without replaying."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def given(ctx: click.Context, param: str) -> bool:
    """Whether option ``param`` was given (not left at its default)."""
    from click.core import ParameterSource

    src = ctx.get_parameter_source(param)
    return src not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


# ---------------------------------------------------------------- listing and docs


def _default_text(k: Knob) -> str:
    v = k.default
    if isinstance(v, tuple):
        return ", ".join(f"{x:g}" for x in v)
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def render_markdown() -> str:
    """``docs/configuration.md``: every knob with its type, default and description."""
    lines = [
        "# Configuration: every knob of `aryl replay`, `aryl compare` and `aryl experiment`",
        "",
        "<!-- Generated by `aryl config --markdown > docs/configuration.md` from the",
        "     dataclasses and their docstrings; tests/test_cli_config.py checks it. -->",
        "",
        "Any field below can be set on the command line with `--set NAME=VALUE`",
        "(repeatable; `NAME` or `SECTION.NAME`) or in a TOML file passed with",
        "`--config FILE`, either as top-level keys or in `[sim]`, `[input]` and",
        "`[policy]` tables:",
        "",
        "```toml",
        "# run.toml",
        "[sim]",
        "rescale_pause_s = 10.0",
        "checkpoint_interval_s = 600.0",
        "",
        "[input]",
        "peak_utilisation = 0.7",
        "",
        "[policy]",
        "return_idle_loans = false",
        "```",
        "",
        "```bash",
        "aryl compare --policies fifo,aryl --config run.toml --set reclaim_grace_s=300",
        "aryl replay --config run.toml --show-config      # print the effective TOML, run nothing",
        "```",
        "",
        "A Python policy's own options ([policies.md](policies.md)): `--set "
        "policy.NAME.OPTION=VALUE` (NAME: the policy's name or entry point; the value "
        "is read as JSON, else as a string) or a `[policy.NAME]` table in the TOML file. "
        "`aryl replay` and `aryl compare` build each Python policy with its options before "
        "reading the trace: an unknown option, a value of another type than its default, "
        "or a NAME that is no Python policy of the run (a registered policy's options are "
        "the `policy` fields below) is an error. `--show-config` prints them as "
        "`[policy.NAME]` tables.",
        "",
        "**Precedence** (later wins): the defaults below < `--config FILE` < `--set` "
        "(the last one of a name wins) < the dedicated options of a command "
        "(`--seed`, `--training-servers`, `--reclaim-policy`, `--elastic-fraction`, "
        "`--inference`, `--keep-idle-loans`, ...) when they are given. `--horizon S` "
        "sets `horizon_s` to the first arrival plus `S`.",
        "",
        "Values are checked before any trace is read: a wrong type or range names the "
        "field and where the value came from; an unknown name suggests the closest "
        "one. On the command line, booleans are `true`/`false` (also `yes`/`no`, "
        "`1`/`0`), `none` clears an optional field and lists are comma-separated. "
        "`n_training_servers` and `n_inference_servers` also take `auto` (sized "
        "from the trace, see docs/simulator.md).",
        "",
        "The effective configuration is recorded in every output: `summary.json` "
        "(`config`: the simulator's fields; `run`: all three sections and the "
        "source of every value not at its default), `--json`, and the `manifest.json` of "
        "`aryl experiment paper`. `--show-config` prints it as TOML that "
        "`--config` reads back.",
        "",
        "`aryl experiment paper` takes the `sim` and `policy` fields except the "
        "cluster shape (it sizes each trace's cluster itself) and applies them to "
        "every run; its sweeps override the field they sweep.",
    ]
    titles = {
        "sim": "`sim`: the simulator (`aryl.sim.SimConfig`)",
        "input": "`input`: elastic synthesis and inference demand (replay and compare)",
        "policy": "`policy`: policy options",
        "serving": "`serving`: request-level inference (replay and compare; docs/model.md)",
    }
    by_section: dict[str, list[Knob]] = {}
    for k in knobs():
        by_section.setdefault(k.section, []).append(k)
    for sec, ks in by_section.items():
        lines += ["", f"## {titles[sec]}", "", "| field | type | default | meaning |",
                  "|---|---|---|---|"]
        for k in ks:
            doc = k.doc.replace("|", "\\|")
            lines.append(f"| `{k.name}` | {k.type_text} | `{_default_text(k)}` | {doc} |")
    return "\n".join(lines) + "\n"


@click.command(name="config")
@click.option("--markdown", is_flag=True, help="Print docs/configuration.md instead.")
def config_command(markdown: bool) -> None:
    """List every field that --set and --config accept, with defaults."""
    if markdown:
        click.echo(render_markdown(), nl=False)
        return
    from rich.console import Console

    from aryl.cli._tables import Col, print_tables

    console = Console()
    rows = [[k.qualified, k.type_text, _default_text(k)] for k in knobs()]
    print_tables(console, [Col("field", "left"), Col("type", "left"), Col("default")], rows,
                 title="Fields of --set NAME=VALUE and --config FILE",
                 caption="docs/configuration.md describes each field")
    from rich.markup import escape

    for k in knobs():
        console.print(f"[bold]{k.qualified}[/bold]: {escape(k.doc)}", highlight=False)
