import numpy as np

import aryl
from largest_first import fit


class SpeedAwareLoans(aryl.Policy):
    """Arrival order with backfill on the training servers (each job on its fastest
    GPU type that fits); the loaned servers go to the waiting jobs that lose the
    least there (measured speeds), or in arrival order with choose="arrival"."""

    name = "speed-aware-loans"
    loans = True
    only_starts = True  # the engine skips the passes where nothing can start
    defaults = {"choose": "speed", "min_loan_speed": 0.0}

    def decide(self, view):
        decision = aryl.Decision()
        free = view.free_gpus.copy()
        q = view.queue
        need = view.ref_workers[q] * view.gpus_per_worker[q]
        train = np.arange(view.n_training)
        left = int(free[train].sum())
        placed = np.zeros(len(q), dtype=bool)

        def start(i, servers):
            j, g = int(q[i]), int(view.gpus_per_worker[q[i]])
            place = fit(free, servers[free[servers] >= g], int(view.ref_workers[j]), g)
            if place is not None:
                for s, k in place.items():
                    free[s] -= k * g
                decision.start(j, place)
                placed[i] = True
            return place is not None

        for i in np.flatnonzero(need <= left):  # arrival order
            if need[i] > left:
                continue
            for t in np.argsort(-view.speed[q[i]], kind="stable"):  # fastest type first
                if start(i, train[view.server_type[train] == t]):
                    left -= int(need[i])
                    break
        loaned = view.loaned
        if len(loaned) == 0:
            return decision
        t_loan = view.server_type[loaned[0]]  # one GPU type on loan (lyra: T4)
        speed = view.speed[q, t_loan]
        cand = np.flatnonzero(~placed & (need <= free[loaned].sum())
                              & (speed >= self.options["min_loan_speed"]))
        if self.options["choose"] == "speed":
            cand = cand[np.argsort(-speed[cand], kind="stable")]  # least loss first
        for i in cand:
            start(i, loaned)
        return decision


class SpeedAwareNoLoans(SpeedAwareLoans):
    """The same policy without loans (the training servers only)."""

    name = "speed-aware-no-loans"
    loans = False
