"""Discrete-event simulator of a training + inference GPU cluster [Aryl]_.

Layout: :mod:`aryl.sim.native` (the compiled engine, the default:
``SimConfig(engine="native")``), :mod:`aryl.sim.engine` (its Python twin: event
loop, cluster state as per-server lists, decision application;
``engine="python"``), :mod:`aryl.sim.jobs` (struct-of-arrays job table),
:mod:`aryl.sim.metrics` (per-job table, summary, time series),
:mod:`aryl.sim.check` (invariants), :mod:`aryl.sim.adapters` (the only calls
into the kernels and the trace layer), :mod:`aryl.sim.config`.  Policies live
in :mod:`aryl.scheduling`.  docs/simulator.md describes the event order and the
defaults.

.. [Aryl] J. Li et al., "Aryl: An Elastic Cluster Scheduler for Deep
   Learning", arXiv:2202.07896 (EuroSys'23 "Lyra").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aryl.sim.config import SimConfig
from aryl.sim.jobs import release_free_memory
from aryl.sim.metrics import SimResult

__all__ = ["SimConfig", "SimResult", "simulate"]

log = logging.getLogger(__name__)


def simulate(
    trace: Any,
    *,
    policy: Any = "aryl",
    config: SimConfig | None = None,
    inference: Any = None,
    progress: Callable[[int, int, float], None] | None = None,
    policy_options: dict[str, Any] | None = None,
    reclaim_log: list[Any] | None = None,
) -> SimResult:
    """Replay a job trace under one policy.

    Parameters
    ----------
    trace : Trace, DataFrame, path or preset name
        Canonical jobs (docs/architecture.md): ``job_id``, ``submit_time_s``,
        ``duration_s``, ``gpus`` and optionally the scaling columns.  Jobs
        without them are rigid.
    policy : str or aryl.Policy
        ``fifo``, ``fifo-backfill``, ``sjf``, ``tiresias``, ``aryl``,
        ``aryl-no-loan``, ``aryl-no-elastic``, ``elastic-greedy``; a Python
        policy: an :class:`aryl.Policy` instance, ``"module:Class"`` or the name
        of an entry point in the group ``aryl.policies`` (docs/policies.md; it
        runs in the compiled event loop, ``engine="native"``).
    config : SimConfig, optional
    inference : InferenceDemand, InferenceSchedule, "default" or None
        Inference demand (servers needed over time).  ``None`` uses the bundled
        profile scaled to the inference cluster when it has servers; pass
        ``False`` for no demand (every inference server idle).
    progress : callable ``(jobs_done, n_jobs, sim_time_s)``, optional
        Called every few thousand events and at the end.
    policy_options : dict, optional
        Extra policy knobs (see each policy's docstring; for a Python policy
        given by name, its constructor's options).
    reclaim_log : list, optional
        If given, every ``aryl.reclaiming.ReclaimRequest`` the replay builds is
        appended to it (for offline studies of the reclaim kernel).

    Returns
    -------
    SimResult
        Per-job table, summary, time series, event log.

    Raises
    ------
    InvalidInputError
        Bad trace, config or policy name; a horizon before the clock start; a
        time series that would exceed 5,000,000 rows; a Python policy with
        ``engine="python"``.
    aryl.errors.PolicyError
        A Python policy's decision breaks a rule of the pass (the message names
        the policy, the pass time, the job and the rule); an exception raised in
        its ``decide`` propagates with its own traceback and a note with the
        pass time.  Also a Python policy that leaves jobs waiting with no event
        left to call it again (the message names the policy and carries the
        stall diagnostic).
    RuntimeError
        The replay stopped making progress under a built-in policy (stall
        watchdog, docs/simulator.md).
    aryl.sim.check.InvariantError
        With ``SimConfig(check=True)``: an invariant of the state or of the
        result's accounting does not hold (a bug).

    Notes
    -----
    Deterministic: the same inputs, config and seed give identical results, with
    either engine (``SimConfig.engine``: ``native``, compiled, or ``python``).
    Same-time arrivals are taken in input row order.  Cost: O(E log E) heap
    work for E events plus the policy's decisions.
    """
    import pandas as pd

    from aryl.sim.adapters import default_inference, inference_schedule, load_jobs
    from aryl.sim.engine import Engine, InferenceSchedule
    from aryl.sim.jobs import build_job_table
    from aryl.sim.metrics import build_result
    from aryl.sim.setup import (
        check_run_size,
        check_types,
        job_families,
        resolve_cluster,
        speed_model,
        worker_server_gpus,
    )

    cfg = config if config is not None else SimConfig()
    spec = resolve_cluster(cfg)
    model = speed_model(cfg, spec)
    check_types(spec, model)
    jobs, meta = load_jobs(trace)
    # a path or a preset: load_trace has just run the job rules on this frame of
    # its own (nobody else holds it), so the job table does not run them again
    fresh = not isinstance(trace, pd.DataFrame) and not (
        hasattr(trace, "jobs") and isinstance(trace.jobs, pd.DataFrame))
    # the frame is `jobs` now: a caller that handed the trace over (aryl replay) has
    # it freed below, once the job table is built
    del trace
    if len(jobs) == 0:
        log.warning("the trace has no jobs: empty results")
    gps = worker_server_gpus(cfg, spec)
    table = build_job_table(jobs, gpus_per_server=gps, default_alpha=cfg.default_alpha,
                            validated=fresh)
    families = job_families(jobs, cfg, spec)
    if families is not None and table.input_row is not None:  # None: the same order
        families = [families[int(i)] for i in table.input_row]
    # the table has every column the replay reads: a frame loaded here (from a path
    # or a preset) goes now, not at the end (one copy of the trace, not two)
    del jobs
    if table.n_jobs >= 200_000:
        release_free_memory()
    from aryl.scheduling.registry import resolve_policy

    # size guards first: before the demand series, the engine or any event
    resolved = resolve_policy(policy, policy_options)
    elastic_policy = bool(resolved.elastic)
    check_run_size(table, cfg, spec, model, families, elastic_policy)
    n_inf = spec.n_inference_servers
    if inference is None:
        sched = default_inference(n_inf, cfg.seed)
    elif inference is False:
        sched = None
    elif isinstance(inference, InferenceSchedule):
        sched = inference
    else:
        t0 = cfg.start_time_s
        if t0 is None:
            t0 = float(table.submit_time_s[0]) if table.n_jobs else 0.0
        sched = inference_schedule(inference, n_inf, t0)
    from aryl.sim.native import NativeEngine, uses_native

    engine_cls: Any = NativeEngine if uses_native(cfg, policy) else Engine
    if engine_cls is Engine and cfg.engine == "native":
        log.debug("policy %s with backend %s: the Python engine", policy, cfg.backend)
    eng = engine_cls(table, policy, cfg, sched, progress=progress,
                     policy_options=policy_options, cluster=spec, speeds=model,
                     families=families)
    eng.reclaim_log = reclaim_log
    del table  # the engine's own (the native one lets its columns go for the run)
    try:
        eng.run()
    except RuntimeError as e:
        _blame_user_policy(e, resolved)
        raise
    res = build_result(eng, meta)
    if cfg.check:
        from aryl.sim.check import check_result

        check_result(res)
    return res


def _blame_user_policy(err: RuntimeError, pol: Any) -> None:
    """A stall under a Python policy (:class:`aryl.Policy`) is the policy's doing:
    it left jobs waiting with no event left to call it again.  Raise
    :class:`aryl.errors.PolicyError` naming the policy; return for any other
    policy (the stall is then a bug and stays a ``RuntimeError``)."""
    from aryl.errors import PolicyError
    from aryl.scheduling.user import Policy as UserPolicy

    if not str(err).startswith("simulation stalled"):
        return
    if not isinstance(pol, UserPolicy):
        return
    name = pol.name or type(pol).__name__
    raise PolicyError(
        f"policy {name!r} left jobs waiting with nothing left to call it again ({err}); "
        "a pass runs only at an arrival, a finish, a demand change or a wake-up "
        "(set uses_tick = True to be called on the periodic tick too)"
    ) from err
