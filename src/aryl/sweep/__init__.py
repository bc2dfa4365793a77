"""Sweeps: grids of replays over traces, policies, seeds and configurations.

A TOML spec (:mod:`aryl.sweep.spec`) names the runs; :func:`run_sweep` runs
those not finished yet in a local process pool, in this process or on a Ray
cluster (:mod:`aryl.sweep.backends`), writing each to a Parquet dataset as it
ends (:mod:`aryl.sweep.store`); :func:`write_report` aggregates over seeds with
Student-t 95% intervals and ratios to a baseline paired by seed
(:mod:`aryl.sweep.stats`).  ``docs/sweep.md`` is the user's guide.
"""

from __future__ import annotations

from aryl.sweep.backends import WorkerLost
from aryl.sweep.execute import RunOutput, execute_run
from aryl.sweep.plan import Plan, PlanEntry, Run, code_digest, plan_sweep
from aryl.sweep.report import Report, SweepData, load_sweep, summarize, write_report
from aryl.sweep.runner import SweepInterrupted, SweepOutcome, run_sweep
from aryl.sweep.spec import SweepSpec, bundled_spec, load_spec, parse_spec, read_spec_data
from aryl.sweep.stats import mean_ci, paired_ratios
from aryl.sweep.store import read_jobs, read_runs, read_timeseries

__all__ = [
    "Plan",
    "PlanEntry",
    "Report",
    "Run",
    "RunOutput",
    "SweepData",
    "SweepInterrupted",
    "SweepOutcome",
    "SweepSpec",
    "WorkerLost",
    "bundled_spec",
    "code_digest",
    "execute_run",
    "load_spec",
    "load_sweep",
    "mean_ci",
    "paired_ratios",
    "parse_spec",
    "plan_sweep",
    "read_jobs",
    "read_runs",
    "read_spec_data",
    "read_timeseries",
    "run_sweep",
    "summarize",
    "write_report",
]
