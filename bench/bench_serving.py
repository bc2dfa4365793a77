"""Request-level inference at scale: the 23-day Alibaba GenAI request trace at 100x its rate.

The trace is research-use and not bundled: give its path in
``$ARYL_ALIBABA_REQUESTS`` (``lora_request_trace.csv``); the benchmark is
skipped without it.  Timed, after the file is read: the rate scale to 100x
(about 2.7 million requests), the Erlang-C autoscaler (60 s steps), the
serving capacity from a loan timeline of 16 eight-GPU inference servers
(half of them lent and reclaimed in turns of U(0, 2 h), about 4,400 events;
20 s cold starts) and the two queue replays of
:func:`aryl.sim.serving.serve` (with the loans and the no-loan reference).

Run as a script for the time and the process's peak resident memory::

    python bench/bench_serving.py PATH/lora_request_trace.csv
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aryl.sim.serving import ServingOptions, demand_from_requests, serve
from aryl.traces.requests import load_requests, scale_rate

TRACE = Path(os.environ.get("ARYL_ALIBABA_REQUESTS", "")).expanduser()
needs_trace = pytest.mark.skipif(not TRACE.is_file(),
                                 reason="set ARYL_ALIBABA_REQUESTS to lora_request_trace.csv")

N_SERVERS = 16
GPUS = 8
SERVER_GPUS = {100 + i: GPUS for i in range(N_SERVERS)}


def loan_events(span_s: float, seed: int = 0) -> pd.DataFrame:
    """A valid loan timeline: servers 108..115 alternate a loan and a time back,
    each lasting U(0, 2 h); servers 100..107 are never lent."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in list(SERVER_GPUS)[N_SERVERS // 2:]:
        t, lent = 0.0, False
        while True:
            t += float(rng.uniform(0, 7200.0))
            if t >= span_s:
                break
            rows.append((t, "reclaim" if lent else "loan", s))
            lent = not lent
    ev = pd.DataFrame(rows, columns=["time_s", "event", "workers"])
    return ev.sort_values("time_s", kind="stable").reset_index(drop=True)


def run(base) -> dict:
    opt = ServingOptions(request_rate_scale=100.0, cold_start_s=20.0, slo_s=60.0)
    t = time.perf_counter()
    reqs = scale_rate(base, 100.0, seed=0)
    demand = demand_from_requests(reqs, opt, n_servers=N_SERVERS, gpus_per_server=GPUS,
                                  start_s=0.0)
    ev = loan_events(reqs.span_s)
    out = serve(reqs, ev, server_gpus=SERVER_GPUS, start_s=0.0, options=opt, demand=demand)
    return {"seconds": time.perf_counter() - t, "n_requests": reqs.n_requests,
            "summary": out.summary}


@needs_trace
@pytest.mark.benchmark(group="serving")
def test_alibaba_requests_100x(benchmark) -> None:
    base = load_requests(TRACE)
    res = benchmark.pedantic(run, args=(base,), rounds=1, iterations=1)
    assert 2_600_000 < res["n_requests"] < 2_760_000
    assert res["seconds"] < 10.0


def main(argv: list[str]) -> None:
    path = Path(argv[1]) if len(argv) > 1 else TRACE
    t = time.perf_counter()
    base = load_requests(path)
    read_s = time.perf_counter() - t
    res = run(base)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = res["summary"]
    print(f"read {base.n_requests:,} requests in {read_s:.2f} s; scaled to "
          f"{res['n_requests']:,}; scale + autoscale + capacity + 2 queue replays: "
          f"{res['seconds']:.2f} s; peak RSS {peak_mb:,.0f} MB; "
          f"p99 latency {s['latency_p99_s']:.1f} s, SLO attainment {s['slo_attainment']:.4f} "
          f"({s['slo_attainment_no_loans']:.4f} without loans), "
          f"{s['n_delayed_by_loans']:,} requests delayed by loans")


if __name__ == "__main__":
    main(sys.argv)
