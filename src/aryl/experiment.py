"""The paper-style evaluation: Aryl against FIFO on public traces [Aryl]_.

One call, :func:`run_paper`, regenerates every table and figure of
``docs/results.md`` from the bundled ITP presets (and the Philly table when its
path is given):

* **headline** — ``fifo`` vs ``aryl`` per trace: mean/p95 queuing delay,
  mean/p95 JCT, cluster usage and goodput, preemptions per 1,000 jobs, and the
  ratios in the paper's form (fifo / aryl for delays, aryl / fifo - 1 for
  usage) beside the paper's own figures;
* **baselines** — aryl against strict ``fifo`` and ``fifo-backfill`` (EASY);
* **ablations** — ``aryl-no-loan``, ``aryl-no-elastic``, ``aryl`` with each
  reclaim policy, and the peers ``sjf`` (with and without its starvation
  bound), ``tiresias``, ``elastic-greedy``;
* **sensitivity** — elastic fraction, inference cluster size, peak inference
  utilisation, checkpoint interval, rescale pause, training cluster size;
* **designed experiments** — multi-GPU elastic workers (exact MCKP against the
  marginal-gain greedy, :func:`knapsack_table`), the reclaim choice with more
  loanable servers and costlier preemptions (:func:`reclaim_choice_table`),
  heterogeneous GPUs (:func:`hetero_table`, :func:`hetero_pools_table`) and
  the loaned GPU's speed (:func:`loaned_speed_table`);
* **reclaim quality** — the cost greedy against the exact optimum on small
  reclaim instances cut from the replay's own reclaim requests.

Cluster sizing (documented choice, not the paper's): each trace is replayed on
the **largest training cluster on which strict ``fifo`` still has a mean
queuing delay of at least 4,000 s** — the regime the paper reports for its
baseline (mean > 3,000 s).  Offered load alone is a poor guide: Philly's
heavy-tailed durations leave a load-sized cluster nearly idle for ``fifo``.
The search is a bisection over ``fifo`` replays (each well under a second),
never below the servers the largest job needs and never above those that run
every job at once; for ``itp-c07`` it gives the simulator's default of 46
servers.  :func:`size_cluster` returns the rule that decided
(:data:`SIZING_RULES`).  The inference
cluster has ``16/46`` as many servers as the training cluster (the default
pair of :class:`aryl.sim.SimConfig`), and at least 4.

The replays are a sweep (:mod:`aryl.sweep`) of the spec shipped as
``aryl/data/sweeps/paper.toml`` (``paper-quick.toml`` for ``--quick``): every
run with 5 seeds, on a process pool or Ray, resumable after Ctrl-C.  Every
number of the tables is a mean over seeds with its 95% Student-t interval
(column ``NAME ±``: the half-width); ratios are paired by seed.  Results do
not depend on the number of processes or the backend.

.. [Aryl] J. Li et al., arXiv:2202.07896; EuroSys'23 "Lyra".
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from aryl._io import atomic_write_bytes, atomic_write_dataframe, atomic_write_text
from aryl.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from aryl.sweep import SweepData, SweepSpec

__all__ = [
    "PAPER_FIGURES",
    "SIZING_RULES",
    "ClusterSize",
    "paper_runs",
    "paper_spec",
    "reclaim_quality",
    "run_paper",
    "size_cluster",
]

log = logging.getLogger(__name__)

#: What [Aryl] reports against FIFO (arXiv version; EuroSys version in brackets
#: in the docs): mean queuing delay ratio, mean JCT ratio, cluster usage gain.
PAPER_FIGURES: dict[str, float] = {
    "queuing_delay_ratio": 1.53,
    "jct_ratio": 1.50,
    "jct_ratio_eurosys": 1.48,
    "usage_gain": 0.269,
    "usage_gain_eurosys": 0.25,
}

from aryl._format import fmt_number as _fmt  # noqa: E402  (shared with aryl.sweep)
from aryl.sim.sizing import (  # noqa: E402  (re-exported: the sizing lives in aryl.sim)
    GPUS_PER_SERVER,
    INFERENCE_RATIO,
    SIZING_RULES,
    TARGET_QUEUING_DELAY_S,
    ClusterSize,
    size_cluster,
)


def paper_spec(
    *,
    quick: bool = False,
    philly: str | os.PathLike[str] | None = None,
    spec: str | os.PathLike[str] | None = None,
    config: Mapping[str, Any] | None = None,
    policy_options: Mapping[str, Any] | None = None,
) -> SweepSpec:
    """The evaluation's sweep spec.

    Parameters
    ----------
    quick : bool
        The bundled ``paper-quick.toml`` (``itp-c10``, 2 seeds, one value per
        sweep: a smoke run) instead of ``paper.toml`` (three ITP clusters,
        5 seeds).
    philly : path, optional
        Path of the Philly job table; adds its busiest 15-day window
        (``philly-15d``) to the ``[grid]``'s traces (the headline).
    spec : path, optional
        Another spec file with the same sections (tags ``section`` =
        ``headline`` / ``ablation`` / ``sensitivity`` and ``sweep`` = the swept
        parameter), instead of the bundled one.
    config : mapping, optional
        :class:`aryl.sim.SimConfig` fields for every run: set in the
        ``[grid]`` unless it sets them itself, so a table that varies a field
        keeps its own values; ``seed`` replaces the spec's seeds.  The cluster
        shape is sized per trace and cannot be set here.
    policy_options : mapping, optional
        Policy options for every run (a table's own options win).

    Returns
    -------
    SweepSpec

    Raises
    ------
    InvalidInputError
        A bad spec (the message names the key).
    """
    from aryl.sweep.spec import bundled_spec, parse_spec, read_spec_data

    common = dict(config or {})
    fixed = sorted(set(common) & {"n_training_servers", "n_inference_servers", "gpus_per_server"})
    if fixed:
        raise InvalidInputError(
            f"{fixed[0]}: the evaluation sizes each trace's cluster itself; it cannot be set")
    path = Path(spec) if spec is not None else bundled_spec("paper-quick" if quick else "paper")
    data = read_spec_data(path)
    grid = data.get("grid")
    if (common or policy_options) and not isinstance(grid, dict):
        raise InvalidInputError(f"{path}: common settings need a [grid] table")
    if isinstance(grid, dict):
        if "seed" in common:
            grid["seed"] = common.pop("seed")
        for k, v in common.items():
            grid.setdefault(k, list(v) if isinstance(v, tuple) else v)
        if policy_options:
            for table in [grid, *(r for r in data.get("run", []) if "policy_options" in r)]:
                table["policy_options"] = {**dict(policy_options),
                                           **table.get("policy_options", {})}
    if philly is not None:
        grid = data.get("grid")
        if not isinstance(grid, dict) or "trace" not in grid:
            raise InvalidInputError(f"{path}: --philly needs a [grid] table with a trace list")
        traces = grid["trace"] if isinstance(grid["trace"], list) else [grid["trace"]]
        grid["trace"] = [*traces, {"source": str(Path(philly).resolve()),
                                   "window": "busiest-15d", "label": "philly-15d"}]
    return parse_spec(data, origin=str(path), base_dir=path.resolve().parent)


def paper_runs(data: SweepData) -> pd.DataFrame:
    """The evaluation's runs, one row per spec entry and seed, with its tags.

    Parameters
    ----------
    data : SweepData
        :func:`aryl.sweep.load_sweep` of the evaluation's sweep folder.

    Returns
    -------
    DataFrame
        ``section``, ``sweep`` (tags; ``""`` if absent), ``value`` (the value
        of the parameter named by ``sweep``, NaN elsewhere), then every column
        of the run's row (``key``, parameters, ``seed``, measures), in spec
        order.  A run asked for by two tables appears twice.
    """
    entries = pd.DataFrame(
        [{"key": e["key"], "section": str(e["tags"].get("section", "")),
          "sweep": str(e["tags"].get("sweep", ""))} for e in data.meta["entries"]]
    )
    if not len(entries) or not len(data.runs):
        return pd.DataFrame(columns=["section", "sweep", "value", "key"])
    runs = entries.merge(data.runs, on="key", how="inner")  # keeps the entries' order
    value = np.full(len(runs), np.nan)
    for i, (sweep, r) in enumerate(zip(runs["sweep"], runs.itertuples(index=False),
                                       strict=True)):
        if sweep and sweep in runs.columns:
            v = getattr(r, sweep)
            value[i] = float(v) if v is not None else np.nan
    runs.insert(2, "value", value)
    return runs


def _groups(rows: pd.DataFrame, params: Sequence[str]) -> list[pd.DataFrame]:
    """``rows`` split into scenarios (equal parameters but the seed), in order of appearance."""
    out: dict[tuple[Any, ...], list[int]] = {}
    cols = [c for c in params if c in rows.columns]
    for i, row in enumerate(rows[cols].itertuples(index=False)):
        k = tuple(None if (isinstance(v, float) and math.isnan(v)) else v for v in row)
        out.setdefault(k, []).append(i)
    return [rows.iloc[idx] for idx in out.values()]


# --------------------------------------------------------------------------- reclaim quality


def reclaim_quality(
    *,
    source: str = "itp-c07",
    n_instances: int = 2000,
    max_servers: int = 8,
    seed: int = 0,
    trace_window: str | None = None,
    n_training_servers: int | None = None,
    n_inference_servers: int | None = None,
    config: Mapping[str, Any] | None = None,
    policy_options: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Greedy vs exact reclaim on small instances cut from a replay's own states.

    Replays ``source`` under ``aryl`` while recording every reclaim request,
    then draws ``n_instances`` sub-instances: a recorded request restricted to
    at most ``max_servers`` of its loaned servers (chosen at random, with the
    jobs on them and their totals unchanged) and a random ``n`` in
    ``[1, n_servers]``.  Each is solved by the cost greedy (``aryl``) and by
    the exact optimum (``exact``: fewest preempted jobs).  ``config`` and
    ``policy_options`` (other :class:`aryl.sim.SimConfig` fields, policy
    options) apply to the replay.

    Returns
    -------
    DataFrame
        One row per instance: ``n_servers, n_return, n_jobs,
        greedy_preemptions, exact_preemptions, excess``.

    Raises
    ------
    InvalidInputError
        If the replay made no reclaim with busy loaned servers.
    """
    from aryl.reclaiming import ReclaimRequest, reclaim
    from aryl.sim import SimConfig, simulate
    from aryl.traces import load_trace, synthesize_elastic

    trace = synthesize_elastic(load_trace(source, window=trace_window), seed=seed)
    if n_training_servers is None or n_inference_servers is None:
        n_training_servers, n_inference_servers = size_cluster(trace.jobs)
    fields: dict[str, Any] = {"record_events": False, **(config or {}), "seed": seed}
    cfg = SimConfig(
        n_training_servers=n_training_servers,
        n_inference_servers=n_inference_servers,
        **fields,
    )
    recorded: list[ReclaimRequest] = []
    simulate(trace, policy="aryl", config=cfg, reclaim_log=recorded,
             policy_options=dict(policy_options or {}) or None)
    busy = [r for r in recorded if len(r.placement_job) > 0]
    if not busy:
        raise InvalidInputError(f"{source}: the replay made no reclaim of a busy loaned server")
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_instances):
        req = busy[int(rng.integers(len(busy)))]
        k = min(max_servers, len(req.server_id))
        keep = np.sort(rng.choice(len(req.server_id), size=k, replace=False))
        sub = _restrict(req, keep, int(rng.integers(1, k + 1)))
        greedy = reclaim(sub, policy="aryl")
        exact = reclaim(sub, policy="exact")
        g, e = len(greedy.preempted_jobs), len(exact.preempted_jobs)
        rows.append(
            {
                "n_servers": k,
                "n_return": sub.n_servers,
                "n_jobs": len(np.unique(sub.placement_job)),
                "greedy_preemptions": g,
                "exact_preemptions": e,
                "excess": g - e,
            }
        )
    return pd.DataFrame(rows)


def _restrict(req: Any, keep: np.ndarray, n: int) -> Any:
    """``req`` with only the servers at positions ``keep`` (and their placements)."""
    sid = np.asarray(req.server_id)[keep]
    mask = np.isin(np.asarray(req.placement_server), sid)
    gpu_type = req.server_gpu_type
    return req.replace(
        server_id=sid,
        server_gpus=np.asarray(req.server_gpus)[keep],
        server_gpu_type=None if gpu_type is None else np.asarray(gpu_type)[keep],
        placement_job=np.asarray(req.placement_job)[mask],
        placement_server=np.asarray(req.placement_server)[mask],
        placement_workers=np.asarray(req.placement_workers)[mask],
        n_servers=n,
    )


# --------------------------------------------------------------------------- report
#
# Every number of the tables is a mean over seeds; the column ``NAME ±`` beside a
# column ``NAME`` holds the half-width of its 95% Student-t interval (NaN with
# one seed).  Ratios are paired by seed: the mean over seeds of the per-seed
# ratio (aryl.sweep.stats).


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0 or not math.isfinite(a) or not math.isfinite(b):
        return None
    return a / b


def _gain(a: float | None, b: float | None) -> float | None:
    r = _ratio(a, b)
    return None if r is None else r - 1.0


def _params(runs: pd.DataFrame) -> list[str]:
    from aryl.sweep.execute import param_columns

    return [c for c in param_columns() if c in runs.columns and c not in ("key", "seed")]


def _stat(rows: pd.DataFrame, col: str) -> tuple[float, float]:
    """Mean over the rows (one per seed) of ``col`` and its 95% half-width (NaN when
    the runs lack the measure: a dataset written before it existed)."""
    from aryl.sweep.stats import mean_ci

    if col not in rows:
        return math.nan, math.nan

    m, h, _ = mean_ci(rows[col].to_numpy(dtype=np.float64))
    return m, h


def _paired(
    x: pd.DataFrame, y: pd.DataFrame, col: str,
    fn: Callable[[float | None, float | None], float | None] = _ratio,
) -> tuple[float, float]:
    """Mean and 95% half-width over seeds of ``fn(x's col, y's col)`` for the same seed
    (NaN when either side lacks the measure)."""
    from aryl.sweep.stats import mean_ci

    if col not in x or col not in y:
        return math.nan, math.nan

    if "seed" not in x or "seed" not in y:  # one run per scenario (hand-made frames)
        x, y = x.assign(seed=0), y.assign(seed=0)
    m = x[["seed", col]].merge(y[["seed", col]], on="seed", suffixes=("_x", "_y"))
    vals = [fn(a, b) for a, b in zip(m[f"{col}_x"], m[f"{col}_y"], strict=True)]
    mean, half, _ = mean_ci(np.nan if v is None else v for v in vals)
    return mean, half


def _put(row: dict[str, Any], name: str, stat: tuple[float, float]) -> None:
    row[name], row[f"{name} ±"] = stat


def headline_table(runs: pd.DataFrame) -> pd.DataFrame:
    """fifo vs aryl per trace with the paper-form ratios, and the paper's own row.

    Means over seeds with 95% half-widths in the ``±`` columns; ``qd ratio`` and
    ``JCT ratio`` are fifo / aryl and the gains aryl / fifo - 1, per seed.
    ``usage`` counts the training GPU-seconds allocated (``cluster_usage``),
    ``goodput`` the useful work, traced duration x traced GPUs of the progress
    made, over the same available GPU-seconds (``aryl.sim`` summary); ``aryl
    GPU-s / fifo's`` is the ratio of GPU-seconds allocated, per seed.
    """
    rows = []
    for tr, grp in runs[runs["section"] == "headline"].groupby("trace", sort=False):
        f = grp[grp["policy"] == "fifo"]
        a = grp[grp["policy"] == "aryl"]
        a0 = a.iloc[0]
        row: dict[str, Any] = {
            "trace": tr,
            "jobs": int(a0["n_jobs"]),
            "servers": f"{a0['n_training_servers']}+{a0['n_inference_servers']}",
        }
        for label, col in (("qd", "mean_queuing_delay_s"), ("p95 qd", "p95_queuing_delay_s"),
                           ("JCT", "mean_jct_s"), ("p95 JCT", "p95_jct_s")):
            _put(row, f"fifo {label}", _stat(f, col))
            _put(row, f"aryl {label}", _stat(a, col))
            if label in ("qd", "JCT"):
                _put(row, f"{label} ratio", _paired(f, a, col))
        _put(row, "fifo usage", _stat(f, "cluster_usage"))
        _put(row, "aryl usage", _stat(a, "cluster_usage"))
        _put(row, "usage gain", _paired(a, f, "cluster_usage", _gain))
        _put(row, "all-GPU usage gain", _paired(a, f, "combined_usage", _gain))
        _put(row, "fifo goodput", _stat(f, "goodput"))
        _put(row, "aryl goodput", _stat(a, "goodput"))
        _put(row, "goodput gain", _paired(a, f, "goodput", _gain))
        _put(row, "aryl GPU-s / fifo's", _paired(a, f, "gpu_s_allocated"))
        _put(row, "preempt/1k jobs", _stat(a, "preemptions_per_1000_jobs"))
        rows.append(row)
    rows.append(
        {
            "trace": "paper [Aryl]",
            "qd ratio": PAPER_FIGURES["queuing_delay_ratio"],
            "JCT ratio": PAPER_FIGURES["jct_ratio"],
            "usage gain": PAPER_FIGURES["usage_gain"],
        }
    )
    table = pd.DataFrame(rows)
    # a count stays an integer in headline.csv although the paper's row has none
    table["jobs"] = table["jobs"].astype("Int64")
    order = ["trace", "jobs", "servers"]
    for name in ("fifo qd", "aryl qd", "qd ratio", "fifo p95 qd", "aryl p95 qd", "fifo JCT",
                 "aryl JCT", "JCT ratio", "fifo p95 JCT", "aryl p95 JCT", "fifo usage",
                 "aryl usage", "usage gain", "all-GPU usage gain", "fifo goodput",
                 "aryl goodput", "goodput gain", "aryl GPU-s / fifo's", "preempt/1k jobs"):
        order += [name, f"{name} ±"]
    return table[[c for c in order if c in table.columns]]


#: A starvation bound at least this long is never reached on the bundled traces
#: (they span months, ~1e7 s): the row is labelled "no starvation bound".
NO_STARVATION_BOUND_S = 1e8


def _label(r0: pd.Series) -> str:
    """A scenario's name in the tables: its variant, then what differs from the defaults
    that the tables do not show in a column of their own."""
    from aryl.sim import SimConfig

    loans = r0["policy"] in ("aryl", "aryl-no-elastic")
    label = str(r0["variant"])
    notes = []
    if loans and r0.get("reclaim_policy", "aryl") != "aryl":
        notes.append(f"reclaim {r0['reclaim_policy']}")
    bound = r0.get("starvation_bound_s", SimConfig.starvation_bound_s)
    if not pd.isna(bound) and float(bound) != SimConfig.starvation_bound_s:
        notes.append("no starvation bound" if float(bound) >= NO_STARVATION_BOUND_S
                     else f"starvation bound {_fmt(float(bound))} s")
    return label + (f" ({', '.join(notes)})" if notes else "")


def _same(a: Any, b: Any) -> bool:
    """Equal parameter values, missing (None / NaN) equal to missing."""
    na, nb = a is None or (isinstance(a, float) and math.isnan(a)), \
        b is None or (isinstance(b, float) and math.isnan(b))
    if na or nb:
        return na and nb
    return bool(a == b)


def _select(runs: pd.DataFrame, ref: pd.Series, **changes: Any) -> pd.DataFrame:
    """The runs (one per seed, by key) whose parameters are ``ref``'s but for ``changes``.

    ``ref`` is a run row; ``changes`` maps parameter columns to the values wanted
    instead (``policy`` also sets ``variant`` to the bare policy name unless
    given).  A run that two sections asked for appears once.  O(runs x params).
    """
    params = _params(runs)
    if "policy" in changes and "variant" not in changes:
        changes = {**changes, "variant": changes["policy"]}
    mask = np.ones(len(runs), dtype=bool)
    for c in params:
        want = changes[c] if c in changes else ref.get(c)
        col = runs[c].tolist()
        mask &= np.fromiter((_same(v, want) for v in col), dtype=bool, count=len(col))
    out = runs[mask].drop_duplicates("key")
    return out.sort_values("seed", kind="stable") if "seed" in out else out


def _main_ref(runs: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The main trace (the headline's first) and its headline runs."""
    main = runs[runs["section"] == "headline"].iloc[0]["trace"]
    return main, runs[(runs["section"] == "headline") & (runs["trace"] == main)]


def baselines_table(runs: pd.DataFrame) -> pd.DataFrame:
    """aryl against both baselines per trace: strict ``fifo`` and ``fifo-backfill``.

    Means over seeds with ``±`` half-widths; ``X/aryl`` columns are the per-seed
    ratios of mean queuing delay or JCT (X's over aryl's), averaged over seeds.
    A trace without ``fifo-backfill`` runs is left out.
    """
    rows = []
    for tr, grp in runs[runs["section"] == "headline"].groupby("trace", sort=False):
        f = grp[grp["policy"] == "fifo"].drop_duplicates("key")
        b = grp[grp["policy"] == "fifo-backfill"].drop_duplicates("key")
        a = grp[grp["policy"] == "aryl"].drop_duplicates("key")
        if not (len(f) and len(b) and len(a)):
            continue
        row: dict[str, Any] = {"trace": tr}
        for label, col in (("qd", "mean_queuing_delay_s"), ("JCT", "mean_jct_s")):
            _put(row, f"fifo {label}", _stat(f, col))
            _put(row, f"backfill {label}", _stat(b, col))
            _put(row, f"aryl {label}", _stat(a, col))
            _put(row, f"fifo/aryl {label}", _paired(f, a, col))
            _put(row, f"backfill/aryl {label}", _paired(b, a, col))
            _put(row, f"fifo/backfill {label}", _paired(f, b, col))
        _put(row, "backfill usage", _stat(b, "cluster_usage"))
        _put(row, "aryl usage", _stat(a, "cluster_usage"))
        _put(row, "backfill goodput", _stat(b, "goodput"))
        _put(row, "aryl goodput", _stat(a, "goodput"))
        rows.append(row)
    return pd.DataFrame(rows)


def ablation_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The ablations and peers on the main trace, with ratios against its fifo runs.

    One row per scenario (``fifo``, ``fifo-backfill`` and ``aryl`` of the
    headline, then each ablation), means over seeds with ``±`` half-widths;
    ratios fifo / run paired by seed, and ``fifo-backfill`` / run when the
    headline has ``fifo-backfill`` runs.  ``usage`` counts GPU-seconds allocated,
    ``goodput`` useful work, both over the GPU-seconds available.
    """
    _, head = _main_ref(runs)
    fifo = head[head["policy"] == "fifo"]
    backfill = head[head["policy"] == "fifo-backfill"]
    params = _params(runs)
    scenarios = _groups(head, params) + _groups(runs[runs["section"] == "ablation"], params)
    rows = []
    for sc in scenarios:
        r0 = sc.iloc[0]
        loans = r0["policy"] in ("aryl", "aryl-no-elastic")
        row: dict[str, Any] = {"policy": _label(r0),
                               "reclaim": r0["reclaim_policy"] if loans else "–"}
        for name, col in (("qd", "mean_queuing_delay_s"), ("p95 qd", "p95_queuing_delay_s"),
                          ("JCT", "mean_jct_s"), ("p95 JCT", "p95_jct_s")):
            _put(row, name, _stat(sc, col))
        _put(row, "qd ratio", _paired(fifo, sc, "mean_queuing_delay_s"))
        _put(row, "JCT ratio", _paired(fifo, sc, "mean_jct_s"))
        if len(backfill):
            _put(row, "backfill/this qd", _paired(backfill, sc, "mean_queuing_delay_s"))
            _put(row, "backfill/this JCT", _paired(backfill, sc, "mean_jct_s"))
        for name, col in (("usage", "cluster_usage"), ("goodput", "goodput"),
                          ("preempt/1k jobs", "preemptions_per_1000_jobs"),
                          ("scale-ins", "n_scale_in"), ("scale-outs", "n_scale_out"),
                          ("loans", "n_loans"), ("reclaims", "n_reclaims")):
            _put(row, name, _stat(sc, col))
        rows.append(row)
    return pd.DataFrame(rows)


def _default_value(sweep: str, run: pd.Series) -> float:
    """The value a sweep's parameter has in the headline run (its own column, else the
    sweep's default: a run row always has it, a hand-made frame may not)."""
    if sweep == "inference_ratio":
        return float(run["n_inference_servers"] / run["n_training_servers"])
    if sweep in run and not pd.isna(run[sweep]):
        return float(run[sweep])
    from aryl.sim import SimConfig
    from aryl.sweep.spec import AXES

    defaults = {**SimConfig().to_dict(), **AXES}
    return float(defaults[sweep])


def sensitivity_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Each sweep's aryl runs, with ratios against the fifo runs of the same cluster.

    The fifo partner of a point is the sweep's own fifo runs at the same value if
    the spec has them (the load sweep), else the headline fifo runs of the main
    trace.  Each sweep also lists the headline ``aryl`` runs at the parameter's
    default (``default`` column True), so a sweep reads as a curve through it.
    """
    main = runs[runs["section"] == "headline"].iloc[0]["trace"]
    head = runs[(runs["section"] == "headline") & (runs["trace"] == main)]
    fifo_default = head[head["policy"] == "fifo"]
    aryl_default = head[head["policy"] == "aryl"]
    sens = runs[runs["section"] == "sensitivity"]
    params = _params(runs)
    rows = []
    for sweep in dict.fromkeys(sens["sweep"]):
        d = sens[sens["sweep"] == sweep]
        points = [(sc, False) for sc in _groups(d[d["policy"] != "fifo"], params)]
        points.append((aryl_default, True))
        for sc, is_default in points:
            r0 = sc.iloc[0]
            value = _default_value(sweep, r0) if is_default else float(r0["value"])
            own = d[(d["policy"] == "fifo") & np.isclose(d["value"], r0["value"])]
            f = own if (len(own) and not is_default) else fifo_default
            row: dict[str, Any] = {
                "sweep": sweep,
                "value": value,
                "default": is_default,
                "servers": f"{r0['n_training_servers']}+{r0['n_inference_servers']}",
            }
            _put(row, "aryl qd", _stat(sc, "mean_queuing_delay_s"))
            _put(row, "aryl JCT", _stat(sc, "mean_jct_s"))
            _put(row, "qd ratio", _paired(f, sc, "mean_queuing_delay_s"))
            _put(row, "JCT ratio", _paired(f, sc, "mean_jct_s"))
            _put(row, "usage", _stat(sc, "cluster_usage"))
            _put(row, "goodput", _stat(sc, "goodput"))
            _put(row, "preempt/1k jobs", _stat(sc, "preemptions_per_1000_jobs"))
            _put(row, "mean loaned", _stat(sc, "mean_loaned_servers"))
            rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        order = {sw: i for i, sw in enumerate(dict.fromkeys(table["sweep"]))}
        table = table.sort_values(
            ["sweep", "value"], key=lambda c: c.map(order) if c.name == "sweep" else c,
            kind="stable",
        ).reset_index(drop=True)
    return table


#: The tables of the designed experiments, by CSV name (empty when the spec has no
#: such section, and then not written).
EXTRA_TABLES: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {}

#: Policies of the knapsack table, in row order.
KNAPSACK_POLICIES = ("fifo", "aryl", "aryl-no-loan", "elastic-greedy")
#: Reclaim policies of the reclaim-choice table, in row order.
RECLAIM_POLICIES = ("aryl", "random", "fewest-jobs", "most-idle")
#: Policies of the heterogeneous table, in row order.
HETERO_POLICIES = ("fifo", "aryl-no-loan", "aryl")


def knapsack_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The exact MCKP against the marginal-gain greedy, one- and multi-GPU workers.

    Rows: the main trace's headline and ablation runs (one-GPU workers, the
    headline's elastic fraction), then each (worker rule, elastic fraction) of
    the ``knapsack`` section; in each, ``fifo``, ``aryl``, ``aryl-no-loan``,
    ``elastic-greedy`` (those present).  Ratios are paired by seed within the
    same worker rule and elastic fraction: ``qd ratio`` / ``JCT ratio`` =
    fifo / this, ``greedy/this`` = elastic-greedy / this (above 1: this beats
    the greedy; none for fifo, which does not scale).  Empty without a
    ``knapsack`` section.
    """
    knap = runs[runs["section"] == "knapsack"]
    if not len(knap):
        return pd.DataFrame()
    _, head = _main_ref(runs)
    ref = head[head["policy"] == "aryl"].iloc[0]
    cells = [(str(ref["elastic_worker_gpus"]), float(ref["elastic_fraction"]))]
    for w, ef in zip(knap["elastic_worker_gpus"], knap["elastic_fraction"], strict=True):
        if (str(w), float(ef)) not in cells:
            cells.append((str(w), float(ef)))
    rows = []
    for w, ef in cells:
        cell = {p: _select(runs, ref, policy=p, elastic_worker_gpus=w, elastic_fraction=ef)
                for p in KNAPSACK_POLICIES}
        fifo, greedy = cell["fifo"], cell["elastic-greedy"]
        for p, sc in cell.items():
            if not len(sc):
                continue
            row: dict[str, Any] = {"workers": w, "elastic": ef, "policy": p}
            _put(row, "qd", _stat(sc, "mean_queuing_delay_s"))
            _put(row, "JCT", _stat(sc, "mean_jct_s"))
            _put(row, "qd ratio", _paired(fifo, sc, "mean_queuing_delay_s"))
            _put(row, "JCT ratio", _paired(fifo, sc, "mean_jct_s"))
            scales = p != "fifo"  # fifo does not scale: no solver to compare
            _put(row, "greedy/this qd", _paired(greedy, sc, "mean_queuing_delay_s")
                 if scales else (math.nan, math.nan))
            _put(row, "greedy/this JCT", _paired(greedy, sc, "mean_jct_s")
                 if scales else (math.nan, math.nan))
            _put(row, "usage", _stat(sc, "cluster_usage"))
            _put(row, "goodput", _stat(sc, "goodput"))
            _put(row, "scale-outs", _stat(sc, "n_scale_out"))
            rows.append(row)
    return pd.DataFrame(rows)


def reclaim_choice_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The reclaim choices under more loanable servers and costlier preemptions.

    One row per cell of the ``reclaim`` section (inference servers, restart
    cost, checkpoint interval) and reclaim policy, ``aryl`` runs of the main
    trace.  ``X vs aryl`` = this / the cost greedy's (``aryl``) in the same
    cell, per seed, averaged (above 1: more preemptions, longer delays than the
    cost greedy).  Empty without a ``reclaim`` section.
    """
    sec = runs[runs["section"] == "reclaim"]
    if not len(sec):
        return pd.DataFrame()
    _, head = _main_ref(runs)
    ref = head[head["policy"] == "aryl"].iloc[0]
    keys = ("inference_ratio", "n_inference_servers", "restart_cost_s", "checkpoint_interval_s")
    cells: list[dict[str, Any]] = []
    for r in sec.itertuples(index=False):
        c = {k: getattr(r, k) for k in keys}
        if not any(all(_same(c[k], d[k]) for k in keys) for d in cells):
            cells.append(c)
    rows = []
    for c in cells:
        base = _select(runs, ref, reclaim_policy="aryl", **c)
        for rp in RECLAIM_POLICIES:
            sc = _select(runs, ref, reclaim_policy=rp, **c)
            if not len(sc):
                continue
            row: dict[str, Any] = {
                "servers": f"{sc.iloc[0]['n_training_servers']}+{c['n_inference_servers']}",
                "restart (s)": float(c["restart_cost_s"]),
                "checkpoint (s)": float(c["checkpoint_interval_s"]),
                "reclaim": rp,
            }
            _put(row, "preempt/1k jobs", _stat(sc, "preemptions_per_1000_jobs"))
            _put(row, "preempt vs aryl", _paired(sc, base, "n_preemptions"))
            _put(row, "qd", _stat(sc, "mean_queuing_delay_s"))
            _put(row, "qd vs aryl", _paired(sc, base, "mean_queuing_delay_s"))
            _put(row, "JCT", _stat(sc, "mean_jct_s"))
            _put(row, "JCT vs aryl", _paired(sc, base, "mean_jct_s"))
            _put(row, "goodput", _stat(sc, "goodput"))
            _put(row, "usage", _stat(sc, "cluster_usage"))
            _put(row, "reclaims", _stat(sc, "n_reclaims"))
            rows.append(row)
    return pd.DataFrame(rows)


def _hetero_runs(runs: pd.DataFrame) -> tuple[pd.Series | None, pd.DataFrame]:
    """The reference run of the ``hetero`` section (its aryl, else first run) and the section."""
    het = runs[runs["section"] == "hetero"]
    plain = het[het["sweep"] == ""]
    if not len(plain):
        return None, het
    arylr = plain[plain["policy"] == "aryl"]
    return (arylr if len(arylr) else plain).iloc[0], het


def hetero_table(runs: pd.DataFrame) -> pd.DataFrame:
    """fifo, aryl-no-loan and aryl on the default cluster and on each cluster of the
    ``hetero`` section, with ratios against the same cluster's fifo (paired by seed).

    ``no-loan/this`` = aryl-no-loan / this (aryl's rows only).  ``usage`` counts GPU-seconds
    allocated over available ones whatever the GPU type; ``goodput`` counts
    useful work in reference-GPU (V100) seconds over the same GPU-seconds, so on
    a cluster with faster GPUs than the reference it can exceed usage.  Empty
    without a ``hetero`` section.
    """
    ref, _het = _hetero_runs(runs)
    if ref is None:
        return pd.DataFrame()
    _, head = _main_ref(runs)
    home = head[head["policy"] == "aryl"].iloc[0]
    rows = []
    for name, base in (("default", home), (str(ref["cluster"]), ref)):
        cell = {p: _select(runs, base, policy=p) for p in HETERO_POLICIES}
        fifo, noloan = cell["fifo"], cell["aryl-no-loan"]
        for p, sc in cell.items():
            if not len(sc):
                continue
            row: dict[str, Any] = {"cluster": name, "policy": p}
            _put(row, "qd", _stat(sc, "mean_queuing_delay_s"))
            _put(row, "JCT", _stat(sc, "mean_jct_s"))
            _put(row, "qd ratio", _paired(fifo, sc, "mean_queuing_delay_s"))
            _put(row, "JCT ratio", _paired(fifo, sc, "mean_jct_s"))
            loans = p == "aryl"  # the loaning policy against its no-loan ablation
            _put(row, "no-loan/this qd", _paired(noloan, sc, "mean_queuing_delay_s")
                 if loans else (math.nan, math.nan))
            _put(row, "no-loan/this JCT", _paired(noloan, sc, "mean_jct_s")
                 if loans else (math.nan, math.nan))
            _put(row, "usage", _stat(sc, "cluster_usage"))
            _put(row, "goodput", _stat(sc, "goodput"))
            _put(row, "mean loaned", _stat(sc, "mean_loaned_servers"))
            _put(row, "preempt/1k jobs", _stat(sc, "preemptions_per_1000_jobs"))
            rows.append(row)
    return pd.DataFrame(rows)


def hetero_pools_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-pool usage, goodput and JCT of the ``hetero`` section's plain runs.

    One row per policy and pool of the cluster (spec order: training pools, then
    inference); ``usage`` and ``goodput`` over the pool's GPU-seconds available
    (an inference pool's only while on loan: "–" when never loaned), ``jobs`` =
    jobs whose main pool it is (most GPU-seconds there), ``JCT`` their mean.
    Empty without a ``hetero`` section.
    """
    from aryl.sim import SimConfig
    from aryl.sim.setup import resolve_cluster

    ref, _ = _hetero_runs(runs)
    if ref is None:
        return pd.DataFrame()
    spec = resolve_cluster(SimConfig(cluster=str(ref["cluster"])))
    rows = []
    for p in HETERO_POLICIES:
        sc = _select(runs, ref, policy=p)
        if not len(sc):
            continue
        for pool in spec.pools:
            pre = f"pool_{pool.name}_"
            if f"{pre}usage" not in sc:
                continue
            row: dict[str, Any] = {"policy": p, "pool": pool.name, "GPU": pool.gpu_type,
                                   "role": pool.role,
                                   "GPUs": pool.n_servers * pool.gpus_per_server}
            _put(row, "usage", _stat(sc, f"{pre}usage"))
            _put(row, "goodput", _stat(sc, f"{pre}goodput"))
            _put(row, "jobs", _stat(sc, f"{pre}jobs"))
            _put(row, "JCT", _stat(sc, f"{pre}mean_jct_s"))
            rows.append(row)
    return pd.DataFrame(rows)


def loaned_speed_table(runs: pd.DataFrame) -> pd.DataFrame:
    """aryl on the ``hetero`` cluster as the loaned GPU's relative speed varies.

    One row per ``loaned_gpu_speed`` of the ``hetero`` section's sweep, then
    the measured model's own speeds (``measured`` True, speed "–").  Ratios
    paired by seed against the section's fifo and aryl-no-loan runs (which
    never run on a loaned server, so one set of runs serves every speed):
    ``fifo/aryl`` and ``no-loan/aryl`` for mean queuing delay and JCT (above 1:
    aryl is faster).  ``loaned usage`` / ``loaned goodput``: the inference
    pools' GPU-seconds allocated / useful work over their GPU-seconds on loan.
    Empty without the sweep.
    """
    ref, het = _hetero_runs(runs)
    sweep = het[het["sweep"] == "loaned_gpu_speed"]
    if ref is None or not len(sweep):
        return pd.DataFrame()
    from aryl.sim import SimConfig
    from aryl.sim.setup import resolve_cluster

    spec = resolve_cluster(SimConfig(cluster=str(ref["cluster"])))
    inf = [p.name for p in spec.pools if p.role == "inference"]
    fifo = _select(runs, ref, policy="fifo")
    noloan = _select(runs, ref, policy="aryl-no-loan")
    speeds = sorted({float(v) for v in sweep["loaned_gpu_speed"]})
    points = [(v, False) for v in speeds] + [(math.nan, True)]
    rows = []
    for v, measured in points:
        sc = _select(runs, ref, policy="aryl", loaned_gpu_speed=None if measured else v)
        if not len(sc):
            continue
        row: dict[str, Any] = {"loaned speed": v, "measured": measured}
        _put(row, "qd", _stat(sc, "mean_queuing_delay_s"))
        _put(row, "JCT", _stat(sc, "mean_jct_s"))
        _put(row, "fifo/aryl qd", _paired(fifo, sc, "mean_queuing_delay_s"))
        _put(row, "fifo/aryl JCT", _paired(fifo, sc, "mean_jct_s"))
        _put(row, "no-loan/aryl qd", _paired(noloan, sc, "mean_queuing_delay_s"))
        _put(row, "no-loan/aryl JCT", _paired(noloan, sc, "mean_jct_s"))
        _put(row, "mean loaned", _stat(sc, "mean_loaned_servers"))
        alloc = sc[[f"pool_{n}_gpu_s_allocated" for n in inf]].sum(axis=1)
        useful = sc[[f"pool_{n}_useful_gpu_s" for n in inf]].sum(axis=1)
        avail = sc[[f"pool_{n}_gpu_s_available" for n in inf]].sum(axis=1)
        sc = sc.assign(_lu=np.where(avail > 0, alloc / avail.where(avail > 0, 1.0), np.nan),
                       _lg=np.where(avail > 0, useful / avail.where(avail > 0, 1.0), np.nan))
        _put(row, "loaned usage", _stat(sc, "_lu"))
        _put(row, "loaned goodput", _stat(sc, "_lg"))
        _put(row, "preempt/1k jobs", _stat(sc, "preemptions_per_1000_jobs"))
        rows.append(row)
    return pd.DataFrame(rows)


EXTRA_TABLES.update(
    baselines=baselines_table,
    knapsack=knapsack_table,
    reclaim_choice=reclaim_choice_table,
    hetero=hetero_table,
    hetero_pools=hetero_pools_table,
    loaned_speed=loaned_speed_table,
)


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table with the same number formats as the CLI.

    A column ``NAME ±`` is shown inside ``NAME``'s cells (:func:`table_cells`).
    """
    cols, rows = table_cells(df)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def formatted_rows(df: pd.DataFrame) -> list[list[str]]:
    """Each row's cells formatted by :func:`_fmt`, read column by column.

    Reading by column keeps each column's dtype (``iterrows`` would turn an
    integer count into a float in a row that also holds floats).
    """
    columns = [df[c].tolist() for c in df.columns]
    return [[_fmt(col[i]) for col in columns] for i in range(len(df))]


def table_cells(df: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Column names and formatted cells, each ``NAME ±`` column merged into ``NAME``.

    A cell reads ``mean ± half-width`` (:func:`_fmt` for both numbers), or just
    the mean where the half-width is missing (one seed, or the paper's own row).
    Cells are formatted column by column (:func:`formatted_rows`).  Shared by
    results.md and the CLI tables.
    """
    names = [str(c) for c in df.columns]
    cells = formatted_rows(df)
    keep = [i for i, c in enumerate(names) if not c.endswith(" ±")]
    half = {names.index(c[: -len(" ±")]): i for i, c in enumerate(names)
            if c.endswith(" ±") and c[: -len(" ±")] in names}
    rows = []
    for row in cells:
        out = []
        for i in keep:
            j = half.get(i)
            if j is not None and row[j] != "–" and row[i] != "–":
                out.append(f"{row[i]} ± {row[j]}")
            else:
                out.append(row[i])
        rows.append(out)
    return [names[i] for i in keep], rows


def _png(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def _log_yerr(d: pd.DataFrame, col: str) -> np.ndarray | None:
    """95% error bars for a log axis: the lower bar stops short of 0."""
    if f"{col} ±" not in d:
        return None
    v = d[col].to_numpy(dtype=np.float64)
    h = np.nan_to_num(d[f"{col} ±"].to_numpy(dtype=np.float64), nan=0.0)
    return np.vstack([np.minimum(h, 0.99 * np.abs(v)), h])


def _figures(rows: list[dict[str, Any]], sens: pd.DataFrame, out: Path,
             speed: pd.DataFrame | None = None) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names: list[str] = []
    series = [r for r in rows if "_jct_s" in r]
    if series:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for r in series:
            qd = np.sort(r["_queuing_delay_s"])
            zero = float((qd <= 0).mean()) if qd.size else 0.0
            cdf = np.arange(1, qd.size + 1) / max(1, qd.size)
            axes[0].step(qd, cdf, where="post",
                         label=f"{r['policy']} ({100 * zero:.0f}% start at once)")
            jct = np.sort(r["_jct_s"])
            axes[1].plot(jct, np.arange(1, jct.size + 1) / max(1, jct.size), label=r["policy"])
        # symlog: zero delays (most jobs under aryl) sit at 0, the tail on a log scale
        axes[0].set_xscale("symlog", linthresh=10.0)
        axes[0].set_xlabel("queuing delay (s; linear below 10 s, log above)")
        axes[1].set_xscale("log")
        axes[1].set_xlabel("JCT (s, log)")
        for ax in axes:
            ax.set_ylabel("CDF")
            ax.grid(alpha=0.3)
            ax.legend(loc="lower right", fontsize=8)
        fig.suptitle(f"{series[0]['trace']}: fifo vs aryl")
        _png(fig, out / "cdf_delay_jct.png")
        plt.close(fig)
        names.append("cdf_delay_jct.png")
        fig, axes = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
        train_gpus = int(series[0]["n_training_servers"]) * GPUS_PER_SERVER
        for r in series:
            ts = r["_timeseries"]
            days = (ts["time_s"] - ts["time_s"].iloc[0]) / 86400.0
            axes[0].plot(days, ts["busy_gpus"], lw=0.6, label=r["policy"])
            if r["policy"] == "aryl":
                axes[1].plot(days, ts["loaned_servers"], lw=0.6, color="C1")
        axes[0].axhline(train_gpus, color="k", lw=0.8, ls="--",
                        label=f"training GPUs ({train_gpus})")
        axes[0].set_ylabel("busy GPUs\n(training + loaned)")
        axes[0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        axes[1].set_ylabel("loaned servers (aryl)")
        axes[1].set_xlabel("days since the first arrival")
        _png(fig, out / "busy_gpus_loans.png")
        plt.close(fig)
        names.append("busy_gpus_loans.png")
    if len(sens):
        sweeps = list(dict.fromkeys(sens["sweep"]))
        fig, axes = plt.subplots(1, len(sweeps), figsize=(3.2 * len(sweeps), 3), squeeze=False)
        for ax, sw in zip(axes[0], sweeps, strict=True):
            d = sens[sens["sweep"] == sw].sort_values("value")
            for col, fmt, name in (("qd ratio", "o-", "queuing delay"), ("JCT ratio", "s-", "JCT")):
                ax.errorbar(d["value"], d[col], yerr=_log_yerr(d, col), fmt=fmt, capsize=3,
                            label=name)
            dd = d[d["default"]]
            ax.plot(dd["value"], dd["qd ratio"], "o", mfc="none", mec="k", ms=11,
                    label="default")
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_title(sw, fontsize=9)
            ax.set_yscale("log")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("fifo / aryl (log)")
        axes[0][0].legend(fontsize=8)
        _png(fig, out / "sensitivity.png")
        plt.close(fig)
        names.append("sensitivity.png")
    if speed is not None and len(speed) and (~speed["measured"]).any():
        d = speed[~speed["measured"]]
        fig, ax = plt.subplots(figsize=(5.5, 3.4))
        for col, fmt, name in (("fifo/aryl JCT", "o-", "JCT, fifo / aryl"),
                               ("no-loan/aryl JCT", "s-", "JCT, aryl-no-loan / aryl"),
                               ("no-loan/aryl qd", "^--", "queuing delay, aryl-no-loan / aryl")):
            ax.errorbar(d["loaned speed"], d[col], yerr=_log_yerr(d, col), fmt=fmt, capsize=3,
                        label=name)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("loaned GPU speed (relative to a V100, every model family)")
        ax.set_ylabel("ratio (above 1: aryl faster)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        _png(fig, out / "loaned_speed.png")
        plt.close(fig)
        names.append("loaned_speed.png")
    return names


def _series(root: Path, runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Per-job delays (pooled over seeds) and the lowest seed's time series of the
    main trace's headline fifo and aryl runs, for the figures."""
    from aryl.sweep import read_jobs, read_timeseries

    head = runs[runs["section"] == "headline"]
    main = head.iloc[0]["trace"]
    out = []
    for pol in ("fifo", "aryl"):
        sc = head[(head["trace"] == main) & (head["policy"] == pol)].sort_values("seed")
        if not len(sc):
            continue
        jobs = read_jobs(root, list(dict.fromkeys(sc["key"])))
        done = jobs[jobs["status"] == "finished"]
        ts = read_timeseries(root, [sc.iloc[0]["key"]]).drop(columns="run")
        out.append({
            "policy": pol,
            "trace": main,
            "n_training_servers": int(sc.iloc[0]["n_training_servers"]),
            "_jct_s": done["jct_s"].to_numpy(np.float64),
            "_queuing_delay_s": done["queuing_delay_s"].to_numpy(np.float64),
            "_timeseries": ts,
        })
    return out


def run_paper(
    out_dir: str | Path,
    *,
    quick: bool = False,
    philly: str | None = None,
    spec: str | Path | None = None,
    n_procs: int | None = None,
    ray: str | None = None,
    data_dir: str | Path | None = None,
    reclaim_instances: int = 2000,
    progress: Callable[[int, int, str], None] | None = None,
    status: Callable[[str], None] | None = None,
    config: Mapping[str, Any] | None = None,
    policy_options: Mapping[str, Any] | None = None,
) -> dict[str, pd.DataFrame]:
    """Run the whole evaluation and write tables, figures and ``results.md``.

    The replays are the sweep :func:`paper_spec` (``aryl/data/sweeps/paper.toml``)
    run by :func:`aryl.sweep.run_sweep`; every table gives means over its seeds
    with 95% Student-t intervals.

    Parameters
    ----------
    out_dir : path
        Output folder, replaced as a whole when everything is written
        (:func:`aryl._io.atomic_directory`): an error or Ctrl-C leaves the
        previous complete results, or nothing.
    quick : bool
        The small spec (see :func:`paper_spec`).
    philly : str, optional
        Path of the Philly job table (not bundled: no licence to redistribute).
    spec : path, optional
        Another spec file with the same sections.
    n_procs : int, optional
        Parallel worker processes (default: the machine's cores; results do not
        depend on it).
    ray : str, optional
        Run the replays on Ray (``"local"`` or an address), see
        :func:`aryl.sweep.run_sweep`.
    data_dir : path, optional
        Keep the sweep's Parquet dataset (every run's measures and per-job
        table) in this folder, and reuse its finished runs.  By default the
        dataset goes to a hidden sibling ``.NAME.sweep`` of ``out_dir`` that is
        deleted once the results are written, and kept after an interruption
        so that the same command resumes.
    reclaim_instances : int
        Instances of the greedy-vs-exact reclaim comparison.
    progress : callable ``(done, total, label)``, optional
    status : callable ``(message)``, optional
    config, policy_options : mapping, optional
        :class:`aryl.sim.SimConfig` fields and policy options for every run
        (see :func:`paper_spec`); recorded in ``manifest.json`` and named in the
        command that ``results.md`` quotes.

    Returns
    -------
    dict of DataFrame
        ``runs`` (one row per spec entry and seed), ``headline``,
        ``ablations``, ``sensitivity``, ``reclaim``, and those of
        :data:`EXTRA_TABLES` that the spec has the sections for
        (``baselines``, ``knapsack``, ``reclaim_choice``, ``hetero``,
        ``hetero_pools``, ``loaned_speed``).

    Raises
    ------
    InvalidInputError
        Bad arguments, spec or traces; ``out_dir`` is a folder aryl did not
        write.  Nothing is written.
    ArylError
        Some replays failed (the others are kept in the dataset).
    aryl.sweep.SweepInterrupted
        Ctrl-C during the replays: finished runs are kept, ``out_dir`` untouched.
    """
    import shutil

    from aryl._io import atomic_directory, check_output_folder
    from aryl.errors import ArylError
    from aryl.sweep import load_sweep, run_sweep

    if n_procs is not None and (isinstance(n_procs, bool) or n_procs < 1):
        raise InvalidInputError("n_procs: must be >= 1")
    say = status or (lambda _m: None)
    out = Path(out_dir)
    check_output_folder(out)  # before hours of replays, not after
    sweep_spec = paper_spec(quick=quick, philly=philly, spec=spec, config=config,
                            policy_options=policy_options)
    keep = data_dir is not None
    data = Path(data_dir) if data_dir is not None else out.parent / f".{out.name}.sweep"
    t0 = time.perf_counter()
    outcome = run_sweep(sweep_spec, data, n_procs=n_procs, ray=ray, progress=progress,
                        status=say)
    if outcome.failures:
        label, msg = outcome.failures[0]
        raise ArylError(
            f"{len(outcome.failures)} of {outcome.n_planned} replays failed (first: {label}: "
            f"{msg}); the others are kept in {data}/ and a rerun retries the failed ones"
        )
    sd = load_sweep(data)
    runs = paper_runs(sd)
    headline = headline_table(runs)
    ablations = ablation_table(runs)
    sensitivity = sensitivity_table(runs)
    extra = {name: fn(runs) for name, fn in EXTRA_TABLES.items()}
    head = runs[runs["section"] == "headline"]
    main = head[head["trace"] == head.iloc[0]["trace"]].sort_values("seed").iloc[0]
    say("reclaim quality: greedy vs exact")
    rq = reclaim_quality(
        source=str(main["trace_source"]),
        trace_window=None if pd.isna(main["trace_window"]) else str(main["trace_window"]),
        n_instances=reclaim_instances if not quick else min(reclaim_instances, 200),
        n_training_servers=int(main["n_training_servers"]),
        n_inference_servers=int(main["n_inference_servers"]),
        seed=int(main["seed"]),
        config={k: v for k, v in (config or {}).items() if k != "seed"},
        policy_options=policy_options,
    )
    rq_summary = pd.DataFrame(
        [
            {
                "instances": len(rq),
                "mean greedy preemptions": float(rq["greedy_preemptions"].mean()),
                "mean exact preemptions": float(rq["exact_preemptions"].mean()),
                "mean excess": float(rq["excess"].mean()),
                "max excess": int(rq["excess"].max()),
                "share optimal": float((rq["excess"] == 0).mean()),
            }
        ]
    )
    tables = {
        "runs": runs,
        "headline": headline,
        "ablations": ablations,
        "sensitivity": sensitivity,
        "reclaim": rq_summary,
        **{k: v for k, v in extra.items() if len(v)},
    }
    say("writing results")
    series = _series(data, runs)
    with atomic_directory(out) as tmp:
        for name, df in tables.items():
            if name == "runs":
                df = public_runs(df)
            atomic_write_dataframe(df, tmp / f"{name}.csv")
        figures = _figures(series, sensitivity, tmp, tables.get("loaned_speed"))
        command = paper_command(quick=quick, philly=philly is not None, config=config,
                                policy_options=policy_options)
        manifest = {
            "command": command,
            "quick": quick,
            "philly": philly is not None,
            "spec": sweep_spec.name,
            "n_runs": outcome.n_planned,
            "seeds": sorted({int(s) for s in runs["seed"]}),
            "confidence": 0.95,
            "elapsed_s": time.perf_counter() - t0,
            # the replays' own wall time, summed over runs (whether run now or reused)
            "replays_s": float(runs.drop_duplicates("key")["run_s"].sum())
            if "run_s" in runs else None,
            "target_queuing_delay_s": TARGET_QUEUING_DELAY_S,
            "inference_ratio": INFERENCE_RATIO,
            "paper": PAPER_FIGURES,
            "data": str(data) if keep else None,
            "config": dict(config or {}),
            "policy_options": dict(policy_options or {}),
        }
        atomic_write_text(tmp / "manifest.json",
                          json.dumps(manifest, indent=2, default=str) + "\n")
        atomic_write_text(tmp / "results.md",
                          render_markdown(tables, figures, quick=quick, command=command))
    if not keep:
        shutil.rmtree(data, ignore_errors=True)
    return tables


def public_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` as written to ``runs.csv``: a trace read from a file is named by the
    file's name, not its path on this machine (``trace_source``)."""
    if "trace_source" not in runs:
        return runs
    from aryl.traces import PRESETS

    names = [s if (s in PRESETS or not isinstance(s, str)) else Path(s).name
             for s in runs["trace_source"]]
    return runs.assign(trace_source=names)


def paper_command(
    *,
    quick: bool = False,
    philly: bool = False,
    config: Mapping[str, Any] | None = None,
    policy_options: Mapping[str, Any] | None = None,
) -> str:
    """The ``aryl experiment paper`` command line that produces a run with these arguments.

    The Philly table's path is written ``PATH`` (it is the user's); every
    common setting appears as ``--set NAME=VALUE``.
    """
    def text(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (tuple, list)):
            return ",".join(f"{x:g}" for x in v)
        return f"{v:g}" if isinstance(v, float) else str(v)

    parts = ["aryl experiment paper"]
    if quick:
        parts.append("--quick")
    if philly:
        parts.append("--philly PATH")
    for k, v in {**dict(config or {}), **dict(policy_options or {})}.items():
        parts.append(f"--set {k}={text(v)}")
    return " ".join(parts)


def render_markdown(
    tables: dict[str, pd.DataFrame],
    figures: Sequence[str],
    *,
    quick: bool,
    command: str | None = None,
) -> str:
    """The ``results.md`` text: the same numbers as the CSVs and the CLI tables.

    ``command`` is the command line that produced the tables (default: from
    ``quick`` and whether the headline has a Philly row, see :func:`paper_command`).
    """
    h = tables["headline"]
    ours = h[~h["trace"].str.startswith("paper")]
    if command is None:
        command = paper_command(quick=quick,
                                philly=bool(h["trace"].str.startswith("philly").any()))
    runs = tables.get("runs")
    seeds = sorted({int(x) for x in runs["seed"]}) if runs is not None and len(runs) else [0]
    if len(seeds) == 1:
        about_seeds = f"Deterministic seed ({seeds[0]})."
    else:
        about_seeds = (
            f"Each number is a mean over {len(seeds)} seeds ({', '.join(map(str, seeds))}: "
            "the seed draws the elastic jobs, their scaling and the inference demand's "
            "noise); `a ± h` gives the half-width h of its 95% Student-t interval, and "
            "ratios are averaged per seed (docs/sweep.md)."
        )
    lines = [
        "# Results: Aryl vs FIFO on public traces",
        "",
        f"Generated by `{command}`; every number below is the one the command prints and "
        "writes to the CSVs "
        f"beside this file. {about_seeds} The paper's figures are from a private "
        "15-day, >50,000-job trace; ours from the public traces named in each row.",
        "",
        "## Headline: fifo vs aryl",
        "",
        "Times in seconds; `qd` = mean queuing delay (first start - arrival), `JCT` = mean "
        "job completion time. Ratios in the paper's form: fifo / aryl for delays; "
        "aryl / fifo - 1 for usage and goodput. `usage` = training GPU-seconds allocated / "
        "training GPU-seconds available (loaned servers count while on loan); `all-GPU "
        "usage gain` counts both clusters' GPUs (serving counts as used). `goodput` = useful "
        "work (traced duration x traced GPUs of the progress kept) / the same GPU-seconds "
        "available; `aryl GPU-s / fifo's` = GPU-seconds allocated to the same jobs, aryl over "
        "fifo. `servers` = training + inference 8-GPU servers.",
        "",
        markdown_table(h),
        "",
    ]
    if len(ours):
        lines += [
            "Paper: 1.53x mean queuing delay, 1.50x mean JCT (1.48x in the EuroSys version), "
            "cluster usage up to +26.9% (+25%).",
            "",
        ]
    lines += [USAGE_NOTE, ""]
    sections: list[tuple[str, str, str]] = [
        ("baselines", "Two baselines: strict fifo and fifo with EASY backfilling",
         "Means over seeds; `X/aryl` = X's mean over aryl's, per seed. `fifo-backfill` "
         "(`backfill`) reserves the earliest start for the job at the head of the queue and "
         "lets later jobs start only if they do not delay it; neither loans nor scales."),
        ("ablations", "Ablations and peers (main trace)",
         "`qd ratio`, `JCT ratio` = fifo / this; `backfill/this` = fifo-backfill / this. "
         "`sjf` has the starvation bound on (4 h: a job waiting longer blocks backfill) "
         "unless the row says otherwise."),
        ("sensitivity", "Sensitivity (aryl; ratios against fifo on the same training cluster)",
         ""),
        ("knapsack", "Where the knapsack could matter: multi-GPU elastic workers",
         "`workers` = `one` (every elastic worker one GPU) or `split` (the traced GPUs "
         "split into at least two whole workers of 8, 4 or 2 GPUs, docs/model.md), so the "
         "MCKP's items weigh 1 to 8 GPUs; `elastic` = share of jobs elastic. "
         "`greedy/this` = elastic-greedy over this, per seed: `aryl-no-loan` and "
         "`elastic-greedy` differ only in the solver (exact MCKP or marginal-gain greedy)."),
        ("reclaim_choice", "Reclaim choice under pressure (aryl, main trace)",
         "Each cell: training + inference servers, restart cost and checkpoint interval; "
         "`X vs aryl` = this / the cost greedy (`aryl`) in the same cell, per seed."),
        ("hetero", "Heterogeneous GPUs",
         "`default`: the headline's homogeneous cluster; otherwise the named preset "
         "(docs/cluster.md) with measured speeds. `qd ratio`, `JCT ratio` = the same "
         "cluster's fifo / this; `no-loan/this` = aryl-no-loan / this. Goodput counts "
         "useful work in V100-seconds, so faster GPUs can push it above usage."),
        ("hetero_pools", "Heterogeneous GPUs: per pool",
         "Usage and goodput over each pool's GPU-seconds available (an inference pool's "
         "only while on loan: `–` when never loaned); `jobs` = jobs whose main pool it is "
         "(most GPU-seconds there), `JCT` their mean."),
        ("loaned_speed", "The loaned GPU's speed",
         "aryl on the heterogeneous cluster with every model family's speed on the loaned "
         "(inference) GPUs set to `loaned speed` x a V100's; the `measured` row keeps the "
         "measured speeds. Ratios per seed against the same cluster's fifo and "
         "aryl-no-loan runs (they never use a loaned server). `loaned usage`, `loaned "
         "goodput`: over the inference pool's GPU-seconds on loan."),
    ]
    for name, title, note in sections:
        df = tables.get(name)
        if df is None or not len(df):
            continue
        lines += [f"## {title}", ""]
        if note:
            lines += [note, ""]
        lines += [markdown_table(df), ""]
    lines += [
        "## Reclaim quality: cost greedy vs exact optimum",
        "",
        "Small instances (at most 8 loaned servers) cut from the reclaim requests of the "
        "main replay; excess = greedy preemptions - optimal preemptions.",
        "",
        markdown_table(tables["reclaim"]),
        "",
    ]
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{f}]({f})" for f in figures]
        lines.append("")
    return "\n".join(lines)


#: What a usage gain can and cannot mean (results.md, under the headline table).
USAGE_NOTE = (
    "**Usage is not goodput.** Usage counts GPU-seconds *allocated*, and an elastic job "
    "scaled out at sub-linear throughput (`T(w) = w / (1 + alpha (w - 1))`) holds more "
    "GPU-seconds for the same work, as does work lost to a preemption; goodput counts only "
    "the useful work. A usage gain such as the paper's +26.9% can mean that more of the "
    "cluster was handed to jobs (idle GPUs put to work, loaned servers filled); it cannot, "
    "on its own, mean that 26.9% more training was done, nor that jobs finish 26.9% sooner: "
    "that needs goodput or JCT. Under strict fifo on one GPU type the two coincide (every job "
    "runs at its traced size and loses nothing)."
)
