import numpy as np

import aryl


def fit(free, order, workers, gpus_per_worker):
    """Whole workers on the servers of `order` (a list, most free GPUs first);
    None if they do not fit."""
    place, left = {}, workers
    for s in order:
        k = min(left, free[s] // gpus_per_worker)
        if k == 0:
            return None  # the servers after s have even fewer free GPUs
        place[s], left = k, left - k
        if left == 0:
            return place
    return None


def by_free(free, servers):
    """`servers` sorted by free GPUs, most first (ties: lower index)."""
    return sorted(servers, key=lambda s: (-free[s], s))


class LargestFirst(aryl.Policy):
    """The largest queued job first; smaller ones backfill the GPUs left."""

    name = "largest-first"

    def decide(self, view):
        decision = aryl.Decision()
        q = view.queue
        need = view.ref_workers[q] * view.gpus_per_worker[q]
        free = view.free_gpus.tolist()  # Python ints: fast to index
        order = by_free(free, range(view.n_training))
        left = sum(free[: view.n_training])
        cand = np.flatnonzero(need <= left)  # the others cannot fit now
        cand = q[cand[np.argsort(-need[cand], kind="stable")]]  # ties: arrival order
        for j, w, g in zip(cand.tolist(), view.ref_workers[cand].tolist(),
                           view.gpus_per_worker[cand].tolist()):
            if w * g > left:
                continue
            place = fit(free, order, w, g)
            if place is not None:
                for s, k in place.items():
                    free[s] -= k * g
                order = by_free(free, order)
                left -= w * g
                decision.start(j, place)
        return decision
