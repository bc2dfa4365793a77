"""Cluster sizing for any trace: the fifo-calibrated rule of docs/simulator.md.

:func:`size_cluster` finds the largest training cluster on which strict
``fifo``'s mean queuing delay is still at least ``TARGET_QUEUING_DELAY_S`` (the
regime [Aryl] reports), bounded below by the servers the largest job needs and
above by the servers that run every job at once; the inference cluster is
``INFERENCE_RATIO`` of it (at least ``MIN_INFERENCE_SERVERS``).  Used by
``--training-servers auto`` and by sweeps.
"""

from __future__ import annotations

import gc
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError
from aryl.sim.config import MAX_DURATION_S, MAX_SERVERS

__all__ = [
    "GPUS_PER_SERVER",
    "INFERENCE_RATIO",
    "MIN_INFERENCE_SERVERS",
    "SIZING_RULES",
    "TARGET_QUEUING_DELAY_S",
    "ClusterSize",
    "size_cluster",
]

log = logging.getLogger(__name__)

TARGET_QUEUING_DELAY_S = 4000.0
INFERENCE_RATIO = 16 / 46
GPUS_PER_SERVER = 8
#: With the simulator's safety reserve of 1 idle server, a smaller inference
#: cluster would leave almost nothing to loan.
MIN_INFERENCE_SERVERS = 4


#: The rules :func:`size_cluster` may decide by (``ClusterSize.rule``).
SIZING_RULES: dict[str, str] = {
    "target-delay": "the largest training cluster on which strict fifo's mean queuing delay "
                    "is still >= the target",
    "largest-job": "the largest job must fit: fifo already queues less than the target on "
                   "the smallest cluster that can hold it",
    "every-job-at-once": "capped at the servers that run every job at once",
}


class ClusterSize(tuple[int, int]):
    """``(n_training_servers, n_inference_servers)`` and why (from :func:`size_cluster`).

    A plain 2-tuple to unpack or compare, with the rule that decided.

    Attributes
    ----------
    n_training_servers, n_inference_servers : int
    rule : str
        A key of :data:`SIZING_RULES`.
    reason : str
        One sentence naming the rule and the figures that decided it.
    mean_queuing_delay_s : dict of int to float
        fifo's mean queuing delay (s) on each training cluster size probed.
    """

    rule: str
    reason: str
    mean_queuing_delay_s: dict[int, float]

    def __new__(
        cls,
        n_training_servers: int,
        n_inference_servers: int,
        *,
        rule: str,
        reason: str,
        mean_queuing_delay_s: dict[int, float],
    ) -> ClusterSize:
        self = super().__new__(cls, (int(n_training_servers), int(n_inference_servers)))
        self.rule = rule
        self.reason = reason
        self.mean_queuing_delay_s = dict(mean_queuing_delay_s)
        return self

    @property
    def n_training_servers(self) -> int:
        """Training servers."""
        return self[0]

    @property
    def n_inference_servers(self) -> int:
        """Inference servers."""
        return self[1]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_cluster_size, (self[0], self[1], self.rule, self.reason,
                                self.mean_queuing_delay_s))


def _cluster_size(a: int, b: int, rule: str, reason: str, delays: dict[int, float]
                  ) -> ClusterSize:
    return ClusterSize(a, b, rule=rule, reason=reason, mean_queuing_delay_s=delays)


def _servers_alone(gpus: np.ndarray, gpus_per_server: int) -> np.ndarray:
    """Servers each rigid job needs on an empty cluster (int64, shape (n,)).

    A rigid job of ``G`` GPUs has workers of ``g`` = the largest divisor of
    ``G`` that is at most ``gpus_per_server`` (as :mod:`aryl.sim.jobs`); a
    server holds ``gpus_per_server // g`` of them, so the job needs
    ``ceil((G / g) / (gpus_per_server // g))`` servers (15 GPUs: 3 workers of 5,
    one per 8-GPU server, 3 servers, not ``ceil(15 / 8) = 2``).  O(n) over the
    distinct sizes.
    """
    from aryl.sim.jobs import largest_divisor_at_most

    out = np.empty(len(gpus), dtype=np.int64)
    sizes, inverse = np.unique(gpus.astype(np.int64), return_inverse=True)
    need = np.empty(len(sizes), dtype=np.int64)
    for k, size in enumerate(sizes.tolist()):
        g = largest_divisor_at_most(int(size), gpus_per_server)
        need[k] = -(-(int(size) // g) // (gpus_per_server // g))
    out[:] = need[inverse]
    return out


def size_cluster(
    jobs: pd.DataFrame,
    *,
    target_queuing_delay_s: float = TARGET_QUEUING_DELAY_S,
    gpus_per_server: int = GPUS_PER_SERVER,
    inference_ratio: float = INFERENCE_RATIO,
    progress: Callable[[int, int, int, float], None] | None = None,
) -> ClusterSize:
    """Training and inference server counts for a trace (documented sizing rule).

    Parameters
    ----------
    jobs : DataFrame
        Canonical jobs (``submit_time_s``, ``duration_s``, ``gpus``), checked
        like every replay input.
    target_queuing_delay_s : float > 0
        The training cluster is the largest on which strict ``fifo`` (no
        loaning, no elastic scaling) has a mean queuing delay of at least this.
    gpus_per_server : int
    inference_ratio : float
        Inference servers per training server (at least
        ``MIN_INFERENCE_SERVERS``).
    progress : callable ``(probes_done, probes_estimate, n_servers, mean_queuing_delay_s)``,
        optional.  Called after each ``fifo`` probe replay with the number of
        probes done, an estimate of the total (exact once the search has
        bracketed the answer; it may grow while it looks for an upper bound),
        the cluster size just probed and fifo's mean queuing delay there (s).

    Returns
    -------
    ClusterSize
        ``(n_training_servers, n_inference_servers)``, a tuple, with ``.rule``
        and ``.reason`` naming the rule that decided (:data:`SIZING_RULES`):
        ``target-delay``; ``largest-job`` when even the smallest cluster that
        fits the largest job queues less than the target (that cluster); or
        ``every-job-at-once`` when fifo still queues at least the target on the
        cluster that runs every job at once (that cluster).

    Raises
    ------
    InvalidInputError
        Empty trace, a bad job row, or a parameter out of range.

    Notes
    -----
    Assumes ``fifo``'s mean queuing delay does not grow with the cluster.
    Doubling then bisection from the offered-load estimate, the upper end
    capped at the servers that run every job at once (each job alone on its
    own servers): O(log n) ``fifo`` replays, however close the submit times
    (three jobs within 2 ms no longer make the load estimate, and the
    cluster, explode).  Each probe runs without the event log, keeps only its
    mean delay, and its memory is freed before the next, so the peak memory
    is that of one replay.
    """
    from aryl.sim import SimConfig, simulate

    if not target_queuing_delay_s > 0 or not math.isfinite(target_queuing_delay_s):
        raise InvalidInputError("target_queuing_delay_s: must be a finite number > 0")
    if isinstance(gpus_per_server, bool) or not isinstance(gpus_per_server, int | np.integer) \
            or gpus_per_server < 1:
        raise InvalidInputError(f"gpus_per_server: must be an integer >= 1, got "
                                f"{gpus_per_server!r}")
    if not (math.isfinite(inference_ratio) and inference_ratio >= 0):
        raise InvalidInputError(f"inference_ratio: must be a finite number >= 0, got "
                                f"{inference_ratio!r}")
    if len(jobs) == 0:
        raise InvalidInputError("jobs: the trace is empty, nothing to size")
    from aryl.traces.validate import validate_jobs

    needed = [c for c in ("job_id", "submit_time_s", "duration_s", "gpus") if c in jobs.columns]
    cols, _, _ = validate_jobs(jobs[needed],
                               drop_hint="aryl.traces.load_trace(jobs, on_invalid='drop')")
    rigid = pd.DataFrame({k: cols[k] for k in ("job_id", "submit_time_s", "duration_s")})
    gpus = cols["gpus"].astype(np.int64)
    rigid["gpus"] = gpus
    target = float(target_queuing_delay_s)
    cache: dict[int, float] = {}

    def left(a: int, b: int) -> int:
        """Bisection probes left once ``delay(a) >= target > delay(b)``."""
        return math.ceil(math.log2(b - a)) if b - a > 1 else 0

    def delay(n: int, lo: int, hi: int | None) -> float:
        """fifo's mean queuing delay on ``n`` servers.  ``lo``: the largest size known
        to queue >= target; ``hi``: the smallest known to queue less, or None while the
        search still goes up (progress estimates only)."""
        if n not in cache:
            cfg = SimConfig(
                n_training_servers=n,
                n_inference_servers=0,
                gpus_per_server=int(gpus_per_server),
                record_events=False,
                # a probe keeps only its mean delay: the coarsest time series, so a
                # long trace does not hit the time-series size guard here
                timeseries_step_s=MAX_DURATION_S,
            )
            res = simulate(rigid, policy="fifo", config=cfg, inference=False)
            mean = res.summary["queuing_delay_s"]["mean"]
            cache[n] = math.inf if mean is None else float(mean)
            del res
            gc.collect()  # the engine holds reference cycles: free it before the next probe
            if progress is not None:
                below = cache[n] < target
                if hi is not None:  # bisection inside (lo, hi)
                    rest = left(lo, n) if below else left(n, hi)
                elif below:  # the upper end is found
                    rest = 0 if n == lo else left(lo, n)
                elif n >= upper:
                    rest = 0
                else:  # the next probe goes up: the load estimate, then doubling
                    up = guess if n == lo and guess > n else min(2 * n, upper)
                    rest = 1 + left(n, up)
                progress(len(cache), len(cache) + rest, n, cache[n])
        return cache[n]

    alone = _servers_alone(gpus, int(gpus_per_server))
    lo = max(1, int(alone.max()))
    if lo > MAX_SERVERS:  # before any probe: no replay could hold the largest job
        k = int(np.argmax(alone))
        raise InvalidInputError(
            f"jobs: job {str(cols['job_id'][k])!r} needs {lo:,} servers of {gpus_per_server} "
            f"GPUs, more than the {MAX_SERVERS:,} a replay may have (n_training_servers); "
            "use larger servers (gpus_per_server) or drop the job")
    # every job at once, each on its own servers (at most the largest replay)
    upper = min(MAX_SERVERS, max(lo, int(alone.sum())))
    biggest = str(cols["job_id"][int(np.argmax(alone))])
    sub = rigid["submit_time_s"].to_numpy(dtype=np.float64)
    span = float(sub.max() - sub.min())
    gpu_s = float(np.dot(rigid["duration_s"].to_numpy(np.float64), gpus.astype(np.float64)))
    # offered-load estimate; with near-equal submit times it is huge, hence the cap
    guess = min(upper, max(lo + 1, math.ceil(gpu_s / span / gpus_per_server))
                if span > 0 else lo + 1)
    rule = "target-delay"
    if delay(lo, lo, None) < target:
        n_train, rule = lo, "largest-job"
    elif lo == upper:
        n_train, rule = lo, "every-job-at-once"
    else:
        hi = guess
        while delay(hi, lo, None) >= target and hi < upper:
            lo, hi = hi, min(2 * hi, upper)
        if cache[hi] >= target:  # hi == upper: fifo still queues there
            n_train, rule = hi, "every-job-at-once"
        else:
            while hi - lo > 1:  # delay(lo) >= target > delay(hi)
                mid = (lo + hi) // 2
                if delay(mid, lo, hi) >= target:
                    lo = mid
                else:
                    hi = mid
            n_train = lo
    n_inf = max(MIN_INFERENCE_SERVERS, round(n_train * inference_ratio))
    d = cache[n_train]
    if rule == "largest-job":
        reason = (f"the largest job must fit: job {biggest!r} needs {n_train} server(s) of "
                  f"{gpus_per_server} GPUs, and strict fifo's mean queuing delay there is "
                  f"{d:,.0f} s, already below the target {target:,.0f} s")
    elif rule == "every-job-at-once":
        reason = (f"capped at {n_train} servers, enough to run every job at once; strict "
                  f"fifo's mean queuing delay there is still {d:,.0f} s >= the target "
                  f"{target:,.0f} s")
    else:
        above = cache.get(n_train + 1, math.nan)
        reason = (f"the largest training cluster on which strict fifo's mean queuing delay "
                  f"is still >= {target:,.0f} s: {d:,.0f} s on {n_train} servers, "
                  f"{above:,.0f} s on {n_train + 1}")
    reason += f" ({len(cache)} fifo replays)"
    log.info("size_cluster: %d training + %d inference servers: %s", n_train, n_inf, reason)
    return ClusterSize(n_train, n_inf, rule=rule, reason=reason,
                       mean_queuing_delay_s=dict(sorted(cache.items())))


# --------------------------------------------------------------------------- plan


