"""Fingerprint replays: one SHA-256 per (scenario, policy) over every per-job number.

A refactor of the engine or of a policy must leave replays bit-identical; this
script makes that check one command::

    python scripts/replay_fingerprints.py --out before.json     # on the old code
    python scripts/replay_fingerprints.py --compare before.json # on the new code

The hash covers the per-job outcome columns (float64 bytes exactly), the event
log and the summary's core measures (wall-clock timings and measures added
after a baseline excluded: ``CORE_JOB_COLUMNS``, ``CORE_SUMMARY_KEYS``).  Scenarios
cover every policy on the default replay (``itp-c07``) and small clusters that
exercise loans, reclaims with a grace period, every reclaim policy, kept idle
loans, a horizon and tight clusters (preemptions, fragmentation).
``--quick`` runs only the small scenarios (about 30 s).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

POLICIES = ("fifo", "sjf", "tiresias", "aryl", "aryl-no-loan", "aryl-no-elastic", "elastic-greedy")

_TIMING_KEYS = ("sched", "wall", "time_per", "elapsed", "timing")
# What a scheduling result is: these per-job columns and the event log.  Columns
# and summary keys added later (new measures) do not enter the hash, so a refactor
# can be checked against a baseline taken before they existed.
CORE_JOB_COLUMNS = (
    "job_id", "status", "first_start_s", "finish_s", "queuing_delay_s", "wait_s", "jct_s",
    "n_preemptions", "n_scale_in", "n_scale_out", "n_moves", "gpu_s",
)
CORE_SUMMARY_KEYS = (
    "n_jobs", "n_finished", "n_unfinished", "n_infeasible", "n_not_arrived", "start_s", "end_s",
    "queuing_delay_s", "jct_s", "wait_s", "cluster_usage", "gpu_s_allocated",
    "gpu_s_available", "inference_utilisation", "inference_utilisation_with_loans",
    "mean_loaned_servers", "n_preemptions", "n_reclaim_preemptions", "n_scale_in",
    "n_scale_out", "n_moves", "n_loans", "n_reclaims", "n_loan_returns", "n_decisions",
)


def _scrub(obj: Any) -> Any:
    """Drop wall-clock measures from a summary (they differ run to run)."""
    if isinstance(obj, dict):
        return {
            k: _scrub(v) for k, v in sorted(obj.items())
            if not any(t in str(k) for t in _TIMING_KEYS)
        }
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    if isinstance(obj, float):
        return obj.hex()
    return obj


def _hash_frame(h: Any, df: pd.DataFrame) -> None:
    for col in df.columns:
        h.update(str(col).encode())
        a = df[col].to_numpy()
        if a.dtype == object:
            h.update("\x1f".join(map(str, a.tolist())).encode())
        else:
            h.update(np.ascontiguousarray(a).tobytes())


def fingerprint(res: Any) -> str:
    h = hashlib.sha256()
    _hash_frame(h, res.jobs[[c for c in CORE_JOB_COLUMNS if c in res.jobs.columns]])
    if res.events is not None and len(res.events):
        _hash_frame(h, res.events)
    summary = {k: res.summary.get(k) for k in CORE_SUMMARY_KEYS}
    h.update(json.dumps(_scrub(summary), sort_keys=True, default=str).encode())
    return h.hexdigest()


def scenarios(quick: bool) -> Iterator[tuple[str, Any, str, Any, dict[str, Any] | None]]:
    from aryl.sim import SimConfig
    from aryl.traces import load_trace, synthesize_elastic

    def el(preset: str, n: int | None = None, seed: int = 0) -> Any:
        tr = load_trace(preset)
        if n is not None:
            tr = tr.replace(jobs=tr.jobs.iloc[:n].reset_index(drop=True))
        return synthesize_elastic(tr, elastic_fraction=0.5, seed=seed)

    c01 = el("itp-c01")
    small = SimConfig(n_training_servers=8, n_inference_servers=4, loan_reserve_servers=0)
    for p in POLICIES:
        yield f"c01-8+4/{p}", c01, p, small, None
    grace = SimConfig(n_training_servers=8, n_inference_servers=4, reclaim_grace_s=600.0,
                      loan_reserve_servers=0, seed=3)
    for p in ("aryl", "aryl-no-elastic"):
        yield f"c01-grace/{p}", c01, p, grace, None
    for rp in ("random", "fewest-jobs", "most-idle"):
        cfg = SimConfig(n_training_servers=8, n_inference_servers=4, reclaim_policy=rp,
                        loan_reserve_servers=0)
        yield f"c01-reclaim-{rp}/aryl", c01, "aryl", cfg, None
    yield "c01-keep-idle/aryl", c01, "aryl", small, {"return_idle_loans": False}
    c06 = el("itp-c06", seed=1)
    tight = SimConfig(n_training_servers=3, n_inference_servers=2, loan_reserve_servers=0,
                      gpus_per_server=8)
    for p in POLICIES:
        yield f"c06-3+2/{p}", c06, p, tight, None
    sub = c06.jobs["submit_time_s"]
    horizon = float(sub.iloc[0] + 10 * 86400.0)
    hz = SimConfig(n_training_servers=3, n_inference_servers=2, horizon_s=horizon)
    for p in ("fifo", "aryl"):
        yield f"c06-horizon/{p}", c06, p, hz, None
    if quick:
        return
    c07 = el("itp-c07")
    for p in POLICIES:
        yield f"c07-default/{p}", c07, p, SimConfig(), None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the fingerprints to this JSON file")
    ap.add_argument("--compare", help="compare against a JSON file written by --out")
    ap.add_argument("--quick", action="store_true", help="small scenarios only")
    ap.add_argument("--backend", default="native", choices=["native", "reference"])
    ap.add_argument("--only", default=None, help="substring filter on scenario names")
    args = ap.parse_args(argv)

    import dataclasses
    import logging

    from aryl.sim import simulate

    logging.basicConfig(level=logging.ERROR)

    got: dict[str, str] = {}
    for name, trace, policy, cfg, opts in scenarios(args.quick):
        if args.only and args.only not in name:
            continue
        cfg = dataclasses.replace(cfg, backend=args.backend)
        t = time.perf_counter()
        res = simulate(trace, policy=policy, config=cfg, policy_options=opts)
        got[name] = fingerprint(res)
        print(f"{name:32s} {got[name][:16]}  {time.perf_counter() - t:6.2f} s", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
    if args.compare:
        with open(args.compare) as f:
            ref = json.load(f)
        diff = sorted(k for k in got if k in ref and ref[k] != got[k])
        missing = sorted(k for k in got if k not in ref)
        for k in diff:
            print(f"DIFFERENT  {k}")
        for k in missing:
            print(f"NEW        {k}")
        same = len(got) - len(diff) - len(missing)
        print(f"{same} identical, {len(diff)} different, {len(missing)} not in {args.compare}")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
