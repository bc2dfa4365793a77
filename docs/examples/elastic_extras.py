import numpy as np

import aryl
from aryl.elastic import jct_reduction_table, throughput


class ElasticExtras(aryl.Policy):
    """Queued jobs start at their base size, one server each (the fullest that
    holds them); a pass that starts nothing gives the free GPUs to the running
    elastic jobs as extra workers, chosen by the MCKP of Aryl's elastic phase."""

    name = "elastic-extras"
    elastic = True  # elastic jobs may run between min_workers and max_workers

    def decide(self, view):
        decision = aryl.Decision()
        free = view.free_gpus[: view.n_training].copy()
        for j in view.queue.tolist():
            w, g = int(view.base_workers[j]), int(view.gpus_per_worker[j])
            ok = np.flatnonzero(free >= w * g)
            if ok.size:
                s = int(ok[np.argmin(free[ok])])
                free[s] -= w * g
                decision.start(j, {s: w})
        if decision.starts:
            return decision
        r = view.running
        grow = np.flatnonzero(view.elastic[r] & (view.running_workers < view.top_workers[r]))
        jobs, w = r[grow], view.running_workers[grow]
        g, alpha = view.gpus_per_worker[jobs], view.alpha[jobs]
        work = view.running_remaining_s[grow] * throughput(view.ref_workers[jobs], alpha)
        values, weights = jct_reduction_table(  # column k - 1: k extra workers
            work, w, w, view.top_workers[jobs], g, alpha, view.rescale_pause_s)
        choice = aryl.solve_mckp(values, weights, int(free.sum())).choice
        for i, k in zip(grow.tolist(), choice.tolist(), strict=True):
            if k < 0:  # no extra worker for this job
                continue
            place, left, gi = view.placement(i), k + 1, int(view.gpus_per_worker[r[i]])
            for s in np.argsort(-free, kind="stable").tolist():  # most free GPUs first
                add = min(left, int(free[s]) // gi)
                place[s], left = place.get(s, 0) + add, left - add
                free[s] -= add * gi
            place = {s: n for s, n in place.items() if n > 0}
            if left <= k:  # at least one extra worker placed (fragmentation may leave some)
                decision.resize(int(r[i]), place)
        return decision
