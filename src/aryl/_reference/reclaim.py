"""Pure-Python twin of the reclaim kernel (:mod:`aryl._core._reclaim`), written for reading.

Same signature, same results and same tie rules as the C++ greedy in
``aryl/_core/reclaim.hpp``.  The shrink-or-preempt step (:meth:`ReclaimState.take`)
and the greedy loop (:func:`run_greedy`) are also what the comparison policies of
:mod:`aryl.reclaiming` (random, fewest-jobs, most-idle, exact) run on, each with
its own priority function.

Model [Aryl]_ §3: a job ``j`` has ``W_j`` workers in total and a base ``b_j``; an
elastic job can still shed ``W_j - b_j`` workers (rigid: 0), one budget shared by
every server returned.  Taking a server, each job still on it either sheds its
workers there (if they fit in its budget) or is preempted, losing its workers on
every server.  The cost of a server is the sum, over the jobs that would be
preempted, of ``w_js / W_j``, summed in placement input order; servers compare on
(cost rounded to the nearest 1e-9, jobs touched, busy GPUs, server id).

References
----------
.. [Aryl] J. Li et al., "Aryl: An Elastic Cluster Scheduler for Deep Learning",
   arXiv:2202.07896, 2022 (EuroSys 2023 as "Lyra").
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "COST_SCALE",
    "ReclaimState",
    "ServerStats",
    "aryl_priority",
    "quantize_cost",
    "reclaim_greedy",
    "run_greedy",
]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

# Same integers as aryl.reclaiming.ActionKind / ReclaimReason and reclaim.hpp.
KIND_RETURN, KIND_SCALE_IN, KIND_PREEMPT = 0, 1, 2
REASON_IDLE_SERVER, REASON_SELECTED, REASON_ELASTIC_SHED = 0, 1, 2
REASON_RIGID_JOB, REASON_BELOW_BASE = 3, 4

#: Costs are compared after rounding to the nearest multiple of ``1 / COST_SCALE``.
COST_SCALE = 1e9


def quantize_cost(cost: float) -> int:
    """Round a cost to an integer number of 1e-9 units, half to even (as ``std::llrint``)."""
    return round(cost * COST_SCALE)


@dataclass(frozen=True)
class ServerStats:
    """A server's state as seen by a policy.

    ``cost`` is the float cost, ``cost_q`` its rounded integer key, ``touched``
    the jobs still on it, ``busy`` their GPUs, ``idle`` = GPUs - busy, ``id`` the
    server id, ``index`` its position in the request.
    """

    cost: float
    cost_q: int
    touched: int
    busy: int
    idle: int
    id: int
    index: int


Priority = Callable[[ServerStats], tuple[int, ...]]


def aryl_priority(st: ServerStats) -> tuple[int, ...]:
    """Aryl's order: cost, then fewer jobs touched, fewer busy GPUs, lower server id."""
    return (st.cost_q, st.touched, st.busy, st.id)


class ReclaimState:
    """Mutable reclaim state: jobs' current totals and budgets, live placements.

    Parameters are the kernel's index arrays (see :func:`reclaim_greedy`).
    """

    def __init__(
        self,
        server_id: I64,
        server_gpus: I64,
        placement_job: I64,
        placement_server: I64,
        placement_workers: I64,
        job_workers: I64,
        job_gpus_per_worker: I64,
        job_min_workers: I64,
        job_elastic: npt.ArrayLike,
        job_preemptible: npt.ArrayLike,
    ) -> None:
        self.server_id: list[int] = [int(x) for x in server_id]
        self.server_gpus: list[int] = [int(x) for x in server_gpus]
        self.pl_job: list[int] = [int(x) for x in placement_job]
        self.pl_server: list[int] = [int(x) for x in placement_server]
        self.pl_workers: list[int] = [int(x) for x in placement_workers]
        self.gpw: list[int] = [int(x) for x in job_gpus_per_worker]
        self.elastic: list[bool] = [bool(x) for x in np.asarray(job_elastic)]
        self.preemptible: list[bool] = [bool(x) for x in np.asarray(job_preemptible)]
        self.workers: list[int] = [int(x) for x in job_workers]
        base = [int(x) for x in job_min_workers]
        self.shed: list[int] = [
            w - b if e else 0 for w, b, e in zip(self.workers, base, self.elastic, strict=True)
        ]
        m, n_jobs = len(self.server_id), len(self.workers)
        # Placements of each server / job, in input order.
        self.server_pl: list[list[int]] = [[] for _ in range(m)]
        self.job_pl: list[list[int]] = [[] for _ in range(n_jobs)]
        for q, (j, s) in enumerate(zip(self.pl_job, self.pl_server, strict=True)):
            self.server_pl[s].append(q)
            self.job_pl[j].append(q)
        self.alive: list[bool] = [True] * len(self.pl_job)
        self.status: list[int] = [0] * n_jobs  # 0 untouched, 1 scaled in, 2 preempted
        self.scaled_order: list[int] = []  # jobs in order of first scale-in
        self.preempted_order: list[int] = []

    # -- queries -----------------------------------------------------------------
    def stats(self, s: int) -> ServerStats | None:
        """Current stats of server ``s``, or None if a non-preemptible job blocks it."""
        cost = 0.0
        touched = busy = 0
        for q in self.server_pl[s]:
            if not self.alive[q]:
                continue
            j, w = self.pl_job[q], self.pl_workers[q]
            touched += 1
            busy += w * self.gpw[j]
            if w <= self.shed[j]:
                continue
            if not self.preemptible[j]:
                return None
            cost += w / self.workers[j]
        return ServerStats(
            cost, quantize_cost(cost), touched, busy, self.server_gpus[s] - busy,
            self.server_id[s], s,
        )

    # -- the shared apply step -----------------------------------------------------
    def take(self, s: int, actions: list[tuple[int, int, int, int, int]]) -> set[int]:
        """Return server ``s``: shrink or preempt every job on it.

        Appends ``(server, job, kind, workers_removed, reason)`` tuples (indices) to
        ``actions`` and returns the other servers whose stats changed.
        """
        touched = sum(1 for q in self.server_pl[s] if self.alive[q])
        actions.append(
            (s, -1, KIND_RETURN, 0, REASON_IDLE_SERVER if touched == 0 else REASON_SELECTED)
        )
        affected: set[int] = set()
        for q in self.server_pl[s]:
            if not self.alive[q]:
                continue
            self.alive[q] = False
            j, w = self.pl_job[q], self.pl_workers[q]
            if w <= self.shed[j]:
                self.workers[j] -= w
                self.shed[j] -= w
                actions.append((s, j, KIND_SCALE_IN, w, REASON_ELASTIC_SHED))
                if self.status[j] == 0:
                    self.status[j] = 1
                    self.scaled_order.append(j)
            else:
                reason = REASON_BELOW_BASE if self.elastic[j] else REASON_RIGID_JOB
                actions.append((s, j, KIND_PREEMPT, self.workers[j], reason))
                self.status[j] = 2
                self.preempted_order.append(j)
                self.workers[j] = 0
                self.shed[j] = 0
            for r in self.job_pl[j]:
                if self.alive[r]:
                    if self.status[j] == 2:
                        self.alive[r] = False
                    affected.add(self.pl_server[r])
        affected.discard(s)
        return affected


GreedyResult = tuple[I64, F64, I64, I64, I64, I64, I64, I64, I64, I64, int]


def run_greedy(
    state: ReclaimState,
    n_return: int,
    allowed: npt.ArrayLike,
    priority: Priority = aryl_priority,
) -> GreedyResult:
    """Take servers one at a time in ``priority`` order, re-ranking after each take.

    A lazy heap: stale entries are skipped by a per-server version number.
    Ineligible servers (a non-preemptible job that cannot shed its workers there)
    are dropped; they never become eligible again.  Returns the kernel's tuple.
    """
    allowed_list = [bool(x) for x in np.asarray(allowed)]
    version = [0] * len(state.server_id)
    in_heap = [False] * len(state.server_id)
    heap: list[tuple[tuple[int, ...], int, int]] = []
    cost_now: dict[int, float] = {}
    for s, ok in enumerate(allowed_list):
        st = state.stats(s) if ok else None
        if st is not None:
            heap.append((priority(st), s, 0))
            in_heap[s] = True
            cost_now[s] = st.cost
    heapq.heapify(heap)
    taken: list[int] = []
    costs: list[float] = []
    actions: list[tuple[int, int, int, int, int]] = []
    while len(taken) < n_return and heap:
        _, s, ver = heapq.heappop(heap)
        if not in_heap[s] or ver != version[s]:
            continue
        in_heap[s] = False
        taken.append(s)
        costs.append(cost_now[s])
        for t in sorted(state.take(s, actions)):
            if not in_heap[t]:
                continue
            version[t] += 1
            st = state.stats(t)
            if st is None:
                in_heap[t] = False
            else:
                cost_now[t] = st.cost
                heapq.heappush(heap, (priority(st), t, version[t]))
    scaled = [j for j in state.scaled_order if state.status[j] == 1]

    def arr(x: list[int]) -> I64:
        return np.asarray(x, dtype=np.int64).reshape(-1)

    cols: list[list[int]] = [list(c) for c in zip(*actions, strict=True)]
    if not cols:
        cols = [[], [], [], [], []]
    return (
        arr(taken),
        np.asarray(costs, dtype=np.float64).reshape(-1),
        arr(cols[0]),
        arr(cols[1]),
        arr(cols[2]),
        arr(cols[3]),
        arr(cols[4]),
        arr(state.preempted_order),
        arr(scaled),
        arr([state.workers[j] for j in scaled]),
        n_return - len(taken),
    )


def reclaim_greedy(
    server_id: I64,
    server_gpus: I64,
    server_allowed: npt.ArrayLike,
    placement_job: I64,
    placement_server: I64,
    placement_workers: I64,
    job_workers: I64,
    job_gpus_per_worker: I64,
    job_min_workers: I64,
    job_elastic: npt.ArrayLike,
    job_preemptible: npt.ArrayLike,
    n_return: int,
) -> GreedyResult:
    """Aryl's cost greedy; same signature and result as ``aryl._core._reclaim.reclaim_greedy``.

    Returns ``(taken, cost, act_server, act_job, act_kind, act_workers, act_reason,
    preempted, scaled, scaled_new_workers, shortfall)`` with server and job
    *indices*.  Complexity O((m + steps * affected) log m) Python operations.
    """
    state = ReclaimState(
        server_id, server_gpus, placement_job, placement_server, placement_workers,
        job_workers, job_gpus_per_worker, job_min_workers, job_elastic, job_preemptible,
    )
    return run_greedy(state, int(n_return), server_allowed, aryl_priority)
