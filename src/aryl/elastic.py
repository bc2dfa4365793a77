"""Phase 2 of Aryl's scheduler: elastic allocation as a multiple-choice knapsack.

Every elastic job is one *class*; option ``k - 1`` of a class is "give the job ``k``
extra workers above its minimum", weighing ``k * gpus_per_worker`` GPUs and worth
the job-completion-time (JCT) reduction that those workers bring, net of the
rescale pause [Aryl]_ (docs/model.md, phase 2).  At most one option per class is
chosen so that the chosen weights fit the capacity and the total value is
maximal: the multiple-choice knapsack problem (MCKP).

Two layers:

* :func:`solve_mckp` — the bare MCKP over ``(values, weights, capacity)`` arrays,
  used by :func:`solve` and directly by the simulator at every scheduling event.
  ``backend="native"`` runs the compiled kernel :mod:`aryl._core._mckp`
  (an LP-bound reduction to a small *core* of classes followed by an exact
  dynamic programme over the core, in the spirit of Pisinger's minimal MCKP
  algorithm); ``backend="reference"`` runs the textbook dynamic programme of
  :mod:`aryl._reference.mckp`.  Both return the *same* choice (see the tie rule).
* :func:`solve` — the job-level request/reply API with frozen dataclasses and a
  reason code for every job.

Exactness and the epsilon policy
--------------------------------
Values are floats; to make "optimal" and "tie" well defined, both backends first
*quantise* the values onto a power-of-two grid: with ``v_max`` the largest
positive value and ``e`` such that ``2**(e-1) <= v_max < 2**e``, the quantum is
``q = 2**(e - 40)`` and option values become the integers ``rint(v / q)``
(``<= 2**40``).  The optimisation is exact over these integers (int64, no
rounding anywhere in the decision).  Consequences:

* the returned choice is optimal for the true values up to at most
  ``n_jobs * q <= n_jobs * v_max * 2**-39`` (about ``1.8e-12 * v_max`` per job);
* values that differ by less than about one quantum count as equal (ties);
* positive values below half a quantum (at most ``v_max * 2**-40``) round to 0
  and are never chosen, as are values ``<= 0`` and NaN (absent) options;
* "values differ by less than a quantum" is the only epsilon: the native kernel's
  floating-point LP bounds are used with a safety margin (``mckp.hpp``) and never
  decide between two integer totals.

Tie rule (identical in both backends)
-------------------------------------
Among all feasible choices, the result is the unique one that

1. maximises the total quantised value, then
2. minimises the total GPUs used, then
3. is lexicographically smallest in job order under the per-job option rank
   "more GPUs first, then lower option index, no option last" — i.e. earlier
   jobs (lower row index) get the larger share when the split is otherwise a tie.

The native kernel eliminates options only when they *strictly* cannot reach the
incumbent value, so every optimal solution survives the reduction and the core
dynamic programme applies the same rule (see ``mckp.hpp``).
"""

from __future__ import annotations

import enum
import logging
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from aryl._reference.mckp import MAX_TABLE_BYTES as _REF_MAX_TABLE_BYTES
from aryl.errors import InvalidInputError

__all__ = [
    "MAX_TABLE_BYTES",
    "DecisionReason",
    "ElasticDecision",
    "ElasticJob",
    "ElasticReply",
    "ElasticRequest",
    "MCKPResult",
    "jct_reduction_table",
    "solve",
    "solve_mckp",
    "throughput",
]

logger = logging.getLogger(__name__)

#: Largest working table (bytes) either MCKP backend may allocate (defined once, in
#: the reference twin); beyond it the solver raises :class:`~aryl.errors.InvalidInputError`.
MAX_TABLE_BYTES: int = _REF_MAX_TABLE_BYTES

#: Bits of the value grid: quantised option values are at most ``2**QUANT_BITS``.
QUANT_BITS: int = 40

#: Jobs (classes) per MCKP instance, so that sums of quantised values fit in int64.
MAX_JOBS: int = 1 << 22

Backend = Literal["native", "reference"]


@dataclass(frozen=True)
class MCKPResult:
    """Solution of one MCKP instance.

    Attributes
    ----------
    choice : ndarray of int64, shape (n_jobs,)
        Chosen option (column) per job, ``-1`` for none.
    value : float
        Sum of the chosen (unquantised) values, summed by :func:`numpy.sum` in job order.
    used_gpus : int
        Sum of the chosen weights.
    """

    choice: NDArray[np.int64]
    value: float
    used_gpus: int


# --------------------------------------------------------------------------- MCKP


def _check_capacity(capacity: Any) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, numbers.Integral):
        raise InvalidInputError(f"capacity must be an integer, got {type(capacity).__name__}")
    cap = int(capacity)
    if cap < 0:
        raise InvalidInputError(f"capacity must be >= 0, got {cap}")
    if cap > np.iinfo(np.int64).max // 4:
        raise InvalidInputError(f"capacity {cap} is too large (limit 2**61)")
    return cap


def _asarray(name: str, x: Any) -> NDArray[Any]:
    """``np.asarray`` whose failures (ragged lists, bad scalars) name the argument."""
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"{name} cannot be read as an array: {exc}") from None


def _is_int_dtype(arr: NDArray[Any]) -> bool:
    """Integer dtype (not bool, not timedelta) whose values fit in int64."""
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        return False
    return not (arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max)


def _validate(
    values: ArrayLike, weights: ArrayLike, capacity: Any
) -> tuple[NDArray[np.float64], NDArray[np.int64], int]:
    """Shapes, dtypes and capacity; the entries are checked by :func:`_check_entries`
    (the reference backend) or by the native kernel itself, with the same messages."""
    v = _asarray("values", values)
    w = _asarray("weights", weights)
    if v.ndim != 2:
        raise InvalidInputError(f"values must be 2-D (n_jobs, n_options), got shape {v.shape}")
    if w.shape != v.shape:
        raise InvalidInputError(
            f"weights must have the shape of values {v.shape}, got shape {w.shape}"
        )
    if v.dtype.kind not in "fiu":
        raise InvalidInputError(f"values must be a float array, got dtype {v.dtype}")
    if not _is_int_dtype(w):
        raise InvalidInputError(
            f"weights must be an integer array within int64, got dtype {w.dtype}"
        )
    if v.shape[0] > MAX_JOBS:
        raise InvalidInputError(f"values has {v.shape[0]} jobs; the limit is {MAX_JOBS}")
    v = np.ascontiguousarray(v, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.int64)
    return v, w, _check_capacity(capacity)


def _entry_error(
    inf: bool, flat_index: int, v: NDArray[np.float64], w: NDArray[np.int64]
) -> InvalidInputError:
    """The error for an inf value or a present option's weight < 1, naming the cell."""
    row, col = divmod(flat_index, v.shape[1])
    if inf:
        return InvalidInputError(
            f"values must be finite or NaN (absent option); found {v[row, col]} at "
            f"values[{row}, {col}]"
        )
    return InvalidInputError(
        f"weights must be >= 1 GPU for every present (non-NaN) option; weights[{row}, {col}] "
        f"= {w[row, col]}"
    )


def _check_entries(v: NDArray[np.float64], w: NDArray[np.int64]) -> None:
    """Refuse inf values (first by flat index), then present options with weight < 1."""
    inf = np.isinf(v).ravel()
    if inf.any():
        raise _entry_error(True, int(np.argmax(inf)), v, w)
    bad = ((w < 1) & ~np.isnan(v)).ravel()
    if bad.any():
        raise _entry_error(False, int(np.argmax(bad)), v, w)


def _quantize(values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Map values onto the integer grid of the epsilon policy (module docstring).

    Values ``<= 0``, NaN and values below half a quantum become 0 (never chosen).
    """
    positive = values > 0  # NaN compares False
    if not positive.any():
        return np.zeros(values.shape, dtype=np.int64)
    vmax = float(values.max(where=positive, initial=0.0))
    _, exponent = math.frexp(vmax)  # vmax = m * 2**exponent, 0.5 <= m < 1
    # Exact scaling by 2**(QUANT_BITS - exponent); np.ldexp, not a float factor, since
    # that factor overflows for tiny values (vmax < 2**-984, e.g. 1e-300).
    scaled = np.ldexp(np.where(positive, values, 0.0), QUANT_BITS - exponent)
    return np.rint(scaled).astype(np.int64)


def solve_mckp(
    values: ArrayLike,
    weights: ArrayLike,
    capacity: int,
    *,
    backend: Backend = "native",
    validate: bool = True,
    max_table_bytes: int = MAX_TABLE_BYTES,
) -> MCKPResult:
    """Solve a multiple-choice knapsack exactly: at most one option per job.

    Parameters
    ----------
    values : array_like of float64, shape (n_jobs, n_options)
        Value of each option (for :func:`solve`, seconds of JCT reduction).  NaN marks
        an absent option; options with value ``<= 0`` are never chosen; ``inf`` is an
        error.
    weights : array_like of int64, shape (n_jobs, n_options)
        GPUs of each option, ``>= 1`` wherever the value is not NaN (ignored where NaN).
    capacity : int
        GPUs available, ``0 <= capacity < 2**61`` (a Python or numpy integer; floats
        and bools are refused).
    backend : {"native", "reference"}
        The compiled kernel (default) or the pure-Python twin; same results.
    validate : bool
        ``False`` skips the checks of shapes, dtypes, capacity and ``max_table_bytes``
        (the caller guarantees them; arrays are only made C-contiguous float64 /
        int64, a no-op for the simulator's arrays): the simulator's fast path.  The
        entries (inf values, weights < 1) are checked either way, by the kernel in
        the same pass that reads them.
    max_table_bytes : int
        Memory limit (bytes, ``>= 0``) for the working tables of the exact dynamic
        programme: the sparse DP's state lists and the dense fallback table of the
        native kernel, the ``(n_jobs + 1) x (capacity + 1)`` table of the reference.

    Returns
    -------
    MCKPResult
        ``choice`` (int64, ``-1`` = none), total ``value`` and ``used_gpus``.

    Raises
    ------
    InvalidInputError
        Bad shapes or dtypes (naming ``values``, ``weights`` or ``capacity``), inf
        values or weights < 1 (naming the first such cell, an inf before a weight),
        capacity < 0 or not an integer, more than 2**22 jobs, a
        chosen total that overflows float64, ``max_table_bytes`` not an integer
        ``>= 0``, or a dynamic-programming table that would exceed
        ``max_table_bytes`` (only for very hard instances, e.g. thousands of classes
        with strongly correlated values and a large capacity).

    Notes
    -----
    Exact up to the quantisation of values onto a grid of ``2**-40`` of the largest
    value (module docstring: epsilon policy), with the deterministic tie rule:
    maximum value, then fewest GPUs, then lexicographically smallest in job order
    under the per-job rank "more GPUs first, lower option index, none last".

    Complexity: native — O(N) for the per-job hulls, the LP bound (a radix select on
    the segments' efficiencies) and the reduction over the N present options, then a
    bound-pruned
    sparse dynamic programme over the remaining *core* jobs (typically a few dozen
    on concave JCT curves), falling back to a dense O(core options * capacity)
    programme with a 1-byte choice per (core job, GPU); reference — O(N * capacity)
    time and O(n_jobs * capacity) memory.  The native kernel releases the GIL.

    Per-call overhead is a few tens of microseconds for simulator-sized instances
    (tens of jobs); ``validate=False`` skips only the Python-side checks of shapes,
    dtypes and scalars (a few microseconds).  The native kernel quantises the values
    itself (bit for bit as the reference's ``_quantize``) and reuses a per-thread
    workspace across calls.

    References
    ----------
    .. [Aryl] J. Li et al., "Aryl: An Elastic Cluster Scheduler for Deep Learning",
       arXiv:2202.07896 (EuroSys'23 "Lyra"), phase-2 elastic scaling as an MCKP.
    """
    if validate:
        v, w, cap = _validate(values, weights, capacity)
        if isinstance(max_table_bytes, bool) or not isinstance(max_table_bytes, numbers.Integral):
            raise InvalidInputError(
                f"max_table_bytes must be an integer, got {type(max_table_bytes).__name__}"
            )
        if max_table_bytes < 0:
            raise InvalidInputError(f"max_table_bytes must be >= 0, got {max_table_bytes}")
    else:
        v = np.ascontiguousarray(values, dtype=np.float64)  # no copy when already so
        w = np.ascontiguousarray(weights, dtype=np.int64)
        cap = int(capacity)
    if backend == "native":
        from aryl._core import _mckp

        choice = np.empty(v.shape[0], dtype=np.int64)
        stats = np.zeros(_mckp.N_STATS, dtype=np.int64)
        status = _mckp.solve_values(v, w, cap, int(max_table_bytes), choice, stats)
        if status != _mckp.STATUS_OK:
            raise _kernel_error(status, stats, v, w, cap, int(max_table_bytes))
    elif backend == "reference":
        from aryl._reference import mckp as _ref

        _check_entries(v, w)
        choice = _ref.solve_quantized(_quantize(v), w, cap, max_table_bytes=int(max_table_bytes))
    else:
        raise InvalidInputError(f"backend must be 'native' or 'reference', got {backend!r}")
    rows = np.flatnonzero(choice >= 0)
    flat = rows * v.shape[1] + choice[rows]
    with np.errstate(over="ignore"):
        total = float(v.ravel().take(flat).sum())
    if not math.isfinite(total):
        raise InvalidInputError(
            "values too large: the chosen options' total overflows float64 (scale them down)"
        )
    return MCKPResult(choice=choice, value=total, used_gpus=int(w.ravel().take(flat).sum()))


def _kernel_error(
    status: int,
    stats: NDArray[np.int64],
    v: NDArray[np.float64],
    w: NDArray[np.int64],
    cap: int,
    max_table_bytes: int,
) -> InvalidInputError:
    """The error for a native kernel status other than ``STATUS_OK``."""
    from aryl._core import _mckp

    if status in (_mckp.STATUS_INF_VALUE, _mckp.STATUS_BAD_WEIGHT):
        return _entry_error(
            status == _mckp.STATUS_INF_VALUE, int(stats[_mckp.STAT_BAD_INDEX]), v, w
        )
    return InvalidInputError(
        f"MCKP table of {int(stats[_mckp.STAT_TABLE_BYTES])} bytes exceeds "
        f"max_table_bytes={max_table_bytes} (core of "
        f"{int(stats[_mckp.STAT_N_CORE])} jobs, capacity {cap})"
    )


def _mckp_stats(
    values: ArrayLike,
    weights: ArrayLike,
    capacity: int,
    max_table_bytes: int = MAX_TABLE_BYTES,
    dp_mode: int = 0,
) -> dict[str, int]:
    """Diagnostics of the native kernel on one instance (core size, DP kind, states).

    Keys: ``n_classes``, ``n_core``, ``n_fixed``, ``n_core_alts``, ``dp_kind`` (0 none,
    1 sparse, 2 dense), ``n_states``, ``table_bytes``, ``lb``, ``ub``, ``opt`` (the
    last three in quantised units), ``sparse_bytes`` (peak bytes of the sparse DP's
    state vectors, at most ``max_table_bytes``), ``used`` (GPUs of the choice),
    ``bad_index`` (-1, or the first invalid cell's flat index), ``select_levels``
    (histogram passes of the radix select for the LP break), ``status``.  ``dp_mode``
    forces the DP for tests (0 automatic, 1 sparse only, 2 dense only).  For benchmarks
    and tests; not public API.
    """
    from aryl._core import _mckp

    v, w, cap = _validate(values, weights, capacity)
    choice = np.empty(v.shape[0], dtype=np.int64)
    stats = np.zeros(_mckp.N_STATS, dtype=np.int64)
    status = _mckp.solve_values(v, w, cap, int(max_table_bytes), choice, stats, dp_mode)
    out = {name: int(stats[i]) for i, name in enumerate(_mckp.STAT_NAMES)}
    out["status"] = int(status)
    return out


# --------------------------------------------------------------------------- JCT table


def throughput(workers: ArrayLike, alpha: ArrayLike) -> NDArray[np.float64]:
    """Sub-linear throughput ``T(w) = w / (1 + alpha * (w - 1))`` (docs/model.md).

    Parameters
    ----------
    workers : array_like of int or float
        Worker counts ``w >= 0`` (broadcast with ``alpha``).
    alpha : array_like of float
        Scaling loss per extra worker, ``>= 0`` (0 = linear speed-up).

    Returns
    -------
    ndarray of float64
        Throughput in single-worker units (``T(1) == 1``).  O(size) time.
    """
    w = np.asarray(workers, dtype=np.float64)
    a = np.asarray(alpha, dtype=np.float64)
    out: NDArray[np.float64] = w / (1.0 + a * (w - 1.0))
    return out


def _as_1d(name: str, x: ArrayLike, dtype: type, n: int | None) -> NDArray[Any]:
    arr = _asarray(name, x)
    if arr.ndim != 1:
        raise InvalidInputError(f"{name} must be 1-D, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise InvalidInputError(f"{name} must have length {n}, got {arr.shape[0]}")
    if dtype is np.int64:
        if not (_is_int_dtype(arr) or arr.size == 0):
            raise InvalidInputError(
                f"{name} must be an integer array within int64, got dtype {arr.dtype}"
            )
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind not in "fiu":
        raise InvalidInputError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    out = arr.astype(np.float64, copy=False)
    if not np.isfinite(out).all():
        raise InvalidInputError(f"{name} must be finite")
    return out


def _table_from_throughput(
    remaining_work: NDArray[np.float64],
    current_workers: NDArray[np.int64],
    min_workers: NDArray[np.int64],
    max_extra: NDArray[np.int64],
    gpus_per_worker: NDArray[np.int64],
    tput: NDArray[np.float64],
    rescale_pause_s: float,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Values/weights from throughputs ``tput[i, k] = T_i(min_i + k)``, k = 0..K."""
    n_cols = tput.shape[1] - 1
    k = np.arange(n_cols + 1, dtype=np.int64)
    target = min_workers[:, None] + k[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        time_s = remaining_work[:, None] / tput
    # zero remaining work: no time left at any size, regardless of throughput
    time_s = np.where(remaining_work[:, None] == 0.0, 0.0, time_s)
    jct = time_s + rescale_pause_s * (target != current_workers[:, None])
    values = jct[:, :1] - jct[:, 1:]
    values[k[None, 1:] > max_extra[:, None]] = np.nan
    weights = k[None, 1:] * gpus_per_worker[:, None]
    return np.ascontiguousarray(values), np.ascontiguousarray(weights)


def jct_reduction_table(
    remaining_work: ArrayLike,
    current_workers: ArrayLike,
    min_workers: ArrayLike,
    max_workers: ArrayLike,
    gpus_per_worker: ArrayLike,
    alpha: ArrayLike,
    rescale_pause_s: float,
    *,
    max_table_bytes: int = MAX_TABLE_BYTES,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """MCKP values and weights of extra workers for elastic jobs (docs/model.md, phase 2).

    With ``T(w) = w / (1 + alpha * (w - 1))``, ``b = min_workers``,
    ``c = current_workers`` and remaining work ``R`` (single-worker seconds), the
    JCT of ``b + k`` workers is ``J(k) = R / T(b + k) + pause * [b + k != c]``; column
    ``k - 1`` holds ``J(0) - J(k)`` (seconds, may be <= 0) and weighs ``k * g`` GPUs.

    Parameters
    ----------
    remaining_work : array_like of float64, shape (n_jobs,)
        Remaining work in single-worker seconds, finite, ``>= 0``.
    current_workers, min_workers, max_workers, gpus_per_worker : array_like of int64
        Shape (n_jobs,) each.
        ``current_workers >= 0``, ``min_workers >= 1``, ``max_workers >= min_workers``,
        ``gpus_per_worker >= 1``.
    alpha : array_like of float64, shape (n_jobs,)
        Throughput loss parameter per job, finite, ``>= 0``.
    rescale_pause_s : float
        Pause of a rescale in seconds, finite, ``>= 0``.
    max_table_bytes : int
        Limit for the returned tables (16 bytes per cell); a larger request raises
        instead of allocating (e.g. ``max_workers`` of 10**9).

    Returns
    -------
    values : ndarray of float64, shape (n_jobs, max(max_workers - min_workers))
        JCT reduction; NaN beyond a job's ``max_workers``.
    weights : ndarray of int64, same shape
        ``k * gpus_per_worker`` (also filled where the value is NaN).

    Raises
    ------
    InvalidInputError
        Shapes differ, wrong dtypes, a value out of the ranges above, a weight
        ``(max_workers - min_workers) * gpus_per_worker`` above 2**61, or tables
        larger than ``max_table_bytes``.

    Notes
    -----
    Vectorised: O(n_jobs * max_extra) time and memory, no per-job Python loop.

    References
    ----------
    .. [Aryl] arXiv:2202.07896, §4 (JCT reduction of an extra worker).
    """
    r = _as_1d("remaining_work", remaining_work, np.float64, None)
    n = r.shape[0]
    c = _as_1d("current_workers", current_workers, np.int64, n)
    b = _as_1d("min_workers", min_workers, np.int64, n)
    m = _as_1d("max_workers", max_workers, np.int64, n)
    g = _as_1d("gpus_per_worker", gpus_per_worker, np.int64, n)
    a = _as_1d("alpha", alpha, np.float64, n)
    try:
        pause = float(rescale_pause_s)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"rescale_pause_s must be a number, got {rescale_pause_s!r}"
        ) from None
    if not math.isfinite(pause) or pause < 0:
        raise InvalidInputError(f"rescale_pause_s must be finite and >= 0, got {pause}")
    if (r < 0).any():
        raise InvalidInputError("remaining_work must be >= 0")
    if (c < 0).any():
        raise InvalidInputError("current_workers must be >= 0")
    if (b < 1).any():
        raise InvalidInputError("min_workers must be >= 1")
    if (m < b).any():
        raise InvalidInputError("max_workers must be >= min_workers")
    if (g < 1).any():
        raise InvalidInputError("gpus_per_worker must be >= 1")
    if (a < 0).any():
        raise InvalidInputError("alpha must be >= 0")
    extra = m - b
    n_cols = int(extra.max()) if n else 0
    if n and float((extra.astype(np.float64) * g).max()) > 2.0**61:
        raise InvalidInputError(
            "gpus_per_worker * (max_workers - min_workers) must be <= 2**61 (int64 weights)"
        )
    if n * (n_cols + 1) * 16 > max_table_bytes:
        raise InvalidInputError(
            f"max_workers: a table of {n} jobs x {n_cols} extra-worker options needs "
            f"{n * (n_cols + 1) * 16} bytes, above max_table_bytes={max_table_bytes}"
        )
    w = b[:, None] + np.arange(n_cols + 1, dtype=np.int64)[None, :]
    tput = throughput(w, a[:, None])
    return _table_from_throughput(r, c, b, extra, g, tput, pause)


# --------------------------------------------------------------------------- job level


class DecisionReason(enum.Enum):
    """Why a job ended up with its target size (one per :class:`ElasticDecision`)."""

    SCALED_OUT = "scaled_out"  #: more workers than now
    SCALED_IN = "scaled_in"  #: fewer workers than now (down to at least min_workers)
    AT_MAX = "at_max"  #: unchanged, already at max_workers (includes rigid jobs)
    NO_GAIN = "no_gain"  #: unchanged; no larger size beats it (JCT gain net of the pause)
    NO_CAPACITY = "no_capacity"  #: unchanged; a larger size would help but GPUs went elsewhere


@dataclass(frozen=True)
class ElasticJob:
    """One elastic (or rigid, ``min_workers == max_workers``) running job.

    Attributes
    ----------
    job_id : str or int
        Unique within a request.
    gpus_per_worker : int
        GPUs per worker, ``>= 1``.
    current_workers : int
        Workers now, ``min_workers <= current_workers <= max_workers``.
    min_workers, max_workers : int
        Base size ``>= 1`` and largest size (``>= min_workers``).
    remaining_work : float
        Remaining work in single-worker seconds (``>= 0``).
    alpha : float or None
        Parameter of ``T(w) = w / (1 + alpha (w - 1))``; exactly one of ``alpha`` and
        ``throughput_table`` must be given.
    throughput_table : sequence of float or None
        Explicit ``T(w)`` for ``w = 1..max_workers`` (all > 0).
    """

    job_id: str | int
    gpus_per_worker: int
    current_workers: int
    min_workers: int
    max_workers: int
    remaining_work: float
    alpha: float | None = None
    throughput_table: tuple[float, ...] | None = None


@dataclass(frozen=True)
class ElasticRequest:
    """Input of :func:`solve`: jobs, free GPUs and the rescale pause (seconds)."""

    jobs: Sequence[ElasticJob]
    free_gpus: int
    rescale_pause_s: float = 30.0


@dataclass(frozen=True)
class ElasticDecision:
    """Target size of one job.

    ``extra_workers = target_workers - min_workers``; ``jct_reduction_s`` is the
    MCKP value of the choice, ``J(0) - J(extra)`` (0 for no extra workers).
    """

    job_id: str | int
    target_workers: int
    extra_workers: int
    jct_reduction_s: float
    reason: DecisionReason


@dataclass(frozen=True)
class ElasticReply:
    """Output of :func:`solve`.

    Attributes
    ----------
    decisions : tuple of ElasticDecision
        One per job, in request order.
    total_value_s : float
        Sum of ``jct_reduction_s``.
    used_gpus : int
        GPUs held by extra workers after the decision.
    capacity_gpus : int
        The MCKP capacity: free GPUs + GPUs of the jobs' current extras.
    """

    decisions: tuple[ElasticDecision, ...]
    total_value_s: float
    used_gpus: int
    capacity_gpus: int


#: Largest count (workers, GPUs) :func:`solve` accepts, so that sums stay in int64.
_MAX_COUNT = 1 << 61


def _int_field(job: ElasticJob, name: str, minimum: int) -> int:
    x = getattr(job, name)
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise InvalidInputError(f"job {job.job_id!r}: {name} must be an integer, got {x!r}")
    value = int(x)
    if not minimum <= value <= _MAX_COUNT:
        raise InvalidInputError(
            f"job {job.job_id!r}: {name} must be in [{minimum}, 2**61], got {value}"
        )
    return value


def _float_field(job: ElasticJob, name: str) -> float:
    x = getattr(job, name)
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or x < 0:
        raise InvalidInputError(f"job {job.job_id!r}: {name} must be finite and >= 0, got {x!r}")
    return float(x)


def _job_throughput(job: ElasticJob, sizes: NDArray[np.int64]) -> NDArray[np.float64]:
    """``T(w)`` of one job at the worker counts ``sizes`` (from alpha or its table)."""
    if job.alpha is not None:
        return throughput(sizes, job.alpha)
    assert job.throughput_table is not None
    return np.asarray(job.throughput_table, dtype=np.float64)[sizes - 1]


def _best_gain_beyond(job: ElasticJob, usable: int, pause: float) -> float:
    """Largest value ``J(0) - J(k)`` over ``usable < k <= max - min`` (too big to fit).

    The current size lies within ``usable`` (its extras count in the capacity), so the
    pause term is constant there; ``T`` of an alpha job is monotone in ``w``, so its
    largest value is at one end of the range.  Same float operations as the table.
    """
    lo, hi = job.min_workers + usable + 1, job.max_workers
    if job.alpha is not None:
        sizes = np.array([lo, hi], dtype=np.int64)
    else:
        sizes = np.arange(lo, hi + 1, dtype=np.int64)
    base = np.array([job.min_workers], dtype=np.int64)
    work = float(job.remaining_work)
    with np.errstate(divide="ignore", invalid="ignore"):
        t0 = work / _job_throughput(job, base) if work else np.zeros(1)
        tk = work / _job_throughput(job, sizes) if work else np.zeros(sizes.size)
    j0 = t0 + pause * (base != job.current_workers)
    jk = tk + pause * (sizes != job.current_workers)
    return float((j0 - jk).max())


def solve(request: ElasticRequest, *, backend: Backend = "native") -> ElasticReply:
    """Decide each elastic job's size for the next period (Aryl phase 2).

    Builds the JCT-reduction MCKP of :func:`jct_reduction_table` (or from each
    job's explicit throughput table), with capacity = ``free_gpus`` plus the GPUs
    that the jobs' current extra workers hold (extras are re-decided
    from scratch), and solves it with :func:`solve_mckp`.

    Parameters
    ----------
    request : ElasticRequest
        Jobs, free GPUs (``>= 0``) and the rescale pause in seconds (``>= 0``).
    backend : {"native", "reference"}
        MCKP backend; both give identical decisions.

    Returns
    -------
    ElasticReply
        One decision per job in request order.

    Raises
    ------
    InvalidInputError
        Malformed input: ``request`` not an :class:`ElasticRequest`, non-integer,
        negative or above-2**61 counts, ``gpus_per_worker < 1``, ``min_workers < 1``,
        sizes out of order (``max_workers < min_workers``, ``current_workers`` outside
        ``[min_workers, max_workers]``: the job is named; the state reader and
        :meth:`aryl.scheduling.SchedulePlan.apply` refuse the same),
        negative or non-finite work/alpha/pause, both or neither of
        ``alpha``/``throughput_table``, a table of the wrong length or with
        non-numeric or non-positive entries, duplicate or unhashable job ids,
        ``free_gpus < 0``, a capacity above 2**61.

    Notes
    -----
    Ties follow :func:`solve_mckp`: among equally good allocations the one with
    fewest GPUs, then earlier jobs (request order) get more workers.
    Complexity: that of :func:`solve_mckp` plus O(n_jobs * max_extra) to build, where
    ``max_extra`` counts only sizes whose extra workers fit the capacity (a huge
    ``max_workers`` costs nothing; larger sizes are only checked for the reason).
    Reasons for unchanged jobs: ``AT_MAX`` if at ``max_workers``, else ``NO_GAIN`` if
    no larger size has a larger value, else ``NO_CAPACITY``.

    References
    ----------
    .. [Aryl] arXiv:2202.07896 (EuroSys'23 "Lyra"), elastic scaling, §4.
    """
    if not isinstance(request, ElasticRequest):
        raise InvalidInputError(
            f"request must be an ElasticRequest, got {type(request).__name__}"
        )
    try:
        jobs = list(request.jobs)
    except TypeError:
        raise InvalidInputError(
            f"jobs must be a sequence of ElasticJob, got {type(request.jobs).__name__}"
        ) from None
    free = request.free_gpus
    if isinstance(free, bool) or not isinstance(free, numbers.Integral) or free < 0:
        raise InvalidInputError(f"free_gpus must be an integer >= 0, got {free!r}")
    pause = request.rescale_pause_s
    if isinstance(pause, bool) or not isinstance(pause, numbers.Real) or not (
        math.isfinite(pause) and pause >= 0
    ):
        raise InvalidInputError(f"rescale_pause_s must be finite and >= 0, got {pause!r}")
    seen: set[str | int] = set()
    ok: list[int] = []
    for idx, job in enumerate(jobs):
        if not isinstance(job, ElasticJob):
            raise InvalidInputError(f"jobs[{idx}] must be an ElasticJob, got {type(job).__name__}")
        try:
            duplicate = job.job_id in seen
        except TypeError:
            raise InvalidInputError(
                f"jobs[{idx}]: job_id must be hashable (str or int), got {job.job_id!r}"
            ) from None
        if duplicate:
            raise InvalidInputError(f"duplicate job_id {job.job_id!r}")
        seen.add(job.job_id)
        _int_field(job, "gpus_per_worker", 1)
        cur = _int_field(job, "current_workers", 0)
        lo = _int_field(job, "min_workers", 1)
        hi = _int_field(job, "max_workers", 1)
        _float_field(job, "remaining_work")
        if (job.alpha is None) == (job.throughput_table is None):
            raise InvalidInputError(
                f"job {job.job_id!r}: give exactly one of alpha and throughput_table"
            )
        if job.alpha is not None:
            _float_field(job, "alpha")
        else:
            try:
                table = np.asarray(job.throughput_table, dtype=np.float64)
            except (TypeError, ValueError):
                raise InvalidInputError(
                    f"job {job.job_id!r}: throughput_table must be a sequence of numbers"
                ) from None
            if table.shape != (hi,):
                raise InvalidInputError(
                    f"job {job.job_id!r}: throughput_table must have max_workers={hi} "
                    f"entries (for 1..max_workers workers), got shape {table.shape}"
                )
            if not (np.isfinite(table).all() and (table > 0).all()):
                raise InvalidInputError(
                    f"job {job.job_id!r}: throughput_table entries must be finite and > 0"
                )
        if hi < lo:
            raise InvalidInputError(f"job {job.job_id!r}: max_workers {hi} < min_workers {lo}")
        if not lo <= cur <= hi:
            raise InvalidInputError(
                f"job {job.job_id!r}: current_workers {cur} outside [min_workers, "
                f"max_workers] = [{lo}, {hi}]"
            )
        ok.append(idx)

    sel = [jobs[i] for i in ok]
    n = len(sel)
    # Python ints: exact, then checked against the solver's int64 range.
    capacity = int(free) + sum(
        (int(j.current_workers) - int(j.min_workers)) * int(j.gpus_per_worker) for j in sel
    )
    if capacity > _MAX_COUNT:
        raise InvalidInputError(
            f"free_gpus plus the GPUs of current extra workers is {capacity}, above 2**61"
        )
    r = np.array([j.remaining_work for j in sel], dtype=np.float64)
    c = np.array([j.current_workers for j in sel], dtype=np.int64)
    b = np.array([j.min_workers for j in sel], dtype=np.int64)
    g = np.array([j.gpus_per_worker for j in sel], dtype=np.int64)
    # Only options that fit the capacity can be chosen: the table stops there, so its
    # size is bounded by the capacity, not by max_workers (which may be huge).
    usable = np.array(
        [min(j.max_workers - j.min_workers, capacity // j.gpus_per_worker) for j in sel],
        dtype=np.int64,
    )
    n_cols = int(usable.max()) if n else 0
    if n * (n_cols + 1) * 16 > MAX_TABLE_BYTES:
        raise InvalidInputError(
            f"free_gpus: a table of {n} jobs x {n_cols} extra-worker options exceeds "
            f"{MAX_TABLE_BYTES} bytes"
        )
    tput = np.ones((n, n_cols + 1), dtype=np.float64)
    for row, job in enumerate(sel):
        sizes = np.arange(job.min_workers, job.min_workers + int(usable[row]) + 1)
        tput[row, : sizes.size] = _job_throughput(job, sizes)
    values, weights = _table_from_throughput(r, c, b, usable, g, tput, float(pause))
    result = solve_mckp(values, weights, capacity, backend=backend)

    decisions: list[ElasticDecision | None] = [None] * len(jobs)
    for row, idx in enumerate(ok):
        job = jobs[idx]
        k = int(result.choice[row]) + 1  # extra workers
        gain = float(values[row, k - 1]) if k > 0 else 0.0
        target = job.min_workers + k
        if target > job.current_workers:
            reason = DecisionReason.SCALED_OUT
        elif target < job.current_workers:
            reason = DecisionReason.SCALED_IN
        elif target == job.max_workers:
            reason = DecisionReason.AT_MAX
        else:
            larger = values[row, k:]
            better = bool((larger[~np.isnan(larger)] > gain).any())
            if not better and usable[row] < job.max_workers - job.min_workers:
                better = _best_gain_beyond(job, int(usable[row]), float(pause)) > gain
            reason = DecisionReason.NO_CAPACITY if better else DecisionReason.NO_GAIN
        decisions[idx] = ElasticDecision(job.job_id, target, k, gain, reason)
    final = tuple(d for d in decisions if d is not None)
    return ElasticReply(
        decisions=final,
        total_value_s=result.value,
        used_gpus=result.used_gpus,
        capacity_gpus=capacity,
    )
