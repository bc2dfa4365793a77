"""Pure-Python twin of the compiled request queue (``aryl._core._serve``).

Same algorithm, same tie rules, same results (``tests/test_serving.py``
compares them).  Used when ``backend="reference"``.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

__all__ = ["fcfs_starts"]


def fcfs_starts(
    arrival_s: np.ndarray,
    service_s: np.ndarray,
    cap_times_s: np.ndarray,
    cap_gpus: np.ndarray,
) -> np.ndarray:
    """Start times of a first-come-first-served queue on a varying GPU count.

    Each request needs one GPU for ``service_s`` seconds.  Requests start in
    arrival order (FCFS, no overtaking), each at the first instant ``s`` not
    before its arrival nor the previous request's start at which fewer
    requests are in service than ``capacity(s)``.  A request in service is
    never interrupted, even if the capacity falls below the number in service
    (it drains).  Ties: a request ending at ``s`` frees its GPU at ``s``; a
    capacity step at ``s`` holds from ``s``.

    Parameters
    ----------
    arrival_s : numpy.ndarray of float64, shape (n,)
        Non-decreasing arrival times.
    service_s : numpy.ndarray of float64, shape (n,)
        Service times, > 0.
    cap_times_s : numpy.ndarray of float64, shape (m,), m >= 1
        Strictly increasing step times of the capacity; the first value also
        holds before ``cap_times_s[0]``.
    cap_gpus : numpy.ndarray of int64, shape (m,)
        GPUs serving from ``cap_times_s[k]``, each >= 0.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
        Start time of each request; ``inf`` for requests never served (the
        capacity stays below what they need forever).

    Notes
    -----
    O(n log c + m) for the largest capacity c.
    """
    n = len(arrival_s)
    m = len(cap_times_s)
    out = np.empty(n, dtype=np.float64)
    a = [float(x) for x in arrival_s]
    sv = [float(x) for x in service_s]
    ct = [float(x) for x in cap_times_s]
    cv = [int(x) for x in cap_gpus]
    heap: list[float] = []
    k = 0
    last = -math.inf
    for i in range(n):
        s = a[i] if a[i] > last else last
        while True:
            while k + 1 < m and ct[k + 1] <= s:
                k += 1
            while heap and heap[0] <= s:
                heapq.heappop(heap)
            if len(heap) < cv[k]:
                heapq.heappush(heap, s + sv[i])
                break
            nxt = heap[0] if heap else math.inf
            if k + 1 < m and ct[k + 1] < nxt:
                nxt = ct[k + 1]
            s = nxt
            if s == math.inf:
                break
        out[i] = s
        last = s
        if s == math.inf:
            out[i:] = math.inf
            break
    return out
