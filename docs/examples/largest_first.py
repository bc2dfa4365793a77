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


class LargestFirst(aryl.Policy):
    """The largest queued job first; smaller ones backfill the GPUs left."""

    name = "largest-first"
    only_starts = True  # so the engine skips the passes where nothing can start

    def decide(self, view):
        q = view.queue
        w, g = view.ref_workers[q], view.gpus_per_worker[q]
        by_size = np.argsort(-(w * g), kind="stable")  # largest first, ties: arrival order
        free = view.free_gpus[: view.n_training].tolist()  # Python ints: fast to index
        # whole workers of each size the free GPUs hold: fit() succeeds iff w <= room[g]
        room = {size: sum(f // size for f in free) for size in set(g.tolist())}
        decision = aryl.Decision()
        for j, wj, gj in zip(q[by_size].tolist(), w[by_size].tolist(), g[by_size].tolist(),
                             strict=True):
            if wj > room[gj]:
                continue  # cannot fit: skip the search
            order = sorted(range(len(free)), key=lambda s: (-free[s], s))  # most free first
            place = fit(free, order, wj, gj)
            for s, k in place.items():
                free[s] -= k * gj
            room = {size: sum(f // size for f in free) for size in room}
            decision.start(j, place)
        return decision
