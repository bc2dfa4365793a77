"""Type stub of the compiled MCKP kernel (see ``_mckp.pyx`` and ``mckp.hpp``)."""

import numpy as np
from numpy.typing import NDArray

STAT_NAMES: tuple[str, ...]
N_STATS: int  # number of int64 diagnostics written by the solvers
STAT_N_CORE: int
STAT_TABLE_BYTES: int
STAT_USED: int
STAT_BAD_INDEX: int
STATUS_OK: int
STATUS_TABLE_LIMIT: int
STATUS_INF_VALUE: int
STATUS_BAD_WEIGHT: int

def solve_quantized(
    q: NDArray[np.int64],  # const int64_t[:, ::1], quantised values (<= 0: absent)
    weights: NDArray[np.int64],  # const int64_t[:, ::1], GPUs, >= 1 where q > 0
    capacity: int,  # int64_t
    max_table_bytes: int,  # int64_t
    choice: NDArray[np.int64],  # int64_t[::1], out: option per job, -1 = none
    stats: NDArray[np.int64],  # int64_t[::1], out: diagnostics (STAT_NAMES)
    dp_mode: int = ...,  # int: 0 automatic, 1 sparse only, 2 dense only (tests)
) -> int: ...  # STATUS_OK, STATUS_TABLE_LIMIT or STATUS_BAD_WEIGHT

def solve_values(
    values: NDArray[np.float64],  # const double[:, ::1], NaN = absent, <= 0 never chosen
    weights: NDArray[np.int64],  # const int64_t[:, ::1], GPUs, >= 1 where not NaN
    capacity: int,  # int64_t
    max_table_bytes: int,  # int64_t
    choice: NDArray[np.int64],  # int64_t[::1], out: option per job, -1 = none
    stats: NDArray[np.int64],  # int64_t[::1], out: diagnostics (STAT_NAMES)
    dp_mode: int = ...,  # int: 0 automatic, 1 sparse only, 2 dense only (tests)
) -> int: ...  # a STATUS_* code

def quantize(
    values: NDArray[np.float64],  # const double[::1]
    out: NDArray[np.int64],  # int64_t[::1], out: the quantised values
) -> int: ...  # -1, or the index of the first +-inf value

def solve_values_unit_steps(
    values: NDArray[np.float64],  # const double[:, ::1], NaN = absent, finite
    weights: NDArray[np.int64],  # const int64_t[:, ::1], GPUs, >= 1 where not NaN
    capacity: int,  # int64_t
    choice: NDArray[np.int64],  # int64_t[::1], out: option per job, -1 = none
    tops: NDArray[np.int64] | None = ...,  # columns >= tops[i] of row i are not read
    steps_g: NDArray[np.int64] | None = ...,  # promise: weights[i, k] == (k + 1) * steps_g[i]
) -> bool: ...  # True: choice is solve_values' answer; False: the shortcut refused

def unit_steps_stream(
    values: NDArray[np.float64],  # const double[:, ::1], NaN = absent, finite, max > 0
    capacity: int,  # int64_t
    choice: NDArray[np.int64],  # int64_t[::1], out: option per job, -1 = none
    tops: NDArray[np.int64],  # const int64_t[::1], row i's columns to read
    g: int,  # int64_t, weights[i, k] == (k + 1) * g
    guess: float = ...,  # > 0: the grid guessed from its frexp exponent; 0: none
) -> int: ...  # 0 answered (choice written), 1 refused, 2 the guess was wrong
