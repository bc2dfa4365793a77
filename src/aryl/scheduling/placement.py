"""Placement helpers: pure functions on a scratch list of free GPUs per server.

* :func:`best_fit` — the server with the fewest free GPUs that still holds ``need``.
* :func:`gang_place` — the fifo baseline's gang placement [Aryl]: a job that fits
  in one server goes on one server (best fit); a larger job takes whole free
  servers plus one best-fit server for the remainder.  Worker granularity: a
  server holds ``gpus_per_server // g`` workers of ``g`` GPUs, which equals the
  GPU rule when ``g`` divides the server size.
* :func:`bf_place` — best fit for one job's workers over an ordered list of
  server groups (training first, then loaned servers): one server that holds
  every worker if any (the fullest such, ties to the lower index), otherwise
  chunks on the servers with the most free GPUs.  Used in best-fit-decreasing
  order by the Aryl pass.

Ties always go to the lower server index.
"""

from __future__ import annotations

from collections.abc import Sequence

from aryl.scheduling.state import ClusterState, Placement

__all__ = ["best_fit", "bf_place", "gang_place", "gang_place_typed"]


def best_fit(free: Sequence[int], servers: Sequence[int], need: int) -> int:
    """Server with the fewest free GPUs that are ``>= need``; ties: lower id.

    ``servers`` must be in ascending id order.  Returns -1 if none.  O(len(servers)).
    """
    best = -1
    best_free = 1 << 62
    for s in servers:
        f = free[s]
        if need <= f < best_free:
            best, best_free = s, f
            if f == need:
                break
    return best


def gang_place(
    free: Sequence[int], servers: Sequence[int], workers: int, g: int, gpus_per_server: int
) -> Placement | None:
    """fifo gang placement [Aryl]; ``None`` if it does not fit now.

    Whole free servers (lowest ids first) for ``workers // (S // g)`` full
    servers' worth, then one best-fit server for the remaining workers.
    """
    per_server = gpus_per_server // g
    if per_server == 0:  # a worker larger than these servers fits none of them
        return None
    n_full, rest = divmod(workers, per_server)
    if n_full == 0:
        s = best_fit(free, servers, rest * g)
        return None if s < 0 else {s: rest}
    full_free = gpus_per_server
    chosen: Placement = {}
    for s in servers:
        if free[s] == full_free:
            chosen[s] = per_server
            if len(chosen) == n_full:
                break
    if len(chosen) < n_full:
        return None
    if rest:
        need = rest * g
        best = -1
        best_free = 1 << 62
        for s in servers:
            f = free[s]
            if s not in chosen and need <= f < best_free:
                best, best_free = s, f
        if best < 0:
            return None
        chosen[best] = rest
    return chosen


def bf_place(
    free: list[int], groups: Sequence[Sequence[int]], workers: int, g: int
) -> Placement | None:
    """Best-fit placement of ``workers`` workers of ``g`` GPUs; mutates ``free``.

    Groups are tried in order (training, then loaned): first one server of a
    group that holds every remaining worker (best fit, ties lower id);
    otherwise the servers of the group with the most free GPUs (ties lower id)
    take chunks, and the rest spills to the next group.  Returns ``None`` and
    leaves ``free`` untouched when the workers do not fit.
    O(n_servers log n_servers).
    """
    need_total = workers * g
    avail = 0
    for grp in groups:
        for s in grp:
            avail += free[s] // g
    if avail < workers:
        return None
    place: Placement = {}
    left = workers
    for grp in groups:
        if not left:
            break
        s = best_fit(free, grp, left * g)
        if s >= 0:
            place[s] = place.get(s, 0) + left
            free[s] -= left * g
            left = 0
            break
        # servers that hold at least one worker, most free first (ties: lower index);
        # the others would take none
        for s in sorted([x for x in grp if free[x] >= g], key=lambda x: (-free[x], x)):
            k = min(left, free[s] // g)
            place[s] = place.get(s, 0) + k
            free[s] -= k * g
            left -= k
            if not left:
                break
    assert left == 0, need_total
    return place


def gang_place_typed(
    st: ClusterState, free: Sequence[int], j: int, workers: int
) -> Placement | None:
    """:func:`gang_place` on the training servers of one GPU type: the fastest type
    for job ``j`` that fits it now (ties: type order); one type on a homogeneous
    cluster, or every training server when ``config.mix_gpu_types``.
    """
    g = st.gpus_per_worker[j]
    if not st.multi_type or st.config.mix_gpu_types:
        servers = st.training_servers
        if not servers:
            return None
        return gang_place(free, servers, workers, g, st.server_gpus[servers[0]])
    for t in st.type_order(j, workers, [x for x in st.gpu_types if st.training_by_type[x]]):
        servers = st.training_by_type[t]
        p = gang_place(free, servers, workers, g, st.server_gpus[servers[0]])
        if p is not None:
            return p
    return None
