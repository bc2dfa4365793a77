"""Training speed per model family and GPU type: relative speeds and scaling curves.

A :class:`SpeedTable` answers "how fast does a data-parallel job of family ``f``
run on ``w`` workers of ``g`` GPUs of type ``t``?" in one unit for every type:
the throughput of **one reference GPU** (V100) running one replica of ``f``.  A
job's work can then be kept in reference-GPU seconds and moved between GPU types
without losing progress.

Two kinds of table
------------------
*Measured* (:meth:`SpeedTable.bundled`, :meth:`SpeedTable.from_csv`): the bundled
``aryl/data/gpu_speeds.csv`` holds, per family and GPU type, the single-GPU
speed relative to V100 and the measured scaling ``S(r) = throughput(r replicas)
/ throughput(1 replica)`` at ``r = 1, 2, 4, 8, ...`` (derived from the Sia
SOSP'23 / Pollux OSDI'21 profiles by ``scripts/make_gpu_profiles.py``; see
``aryl/data/README.md``).  With ``r = workers * gpus_per_worker`` replicas::

    throughput(f, t, w, g) = relative_speed(f, t) * S_ft(w * g)

Between profiled replica counts ``S`` is linear in ``log2(r)``, capped at ``r``
(never above linear).  Beyond the largest profiled count ``r_max``
(``extrapolation="doubling"``, the default) every further doubling gains the
ratio the last profiled one gained: with ``r_prev`` the count before ``r_max``,
``beta = log(S(r_max) / S(r_prev)) / log(r_max / r_prev)`` (in [0, 1]) and
``S(r) = S(r_max) * (r / r_max) ** beta``; a curve with one point stays at 1.
``extrapolation="flat"`` keeps ``S(r) = S(r_max)``, a pessimistic bound.  Why
"doubling": held out on the counts profiled beyond 16 (T4 to 64, V100 to 32),
predicting them from the curve up to 16 misses by a factor of at most 1.7 and
about 1.2 on average (geometric), where "flat" misses by up to 3.6x (always
low) and a constant parallel efficiency by up to 2x (always high); numbers in
``aryl/data/README.md``.  Both rules are non-decreasing and never above linear.

*Parametric* (:meth:`SpeedTable.parametric`): today's homogeneous model [Aryl]_
(``T(w) = w / (1 + alpha (w - 1))`` over workers, docs/model.md), times a per-type
factor (1 for every type unless given)::

    throughput(f, t, w, g) = factor(t) * g * T_alpha(w)

the GPUs of one worker counting as one perfectly scaling unit, as in the
homogeneous model.  The family is ignored.  :meth:`SpeedTable.speed` of a
parametric table with every factor 1 equals ``ClusterState.speed_at`` bit for
bit, so "every speed ratio 1" reproduces the homogeneous replay exactly.

Also :func:`assign_families` (a model family per job of a trace).

.. [Aryl] J. Li et al., "Aryl: An Elastic Cluster Scheduler for Deep Learning",
   arXiv:2202.07896 (EuroSys'23 "Lyra").
.. [Sia] S. Jayaram Subramanya et al., "Sia: Heterogeneity-aware, goodput-optimized
   ML-cluster scheduling", SOSP'23 (profiles from github.com/siasosp23/artifacts,
   commit aaf7a0d).
"""

from __future__ import annotations

import bisect
import csv
import difflib
import functools
import io
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
from numpy.typing import NDArray

from aryl.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    import os

    import pandas as pd

__all__ = [
    "FAMILY_BUCKETS",
    "REFERENCE_GPU_TYPE",
    "SpeedTable",
    "assign_families",
]

#: GPU type whose single-GPU throughput is the unit of every table.
REFERENCE_GPU_TYPE = "V100"

#: Columns of the speed-table CSV that :meth:`SpeedTable.from_csv` reads.
CSV_COLUMNS = ("family", "gpu_type", "replicas", "relative_speed", "scaling")

Extrapolation = Literal["doubling", "flat"]

#: Largest replica count kept in a pair's look-up table (beyond: computed per call).
_LUT_MAX = 1 << 16

#: Seeded family assignment by GPU-time bucket, after Sia's workload generator
#: (``sia-simulator/utils/generate_workload.py`` of github.com/siasosp23/artifacts at
#: commit 37c68be, itself after Pollux's job-size categories): ``(upper bound in
#: GPU-hours, ((family, weight), ...))``, buckets in increasing order, the last one
#: unbounded.
FAMILY_BUCKETS: tuple[tuple[float, tuple[tuple[str, float], ...]], ...] = (
    (1.0, (("cifar10", 1.0),)),
    (10.0, (("deepspeech2", 0.5), ("bert", 0.5))),
    (100.0, (("yolov3", 1.0),)),
    (math.inf, (("imagenet", 1.0),)),
)


def _suggest(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"known: {', '.join(sorted(known))}{hint}"


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)


def _check_count(name: str, v: Any, lo: int) -> int:
    if not _is_int(v) or int(v) < lo:
        raise InvalidInputError(f"{name}: must be an integer >= {lo}, got {v!r}")
    return int(v)


def _check_counts(name: str, v: Any, lo: int) -> NDArray[np.int64]:
    arr = np.asarray(v)
    if arr.dtype.kind not in "iu":
        raise InvalidInputError(f"{name}: must be integers, got dtype {arr.dtype}")
    if arr.size and int(arr.min()) < lo:
        raise InvalidInputError(f"{name}: must be >= {lo}, got {int(arr.min())}")
    out: NDArray[np.int64] = arr.astype(np.int64)
    return out


def _check_alpha(alpha: Any) -> float:
    if (isinstance(alpha, bool) or not isinstance(alpha, numbers.Real)
            or not math.isfinite(float(alpha)) or not 0.0 <= float(alpha) <= 1.0):
        raise InvalidInputError(f"alpha: must be a number in [0, 1], got {alpha!r}")
    return float(alpha)


@dataclass(frozen=True)
class _Curve:
    """Scaling of one (family, GPU type): ``log2`` of the profiled replica counts."""

    replicas: NDArray[np.int64]  # (k,), 1 = replicas[0] < replicas[1] < ...
    log2_replicas: NDArray[np.float64]  # (k,)
    scaling: NDArray[np.float64]  # (k,), scaling[0] == 1, non-decreasing, <= replicas
    beta: float  # exponent of the "doubling" extrapolation, in [0, 1]


class SpeedTable:
    """Relative speed and scaling per (model family, GPU type) ``[Sia]``, ``[Aryl]``.

    Build one with :meth:`bundled`, :meth:`from_csv`, :meth:`parametric` or the
    constructor.  Immutable after construction.

    Parameters
    ----------
    relative_speed : mapping of (family, gpu_type) to float
        Single-GPU throughput relative to one ``reference`` GPU (> 0, finite).
    scaling : mapping of (family, gpu_type) to (replicas, scaling)
        The profiled curve: replica counts (int, strictly increasing, starting
        at 1) and ``S(r)`` (float, ``S(1) == 1``, non-decreasing, ``1 <= S(r) <=
        r``).  Same keys as ``relative_speed``.
    reference : str, default ``"V100"``
        The unit type; every family must have it, with relative speed 1.
    extrapolation : {"doubling", "flat"}, default "doubling"
        Beyond the largest profiled replica count (module docstring).
    source : str
        Where the numbers came from (a path or ``"bundled"``), for messages.

    Raises
    ------
    InvalidInputError
        Naming the (family, GPU type) and the field that breaks a rule above.
    """

    def __init__(
        self,
        relative_speed: Mapping[tuple[str, str], float],
        scaling: Mapping[tuple[str, str], tuple[Sequence[int], Sequence[float]]],
        *,
        reference: str = REFERENCE_GPU_TYPE,
        extrapolation: Extrapolation = "doubling",
        source: str = "<mapping>",
    ) -> None:
        if extrapolation not in ("doubling", "flat"):
            raise InvalidInputError(
                f"extrapolation: must be 'doubling' or 'flat', got {extrapolation!r}")
        self._parametric = False
        self._alpha = 0.0
        self._factors: dict[str, float] = {}
        self._reference = str(reference)
        self._extrapolation: Extrapolation = extrapolation
        self._source = source
        if set(relative_speed) != set(scaling):
            diff = sorted(set(relative_speed) ^ set(scaling))
            raise InvalidInputError(
                f"{source}: relative_speed and scaling must cover the same (family, gpu_type) "
                f"pairs; differing: {diff}")
        if not relative_speed:
            raise InvalidInputError(f"{source}: empty speed table")
        self._rel: dict[tuple[str, str], float] = {}
        self._curves: dict[tuple[str, str], _Curve] = {}
        self._luts: dict[tuple[str, str], NDArray[np.float64]] = {}
        for key in sorted(relative_speed):
            fam, typ = key
            where = f"{source}: family {fam!r}, gpu_type {typ!r}"
            rel = relative_speed[key]
            if (isinstance(rel, bool) or not isinstance(rel, numbers.Real)
                    or not math.isfinite(float(rel)) or float(rel) <= 0.0):
                raise InvalidInputError(f"{where}: relative_speed must be a finite number > 0, "
                                        f"got {rel!r}")
            self._rel[key] = float(rel)
            self._curves[key] = self._make_curve(where, *scaling[key])
        self._families = tuple(sorted({f for f, _ in self._rel}))
        self._types = tuple(sorted({t for _, t in self._rel}))
        for fam in self._families:
            ref = self._rel.get((fam, self._reference))
            if ref is None:
                raise InvalidInputError(
                    f"{source}: family {fam!r} has no row for the reference gpu_type "
                    f"{self._reference!r}")
            if ref != 1.0:
                raise InvalidInputError(
                    f"{source}: family {fam!r}, gpu_type {self._reference!r}: relative_speed of "
                    f"the reference type must be 1, got {ref!r}")

    @staticmethod
    def _make_curve(where: str, replicas: Sequence[int], scaling: Sequence[float]) -> _Curve:
        r = list(replicas)
        s = list(scaling)
        if len(r) != len(s) or not r:
            raise InvalidInputError(f"{where}: replicas and scaling must be non-empty and of "
                                    f"equal length, got {len(r)} and {len(s)}")
        for rv in r:
            if not _is_int(rv):
                raise InvalidInputError(f"{where}: replicas must be integers, got {rv!r}")
        for sv in s:
            if (isinstance(sv, bool) or not isinstance(sv, numbers.Real)
                    or not math.isfinite(float(sv))):
                raise InvalidInputError(f"{where}: scaling must be finite numbers, got {sv!r}")
        ra = np.asarray([int(v) for v in r], dtype=np.int64)
        sa = np.asarray([float(v) for v in s], dtype=np.float64)
        if ra[0] != 1 or sa[0] != 1.0:
            raise InvalidInputError(f"{where}: the curve must start at replicas 1 with scaling 1, "
                                    f"got replicas {int(ra[0])} scaling {float(sa[0])!r}")
        if np.any(np.diff(ra) <= 0):
            raise InvalidInputError(f"{where}: replicas must be strictly increasing, got "
                                    f"{ra.tolist()}")
        if np.any(np.diff(sa) < 0):
            raise InvalidInputError(f"{where}: scaling must be non-decreasing in replicas, got "
                                    f"{sa.tolist()}")
        over = sa > ra
        if np.any(over):
            k = int(np.argmax(over))
            raise InvalidInputError(f"{where}: scaling {float(sa[k])!r} at replicas {int(ra[k])} "
                                    f"is above linear")
        beta = 0.0
        if len(ra) > 1:
            beta = math.log(float(sa[-1]) / float(sa[-2])) / math.log(float(ra[-1]) / float(ra[-2]))
            beta = min(max(beta, 0.0), 1.0)
        return _Curve(ra, np.log2(ra.astype(np.float64)), sa, beta)

    # ------------------------------------------------------------ constructors
    @classmethod
    def parametric(
        cls,
        alpha: float = 0.05,
        factors: Mapping[str, float] | None = None,
        *,
        reference: str = REFERENCE_GPU_TYPE,
    ) -> SpeedTable:
        """Today's homogeneous curve ``T(w) = w / (1 + alpha (w - 1))`` times a per-type factor.

        Parameters
        ----------
        alpha : float in [0, 1], default 0.05
            Default scaling loss per extra worker; each call may pass the job's own.
        factors : mapping of str to float, optional
            Single-GPU speed of a GPU type relative to ``reference`` (> 0).  Types
            not listed have factor 1; the reference's factor must be 1 if given.
        reference : str, default ``"V100"``

        Returns
        -------
        SpeedTable
            With ``is_parametric`` true; any family name is accepted and ignored.

        Raises
        ------
        InvalidInputError
            For an ``alpha`` outside [0, 1] or a factor that is not a finite
            number > 0 (naming the type).
        """
        self = cls.__new__(cls)
        self._parametric = True
        self._alpha = _check_alpha(alpha)
        self._reference = str(reference)
        self._extrapolation = "doubling"
        self._source = "parametric"
        self._rel = {}
        self._curves = {}
        self._luts = {}
        self._families = ()
        fac: dict[str, float] = {}
        for typ, f in (factors or {}).items():
            if (isinstance(f, bool) or not isinstance(f, numbers.Real)
                    or not math.isfinite(float(f)) or float(f) <= 0.0):
                raise InvalidInputError(f"factors[{typ!r}]: must be a finite number > 0, got {f!r}")
            fac[str(typ)] = float(f)
        if fac.get(self._reference, 1.0) != 1.0:
            raise InvalidInputError(f"factors[{self._reference!r}]: the reference type's factor "
                                    f"must be 1, got {fac[self._reference]!r}")
        self._factors = fac
        self._types = tuple(sorted(fac))
        return self

    @classmethod
    def from_csv(
        cls,
        path: str | os.PathLike[str],
        *,
        reference: str = REFERENCE_GPU_TYPE,
        extrapolation: Extrapolation = "doubling",
    ) -> SpeedTable:
        """Read a speed table in the format of the bundled ``gpu_speeds.csv``.

        Lines starting with ``#`` and blank lines are skipped; the header names at
        least the columns ``family``, ``gpu_type``, ``replicas``, ``relative_speed``
        and ``scaling`` (others are ignored).  One row per (family, GPU type,
        replica count); ``relative_speed`` is the same on every row of a pair.

        Raises
        ------
        InvalidInputError
            Naming the file, line and column of a missing column, a bad number,
            a duplicate row or an inconsistent ``relative_speed``, or the pair
            whose curve breaks a rule of the constructor.
        """
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"{p}: cannot read speed table: {exc}") from exc
        return cls._from_text(text, str(p), reference=reference, extrapolation=extrapolation)

    @classmethod
    def bundled(cls) -> SpeedTable:
        """The bundled measured table (``aryl/data/gpu_speeds.csv``), cached.

        Families ``bert``, ``cifar10``, ``deepspeech2``, ``imagenet``, ``yolov3``;
        GPU types ``A100``, ``QuadroRTX6000``, ``RTX2080Ti``, ``T4``, ``V100``.
        """
        return _bundled()

    @classmethod
    def _from_text(cls, text: str, label: str, *, reference: str,
                   extrapolation: Extrapolation) -> SpeedTable:
        lines = [(n, ln) for n, ln in enumerate(text.splitlines(), start=1)
                 if ln.strip() and not ln.lstrip().startswith("#")]
        if not lines:
            raise InvalidInputError(f"{label}: no header line")
        header_line, header = lines[0]
        cols = next(csv.reader(io.StringIO(header)))
        for c in CSV_COLUMNS:
            if c not in cols:
                raise InvalidInputError(f"{label}, line {header_line}: missing column {c!r}")
        idx = {c: cols.index(c) for c in CSV_COLUMNS}
        rel: dict[tuple[str, str], float] = {}
        rel_line: dict[tuple[str, str], int] = {}
        pts: dict[tuple[str, str], dict[int, float]] = {}
        for n, ln in lines[1:]:
            row = next(csv.reader(io.StringIO(ln)))
            if len(row) != len(cols):
                raise InvalidInputError(f"{label}, line {n}: expected {len(cols)} fields, "
                                        f"got {len(row)}")
            fam, typ = row[idx["family"]].strip(), row[idx["gpu_type"]].strip()
            for c, v in (("family", fam), ("gpu_type", typ)):
                if not v:
                    raise InvalidInputError(f"{label}, line {n}, column {c!r}: empty value")
            try:
                r = int(row[idx["replicas"]])
            except ValueError:
                raise InvalidInputError(f"{label}, line {n}, column 'replicas': not an integer: "
                                        f"{row[idx['replicas']]!r}") from None
            vals = {}
            for c in ("relative_speed", "scaling"):
                try:
                    vals[c] = float(row[idx[c]])
                except ValueError:
                    raise InvalidInputError(f"{label}, line {n}, column {c!r}: not a number: "
                                            f"{row[idx[c]]!r}") from None
                if not math.isfinite(vals[c]):
                    raise InvalidInputError(f"{label}, line {n}, column {c!r}: not finite")
            key = (fam, typ)
            if key in rel and rel[key] != vals["relative_speed"]:
                raise InvalidInputError(
                    f"{label}, line {n}, column 'relative_speed': {vals['relative_speed']!r} "
                    f"differs from {rel[key]!r} on line {rel_line[key]} for the same family "
                    f"{fam!r} and gpu_type {typ!r}")
            rel.setdefault(key, vals["relative_speed"])
            rel_line.setdefault(key, n)
            curve = pts.setdefault(key, {})
            if r in curve:
                raise InvalidInputError(f"{label}, line {n}: duplicate row for family {fam!r}, "
                                        f"gpu_type {typ!r}, replicas {r}")
            curve[r] = vals["scaling"]
        scal = {k: (sorted(v), [v[r] for r in sorted(v)]) for k, v in pts.items()}
        return cls(rel, scal, reference=reference, extrapolation=extrapolation, source=label)

    # ------------------------------------------------------------ JSON form
    def to_dict(self) -> dict[str, Any]:
        """The table as a JSON-serialisable dict that :meth:`from_dict` reads back exactly.

        Measured: ``{"kind": "measured", "reference", "extrapolation", "source",
        "pairs": [{"family", "gpu_type", "relative_speed", "replicas", "scaling"}]}``
        (pairs sorted by family, then type); parametric: ``{"kind": "parametric",
        "reference", "alpha", "factors"}``.  Floats are kept as they are (JSON
        writers print the shortest repr, which reads back to the same double).
        """
        if self._parametric:
            return {"kind": "parametric", "reference": self._reference, "alpha": self._alpha,
                    "factors": dict(self._factors)}
        pairs = []
        for (fam, typ), rel in sorted(self._rel.items()):
            c = self._curves[(fam, typ)]
            pairs.append({"family": fam, "gpu_type": typ, "relative_speed": rel,
                          "replicas": c.replicas.tolist(), "scaling": c.scaling.tolist()})
        return {"kind": "measured", "reference": self._reference,
                "extrapolation": self._extrapolation, "source": self._source, "pairs": pairs}

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "speed table") -> SpeedTable:
        """The table of a :meth:`to_dict` document (every rule of the constructor applies).

        Raises
        ------
        InvalidInputError
            Naming ``where`` and the field: an unknown or missing key, a pair
            listed twice, or whatever the constructor or :meth:`parametric`
            refuses.
        """
        def obj(w: str, d: Any, required: set[str], optional: set[str]) -> Mapping[str, Any]:
            if not isinstance(d, Mapping):
                raise InvalidInputError(f"{w}: must be an object, got {d!r}")
            extra = sorted(set(d) - required - optional)
            if extra:
                raise InvalidInputError(f"{w}: unknown field(s) {extra}")
            missing = sorted(required - set(d))
            if missing:
                raise InvalidInputError(f"{w}: required field(s) missing: {missing}")
            return d

        def text(w: str, v: Any) -> str:
            if not isinstance(v, str) or not v:
                raise InvalidInputError(f"{w}: must be a non-empty string, got {v!r}")
            return v

        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        if kind == "parametric":
            d = obj(where, doc, {"kind", "alpha"}, {"reference", "factors"})
            factors = d.get("factors", {})
            if not isinstance(factors, Mapping):
                raise InvalidInputError(f"{where}.factors: must be an object")
            try:
                return cls.parametric(d["alpha"], factors,
                                      reference=text(f"{where}.reference",
                                                     d.get("reference", REFERENCE_GPU_TYPE)))
            except InvalidInputError as exc:
                raise InvalidInputError(f"{where}: {exc}") from None
        if kind != "measured":
            raise InvalidInputError(f"{where}.kind: must be 'measured' or 'parametric', "
                                    f"got {kind!r}")
        d = obj(where, doc, {"kind", "pairs"}, {"reference", "extrapolation", "source"})
        pairs = d["pairs"]
        if not isinstance(pairs, list):
            raise InvalidInputError(f"{where}.pairs: must be a list")
        rel: dict[tuple[str, str], float] = {}
        scal: dict[tuple[str, str], tuple[Sequence[int], Sequence[float]]] = {}
        for i, pd_ in enumerate(pairs):
            w = f"{where}.pairs[{i}]"
            e = obj(w, pd_, {"family", "gpu_type", "relative_speed", "replicas", "scaling"},
                    set())
            key = (text(f"{w}.family", e["family"]), text(f"{w}.gpu_type", e["gpu_type"]))
            if key in rel:
                raise InvalidInputError(f"{w}: family {key[0]!r}, gpu_type {key[1]!r} listed "
                                        f"twice")
            for name in ("replicas", "scaling"):
                if not isinstance(e[name], list):
                    raise InvalidInputError(f"{w}.{name}: must be a list")
            rel[key] = e["relative_speed"]
            scal[key] = (e["replicas"], e["scaling"])
        reference = text(f"{where}.reference", d.get("reference", REFERENCE_GPU_TYPE))
        source = text(f"{where}.source", d["source"]) if "source" in d else None
        try:
            # the constructor's messages start with the source: ``where`` when none given
            return cls(rel, scal, reference=reference,
                       extrapolation=d.get("extrapolation", "doubling"),
                       source=where if source is None else source)
        except InvalidInputError as exc:
            if source is None:
                raise
            raise InvalidInputError(f"{where}: {exc}") from None

    # ------------------------------------------------------------ properties
    @property
    def is_parametric(self) -> bool:
        """True for :meth:`parametric` tables."""
        return self._parametric

    @property
    def families(self) -> tuple[str, ...]:
        """Model families of a measured table, sorted (empty for a parametric one)."""
        return self._families

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """GPU types of a measured table; the types with a factor for a parametric one."""
        return self._types

    @property
    def reference_gpu_type(self) -> str:
        """The type whose single GPU is the throughput unit."""
        return self._reference

    @property
    def alpha(self) -> float:
        """Default ``alpha`` of a parametric table (0 for a measured one; unused there)."""
        return self._alpha

    def __repr__(self) -> str:
        if self._parametric:
            return f"SpeedTable.parametric(alpha={self._alpha!r}, factors={self._factors!r})"
        return (f"SpeedTable(source={self._source!r}, families={list(self._families)}, "
                f"gpu_types={list(self._types)})")

    # ------------------------------------------------------------ look-ups
    def _key(self, family: str, gpu_type: str) -> tuple[str, str]:
        if family not in self._families:
            raise InvalidInputError(f"unknown model family {family!r} ({self._source}); "
                                    f"{_suggest(str(family), self._families)}")
        if gpu_type not in self._types:
            raise InvalidInputError(f"unknown gpu_type {gpu_type!r} ({self._source}); "
                                    f"{_suggest(str(gpu_type), self._types)}")
        key = (family, gpu_type)
        if key not in self._rel:
            raise InvalidInputError(f"no speeds for family {family!r} on gpu_type {gpu_type!r} "
                                    f"({self._source})")
        return key

    def _factor(self, gpu_type: str) -> float:
        if not isinstance(gpu_type, str) or not gpu_type:
            raise InvalidInputError(f"gpu_type: must be a non-empty string, got {gpu_type!r}")
        return self._factors.get(gpu_type, 1.0)

    def relative_speed(self, family: str, gpu_type: str) -> float:
        """Single-GPU throughput of ``family`` on ``gpu_type`` over that on the reference type.

        Returns
        -------
        float
            > 0; exactly 1 for the reference type.  A parametric table returns the
            type's factor whatever the family.  O(1).

        Raises
        ------
        InvalidInputError
            For an unknown family or GPU type (with the known names and the
            closest one).
        """
        if self._parametric:
            return self._factor(gpu_type)
        return self._rel[self._key(family, gpu_type)]

    def max_profiled_replicas(self, family: str, gpu_type: str) -> int:
        """Largest replica count measured for the pair (beyond it: extrapolated)."""
        if self._parametric:
            raise InvalidInputError("a parametric table has no profiled replica counts")
        return int(self._curves[self._key(family, gpu_type)].replicas[-1])

    @overload
    def scaling(self, family: str, gpu_type: str, replicas: int, *,
                alpha: float | None = None) -> float: ...
    @overload
    def scaling(self, family: str, gpu_type: str, replicas: NDArray[Any], *,
                alpha: float | None = None) -> NDArray[np.float64]: ...

    def scaling(self, family: str, gpu_type: str, replicas: Any, *,
                alpha: float | None = None) -> Any:
        """Throughput at ``replicas`` data-parallel replicas over that at one replica.

        Parameters
        ----------
        family, gpu_type : str
        replicas : int or ndarray of int
            ``>= 0``; 0 gives 0.
        alpha : float, optional
            Parametric tables only (default: the table's); measured tables ignore
            it.  A parametric table counts workers: ``T_alpha(replicas)``.

        Returns
        -------
        float or ndarray of float64 (the shape of ``replicas``)
            Non-decreasing in ``replicas``, ``<= replicas``, 1 at one replica.
            Measured: linear in ``log2(replicas)`` between profiled counts, then
            capped at ``replicas``; beyond the largest profiled count per the
            table's ``extrapolation``.  One count gives one float whatever the
            call: counts up to 65,536 come from a per-pair look-up table built on
            first use (O(max count) once, then O(size)).

        Raises
        ------
        InvalidInputError
            Unknown family or type, or a negative / non-integer count.
        """
        scalar = _is_int(replicas)
        r = (np.asarray(_check_count("replicas", replicas, 0), dtype=np.int64) if scalar
             else _check_counts("replicas", replicas, 0))
        if self._parametric:
            self._factor(gpu_type)
            a = self._alpha if alpha is None else _check_alpha(alpha)
            if scalar:
                w = int(r)
                return w / (1.0 + a * (w - 1)) if w > 0 else 0.0
            rf = r.astype(np.float64)
            den = np.where(r > 0, 1.0 + a * (rf - 1.0), 1.0)  # alpha 1, w 0: no 0 / 0
            out: NDArray[np.float64] = np.where(r > 0, rf / den, 0.0)
            return out
        key = self._key(family, gpu_type)
        if scalar:
            rv = int(r)
            return self._point(self._curves[key], rv) if rv > _LUT_MAX else float(
                self._lut(key, rv)[rv])
        if r.size == 0:
            return np.zeros(r.shape, dtype=np.float64)
        top = int(r.max())
        if top > _LUT_MAX:
            c = self._curves[key]
            return np.asarray([self._point(c, int(v)) for v in r.ravel()],
                              dtype=np.float64).reshape(r.shape)
        res: NDArray[np.float64] = self._lut(key, top)[r]
        return res

    def _point(self, c: _Curve, r: int) -> float:
        """``S(r)`` of one curve in plain float arithmetic (the definition)."""
        if r <= 0:
            return 0.0
        reps = c.replicas
        k = len(reps)
        if r >= int(reps[-1]):
            if r == int(reps[-1]) or self._extrapolation == "flat":
                return float(c.scaling[-1])
            return min(float(c.scaling[-1]) * (r / int(reps[-1])) ** c.beta, float(r))
        i = bisect.bisect_right(reps.tolist(), r) - 1  # reps[i] <= r < reps[i + 1]
        j = min(i + 1, k - 1)
        x0, x1 = float(c.log2_replicas[i]), float(c.log2_replicas[j])
        f0, f1 = float(c.scaling[i]), float(c.scaling[j])
        return min(f0 + (f1 - f0) * ((math.log2(r) - x0) / (x1 - x0)), float(r))

    def _lut(self, key: tuple[str, str], r_max: int) -> NDArray[np.float64]:
        """``S(0..n-1)`` of a pair with ``n > r_max``, computed once by :meth:`_point`.

        A look-up table, so one replica count gives one number whatever the
        call (scalar or array, any length): vectorised ``np.interp`` and
        ``np.power`` round differently with the array length.
        """
        lut = self._luts.get(key)
        if lut is None or len(lut) <= r_max:
            n = max(r_max + 1, 2 * (0 if lut is None else len(lut)), 257)
            c = self._curves[key]
            lut = np.asarray([self._point(c, r) for r in range(n)], dtype=np.float64)
            lut.setflags(write=False)
            self._luts[key] = lut
        return lut

    @overload
    def throughput(self, family: str, gpu_type: str, workers: int, gpus_per_worker: int, *,
                   alpha: float | None = None) -> float: ...
    @overload
    def throughput(self, family: str, gpu_type: str, workers: NDArray[Any],
                   gpus_per_worker: int, *,
                   alpha: float | None = None) -> NDArray[np.float64]: ...

    def throughput(self, family: str, gpu_type: str, workers: Any, gpus_per_worker: int, *,
                   alpha: float | None = None) -> Any:
        """Throughput of ``workers`` workers of ``gpus_per_worker`` GPUs each.

        Parameters
        ----------
        family, gpu_type : str
        workers : int or ndarray of int
            ``>= 0``; 0 gives 0.
        gpus_per_worker : int
            ``>= 1``.
        alpha : float, optional
            Parametric tables only (default: the table's).

        Returns
        -------
        float or ndarray of float64
            In reference-GPU units: 1.0 = one reference GPU running one replica of
            ``family``, so work in reference-GPU seconds divided by it is run time
            in seconds.  Measured: ``relative_speed * S(workers * gpus_per_worker)``;
            parametric: ``factor * gpus_per_worker * T_alpha(workers)``.  O(size).

        Raises
        ------
        InvalidInputError
            Unknown family or type, bad counts or ``alpha``.
        """
        g = _check_count("gpus_per_worker", gpus_per_worker, 1)
        scalar = _is_int(workers)
        w = (_check_count("workers", workers, 0) if scalar
             else _check_counts("workers", workers, 0))
        if self._parametric:
            f = self._factor(gpu_type)
            t = self.scaling(family, gpu_type, w, alpha=alpha)
            return f * g * t
        rel = self._rel[self._key(family, gpu_type)]
        return rel * self.scaling(family, gpu_type, w * g)

    def speed(
        self,
        family: str,
        gpu_type: str,
        workers: int,
        gpus_per_worker: int,
        ref_workers: int,
        *,
        ref_gpu_type: str | None = None,
        alpha: float | None = None,
    ) -> float:
        """Progress rate of a job whose work is measured at ``ref_workers`` on ``ref_gpu_type``.

        ``throughput(family, gpu_type, workers, g) / throughput(family, ref_gpu_type,
        ref_workers, g)``: reference seconds (seconds at the reference size and
        type, e.g. a trace's duration) done per second.

        Parameters
        ----------
        family, gpu_type : str
        workers, gpus_per_worker, ref_workers : int
            ``workers >= 0``, the others ``>= 1``.
        ref_gpu_type : str, optional
            Default: the table's reference type.
        alpha : float, optional
            Parametric tables only.

        Returns
        -------
        float
            1.0 when ``workers == ref_workers`` on the reference type.  A parametric
            table computes ``(factor(t) / factor(ref)) * (T(w) / T(ref))`` in the
            engine's arithmetic order, so with every factor 1 it equals
            ``ClusterState.speed_at`` bit for bit.  O(log k).

        Raises
        ------
        InvalidInputError
            Unknown family or type, bad counts or ``alpha``.
        """
        w = _check_count("workers", workers, 0)
        g = _check_count("gpus_per_worker", gpus_per_worker, 1)
        ref = _check_count("ref_workers", ref_workers, 1)
        rt = self._reference if ref_gpu_type is None else ref_gpu_type
        if self._parametric:
            ratio = self._factor(gpu_type) / self._factor(rt)
            a = self._alpha if alpha is None else _check_alpha(alpha)
            if w == ref:
                return ratio * 1.0
            return ratio * ((w / (1.0 + a * (w - 1))) / (ref / (1.0 + a * (ref - 1))))
        num = self.throughput(family, gpu_type, w, g)
        den = self.throughput(family, rt, ref, g)
        return float(num / den)


@functools.lru_cache(maxsize=1)
def _bundled() -> SpeedTable:
    res = resources.files("aryl") / "data" / "gpu_speeds.csv"
    return SpeedTable._from_text(res.read_text(encoding="utf-8"), "aryl/data/gpu_speeds.csv",
                                 reference=REFERENCE_GPU_TYPE, extrapolation="doubling")


def _row_name(jobs: pd.DataFrame, i: int) -> str:
    jid = f" (job_id {jobs['job_id'].iloc[i]!r})" if "job_id" in jobs.columns else ""
    return f"row {i}{jid}"


def assign_families(
    jobs: pd.DataFrame,
    seed: int,
    table: SpeedTable | None = None,
) -> NDArray[np.str_]:
    """A model family per job: the trace's ``model`` column, else a seeded draw by GPU-time.

    Parameters
    ----------
    jobs : pandas.DataFrame
        One row per job.  If it has a ``model`` column, every value must be a
        family of ``table``.  Otherwise it needs ``gpus`` (GPUs at the traced
        size, >= 1) and ``duration_s`` (seconds, > 0): GPU-time = ``gpus *
        duration_s / 3600`` GPU-hours picks a bucket of :data:`FAMILY_BUCKETS`
        (upper bounds exclusive), after Sia's workload generator (itself after
        Pollux's job-size categories):

        =====================  ==============================================
        GPU-hours              family
        =====================  ==============================================
        < 1                    cifar10
        [1, 10)                deepspeech2 or bert, 1/2 each (seeded draw)
        [10, 100)              yolov3
        >= 100                 imagenet
        =====================  ==============================================

        ``ncf`` (small in Pollux) and ``gpt_pmp`` are not in the bundled table
        (see ``aryl/data/README.md``).
    seed : int
        ``>= 0``.  ``u = numpy.random.default_rng(seed).random(n)`` is drawn for
        every row in row order; a bucket with several families takes the first
        whose cumulative weight exceeds ``u[i]``.  So a row's family depends only
        on its own GPU-time, its position and the seed.
    table : SpeedTable, optional
        Default: :meth:`SpeedTable.bundled`.  Must be measured.

    Returns
    -------
    ndarray of str, shape (n,)
        Family per row, in row order.  O(n).

    Raises
    ------
    InvalidInputError
        A ``model`` value that is not a family of the table (naming the value,
        the row and its ``job_id``, and the known families); a missing
        ``gpus``/``duration_s`` column or a bad value in one (naming the row);
        a bad seed; a parametric table; a bucket family missing from the table.
    """
    import pandas as pd

    if not isinstance(jobs, pd.DataFrame):
        raise InvalidInputError(f"jobs: must be a pandas DataFrame, got {type(jobs).__name__}")
    if isinstance(seed, bool | np.bool_) or not _is_int(seed) or int(seed) < 0:
        raise InvalidInputError(f"seed: must be an integer >= 0, got {seed!r}")
    tab = SpeedTable.bundled() if table is None else table
    if tab.is_parametric:
        raise InvalidInputError("table: assign_families needs a measured speed table")
    known = tab.families
    n = len(jobs)
    if "model" in jobs.columns:
        vals = jobs["model"].to_numpy(dtype=object)
        for i, v in enumerate(vals):
            if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
                raise InvalidInputError(
                    f"jobs, {_row_name(jobs, i)}, column 'model': missing model family; "
                    f"known: {', '.join(known)}")
            if not isinstance(v, str) or v not in known:
                raise InvalidInputError(
                    f"jobs, {_row_name(jobs, i)}, column 'model': unknown model family {v!r}; "
                    f"{_suggest(str(v), known)}")
        return np.asarray(vals, dtype=np.str_)
    for col in ("gpus", "duration_s"):
        if col not in jobs.columns:
            raise InvalidInputError(f"jobs: needs a column {col!r} (or a 'model' column)")
    for _, fams in FAMILY_BUCKETS:
        for fam, _w in fams:
            if fam not in known:
                raise InvalidInputError(f"table: lacks the family {fam!r} that the GPU-time "
                                        f"rule assigns; {_suggest(fam, known)}")
    gpus = pd.to_numeric(jobs["gpus"], errors="coerce").to_numpy(dtype=np.float64)
    dur = pd.to_numeric(jobs["duration_s"], errors="coerce").to_numpy(dtype=np.float64)
    bad_g = ~(np.isfinite(gpus) & (gpus >= 1))
    if bad_g.any():
        i = int(np.argmax(bad_g))
        raise InvalidInputError(f"jobs, {_row_name(jobs, i)}, column 'gpus': must be a number "
                                f">= 1, got {jobs['gpus'].iloc[i]!r}")
    bad_d = ~(np.isfinite(dur) & (dur > 0))
    if bad_d.any():
        i = int(np.argmax(bad_d))
        raise InvalidInputError(f"jobs, {_row_name(jobs, i)}, column 'duration_s': must be a "
                                f"finite number > 0, got {jobs['duration_s'].iloc[i]!r}")
    gpu_h = gpus * dur / 3600.0
    u = np.random.default_rng(int(seed)).random(n)
    bounds = np.asarray([b for b, _ in FAMILY_BUCKETS[:-1]], dtype=np.float64)
    bucket = np.searchsorted(bounds, gpu_h, side="right")
    out = np.empty(n, dtype=object)
    for k, (_, fams) in enumerate(FAMILY_BUCKETS):
        m = bucket == k
        if not m.any():
            continue
        names = [f for f, _ in fams]
        cum = np.cumsum([w for _, w in fams], dtype=np.float64)
        cum /= cum[-1]
        pick = np.minimum(np.searchsorted(cum, u[m], side="right"), len(names) - 1)
        out[m] = np.asarray(names, dtype=object)[pick]
    return np.asarray(out, dtype=np.str_)
