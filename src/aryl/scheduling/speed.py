"""How fast a job runs on ``w`` workers of a GPU type: the pass's speed model.

A job's work is kept in *reference seconds*: seconds at its reference size
(``ref_workers``, the traced size) on the reference GPU type.  Its progress rate
on ``w`` workers of type ``t`` is ``throughput(t, w) / throughput(ref type,
ref_workers)`` reference seconds per second, so a job moved between types keeps
its progress.

Throughput, in any unit common to one job:

* **parametric** (a job without a model family): ``factor(t) * T(w)`` with
  ``T(w) = w / (1 + alpha (w - 1))`` and a per-type factor (1 unless given;
  the reference type's is 1).  With every factor 1 this is the homogeneous
  model exactly (bit for bit: ``1.0 * x == x``).
* **measured** (a job of model family ``f``): ``relative_speed(f, t) *
  S_ft(w * g)`` from a :class:`aryl.speeds.SpeedTable` (bundled: derived from
  the Sia/Pollux profiles, see ``aryl/data/README.md``).

A job whose workers span several GPU types runs at the speed of its slowest
worker: a synchronous data-parallel step waits for the slowest replica
(docs/model.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aryl.errors import InvalidInputError

__all__ = ["DEFAULT_GPU_TYPE", "SpeedModel"]

DEFAULT_GPU_TYPE = "default"


class SpeedModel:
    """Per-type factors for parametric jobs and a measured table for model families.

    Parameters
    ----------
    reference_gpu_type : str
        The type on which work is measured (its factor is 1).
    factors : mapping of str to float, optional
        Parametric throughput factor per GPU type (> 0; 1 for types not listed).
    table : aryl.speeds.SpeedTable, optional
        Measured speeds for jobs with a model family (required if any has one).
    relative_speed_override : mapping of str to float, optional
        Replaces the table's single-GPU relative speed of these types for every
        family (the measured scaling curves are kept): sensitivity studies such
        as "a loaned GPU at 0.2 .. 1.0 of the reference".

    Raises
    ------
    InvalidInputError
        A factor that is not a finite number > 0, or a factor for the reference
        type other than 1.
    """

    __slots__ = ("_cache", "factors", "override", "reference_gpu_type", "table")

    def __init__(
        self,
        reference_gpu_type: str = DEFAULT_GPU_TYPE,
        factors: Mapping[str, float] | None = None,
        table: Any = None,
        relative_speed_override: Mapping[str, float] | None = None,
    ) -> None:
        self.reference_gpu_type = str(reference_gpu_type)
        self.factors = {str(k): float(v) for k, v in (factors or {}).items()}
        self.override = {str(k): float(v) for k, v in (relative_speed_override or {}).items()}
        for name, d in (("factors", self.factors), ("relative_speed_override", self.override)):
            for t, v in d.items():
                if not (v > 0 and v < float("inf")):
                    raise InvalidInputError(f"speed {name}[{t!r}]: must be a finite number > 0")
        if self.factors.get(self.reference_gpu_type, 1.0) != 1.0:
            raise InvalidInputError(
                f"speed factors[{self.reference_gpu_type!r}]: the reference type's factor is 1"
            )
        self.table = table
        self._cache: dict[tuple[str, str], list[float]] = {}

    @property
    def is_trivial(self) -> bool:
        """Every type at factor 1 and no measured table: the homogeneous model."""
        return self.table is None and all(v == 1.0 for v in self.factors.values())

    def factor(self, gpu_type: str) -> float:
        return self.factors.get(gpu_type, 1.0)

    def throughput(
        self, family: str | None, alpha: float, gpu_type: str, w: int, g: int
    ) -> float:
        """Throughput of ``w`` workers of ``g`` GPUs of ``gpu_type`` (job units). O(1)."""
        if family is None:
            t = w / (1.0 + alpha * (w - 1)) if w > 0 else 0.0
            f = self.factors.get(gpu_type, 1.0)
            return t if f == 1.0 else f * t
        r = w * g
        if r <= 0:
            return 0.0
        lut = self._cache.get((family, gpu_type))
        if lut is None or r >= len(lut):
            lut = self._build(family, gpu_type, r)
        return lut[r]

    def throughput_row(
        self, family: str | None, alpha: float, gpu_type: str, w0: int, n: int, g: int
    ) -> list[float]:
        """``[throughput(w0 + k) for k in range(n)]`` (the same floats). O(n)."""
        if family is None:
            f = self.factors.get(gpu_type, 1.0)
            out = [w / (1.0 + alpha * (w - 1)) if w > 0 else 0.0 for w in range(w0, w0 + n)]
            return out if f == 1.0 else [f * t for t in out]
        top = (w0 + n - 1) * g
        lut = self._cache.get((family, gpu_type))
        if lut is None or top >= len(lut):
            lut = self._build(family, gpu_type, max(top, 1))
        return lut[w0 * g: top + 1: g]

    def _build(self, family: str, gpu_type: str, r: int) -> list[float]:
        """Throughput by replica count ``0 .. >= r`` of one (family, type), cached.

        ``relative_speed * S(replicas)`` from one vectorised call of the table (whose
        scalar and array look-ups give the same floats). O(size) once per doubling.
        """
        import numpy as np

        if self.table is None:
            raise InvalidInputError(f"model family {family!r}: no measured speed table given")
        old = self._cache.get((family, gpu_type))
        size = max(64, 2 * r, 2 * len(old) if old else 0)
        rel = self.override.get(gpu_type)
        if rel is None:
            rel = float(self.table.relative_speed(family, gpu_type))
        sc = self.table.scaling(family, gpu_type, np.arange(size + 1, dtype=np.int64))
        lut = [rel * float(x) for x in sc.tolist()]
        lut[0] = 0.0
        self._cache[(family, gpu_type)] = lut
        return lut

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description; the table as ``"bundled"`` when it is the
        bundled one (:meth:`aryl.speeds.SpeedTable.bundled`), else its whole content
        (:meth:`aryl.speeds.SpeedTable.to_dict`), so that the model reads back exactly."""
        table: Any = None
        if self.table is not None:
            from aryl.speeds import SpeedTable

            table = "bundled" if self.table is SpeedTable.bundled() else self.table.to_dict()
        return {
            "reference_gpu_type": self.reference_gpu_type,
            "factors": dict(self.factors),
            "table": table,
            "relative_speed_override": dict(self.override),
        }
