# cython: language_level=3
# distutils: language = c++
"""Exact multiple-choice knapsack kernel (Cython over the header ``mckp.hpp``).

Private: use :func:`aryl.elastic.solve_mckp`, which validates the input and
quantises the values before calling :func:`solve_quantized`.  The algorithm, its
tie rule and its floating-point margin are documented in ``mckp.hpp``.
"""

from libc.stdint cimport int64_t


cdef extern from "mckp.hpp" namespace "aryl::mckp" nogil:
    int c_solve "aryl::mckp::solve" (
        const int64_t* q, const int64_t* wt, int64_t n, int64_t K, int64_t C,
        int64_t max_table_bytes, int64_t* choice, int64_t* stats, int dp_mode) except +
    int N_STATS_C "aryl::mckp::N_STATS"


STAT_NAMES = (
    "n_classes", "n_core", "n_fixed", "n_core_alts", "dp_kind", "n_states",
    "table_bytes", "lb", "ub", "opt", "sparse_bytes",
)
N_STATS = len(STAT_NAMES)
STAT_N_CORE = 1
STAT_TABLE_BYTES = 6
assert N_STATS == N_STATS_C


def solve_quantized(
    const int64_t[:, ::1] q,
    const int64_t[:, ::1] weights,
    int64_t capacity,
    int64_t max_table_bytes,
    int64_t[::1] choice,
    int64_t[::1] stats,
    int dp_mode=0,
):
    """Solve the MCKP over quantised values ``q`` in place; return a status code.

    ``q`` and ``weights`` are C-contiguous int64 ``(n_jobs, n_options)``; ``choice``
    (int64, ``n_jobs``) receives the option per job (-1 = none) and ``stats``
    (int64, ``N_STATS``) the diagnostics named in ``STAT_NAMES``.  Returns 0, or 1
    when the dense table would exceed ``max_table_bytes``.  ``dp_mode`` is for
    tests: 0 automatic, 1 sparse DP only, 2 dense DP only.  Runs without the GIL.
    """
    cdef int64_t n = q.shape[0]
    cdef int64_t k = q.shape[1]
    cdef int status
    if weights.shape[0] != n or weights.shape[1] != k or choice.shape[0] != n:
        raise ValueError("solve_quantized: shape mismatch")
    if stats.shape[0] < N_STATS:
        raise ValueError("solve_quantized: stats too short")
    if n == 0:
        return 0
    if k == 0:
        choice[:] = -1
        return 0
    with nogil:
        status = c_solve(&q[0, 0], &weights[0, 0], n, k, capacity, max_table_bytes,
                         &choice[0], &stats[0], dp_mode)
    return status
