# cython: language_level=3
# distutils: language = c++
"""Exact multiple-choice knapsack kernel (Cython over the header ``mckp.hpp``).

Private: use :func:`aryl.elastic.solve_mckp`, which checks shapes and dtypes and
calls :func:`solve_values` (the kernel quantises the values and checks the entries
itself).  :func:`solve_quantized` takes values already quantised, :func:`quantize`
exposes the kernel's quantisation to the tests, :func:`solve_values_unit_steps` the
step shortcut (the native Aryl pass calls it before the solver).  The algorithm,
its tie rule and its floating-point margin are documented in ``mckp.hpp``.
"""

from libc.math cimport INFINITY
from libc.stdint cimport int64_t


cdef extern from "mckp.hpp" namespace "aryl::mckp" nogil:
    int c_solve "aryl::mckp::solve" (
        const int64_t* q, const int64_t* wt, int64_t n, int64_t K, int64_t C,
        int64_t max_table_bytes, int64_t* choice, int64_t* stats, int dp_mode) except +
    int c_solve_values "aryl::mckp::solve_values" (
        const double* v, const int64_t* wt, int64_t n, int64_t K, int64_t C,
        int64_t max_table_bytes, int64_t* choice, int64_t* stats, int dp_mode) except +
    int c_quantize "aryl::mckp::quantize" (
        const double* v, int64_t n_entries, int64_t* q, int64_t* bad_index)
    bint c_solve_values_unit_steps "aryl::mckp::solve_values_unit_steps" (
        const double* v, const int64_t* wt, int64_t n, int64_t K, int64_t C, double vmax,
        const int64_t* tops, const int64_t* steps_g, int64_t* choice) except +
    int N_STATS_C "aryl::mckp::N_STATS"
    cdef cppclass StepRun "aryl::mckp::UnitStepStream::Run":
        int64_t k
        bint push(double x)
    cdef cppclass StepCursor "aryl::mckp::UnitStepStream::Cursor":
        bint on()
        int64_t begin_class(int64_t top)
        StepRun run()
        void end_class(const StepRun& r, const double* x, int64_t lim)
    cdef cppclass UnitStepStream "aryl::mckp::UnitStepStream":
        StepCursor begin(int64_t n, int64_t K, int64_t C, int64_t g) except +
        void finish(const StepCursor& cur, double vmax)
        int solve[F](int64_t C, int64_t* out, int64_t offset, F row) except +


cdef extern from *:
    """
    // the rows of a C-contiguous array, for UnitStepStream::solve (unit_steps_stream)
    struct ArrayRows {
      const double* v = nullptr;
      const int64_t* tops = nullptr;
      int64_t K = 0;
      const double* operator()(int64_t i, int64_t* top) const {
        *top = tops[i] < K ? tops[i] : K;
        return v + i * K;
      }
    };
    """
    cdef cppclass ArrayRows:
        const double* v
        const int64_t* tops
        int64_t K


STAT_NAMES = (
    "n_classes", "n_core", "n_fixed", "n_core_alts", "dp_kind", "n_states",
    "table_bytes", "lb", "ub", "opt", "sparse_bytes", "used", "bad_index", "select_levels",
)
N_STATS = len(STAT_NAMES)
STAT_N_CORE = 1
STAT_TABLE_BYTES = 6
STAT_USED = 11
STAT_BAD_INDEX = 12
STATUS_OK = 0
STATUS_TABLE_LIMIT = 1
STATUS_INF_VALUE = 2
STATUS_BAD_WEIGHT = 3
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
    (int64, ``N_STATS``) the diagnostics named in ``STAT_NAMES``.  Returns
    ``STATUS_OK``, ``STATUS_TABLE_LIMIT`` when the dense table would exceed
    ``max_table_bytes``, or ``STATUS_BAD_WEIGHT`` when an option with ``q > 0``
    weighs less than 1 (its flat index in ``stats[STAT_BAD_INDEX]``).  ``dp_mode``
    is for tests: 0 automatic, 1 sparse DP only, 2 dense DP only.  Runs without
    the GIL.
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


def solve_values(
    const double[:, ::1] values,
    const int64_t[:, ::1] weights,
    int64_t capacity,
    int64_t max_table_bytes,
    int64_t[::1] choice,
    int64_t[::1] stats,
    int dp_mode=0,
):
    """Solve the MCKP over float ``values``, quantised by the kernel; return a status.

    As :func:`solve_quantized`, with ``values`` C-contiguous float64 (NaN = absent,
    ``<= 0`` never chosen) quantised exactly as ``aryl.elastic._quantize`` does.
    Also returns ``STATUS_INF_VALUE`` for a value of +-inf, and ``STATUS_BAD_WEIGHT``
    for a non-NaN value whose weight is below 1 (the first offending flat index in
    ``stats[STAT_BAD_INDEX]``; an inf anywhere is reported before a bad weight).
    """
    cdef int64_t n = values.shape[0]
    cdef int64_t k = values.shape[1]
    cdef int status
    if weights.shape[0] != n or weights.shape[1] != k or choice.shape[0] != n:
        raise ValueError("solve_values: shape mismatch")
    if stats.shape[0] < N_STATS:
        raise ValueError("solve_values: stats too short")
    stats[STAT_BAD_INDEX] = -1
    if n == 0:
        return 0
    if k == 0:
        choice[:] = -1
        return 0
    with nogil:
        status = c_solve_values(&values[0, 0], &weights[0, 0], n, k, capacity,
                                max_table_bytes, &choice[0], &stats[0], dp_mode)
    return status


def quantize(const double[::1] values, int64_t[::1] out):
    """Quantise ``values`` into ``out`` (int64, same length) as the kernel does.

    Returns -1, or the index of the first +-inf value (then ``out`` is unspecified).
    For tests: the grid must equal ``aryl.elastic._quantize``'s bit for bit.
    """
    cdef int64_t bad = -1
    if out.shape[0] != values.shape[0]:
        raise ValueError("quantize: shape mismatch")
    if values.shape[0] == 0:
        return -1
    with nogil:
        c_quantize(&values[0], values.shape[0], &out[0], &bad)
    return bad


def solve_values_unit_steps(
    const double[:, ::1] values,
    const int64_t[:, ::1] weights,
    int64_t capacity,
    int64_t[::1] choice,
    tops=None,
    steps_g=None,
):
    """The step shortcut of ``mckp.hpp``: True if it answered (``choice`` written), else False.

    For instances whose option ``k`` weighs ``(k + 1) * g`` (one ``g`` for every job
    with a usable option) and whose LP relaxation over the jobs' upper hulls is
    integral and unique; then ``choice`` is exactly what :func:`solve_values` returns.
    Otherwise returns False (``choice`` unspecified).  ``values`` and ``weights`` as
    for :func:`solve_values`; a value of +-inf, or a non-NaN value whose weight is
    below 1, raises ValueError (the solver's errors are not the shortcut's business).
    ``tops`` (int64, ``n_jobs``, optional): columns ``>= tops[i]`` of row ``i`` are
    not read (the caller knows they are NaN).  ``steps_g`` (int64, ``n_jobs``,
    optional): the caller's promise that ``weights[i, k] == (k + 1) * steps_g[i]``
    wherever ``values[i, k]`` is not NaN; the weights are then not read.
    """
    cdef int64_t n = values.shape[0]
    cdef int64_t k = values.shape[1]
    cdef int64_t i, j
    cdef double x, vmax = 0.0
    cdef bint ok
    cdef const int64_t[::1] tops_v
    cdef const int64_t[::1] g_v
    cdef const int64_t* tops_p = NULL
    cdef const int64_t* g_p = NULL
    if weights.shape[0] != n or weights.shape[1] != k or choice.shape[0] != n:
        raise ValueError("solve_values_unit_steps: shape mismatch")
    if tops is not None:
        tops_v = tops
        if tops_v.shape[0] != n:
            raise ValueError("solve_values_unit_steps: tops shape mismatch")
        if n:
            tops_p = &tops_v[0]
    if steps_g is not None:
        g_v = steps_g
        if g_v.shape[0] != n:
            raise ValueError("solve_values_unit_steps: steps_g shape mismatch")
        if n:
            g_p = &g_v[0]
    if n == 0:
        return True
    for i in range(n):
        for j in range(k):
            x = values[i, j]
            if x != x:
                continue
            if x == INFINITY or x == -INFINITY:
                raise ValueError(f"solve_values_unit_steps: values[{i}, {j}] is inf")
            if weights[i, j] < 1:
                raise ValueError(f"solve_values_unit_steps: weights[{i}, {j}] < 1")
            if x > vmax:
                vmax = x
    if not vmax > 0.0 or k == 0:  # nothing to choose (as solve_values)
        choice[:] = -1
        return True
    with nogil:
        ok = c_solve_values_unit_steps(&values[0, 0], &weights[0, 0], n, k, capacity, vmax,
                                       tops_p, g_p, &choice[0])
    return ok


def unit_steps_stream(
    const double[:, ::1] values,
    int64_t capacity,
    int64_t[::1] choice,
    const int64_t[::1] tops,
    int64_t g,
    double guess=0.0,
):
    """The step shortcut fed row by row (``mckp::UnitStepStream``, test entry).

    Feeds the rows of ``values`` (``tops[i]`` leading columns of row ``i``, option
    ``k`` weighing ``(k + 1) * g``) to a stream whose grid is guessed from
    ``guess`` (> 0: its frexp exponent; 0: no guess), then asks it for the choice
    :func:`solve_values` would make.  Returns 0 (answered: ``choice`` written; also
    where :func:`solve_values_unit_steps` refuses because the cut splits one job's
    hull segment), 1 (refused) or 2 (the guess was wrong, or none).  ``values`` must
    hold finite or NaN values, the largest > 0.
    """
    cdef int64_t n = values.shape[0]
    cdef int64_t k = values.shape[1]
    cdef int64_t i, j, lim, top
    cdef double vmax = 0.0
    cdef UnitStepStream stream
    cdef StepCursor cur
    cdef StepRun run
    cdef ArrayRows rows
    cdef int result
    cdef int64_t* out = NULL
    if choice.shape[0] != n or tops.shape[0] != n:
        raise ValueError("unit_steps_stream: shape mismatch")
    for i in range(n):
        for j in range(k):
            if values[i, j] > vmax:
                vmax = values[i, j]
    if not vmax > 0.0:
        raise ValueError("unit_steps_stream: no positive value")
    if n:
        out = &choice[0]
        rows.v = &values[0, 0]
        rows.tops = &tops[0]
        rows.K = k
    if guess > 0.0:  # an instance to learn the guess from
        cur = stream.begin(0, 0, 0, 0)
        stream.finish(cur, guess)
    with nogil:
        cur = stream.begin(n, k, capacity, g)
        if cur.on():
            for i in range(n):
                top = min(tops[i], k)
                lim = cur.begin_class(top)
                run = cur.run()
                for j in range(lim):
                    if not run.push(values[i, j]):
                        break
                cur.end_class(run, &values[i, 0], lim)
        stream.finish(cur, vmax)
        result = stream.solve[ArrayRows](capacity, out, -1, rows)
    return result
