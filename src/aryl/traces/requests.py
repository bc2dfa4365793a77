"""Inference request traces: the canonical request table and its readers.

A request trace lists user requests to the inference (serving) cluster: when
each arrived and how long one GPU works on it.  The request-level inference
model (docs/model.md, "Request-level inference") turns it into the demand
series ``servers_needed(t)`` (:mod:`aryl.sim.autoscale`) and replays it as a
queue on the servers that actually serve (:mod:`aryl.sim.serving`).

Canonical table (:attr:`RequestTrace.requests`), one row per request, sorted
by ``arrival_time_s`` (stable on input order):

=================  =======  ===============================================
column             dtype    meaning
=================  =======  ===============================================
``arrival_time_s``  float64  seconds since the first request (>= 0)
``service_s``       float64  GPU-seconds on one GPU (> 0, at most
                             ``MAX_DURATION_S``, 1e9): the time one GPU
                             works on the request
``model``           category model id ("" when the format has none)
=================  =======  ===============================================

Formats (detected from the header, or ``format=``):

=============  ===========================================  ===================================
format         header (columns used)                        mapping
=============  ===========================================  ===================================
canonical      ``arrival_time_s,service_s[,model]``         as is
alibaba-genai  ``gmt_create,predict_status,``               ``gmt_create`` naive local time in
               ``exec_time_seconds,``                       ``tz`` (default ``Asia/Shanghai``);
               ``checkpoint_model_version_id``              service = ``exec_time_seconds``;
                                                            model = the checkpoint id; rows
                                                            with ``predict_status`` PENDING
                                                            were never served: always
                                                            dropped and counted
                                                            (``not_served``); FAILED and
                                                            PROCESSING rows kept (they held
                                                            a GPU for their time)
azure-llm      ``TIMESTAMP,ContextTokens,GeneratedTokens``  ``TIMESTAMP`` UTC; service =
                                                            prompt / prefill rate + output /
                                                            decode rate of ``gpu_type``
                                                            (:data:`LLM_THROUGHPUT`)
=============  ===========================================  ===================================

Every row goes through a :class:`~aryl.traces.validate.RowChecker`, as job
traces do: a blank, non-numeric, non-finite, zero or negative service time, a
bad time stamp, a fractional token count raise a
:class:`~aryl.traces.validate.InvalidRowsError` naming the file, line and
column (``on_invalid="drop"`` drops and counts them instead).  Nothing is
defaulted.

Token model (``azure-llm``; the trace has no service times).  One request
holds one GPU for ``prompt_tokens / prefill_tokens_per_s + output_tokens /
decode_tokens_per_s`` seconds (no batching).  The rates of
:data:`LLM_THROUGHPUT` are this package's assumption for a 7B-parameter model
in 16-bit precision served one request at a time, not measurements; pass
``prefill_tokens_per_s`` / ``decode_tokens_per_s`` to use others.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aryl._limits import MAX_DURATION_S
from aryl.errors import InvalidInputError, TraceFormatError
from aryl.traces.readers import read_raw
from aryl.traces.validate import RowChecker, check_on_invalid, check_seed, check_tz

__all__ = [
    "LLM_THROUGHPUT",
    "REQUEST_FORMATS",
    "REQUEST_PRESETS",
    "RequestTrace",
    "load_requests",
    "read_load_latencies",
    "scale_rate",
    "summarize_requests",
]

#: Columns identifying each request format (all must be in the header).
REQUEST_FORMATS: dict[str, tuple[str, ...]] = {
    "canonical": ("arrival_time_s", "service_s"),
    "alibaba-genai": ("gmt_create", "predict_status", "exec_time_seconds",
                      "checkpoint_model_version_id"),
    "azure-llm": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
}

#: Assumed per-GPU-type (prefill, decode) throughput in tokens per second of one
#: request alone on one GPU (a 7B-parameter model, 16-bit weights; an assumption
#: of this package, see the module docstring).
LLM_THROUGHPUT: dict[str, tuple[float, float]] = {
    "V100": (2_500.0, 20.0),
    "A100": (8_000.0, 40.0),
    "H100": (16_000.0, 70.0),
}

_DEFAULT_TZ = "Asia/Shanghai"

#: Bundled request traces (``aryl/data/requests/``, CC-BY 4.0, see its README):
#: the two Azure LLM inference services of 2023-11-16, about one hour each.
REQUEST_PRESETS: dict[str, str] = {
    "azure-code": "azure-llm-2023-code.csv.gz",
    "azure-conv": "azure-llm-2023-conv.csv.gz",
}


def _preset_path(name: str) -> Path:
    from importlib import resources

    return Path(str(resources.files("aryl") / "data" / "requests" / REQUEST_PRESETS[name]))


@dataclasses.dataclass(frozen=True)
class RequestTrace:
    """A validated inference request trace (canonical form).

    Attributes
    ----------
    requests : pandas.DataFrame
        Columns ``arrival_time_s`` (float64, sorted, first 0 unless rescaled
        or sliced), ``service_s`` (float64, > 0), ``model`` (categorical of str).
    source : str
        The file it was read from.
    format : str
        ``canonical``, ``alibaba-genai`` or ``azure-llm``.
    dropped : dict of str to int
        Rows dropped, by kind.
    meta : dict
        Provenance: epoch of time 0 (``epoch_s``, Unix seconds when the file
        has date-times), time zone, token model, rate scale and seed.
    """

    requests: pd.DataFrame
    source: str = ""
    format: str = "canonical"
    dropped: dict[str, int] = dataclasses.field(default_factory=dict)
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def n_requests(self) -> int:
        """Number of requests."""
        return len(self.requests)

    @property
    def span_s(self) -> float:
        """Last arrival minus first (0 for fewer than two requests)."""
        t = self.requests["arrival_time_s"].to_numpy()
        return float(t[-1] - t[0]) if len(t) > 1 else 0.0

    @property
    def offered_load_gpus(self) -> float:
        """Mean offered load: total service GPU-seconds / span (0 if no span)."""
        span = self.span_s
        return float(self.requests["service_s"].sum() / span) if span > 0 else 0.0


def _detect(columns: list[str], path: str) -> str:
    have = set(columns)
    for name, req in REQUEST_FORMATS.items():
        if set(req) <= have:
            return name
    best = max(REQUEST_FORMATS, key=lambda n: len(set(REQUEST_FORMATS[n]) & have))
    missing = [c for c in REQUEST_FORMATS[best] if c not in have]
    raise TraceFormatError(
        f"not a known request trace format: closest is {best!r}, which needs "
        f"{', '.join(REQUEST_FORMATS[best])}", path=path, line=1, column=missing[0])


def _positive_service(ck: RowChecker, service: np.ndarray, column: str) -> None:
    with np.errstate(invalid="ignore"):
        ck.flag(service < 0, "negative_duration", column, "service time is negative",
                values=service)
        ck.flag(service == 0, "zero_duration", column, "service time is zero", values=service)
        ck.flag(service > MAX_DURATION_S, "long_duration", column,
                f"service time is above {MAX_DURATION_S:g} s", values=service)


def _throughput(gpu_type: str, prefill: float | None, decode: float | None
                ) -> tuple[float, float]:
    if gpu_type not in LLM_THROUGHPUT and (prefill is None or decode is None):
        raise InvalidInputError(
            f"gpu_type: no assumed LLM throughput for {gpu_type!r} (known: "
            f"{', '.join(LLM_THROUGHPUT)}); give prefill_tokens_per_s and decode_tokens_per_s")
    p0, d0 = LLM_THROUGHPUT.get(gpu_type, (math.nan, math.nan))
    p = p0 if prefill is None else float(prefill)
    d = d0 if decode is None else float(decode)
    for name, v in (("prefill_tokens_per_s", p), ("decode_tokens_per_s", d)):
        if not (math.isfinite(v) and v > 0):
            raise InvalidInputError(f"{name}: must be a finite number > 0, got {v!r}")
    return p, d


def load_requests(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    on_invalid: str = "raise",
    tz: str | None = None,
    gpu_type: str = "A100",
    prefill_tokens_per_s: float | None = None,
    decode_tokens_per_s: float | None = None,
) -> RequestTrace:
    """Read a request trace into the canonical, validated form.

    Parameters
    ----------
    path : str or os.PathLike
        CSV (optionally gzip, ``.csv.gz``) or Parquet file in one of the
        formats of the module docstring, or a preset name of
        :data:`REQUEST_PRESETS` (the bundled Azure traces).
    format : {"canonical", "alibaba-genai", "azure-llm"}, optional
        Default: detected from the header.
    on_invalid : {"raise", "drop"}, default "raise"
        Raise on the earliest bad row, or drop bad rows and count them.
    tz : str, optional
        IANA time zone of naive date-times (``alibaba-genai``; default
        ``Asia/Shanghai``).  ``azure-llm`` times are UTC.
    gpu_type : str, default "A100"
        GPU type whose throughput turns tokens into seconds (``azure-llm``).
    prefill_tokens_per_s, decode_tokens_per_s : float, optional
        Override the assumed throughput (tokens per second, > 0).

    Returns
    -------
    RequestTrace
        Arrivals rebased so that the first request arrives at 0 (the original
        time of the first request, Unix seconds, is ``meta["epoch_s"]``).

    Raises
    ------
    InvalidRowsError
        A bad row (file, line, column and rule; counts by kind).
    TraceFormatError
        Unknown header, unreadable CSV.
    InvalidInputError
        Missing file or bad argument.

    Notes
    -----
    O(n log n) (the sort); the file is held in memory.
    """
    check_on_invalid(on_invalid)
    name_in = os.fspath(path)
    p = _preset_path(name_in) if name_in in REQUEST_PRESETS else Path(name_in)
    if not p.is_file():
        raise InvalidInputError(
            f"requests: file {str(p)!r} does not exist (presets: {', '.join(REQUEST_PRESETS)})")
    if format is not None and format not in REQUEST_FORMATS:
        raise InvalidInputError(
            f"format: unknown request format {format!r} (known: {', '.join(REQUEST_FORMATS)})")
    raw, lines, label = read_raw(p)
    name = format or _detect(list(raw.columns), str(p))
    for col in REQUEST_FORMATS[name]:
        if col not in raw.columns:
            raise TraceFormatError(f"format {name!r} needs this column", path=str(p), line=1,
                                   column=col)
    ck = RowChecker(str(p), lines, on_invalid, line_label=label)
    meta: dict[str, Any] = {}
    model = np.full(len(raw), "", dtype=object)
    if name == "canonical":
        arrival = ck.number(raw["arrival_time_s"], "arrival_time_s")
        with np.errstate(invalid="ignore"):
            ck.flag(arrival < 0, "negative_duration", "arrival_time_s",
                    "arrival time is negative", values=arrival)
            ck.flag(arrival > MAX_DURATION_S, "long_duration", "arrival_time_s",
                    f"arrival time is above {MAX_DURATION_S:g} s", values=arrival)
        service = ck.number(raw["service_s"], "service_s")
        _positive_service(ck, service, "service_s")
        if "model" in raw.columns:
            model = ck.text(raw["model"], "model", required=False)
        epoch = None
    elif name == "alibaba-genai":
        zone = check_tz(tz) or _DEFAULT_TZ
        status = ck.text(raw["predict_status"], "predict_status")
        ck.flag(status == "PENDING", "not_served", "predict_status",
                "request never served (PENDING)", always_drop=True)
        arrival = ck.timestamp(raw["gmt_create"], "gmt_create", tz=zone)
        service = ck.number(raw["exec_time_seconds"], "exec_time_seconds")
        _positive_service(ck, service, "exec_time_seconds")
        model = ck.text(raw["checkpoint_model_version_id"], "checkpoint_model_version_id")
        meta["tz"] = zone
        epoch = True
    else:
        if tz is not None:
            raise InvalidInputError("tz: azure-llm time stamps are UTC; do not give tz")
        pre, dec = _throughput(gpu_type, prefill_tokens_per_s, decode_tokens_per_s)
        arrival = ck.timestamp(raw["TIMESTAMP"], "TIMESTAMP", tz="UTC")
        prompt = ck.integer(raw["ContextTokens"], "ContextTokens")
        output = ck.integer(raw["GeneratedTokens"], "GeneratedTokens")
        with np.errstate(invalid="ignore"):
            ck.flag(prompt < 0, "negative_duration", "ContextTokens", "negative token count",
                    values=prompt)
            ck.flag(output < 0, "negative_duration", "GeneratedTokens", "negative token count",
                    values=output)
            service = prompt / pre + output / dec
        _positive_service(ck, service, "GeneratedTokens")
        meta.update({"gpu_type": gpu_type, "prefill_tokens_per_s": pre,
                     "decode_tokens_per_s": dec,
                     "service_model": "prompt / prefill + output / decode, one request per GPU"})
        epoch = True
    keep, dropped = ck.finish()
    arrival = arrival[keep]
    service = service[keep]
    model = model[keep]
    order = np.argsort(arrival, kind="stable")
    arrival, service, model = arrival[order], service[order], model[order]
    if epoch and len(arrival):
        meta["epoch_s"] = float(arrival[0])
        arrival = arrival - arrival[0]
    df = pd.DataFrame({
        "arrival_time_s": np.asarray(arrival, dtype=np.float64),
        "service_s": np.asarray(service, dtype=np.float64),
        "model": pd.Categorical(pd.Series(model, dtype=object).astype(str)),
    })
    if df.empty:
        raise TraceFormatError("request trace has no usable rows", path=str(p), line=1)
    source = name_in if name_in in REQUEST_PRESETS else str(p)
    return RequestTrace(df, source=source, format=name, dropped=dropped, meta=meta)


def scale_rate(trace: RequestTrace, factor: float, *, seed: int = 0,
               jitter_s: float | None = None) -> RequestTrace:
    """Model a larger service: ``factor`` times the arrival rate, same shape.

    Each request yields ``floor(factor)`` copies, plus one more with
    probability ``factor - floor(factor)``; a copy keeps the service time and
    model and arrives ``U[0, jitter_s)`` after the original (the first copy of
    each request is the original itself when ``factor >= 1``).  So the rate is
    ``factor`` times the original's in expectation (exactly, for a whole
    ``factor``) and its day shape is kept.

    Parameters
    ----------
    trace : RequestTrace
    factor : float
        Rate multiplier, > 0 (1: the trace unchanged).
    seed : int, default 0
        Seed of ``numpy.random.default_rng`` for the copies' count and offsets.
    jitter_s : float, optional
        Spread of the copies, seconds (> 0; default: the mean gap between
        requests, ``span_s / (n - 1)``).

    Returns
    -------
    RequestTrace
        Sorted by arrival (stable); ``meta`` records ``rate_scale``,
        ``rate_scale_seed`` and ``rate_scale_jitter_s``.

    Notes
    -----
    O(n factor log(n factor)) time and memory.
    """
    f = float(factor)
    if not (math.isfinite(f) and f > 0):
        raise InvalidInputError(f"request_rate_scale: must be a finite number > 0, got {factor!r}")
    check_seed(seed)
    if f == 1.0:
        return dataclasses.replace(trace, meta={**trace.meta, "rate_scale": 1.0})
    df = trace.requests
    n = len(df)
    if jitter_s is None:
        jitter_s = trace.span_s / (n - 1) if n > 1 else 1.0
        jitter_s = jitter_s if jitter_s > 0 else 1.0
    if not (math.isfinite(jitter_s) and jitter_s > 0):
        raise InvalidInputError(f"jitter_s: must be a finite number > 0, got {jitter_s!r}")
    rng = np.random.default_rng(seed)
    whole = math.floor(f)
    copies = np.full(n, whole, dtype=np.int64) + (rng.random(n) < (f - whole))
    src = np.repeat(np.arange(n, dtype=np.int64), copies)
    offset = rng.random(len(src)) * jitter_s
    if whole >= 1:
        # the first copy of every request is the original, unshifted
        first = np.ones(len(src), dtype=bool)
        first[1:] = src[1:] != src[:-1]
        offset[first] = 0.0
    arrival = df["arrival_time_s"].to_numpy()[src] + offset
    order = np.argsort(arrival, kind="stable")
    src = src[order]
    model = pd.Categorical(df["model"])
    out = pd.DataFrame({
        "arrival_time_s": arrival[order],
        "service_s": df["service_s"].to_numpy()[src],
        "model": pd.Categorical.from_codes(model.codes[src], categories=model.categories),
    })
    meta = {**trace.meta, "rate_scale": f, "rate_scale_seed": int(seed),
            "rate_scale_jitter_s": float(jitter_s)}
    return RequestTrace(out, source=trace.source, format=trace.format, dropped=trace.dropped,
                        meta=meta)


def read_load_latencies(path: str | os.PathLike[str], *, column: str = "value",
                        units_per_s: float = 1000.0) -> np.ndarray:
    """Read measured model-load latencies (the cold start of a server).

    Parameters
    ----------
    path : str or os.PathLike
        CSV with a numeric column ``column`` (the Alibaba GenAI
        ``basemodel_update_latency_anon.csv``: ``value`` in milliseconds).
    column : str, default "value"
    units_per_s : float, default 1000.0
        Units of the column per second (milliseconds).

    Returns
    -------
    numpy.ndarray of float64
        Latencies in seconds, in file order, each > 0.

    Raises
    ------
    InvalidRowsError
        A blank, non-numeric, zero or negative value (file, line, column).
    """
    p = Path(os.fspath(path))
    if not p.is_file():
        raise InvalidInputError(f"cold_start: file {str(p)!r} does not exist")
    raw, lines, label = read_raw(p)
    if column not in raw.columns:
        raise TraceFormatError("load-latency CSV lacks a column", path=str(p), line=1,
                               column=column)
    ck = RowChecker(str(p), lines, "raise", line_label=label, drop_hint=None)
    v = ck.number(raw[column], column)
    _positive_service(ck, v, column)
    ck.finish()
    if len(v) == 0:
        raise TraceFormatError("load-latency CSV has no rows", path=str(p), line=1)
    return np.asarray(v / units_per_s, dtype=np.float64)


def summarize_requests(trace: RequestTrace, bins: int = 12) -> dict[str, Any]:
    """Figures of a request trace (``aryl trace inspect --requests``).

    Returns
    -------
    dict
        ``n_requests``, ``span_s``, ``offered_load_gpus``, ``rate_per_s``,
        ``service_{mean,p50,p95,p99,max}_s``, ``n_models``, and ``bins``: a
        DataFrame ``start_s, end_s, n_requests, offered_load_gpus`` over
        ``bins`` equal time bins (requests counted at arrival, their service
        GPU-seconds over the bin length).
    """
    df = trace.requests
    t = df["arrival_time_s"].to_numpy()
    s = df["service_s"].to_numpy()
    span = trace.span_s
    out: dict[str, Any] = {
        "n_requests": len(df),
        "span_s": span,
        "offered_load_gpus": trace.offered_load_gpus,
        "rate_per_s": (len(df) / span) if span > 0 else math.nan,
        "service_mean_s": float(np.mean(s)),
        "service_p50_s": float(np.percentile(s, 50)),
        "service_p95_s": float(np.percentile(s, 95)),
        "service_p99_s": float(np.percentile(s, 99)),
        "service_max_s": float(np.max(s)),
        "n_models": int(df["model"][df["model"] != ""].nunique()),
    }
    lo = float(t[0])
    width = span / bins if span > 0 else 1.0
    edges = lo + width * np.arange(bins + 1)
    idx = np.clip(((t - lo) // width).astype(np.int64), 0, bins - 1)
    n = np.bincount(idx, minlength=bins)
    w = np.bincount(idx, weights=s, minlength=bins)
    out["bins"] = pd.DataFrame({"start_s": edges[:-1], "end_s": edges[1:], "n_requests": n,
                                "offered_load_gpus": w / width})
    return out
