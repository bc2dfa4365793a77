"""Inference autoscalers: a request trace -> ``servers_needed(t)``.

The inference side's own scheduler (docs/model.md, "Request-level
inference").  Every ``step_s`` seconds, at ``t_k = start_s + k step_s``, a rule
looks at the requests that arrived in the *stable window* ``[t_k - window_s,
t_k)`` (reactive: only the past) and sets the GPUs the service needs until
``t_{k+1}``.  With ``n`` requests of total service ``W`` GPU-seconds in the
window, the offered load is ``a = W / window_s`` GPUs, the arrival rate
``lambda = n / window_s`` and the mean service time ``E[S] = W / n``.

``utilisation`` (Knative-like; Knative's default stable window is 60 s and its
target utilisation 0.7)
    ``gpus = ceil(a / target * (1 + headroom))``.
``erlang-c`` (latency-SLO sizing, M/M/c)
    the smallest ``c > a`` with ``P(wait > slo_s) = C(c, a) exp(-(c - a) slo_s / E[S])
    <= epsilon``, where ``C(c, a)`` is the Erlang-C probability of waiting
    (computed through the Erlang-B recursion ``B(0) = 1``, ``B(c) = a B(c-1) /
    (c + a B(c-1))``, ``C = c B / (c - a (1 - B))``); then ``gpus = ceil(c (1 +
    headroom))``.  Sources: L. Kleinrock, *Queueing Systems* vol. 1 (1975),
    section 3.5; the tail ``P(W > t) = C e^{-(c mu - lambda) t}`` is the M/M/c
    waiting-time distribution.

Both: ``servers = ceil(gpus / gpus_per_server)``, at most ``n_servers``; no
request in the window gives 0.  A **reclaim lead time** ``lead_s`` asks for
servers ahead: the series published at ``t_k`` is the largest need over the
steps ``k .. k + ceil(lead_s / step_s)`` (a perfect forecast of the rule's own output
``lead_s`` ahead; set it to the cold start so that a reclaimed server has
loaded its model by the time the rule needs it).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from aryl.errors import InvalidInputError
from aryl.traces.inference import MAX_STEPS, InferenceDemand

__all__ = ["AUTOSCALERS", "AutoscalerOptions", "autoscale", "erlang_c", "erlang_c_gpus"]

AUTOSCALERS = ("utilisation", "erlang-c")


@dataclasses.dataclass(frozen=True)
class AutoscalerOptions:
    """Knobs of the inference autoscaler (module docstring).

    Attributes
    ----------
    rule : {"utilisation", "erlang-c"}
    step_s : float
        Decision period, seconds (> 0; default 60).
    window_s : float
        Stable window, seconds (> 0; default 60).
    target : float
        Target utilisation of ``utilisation``, in (0, 1] (default 0.7).
    slo_s : float
        Waiting-time SLO of ``erlang-c``, seconds (>= 0; default 60).
    epsilon : float
        Allowed ``P(wait > slo_s)`` of ``erlang-c``, in (0, 1) (default 0.05).
    headroom : float
        Extra share of GPUs above the rule's need, >= 0 (default 0).
    lead_s : float
        Reclaim lead time, seconds (>= 0; default 0).
    """

    rule: str = "erlang-c"
    step_s: float = 60.0
    window_s: float = 60.0
    target: float = 0.7
    slo_s: float = 60.0
    epsilon: float = 0.05
    headroom: float = 0.0
    lead_s: float = 0.0

    def __post_init__(self) -> None:
        if self.rule not in AUTOSCALERS:
            raise InvalidInputError(
                f"autoscaler: unknown rule {self.rule!r} (known: {', '.join(AUTOSCALERS)})")
        checks = (("step_s", self.step_s, 0.0, False), ("window_s", self.window_s, 0.0, False),
                  ("slo_s", self.slo_s, 0.0, True), ("headroom", self.headroom, 0.0, True),
                  ("lead_s", self.lead_s, 0.0, True))
        for name, v, lo, closed in checks:
            ok = (isinstance(v, (int, float)) and math.isfinite(v)
                  and (v >= lo if closed else v > lo))
            if not ok:
                raise InvalidInputError(
                    f"autoscaler {name}: must be a finite number {'>=' if closed else '>'} "
                    f"{lo:g}, got {v!r}")
        if not (isinstance(self.target, (int, float)) and 0.0 < self.target <= 1.0):
            raise InvalidInputError(f"autoscaler target: must be in (0, 1], got {self.target!r}")
        if not (isinstance(self.epsilon, (int, float)) and 0.0 < self.epsilon < 1.0):
            raise InvalidInputError(
                f"autoscaler epsilon: must be in (0, 1), got {self.epsilon!r}")

    def to_dict(self) -> dict[str, Any]:
        """The options as a JSON-serialisable dict."""
        return dataclasses.asdict(self)


def erlang_c(c: int, a: float) -> float:
    """Erlang-C probability that an arrival waits, M/M/c with offered load ``a``.

    Parameters
    ----------
    c : int
        Servers (GPUs), >= 1.
    a : float
        Offered load ``lambda / mu`` (Erlangs), >= 0.

    Returns
    -------
    float
        ``C(c, a)`` in [0, 1]; 1 when ``a >= c`` (the queue is unstable).
    """
    if a >= c:
        return 1.0
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1.0 - b))


def erlang_c_gpus(a: np.ndarray, mean_service_s: np.ndarray, *, slo_s: float, epsilon: float,
                  max_gpus: int) -> np.ndarray:
    """Smallest ``c`` with ``P(wait > slo_s) <= epsilon`` for each offered load.

    Parameters
    ----------
    a : numpy.ndarray of float64, shape (n,)
        Offered loads, Erlangs (>= 0; 0 gives 0).
    mean_service_s : numpy.ndarray of float64, shape (n,)
        Mean service times, seconds (> 0 where ``a > 0``).
    slo_s, epsilon : float
    max_gpus : int
        Largest ``c`` tried; loads that need more get ``max_gpus + 1``.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)

    Notes
    -----
    Vectorised over loads: O(n max_gpus).
    """
    a = np.asarray(a, dtype=np.float64)
    es = np.asarray(mean_service_s, dtype=np.float64)
    out = np.where(a > 0, max_gpus + 1, 0).astype(np.int64)
    todo = np.flatnonzero(a > 0)
    b = np.ones(len(todo))
    at = a[todo]
    et = es[todo]
    for c in range(1, max_gpus + 1):
        if len(todo) == 0:
            break
        b = at * b / (c + at * b)
        stable = at < c
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            cw = np.where(stable, c * b / (c - at * (1.0 - b)), 1.0)
            tail = cw * np.exp(-(c - at) * slo_s / et)
        ok = stable & (tail <= epsilon)
        out[todo[ok]] = c
        keep = ~ok
        todo, b, at, et = todo[keep], b[keep], at[keep], et[keep]
    return out


def autoscale(
    arrival_s: np.ndarray,
    service_s: np.ndarray,
    *,
    n_servers: int,
    gpus_per_server: int,
    span_s: float,
    options: AutoscalerOptions | None = None,
    start_s: float = 0.0,
) -> InferenceDemand:
    """Turn requests into the inference demand series ``servers_needed(t)``.

    Parameters
    ----------
    arrival_s : numpy.ndarray of float64, shape (n,)
        Sorted arrival times, seconds, in the replay's time base.
    service_s : numpy.ndarray of float64, shape (n,)
        GPU-seconds of each request.
    n_servers : int
        Inference servers (>= 0): the cap of the series.
    gpus_per_server : int
        GPUs of each inference server (>= 1).
    span_s : float
        Length to cover from ``start_s``, seconds (> 0).
    options : AutoscalerOptions, optional
    start_s : float, default 0.0
        Time of the first step.

    Returns
    -------
    InferenceDemand
        ``ceil(span_s / step_s)`` steps; ``meta`` holds the options, the rule's
        need before the cap (``gpus_needed``, int64 per step) and how many
        steps were capped at ``n_servers`` (``n_steps_capped``).

    Notes
    -----
    O(n log n + steps x GPUs) (Erlang-C vectorised over steps).
    """
    opt = options or AutoscalerOptions()
    n_servers = int(n_servers)
    gps = int(gpus_per_server)
    if n_servers < 0 or gps < 1:
        raise InvalidInputError("autoscale: n_servers must be >= 0 and gpus_per_server >= 1")
    if not (math.isfinite(span_s) and span_s > 0):
        raise InvalidInputError(f"autoscale: span_s must be finite and > 0, got {span_s!r}")
    n_steps = math.ceil(span_s / opt.step_s)
    if n_steps > MAX_STEPS:
        raise InvalidInputError(
            f"autoscale: span_s / step_s = {n_steps:,} steps, more than {MAX_STEPS:,}")
    arr = np.asarray(arrival_s, dtype=np.float64)
    svc = np.asarray(service_s, dtype=np.float64)
    t = float(start_s) + opt.step_s * np.arange(n_steps, dtype=np.float64)
    work = np.concatenate([[0.0], np.cumsum(svc)])
    hi = np.searchsorted(arr, t, side="left")
    lo = np.searchsorted(arr, t - opt.window_s, side="left")
    count = hi - lo
    w = work[hi] - work[lo]
    load = w / opt.window_s
    max_gpus = n_servers * gps
    if opt.rule == "utilisation":
        gpus = np.ceil(np.round(load / opt.target * (1.0 + opt.headroom), 9)).astype(np.int64)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_s = np.where(count > 0, w / np.maximum(count, 1), 1.0)
        c = erlang_c_gpus(load, mean_s, slo_s=opt.slo_s, epsilon=opt.epsilon,
                          max_gpus=max_gpus)
        gpus = np.ceil(np.round(c * (1.0 + opt.headroom), 9)).astype(np.int64)
    gpus[count == 0] = 0
    need = -(-gpus // gps)
    if opt.lead_s > 0:
        ahead = math.ceil(opt.lead_s / opt.step_s - 1e-9)
        if ahead > 0:
            padded = np.concatenate([need, np.full(ahead, need[-1])])
            win = np.lib.stride_tricks.sliding_window_view(padded, ahead + 1)
            need = win.max(axis=1)
    capped = need > n_servers
    need = np.minimum(need, n_servers).astype(np.int64)
    meta = {"autoscaler": opt.to_dict(), "gpus_per_server": gps,
            "n_steps_capped": int(capped.sum()), "gpus_needed": gpus}
    return InferenceDemand(t, need, n_servers, f"requests ({opt.rule})", meta)
