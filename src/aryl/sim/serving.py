"""Request-level inference: serving capacity from a replay, and the request queue.

A client of the training replay, not a third engine (docs/model.md,
"Request-level inference"):

1. the autoscaler (:mod:`aryl.sim.autoscale`) turns the request trace into the
   demand series ``servers_needed(t)`` that either engine consumes unchanged;
2. after the training replay, :func:`serving_capacity` reads its loan timeline
   (the event log's ``loan``, ``loan_return`` and ``reclaim`` rows: which
   inference server is lent, when each comes back) and adds cold starts: a
   server back from a loan serves only after a model load, and meanwhile is
   neither lent nor serving;
3. :func:`replay_requests` runs the requests through a first-come-first-served
   queue on the GPUs serving over time (compiled ``aryl._core._serve``, with
   the pure-Python twin ``aryl._reference.serving``);
4. :func:`serve` does the three and the measures; the same requests on every
   inference GPU all the time (no loans) is the reference that says which
   requests a loan delayed and by how much.

The coupling is one-way: the training replay never sees the requests, only
the demand series, so it is the same replay as with any other series.

Measures (``ServingResult.summary``): latency = wait + service; SLO
attainment = share of requests with ``wait <= slo_s`` (the same waiting-time
SLO the ``erlang-c`` rule sizes for); a request is *delayed by a loan* when
its wait exceeds its wait in the no-loan reference by more than 1e-9 s.
Percentiles use numpy's linear interpolation; unserved requests (capacity 0
for ever) count as SLO misses and have infinite latency.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd

from aryl.errors import InvalidInputError
from aryl.sim.autoscale import AUTOSCALERS, AutoscalerOptions, autoscale
from aryl.traces.inference import InferenceDemand
from aryl.traces.requests import RequestTrace, load_requests, read_load_latencies, scale_rate

__all__ = [
    "ServingCapacity",
    "ServingOptions",
    "ServingResult",
    "demand_from_requests",
    "inference_server_gpus",
    "load_serving_requests",
    "replay_requests",
    "serve",
    "serve_result",
    "serving_capacity",
]

_EPS_S = 1e-9


@dataclasses.dataclass(frozen=True)
class ServingOptions:
    """Knobs of the request-level inference model (``aryl config``, section ``serving``).

    Attributes
    ----------
    inference_requests : str or None
        Request trace: a path (canonical ``arrival_time_s,service_s``, the
        Alibaba GenAI ``lora_request_trace.csv`` or an Azure LLM trace) or a
        bundled preset (``azure-code``, ``azure-conv``); none: the demand is
        the ``inference`` series and no request is replayed.
    request_format : str or None
        ``canonical``, ``alibaba-genai`` or ``azure-llm`` (none: from the header).
    request_rate_scale : float
        Arrival-rate multiplier modelling a larger service (> 0; each request
        copied ``floor(x)`` times plus once more with probability ``x -
        floor(x)``, the copies spread over the mean gap, seeded by ``seed``).
    request_rate_jitter_s : float or None
        Spread of the copies made by ``request_rate_scale``, seconds (none:
        the trace's mean gap between requests).
    request_tz : str or None
        IANA time zone of the Alibaba trace's naive times (none: Asia/Shanghai).
    llm_gpu_type : str
        GPU type of the token model (Azure traces): ``V100``, ``A100``, ``H100``.
    prefill_tokens_per_s, decode_tokens_per_s : float or None
        Override the assumed token throughput of ``llm_gpu_type``.
    autoscaler : str
        The inference autoscaler: ``erlang-c`` (latency-SLO sizing) or
        ``utilisation`` (Knative-like target utilisation).
    autoscaler_step_s : float
        Decision period of the autoscaler, seconds.
    autoscaler_window_s : float
        Stable window over which the offered load is measured, seconds.
    autoscaler_target : float
        Target utilisation of ``utilisation``, in (0, 1].
    slo_s : float
        Waiting-time SLO, seconds: ``erlang-c`` sizes for it, the summary's
        SLO attainment counts it.
    slo_epsilon : float
        ``erlang-c``: the allowed probability of waiting longer than ``slo_s``.
    autoscaler_headroom : float
        Extra share of GPUs above the rule's need (>= 0).
    reclaim_lead_s : float
        Ask for servers this long ahead (the largest need of the coming steps).
    cold_start_s : float
        Model load of a server back from a loan, seconds (fixed; >= 0).
    cold_start_trace : str or None
        CSV of measured model-load latencies (ms, column ``value``, e.g. the
        Alibaba ``basemodel_update_latency_anon.csv``): each return draws one,
        seeded by ``seed``; replaces ``cold_start_s``.
    """

    inference_requests: str | None = None
    request_format: str | None = None
    request_rate_scale: float = 1.0
    request_rate_jitter_s: float | None = None
    request_tz: str | None = None
    llm_gpu_type: str = "A100"
    prefill_tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    autoscaler: str = "erlang-c"
    autoscaler_step_s: float = 60.0
    autoscaler_window_s: float = 60.0
    autoscaler_target: float = 0.7
    slo_s: float = 60.0
    slo_epsilon: float = 0.05
    autoscaler_headroom: float = 0.0
    reclaim_lead_s: float = 0.0
    cold_start_s: float = 0.0
    cold_start_trace: str | None = None

    def __post_init__(self) -> None:
        if self.autoscaler not in AUTOSCALERS:
            raise InvalidInputError(
                f"autoscaler: unknown {self.autoscaler!r} (known: {', '.join(AUTOSCALERS)})")
        x = self.request_rate_scale
        if not (isinstance(x, (int, float)) and math.isfinite(x) and x > 0):
            raise InvalidInputError(f"request_rate_scale: must be a number > 0, got {x!r}")
        j = self.request_rate_jitter_s
        if j is not None and not (isinstance(j, (int, float)) and math.isfinite(j) and j > 0):
            raise InvalidInputError(f"request_rate_jitter_s: must be a number > 0, got {j!r}")
        c = self.cold_start_s
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 0):
            raise InvalidInputError(f"cold_start_s: must be a number >= 0, got {c!r}")
        self.autoscaler_options()  # checks the autoscaler's knobs

    def autoscaler_options(self) -> AutoscalerOptions:
        """The :class:`AutoscalerOptions` these knobs describe."""
        return AutoscalerOptions(
            rule=self.autoscaler, step_s=self.autoscaler_step_s,
            window_s=self.autoscaler_window_s, target=self.autoscaler_target,
            slo_s=self.slo_s, epsilon=self.slo_epsilon, headroom=self.autoscaler_headroom,
            lead_s=self.reclaim_lead_s)

    def to_dict(self) -> dict[str, Any]:
        """The options as a JSON-serialisable dict."""
        return dataclasses.asdict(self)


def load_serving_requests(options: ServingOptions, *, seed: int = 0,
                          on_invalid: str = "raise") -> RequestTrace:
    """Read ``options.inference_requests`` and apply the rate scale.

    Raises
    ------
    InvalidInputError
        No request trace configured, or a bad file / row (located).
    """
    if options.inference_requests is None:
        raise InvalidInputError("inference_requests: no request trace given")
    trace = load_requests(
        options.inference_requests, format=options.request_format, on_invalid=on_invalid,
        tz=options.request_tz, gpu_type=options.llm_gpu_type,
        prefill_tokens_per_s=options.prefill_tokens_per_s,
        decode_tokens_per_s=options.decode_tokens_per_s)
    return scale_rate(trace, options.request_rate_scale, seed=seed,
                      jitter_s=options.request_rate_jitter_s)


def demand_from_requests(trace: RequestTrace, options: ServingOptions, *, n_servers: int,
                         gpus_per_server: int, start_s: float) -> InferenceDemand:
    """The autoscaler's ``servers_needed(t)`` for a request trace placed at ``start_s``.

    The series covers the requests (the last step holds after the last one).
    """
    arr = trace.requests["arrival_time_s"].to_numpy() + float(start_s)
    svc = trace.requests["service_s"].to_numpy()
    span = max(trace.span_s, 0.0) + options.autoscaler_step_s
    return autoscale(arr, svc, n_servers=n_servers, gpus_per_server=gpus_per_server,
                     span_s=span, options=options.autoscaler_options(), start_s=start_s)


@dataclasses.dataclass(frozen=True)
class ServingCapacity:
    """GPUs serving over time (a step series) and the cold starts behind it.

    Attributes
    ----------
    times_s : numpy.ndarray of float64, shape (m,)
        Strictly increasing step times (the first is ``start_s``).
    gpus : numpy.ndarray of int64, shape (m,)
        Inference GPUs serving from ``times_s[k]``: on servers neither lent
        nor loading a model.
    n_cold_starts : int
        Returns from a loan that loaded a model.
    cold_server_s : float
        Server-seconds spent loading (a load cut short by a new loan counts
        up to the loan).
    """

    times_s: np.ndarray
    gpus: np.ndarray
    n_cold_starts: int
    cold_server_s: float


def serving_capacity(
    events: pd.DataFrame,
    *,
    server_gpus: dict[int, int],
    start_s: float,
    cold_start_s: float | np.ndarray = 0.0,
    seed: int = 0,
) -> ServingCapacity:
    """Inference GPUs serving over time, from a replay's loan timeline.

    Parameters
    ----------
    events : pandas.DataFrame
        A replay's event log (``SimResult.events``: ``time_s, event,
        workers``); rows ``loan``, ``loan_return`` and ``reclaim`` carry the
        server id in ``workers``.  Other rows are ignored.
    server_gpus : dict of int to int
        GPUs of each inference server, by server id.  Every server serves at
        ``start_s`` (none is lent yet).
    start_s : float
        Start of the series (the replay's clock start).
    cold_start_s : float or numpy.ndarray of float64
        A fixed model load (seconds, >= 0), or measured loads to draw from:
        each return, in event-log order, draws one with
        ``numpy.random.default_rng(seed).choice``.
    seed : int, default 0

    Returns
    -------
    ServingCapacity

    Raises
    ------
    InvalidInputError
        A loan/return event names a server not in ``server_gpus``, a server
        lent twice or returned while not lent (a log that is not a timeline).

    Notes
    -----
    A server lent again while it is still loading is lent from then on (the
    load is abandoned).  O(events log log events).
    """
    kinds = ("loan", "loan_return", "reclaim")
    ev = events[events["event"].isin(kinds)]
    t_ev = ev["time_s"].to_numpy(dtype=np.float64)
    s_ev = ev["workers"].to_numpy(dtype=np.int64)
    lend = (ev["event"] == "loan").to_numpy(dtype=bool)
    n_ret = int((~lend).sum())
    if isinstance(cold_start_s, np.ndarray):
        if cold_start_s.size == 0 or not np.all(np.isfinite(cold_start_s) & (cold_start_s >= 0)):
            raise InvalidInputError("cold_start: measured loads must be finite and >= 0")
        loads = np.random.default_rng(seed).choice(cold_start_s, size=n_ret)
    else:
        c = float(cold_start_s)
        if not (math.isfinite(c) and c >= 0):
            raise InvalidInputError(f"cold_start_s: must be a number >= 0, got {cold_start_s!r}")
        loads = np.full(n_ret, c)
    lent: dict[int, bool] = {s: False for s in server_gpus}
    ready: dict[int, float] = {}  # server -> time its load ends (pending)
    ret_at: dict[int, float] = {}
    steps: list[tuple[float, int]] = []
    cold_s = 0.0
    r = 0
    for t, s, is_loan in zip(t_ev.tolist(), s_ev.tolist(), lend.tolist(), strict=True):
        if s not in server_gpus:
            raise InvalidInputError(f"events: server {s} at t = {t:g} s is not an inference server")
        g = server_gpus[s]
        if is_loan:
            if lent[s]:
                raise InvalidInputError(f"events: server {s} lent at t = {t:g} s while on loan")
            if s in ready:
                end = ready.pop(s)
                if end <= t:
                    steps.append((end, g))
                    steps.append((t, -g))
                    cold_s += end - ret_at[s]
                else:
                    cold_s += t - ret_at[s]  # still loading: it stays unavailable
            else:
                steps.append((t, -g))
            lent[s] = True
        else:
            if not lent[s]:
                raise InvalidInputError(
                    f"events: server {s} returned at t = {t:g} s while not lent")
            lent[s] = False
            ready[s] = t + float(loads[r])
            ret_at[s] = t
            r += 1
    for s, end in ready.items():
        steps.append((end, server_gpus[s]))
        cold_s += end - ret_at[s]
    total = int(sum(server_gpus.values()))
    t0 = float(start_s)
    if steps:
        st = np.array([x[0] for x in steps], dtype=np.float64)
        dv = np.array([x[1] for x in steps], dtype=np.int64)
        order = np.argsort(st, kind="stable")
        st, dv = st[order], dv[order]
        uniq, first = np.unique(st, return_index=True)
        level = total + np.cumsum(dv)
        last = np.append(first[1:], len(st)) - 1  # the level after every change at a time
        times = np.concatenate([[min(t0, float(uniq[0]))], uniq])
        gpus = np.concatenate([[total], level[last]])
        # one value per time (the last), then only the changes
        keep = np.ones(len(times), dtype=bool)
        keep[:-1] = times[:-1] < times[1:]
        times, gpus = times[keep], gpus[keep]
        keep = np.ones(len(times), dtype=bool)
        keep[1:] = gpus[1:] != gpus[:-1]
        times, gpus = times[keep], gpus[keep]
    else:
        times = np.array([t0])
        gpus = np.array([total], dtype=np.int64)
    if np.any(gpus < 0):  # pragma: no cover - guarded by the lent/returned checks
        raise AssertionError("negative serving capacity")
    return ServingCapacity(times, gpus.astype(np.int64), n_ret, cold_s)


def replay_requests(
    arrival_s: np.ndarray,
    service_s: np.ndarray,
    cap_times_s: np.ndarray,
    cap_gpus: np.ndarray,
    *,
    backend: str = "native",
) -> np.ndarray:
    """Start times of the requests in a FCFS queue on a GPU count varying over time.

    Parameters
    ----------
    arrival_s : numpy.ndarray of float64, shape (n,)
        Arrival times, non-decreasing, finite.
    service_s : numpy.ndarray of float64, shape (n,)
        Service times, finite and > 0 (one GPU each).
    cap_times_s : numpy.ndarray of float64, shape (m,), m >= 1
        Strictly increasing step times of the capacity (the first value also
        holds before ``cap_times_s[0]``).
    cap_gpus : numpy.ndarray of int64, shape (m,)
        GPUs serving from each step, >= 0.
    backend : {"native", "reference"}
        The compiled kernel or its pure-Python twin (identical results).

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
        Start times (``inf``: never served).  FCFS without overtaking; a
        request in service is never interrupted (when the capacity falls, the
        GPUs drain); a request ending at ``s`` frees its GPU at ``s``; a
        capacity step at ``s`` holds from ``s``.

    Raises
    ------
    InvalidInputError
        Shapes, order, non-finite or out-of-range values, unknown backend.

    Notes
    -----
    O(n log c + m); 2.7 million requests take about a second compiled.
    """
    a = np.ascontiguousarray(arrival_s, dtype=np.float64)
    s = np.ascontiguousarray(service_s, dtype=np.float64)
    ct = np.ascontiguousarray(cap_times_s, dtype=np.float64)
    cv = np.ascontiguousarray(cap_gpus, dtype=np.int64)
    if a.ndim != 1 or s.shape != a.shape:
        raise InvalidInputError("replay_requests: arrival_s and service_s must be equal-length 1-D")
    if ct.ndim != 1 or cv.shape != ct.shape or ct.size == 0:
        raise InvalidInputError("replay_requests: cap_times_s and cap_gpus must be equal-length "
                                "1-D with at least one step")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(s)) and np.all(s > 0)):
        raise InvalidInputError("replay_requests: arrivals must be finite, services finite > 0")
    if a.size > 1 and np.any(np.diff(a) < 0):
        raise InvalidInputError("replay_requests: arrival_s must be non-decreasing")
    if not np.all(np.isfinite(ct)) or (ct.size > 1 and np.any(np.diff(ct) <= 0)):
        raise InvalidInputError("replay_requests: cap_times_s must be finite, strictly increasing")
    if np.any(cv < 0):
        raise InvalidInputError("replay_requests: cap_gpus must be >= 0")
    if backend == "native":
        from aryl._core import _serve

        return np.asarray(_serve.fcfs_starts(a, s, ct, cv))
    if backend == "reference":
        from aryl._reference.serving import fcfs_starts

        return fcfs_starts(a, s, ct, cv)
    raise InvalidInputError(f"backend: expected 'native' or 'reference', got {backend!r}")


class ServingResult:
    """Outcome of the request-level replay.

    Attributes
    ----------
    summary : dict
        JSON-serialisable measures (module docstring) and the options.
    capacity : ServingCapacity
    requests : pandas.DataFrame
        Built on first use (the per-request table is optional): one row per
        request, ``arrival_s`` (replay clock), ``service_s``, ``start_s``,
        ``wait_s``, ``latency_s``, ``wait_no_loans_s`` (the same request with
        every inference GPU serving), ``loan_delay_s`` (``wait_s -
        wait_no_loans_s``), ``model``.
    """

    def __init__(self, summary: dict[str, Any], capacity: ServingCapacity,
                 columns: dict[str, Any]) -> None:
        self.summary = summary
        self.capacity = capacity
        self._columns = columns
        self._table: pd.DataFrame | None = None

    @property
    def requests(self) -> pd.DataFrame:
        if self._table is None:
            self._table = pd.DataFrame(self._columns)
        return self._table


def _pcts(x: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
    """Percentiles (linear interpolation; ``inf`` once an unserved request is in reach)."""
    if x.size == 0:
        return [None] * len(qs)
    with np.errstate(invalid="ignore"):
        v = np.percentile(x, qs)
    return [float(y) if math.isfinite(y) else math.inf for y in v]


def serve(
    trace: RequestTrace,
    events: pd.DataFrame,
    *,
    server_gpus: dict[int, int],
    start_s: float,
    options: ServingOptions | None = None,
    seed: int = 0,
    demand: InferenceDemand | None = None,
    backend: str = "native",
) -> ServingResult:
    """Replay the requests on the servers a training replay left serving.

    Parameters
    ----------
    trace : RequestTrace
        The requests (already rate-scaled), times relative to ``start_s``.
    events : pandas.DataFrame
        The training replay's event log (``SimResult.events``; run with
        ``record_events=True``).
    server_gpus : dict of int to int
        GPUs of each inference server, by server id.
    start_s : float
        Replay clock time of request time 0 (the replay's clock start).
    options : ServingOptions, optional
    seed : int, default 0
        Seed of the cold-start draws.
    demand : InferenceDemand, optional
        The demand series the replay used, summarised in the output.
    backend : {"native", "reference"}

    Returns
    -------
    ServingResult
    """
    opt = options or ServingOptions()
    cold: float | np.ndarray = opt.cold_start_s
    if opt.cold_start_trace is not None:
        cold = read_load_latencies(opt.cold_start_trace)
    cap = serving_capacity(events, server_gpus=server_gpus, start_s=start_s,
                           cold_start_s=cold, seed=seed)
    arr = trace.requests["arrival_time_s"].to_numpy() + float(start_s)
    svc = trace.requests["service_s"].to_numpy()
    starts = replay_requests(arr, svc, cap.times_s, cap.gpus, backend=backend)
    total = int(sum(server_gpus.values()))
    base = replay_requests(arr, svc, np.array([float(start_s)]), np.array([total]),
                           backend=backend)
    wait = starts - arr
    wait0 = base - arr
    with np.errstate(invalid="ignore"):
        extra = wait - wait0
    delayed = extra > _EPS_S
    lat = wait + svc
    served = np.isfinite(starts)
    n = len(arr)
    lat_q = _pcts(lat, (50, 95, 99))
    wait_q = _pcts(wait, (95, 99))
    summary: dict[str, Any] = {
        "n_requests": n,
        "n_unserved": int((~served).sum()),
        "offered_load_gpus": trace.offered_load_gpus,
        "inference_gpus": total,
        "latency_p50_s": lat_q[0], "latency_p95_s": lat_q[1], "latency_p99_s": lat_q[2],
        "wait_mean_s": float(np.mean(wait)) if n else None,
        "wait_p95_s": wait_q[0], "wait_p99_s": wait_q[1],
        "slo_s": opt.slo_s,
        "slo_attainment": float(np.mean(wait <= opt.slo_s + _EPS_S)) if n else None,
        "slo_attainment_no_loans": float(np.mean(wait0 <= opt.slo_s + _EPS_S)) if n else None,
        "latency_p99_no_loans_s": _pcts(wait0 + svc, (99,))[0],
        "n_delayed_by_loans": int(delayed.sum()),
        "share_delayed_by_loans": float(np.mean(delayed)) if n else None,
        "loan_delay_mean_s": float(np.mean(extra[delayed])) if delayed.any() else 0.0,
        "loan_delay_p99_s": _pcts(extra[delayed], (99,))[0] if delayed.any() else 0.0,
        "loan_delay_max_s": float(np.max(extra[delayed])) if delayed.any() else 0.0,
        "n_cold_starts": cap.n_cold_starts,
        "cold_start_server_s": cap.cold_server_s,
        "request_rate_scale": float(trace.meta.get("rate_scale", 1.0)),
        "requests_source": trace.source,
        "requests_format": trace.format,
        "requests_dropped": dict(trace.dropped),
        "options": opt.to_dict(),
    }
    if demand is not None:
        summary["mean_servers_needed"] = float(demand.mean_utilisation * demand.n_servers)
        summary["n_steps_capped"] = int(demand.meta.get("n_steps_capped", 0))
    columns = {
        "arrival_s": arr, "service_s": svc, "start_s": starts, "wait_s": wait,
        "latency_s": lat, "wait_no_loans_s": wait0, "loan_delay_s": extra,
        "model": trace.requests["model"].array,
    }
    return ServingResult(summary, cap, columns)


def inference_server_gpus(spec: Any) -> dict[int, int]:
    """GPUs of each inference server of a cluster spec, by server id.

    Server ids are those of the replay (training pools' servers first, then
    inference pools', in spec order: :meth:`aryl.cluster.ClusterSpec.server_pools`).
    """
    pools = spec.server_pools()
    return {i: int(p.gpus_per_server) for i, p in enumerate(pools) if p.role == "inference"}


def serve_result(result: Any, trace: RequestTrace, options: ServingOptions | None = None, *,
                 demand: InferenceDemand | None = None, backend: str = "native") -> ServingResult:
    """:func:`serve` on a finished training replay (a ``SimResult``).

    The request time 0 is the replay's clock start (``summary["start_s"]``);
    the inference servers and their GPUs come from ``summary["cluster"]``;
    the cold starts are seeded by the replay's seed.

    Raises
    ------
    InvalidInputError
        The replay kept no event log (``record_events=False``) while it lent
        servers, or its cluster has no inference server.
    """
    from aryl.cluster import ClusterSpec

    s = result.summary
    spec = ClusterSpec.from_dict({"pools": s["cluster"]["pools"]})
    gpus = inference_server_gpus(spec)
    if not gpus:
        raise InvalidInputError("the replay's cluster has no inference server")
    if not s["config"].get("record_events", True) and s.get("n_loans", 0):
        raise InvalidInputError("serving needs the replay's event log: run with record_events")
    return serve(trace, result.events, server_gpus=gpus, start_s=float(s["start_s"]),
                 options=options, seed=int(s["config"]["seed"]), demand=demand,
                 backend=backend)
