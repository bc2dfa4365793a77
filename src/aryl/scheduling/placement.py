"""Placement helpers: pure functions on a scratch list of free GPUs per server.

* :func:`best_fit` — the server with the fewest free GPUs that still holds ``need``.
* :func:`gang_place` — the fifo baseline's gang placement [Aryl]: a job that fits
  in one server goes on one server (best fit); a larger job takes whole free
  servers (largest first when sizes differ) plus one best-fit server for the
  remainder.  Worker granularity: a server of ``S`` GPUs holds ``S // g``
  workers of ``g`` GPUs, which equals the GPU rule when ``g`` divides ``S``;
  each server's own size counts (pools of different sizes).
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
    free: Sequence[int],
    servers: Sequence[int],
    workers: int,
    g: int,
    server_gpus: int | Sequence[int],
) -> Placement | None:
    """fifo gang placement [Aryl]; ``None`` if it does not fit now.

    ``server_gpus`` is every server's size (a list indexed by server) or one
    size for all.  A server of ``S`` GPUs holds ``S // g`` workers (its
    *capacity*).  A job of less than a server's capacity goes on one server
    (best fit: the fewest free GPUs that hold it, ties lower id), as does a job
    of exactly a whole free server's capacity.  Otherwise: whole free servers,
    largest capacity first (ties lower id), each while the workers left fill
    it, then one best-fit server (among the others) for the workers left, which
    must be fewer than its capacity.  With one server size this is whole free
    servers (lowest ids) for ``workers // (S // g)`` servers' worth plus one
    best-fit server for the rest.
    """
    if isinstance(server_gpus, int):
        size = server_gpus
        one = _one_server(free, servers, workers, g, size, None)
        if one >= 0:
            return {one: workers}
        cap = size // g
        if cap == 0:  # a worker larger than these servers fits none of them
            return None
        chosen: Placement = {}
        left = workers
        for s in servers:
            if left < cap:
                break
            if free[s] == size:
                chosen[s] = cap
                left -= cap
    else:
        sizes = server_gpus
        one = _one_server(free, servers, workers, g, sizes, None)
        if one >= 0:
            return {one: workers}
        whole = [s for s in servers if free[s] == sizes[s] and sizes[s] >= g]
        whole.sort(key=lambda s: -(sizes[s] // g))  # stable: ties keep the lower id
        chosen = {}
        left = workers
        for s in whole:
            cap = sizes[s] // g
            if left >= cap:
                chosen[s] = cap
                left -= cap
                if not left:
                    break
    if left:
        s = _one_server(free, servers, left, g, server_gpus, chosen)
        if s < 0:
            return None
        chosen[s] = left
    return chosen


def _one_server(
    free: Sequence[int],
    servers: Sequence[int],
    workers: int,
    g: int,
    server_gpus: int | Sequence[int],
    taken: Placement | None,
) -> int:
    """Best-fit server for ``workers`` workers on one server, ``-1`` if none.

    Eligible: not in ``taken``, ``workers * g`` GPUs free, and ``workers`` fewer
    than the server's capacity or the server whole free (gang placement's rule).
    Fewest free GPUs first, ties lower id (``servers`` ascending).
    """
    need = workers * g
    best = -1
    best_free = 1 << 62
    for s in servers:
        f = free[s]
        if need <= f < best_free and (taken is None or s not in taken):
            size = server_gpus if isinstance(server_gpus, int) else server_gpus[s]
            if workers < size // g or f == size:
                best, best_free = s, f
                if f == need:
                    break
    return best


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
        return gang_place(free, servers, workers, g, st.server_gpus)
    for t in st.type_order(j, workers, [x for x in st.gpu_types if st.training_by_type[x]]):
        servers = st.training_by_type[t]
        p = gang_place(free, servers, workers, g, st.server_gpus)
        if p is not None:
            return p
    return None
