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
        q, w, g = q[by_size], w[by_size], g[by_size]
        free = view.free_gpus[: view.n_training].copy()
        decision = aryl.Decision()
        while True:
            # whole workers of its size that the free GPUs hold: fit() succeeds iff w <= room
            room = (free // g[:, None]).sum(axis=1)
            fits = np.flatnonzero(w <= room)
            if fits.size == 0:
                return decision
            i = fits[0]  # the jobs before it cannot start in this pass: free GPUs only shrink
            order = np.argsort(-free, kind="stable")  # most free GPUs first, ties: lower index
            place = fit(free.tolist(), order.tolist(), int(w[i]), int(g[i]))
            for s, k in place.items():
                free[s] -= k * g[i]
            decision.start(int(q[i]), place)
            q, w, g = q[i + 1:], w[i + 1:], g[i + 1:]
