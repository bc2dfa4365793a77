"""Cluster specification: pools of identical servers, by role and GPU type.

A cluster is a list of *pools*.  A pool is a set of identical servers: a role
(``training`` or ``inference``, [Aryl]_ §2: the inference cluster is the one
that lends idle servers), a number of servers, GPUs per server and a GPU type
(a name of :class:`aryl.speeds.SpeedTable`, e.g. ``V100``, ``A100``, ``T4``).
Specs are read from TOML (``load_cluster_spec``; format in ``docs/cluster.md``)
or built from a preset (``cluster_preset``) or from plain counts
(``ClusterSpec.from_counts``, what ``--training-servers`` and
``--inference-servers`` describe).

Presets
-------
``default``
    Today's homogeneous cluster: 46 training and 16 inference servers of 8
    ``V100`` GPUs (sizes argued in ``docs/simulator.md``).  The type is ``V100``
    because it is the reference type of the speed table (relative speed exactly
    1), so the homogeneous cluster is "all reference GPUs" under any speed model.
``lyra``
    Heterogeneous, in the setting of Lyra (EuroSys'23): training pools of 30
    ``V100`` and 12 ``A100`` servers (8 GPUs each) and an inference pool of 32
    ``T4`` servers of 4 GPUs (an AWS g4dn.12xlarge, the machine the T4 speeds
    were measured on).  Sizes: on itp-c07 one A100 GPU does the work of ~4/3
    V100 GPUs (``docs/cluster.md``), so the training pools are worth 240 + 96 x
    4/3 = 368 V100 GPUs, the default's 46 x 8; the inference pool keeps the
    default's 128 GPUs.

.. [Aryl] J. Li et al., "Aryl: An Elastic Cluster Scheduler for Deep Learning",
   arXiv:2202.07896 (EuroSys'23 "Lyra").
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aryl.errors import InvalidInputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

if TYPE_CHECKING:  # pragma: no cover
    import os

__all__ = [
    "CLUSTER_PRESETS",
    "ROLES",
    "ClusterSpec",
    "Pool",
    "cluster_preset",
    "load_cluster_spec",
]

ROLES = ("training", "inference")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_POOL_KEYS = ("name", "role", "n_servers", "gpus_per_server", "gpu_type")


def _int_field(where: str, field: str, v: Any, lo: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise InvalidInputError(f"{where}, field {field!r}: must be an integer >= {lo}, "
                                f"got {v!r}")


def _name_field(where: str, field: str, v: Any) -> None:
    if not isinstance(v, str) or not _NAME.fullmatch(v):
        raise InvalidInputError(
            f"{where}, field {field!r}: must be a non-empty string of letters, digits, "
            f"'_', '.', '-' (starting with a letter or digit), got {v!r}")


@dataclass(frozen=True)
class Pool:
    """A set of identical servers.

    Attributes
    ----------
    name : str
        Unique within the cluster; letters, digits, ``_ . -``.
    role : {"training", "inference"}
        Inference servers serve the inference demand and may be loaned [Aryl]_.
    n_servers : int
        ``>= 0``.
    gpus_per_server : int
        ``>= 1``.
    gpu_type : str
        GPU model name (letters, digits, ``_ . -``), e.g. ``V100``.

    Raises
    ------
    InvalidInputError
        Naming the pool and the field.
    """

    name: str
    role: str
    n_servers: int
    gpus_per_server: int
    gpu_type: str

    def __post_init__(self) -> None:
        where = f"pool {self.name!r}" if isinstance(self.name, str) and self.name else "pool"
        _name_field(where, "name", self.name)
        if self.role not in ROLES:
            raise InvalidInputError(f"{where}, field 'role': must be 'training' or 'inference', "
                                    f"got {self.role!r}")
        _int_field(where, "n_servers", self.n_servers, 0)
        _int_field(where, "gpus_per_server", self.gpus_per_server, 1)
        _name_field(where, "gpu_type", self.gpu_type)

    @property
    def n_gpus(self) -> int:
        """``n_servers * gpus_per_server``."""
        return self.n_servers * self.gpus_per_server

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (the TOML table of the pool)."""
        return {k: getattr(self, k) for k in _POOL_KEYS}


@dataclass(frozen=True)
class ClusterSpec:
    """The pools of a cluster, in order.

    Server indexes (:meth:`server_pools`) follow the simulator's layout: every
    training pool's servers first (pools in spec order), then the inference
    pools'.

    Attributes
    ----------
    pools : tuple of Pool
        At least one; unique names.  A list is converted to a tuple.

    Raises
    ------
    InvalidInputError
        For no pools, a non-:class:`Pool` item or a duplicate name (naming it).
    """

    pools: tuple[Pool, ...]

    def __post_init__(self) -> None:
        pools = self.pools
        if isinstance(pools, Pool) or not isinstance(pools, Iterable):
            raise InvalidInputError(f"pools: must be a sequence of Pool, got {pools!r}")
        pools = tuple(pools)
        object.__setattr__(self, "pools", pools)
        if not pools:
            raise InvalidInputError("pools: a cluster needs at least one pool")
        seen: set[str] = set()
        for i, p in enumerate(pools):
            if not isinstance(p, Pool):
                raise InvalidInputError(f"pools[{i}]: must be a Pool, got {type(p).__name__}")
            if p.name in seen:
                raise InvalidInputError(f"pool {p.name!r}, field 'name': duplicate pool name")
            seen.add(p.name)

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_counts(
        cls,
        n_training: int,
        n_inference: int,
        gpus_per_server: int = 8,
        gpu_type: str = "V100",
    ) -> ClusterSpec:
        """A homogeneous cluster: pools ``training`` and ``inference`` of one GPU type.

        What ``--training-servers`` / ``--inference-servers`` (and
        ``SimConfig.n_training_servers`` etc.) describe.

        Raises
        ------
        InvalidInputError
            Naming the pool and field of a bad count.
        """
        return cls((
            Pool("training", "training", n_training, gpus_per_server, gpu_type),
            Pool("inference", "inference", n_inference, gpus_per_server, gpu_type),
        ))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "cluster spec") -> ClusterSpec:
        """Build from the TOML document's structure ``{"pools": [{...}, ...]}``.

        Raises
        ------
        InvalidInputError
            ``source`` and ``pools[i]`` (and the pool's name when known) and the
            field: a missing or unknown key, a wrong type or value.
        """
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"{source}: must be a table, got {type(data).__name__}")
        extra = sorted(set(data) - {"pools"})
        if extra:
            raise InvalidInputError(f"{source}: unknown top-level key(s) {extra}; expected "
                                    f"'pools' (an array of tables [[pools]])")
        raw = data.get("pools")
        if not isinstance(raw, list) or not raw:
            raise InvalidInputError(f"{source}: needs at least one [[pools]] table")
        pools = []
        for i, item in enumerate(raw):
            label = f"{source}: pools[{i}]"
            if not isinstance(item, Mapping):
                raise InvalidInputError(f"{label}: must be a table, got {type(item).__name__}")
            name = item.get("name")
            if isinstance(name, str) and name:
                label += f" ({name!r})"
            unknown = sorted(set(item) - set(_POOL_KEYS))
            if unknown:
                raise InvalidInputError(f"{label}: unknown field(s) {unknown}; "
                                        f"known: {', '.join(_POOL_KEYS)}")
            for k in _POOL_KEYS:
                if k not in item:
                    raise InvalidInputError(f"{label}, field {k!r}: missing")
            try:
                pools.append(Pool(**{k: item[k] for k in _POOL_KEYS}))
            except InvalidInputError as exc:  # the message names the pool and field
                raise InvalidInputError(f"{source}: pools[{i}]: {exc}") from None
        try:
            return cls(tuple(pools))
        except InvalidInputError as exc:
            raise InvalidInputError(f"{source}: {exc}") from None

    # ------------------------------------------------------------ views
    @property
    def training_pools(self) -> tuple[Pool, ...]:
        """Pools with role ``training``, in spec order."""
        return tuple(p for p in self.pools if p.role == "training")

    @property
    def inference_pools(self) -> tuple[Pool, ...]:
        """Pools with role ``inference``, in spec order."""
        return tuple(p for p in self.pools if p.role == "inference")

    @property
    def n_training_servers(self) -> int:
        """Servers over all training pools."""
        return sum(p.n_servers for p in self.training_pools)

    @property
    def n_inference_servers(self) -> int:
        """Servers over all inference pools."""
        return sum(p.n_servers for p in self.inference_pools)

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """GPU types in order of first appearance."""
        return tuple(dict.fromkeys(p.gpu_type for p in self.pools))

    @property
    def is_homogeneous(self) -> bool:
        """One GPU type and one GPU count per server across every pool."""
        return len({(p.gpu_type, p.gpus_per_server) for p in self.pools}) == 1

    def pool(self, name: str) -> Pool:
        """The pool called ``name``.

        Raises
        ------
        InvalidInputError
            For an unknown name (listing the pools).
        """
        for p in self.pools:
            if p.name == name:
                return p
        raise InvalidInputError(f"no pool {name!r}; pools: {', '.join(p.name for p in self.pools)}")

    def server_pools(self) -> tuple[Pool, ...]:
        """The pool of each server index: training pools' servers first, then inference.

        Returns
        -------
        tuple of Pool, length ``n_training_servers + n_inference_servers``.  O(n).
        """
        out: list[Pool] = []
        for p in (*self.training_pools, *self.inference_pools):
            out.extend([p] * p.n_servers)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        """``{"pools": [pool.to_dict(), ...]}`` (the TOML document)."""
        return {"pools": [p.to_dict() for p in self.pools]}

    def to_toml(self) -> str:
        """The spec as a TOML document that :func:`load_cluster_spec` reads back equal."""
        parts = []
        for p in self.pools:
            lines = ["[[pools]]"]
            for k, v in p.to_dict().items():
                lines.append(f"{k} = {json.dumps(v) if isinstance(v, str) else v}")
            parts.append("\n".join(lines) + "\n")
        return "\n".join(parts)


def load_cluster_spec(path: str | os.PathLike[str]) -> ClusterSpec:
    """Read a cluster spec from a TOML file (format: ``docs/cluster.md``).

    Parameters
    ----------
    path : str or os.PathLike
        A TOML file with one ``[[pools]]`` table per pool and the keys ``name``,
        ``role``, ``n_servers``, ``gpus_per_server``, ``gpu_type``.

    Returns
    -------
    ClusterSpec

    Raises
    ------
    InvalidInputError
        Naming the file: unreadable, not TOML (with the parser's line and
        column), or a pool's bad field (naming the pool and the field).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"{p}: cannot read cluster spec: {exc}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{p}: not UTF-8 text: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"{p}: not valid TOML: {exc}") from None
    return ClusterSpec.from_dict(data, source=str(p))


def _default() -> ClusterSpec:
    return ClusterSpec.from_counts(46, 16, 8, "V100")


def _lyra() -> ClusterSpec:
    return ClusterSpec((
        Pool("v100", "training", 30, 8, "V100"),
        Pool("a100", "training", 12, 8, "A100"),
        Pool("t4", "inference", 32, 4, "T4"),
    ))


#: Preset name -> builder (module docstring and docs/cluster.md give the sizes).
CLUSTER_PRESETS = {"default": _default, "lyra": _lyra}


def cluster_preset(name: str) -> ClusterSpec:
    """The preset cluster ``name`` (``default`` or ``lyra``; see the module docstring).

    Raises
    ------
    InvalidInputError
        For an unknown name, listing the presets and the closest one.
    """
    build = CLUSTER_PRESETS.get(name) if isinstance(name, str) else None
    if build is None:
        close = difflib.get_close_matches(str(name), list(CLUSTER_PRESETS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise InvalidInputError(f"unknown cluster preset {name!r}; presets: "
                                f"{', '.join(CLUSTER_PRESETS)}{hint}")
    return build()
