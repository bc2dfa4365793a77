"""The compiled scheduling pass (``aryl._core._sched``): inputs prepared here, plan back.

:func:`schedule_native` runs one pass of :func:`aryl.schedule` in C++ on the
state's content, read directly from the :class:`ClusterState` lists (the state
is not modified), and returns the same :class:`SchedulePlan` as the Python pass
(bit-identical: the C++ code performs the same floating-point operations in the
same order, with the same tie rules; differential tests in
``tests/test_native_pass.py``).  The Python pass (``scheduling/api.py`` and the
policy modules) is the reference twin.

Which policies run natively: ``fifo``, ``fifo-backfill``, ``sjf``, ``tiresias``
always; the ``aryl`` family when the module was built with its pass
(:data:`ARYL_NATIVE`).  The reclaim policy ``aryl`` runs in C++
(``reclaim.hpp``); ``random``, ``fewest-jobs``, ``most-idle`` and ``exact`` are
called back in Python (:func:`aryl.reclaiming.reclaim`) from the pass.

The helpers here (configuration, speed model and policy as plain values) are
shared with the native simulator engine (:mod:`aryl.sim.native`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aryl.scheduling.plan import Reason, SchedulePlan
from aryl.scheduling.policy import Policy
from aryl.scheduling.speed import SpeedModel
from aryl.scheduling.state import RECLAIM_POLICIES, ClusterState, SchedulerConfig

__all__ = [
    "ARYL_NATIVE",
    "config_prep",
    "native_policy",
    "policy_prep",
    "reclaim_hook",
    "schedule_native",
    "speeds_prep",
    "user_policy_prep",
]

# the C++ policy kinds (sched_plan.hpp PolicyKind), by registry name
POLICY_KINDS = {
    "fifo": 0, "fifo-backfill": 1, "sjf": 2, "tiresias": 3,
    "aryl": 4, "aryl-no-loan": 5, "aryl-no-elastic": 6, "elastic-greedy": 7,
}
_ARYL_FAMILY = ("aryl", "aryl-no-loan", "aryl-no-elastic", "elastic-greedy")


def _core() -> Any:
    from aryl._core import _sched

    return _sched


def _aryl_native() -> bool:
    try:
        return bool(_core().ARYL_NATIVE)
    except ImportError:  # pragma: no cover - build without the module
        return False


ARYL_NATIVE: bool = _aryl_native()
"""Whether the compiled module has the ``aryl`` family's pass (else they run in Python)."""


def native_policy(pol: Policy) -> bool:
    """Whether the compiled pass can decide for ``pol`` (a registered policy class,
    not a subclass; the ``aryl`` family only with
    :data:`ARYL_NATIVE`)."""
    from aryl.scheduling.registry import POLICIES

    cls = POLICIES.get(pol.name)
    if cls is None or type(pol) is not cls:
        return False
    return pol.name not in _ARYL_FAMILY or ARYL_NATIVE


def config_prep(cfg: SchedulerConfig) -> dict[str, Any]:
    """The pass's knobs as plain values (sched_state.hpp Config)."""
    return {
        "rescale_pause_s": float(cfg.rescale_pause_s),
        "checkpoint_interval_s": float(cfg.checkpoint_interval_s),
        "restart_cost_s": float(cfg.restart_cost_s),
        "loan_reserve_servers": int(cfg.loan_reserve_servers),
        "loan_cooldown_s": float(cfg.loan_cooldown_s),
        "starvation_bound_s": float(cfg.starvation_bound_s),
        "reclaim_policy": RECLAIM_POLICIES.index(cfg.reclaim_policy),
        "seed": int(cfg.seed),
        "mix_gpu_types": bool(cfg.mix_gpu_types),
    }


P_CALLBACK = 8  # sched_plan.hpp PolicyKind: a Python policy (aryl.Policy)


def user_policy_prep(pol: Any, job_ids: Any) -> dict[str, Any]:
    """An :class:`aryl.Policy` as the compiled pass's "python callback" policy:
    its attributes and the bridge the engine calls once per pass
    (:mod:`aryl.scheduling.user`)."""
    from aryl.scheduling.twin import TwinPolicy
    from aryl.scheduling.user import _Bridge

    bridge = _Bridge(pol, job_ids)
    return {
        "kind": P_CALLBACK,
        "name": pol.policy_name(),
        "loans": bool(pol.loans),
        "loans_for_growth": bool(pol.loans_for_growth),
        "elastic": bool(pol.elastic),
        "uses_tick": bool(pol.uses_tick),
        "only_starts": bool(pol.only_starts),
        "return_idle_loans": bool(pol.return_idle_loans),
        "bound_option": None,
        "las_thresholds": [3600.0, 36000.0],
        "decide": bridge,
        "job_label": bridge.job_label,
        "to_arrays": bridge.arrays,
        # a registered policy's twin (aryl.scheduling.twin): called with the pass's
        # values directly instead of through a view
        "twin_decide": pol.decide_values if isinstance(pol, TwinPolicy) and pol.direct else None,
    }


def policy_prep(pol: Policy) -> dict[str, Any]:
    """A policy's kind and options as plain values (sched_plan.hpp Policy)."""
    th = getattr(pol, "thresholds", None)
    return {
        "kind": POLICY_KINDS[pol.name],
        "return_idle_loans": bool(pol.return_idle_loans),
        "bound_option": getattr(pol, "bound_option", None),
        "las_thresholds": [float(x) for x in th] if th is not None else [3600.0, 36000.0],
    }


def speeds_prep(
    speeds: SpeedModel | None,
    gpu_types: Sequence[str],
    family: Sequence[str | None] | None,
    replicas: Callable[[str], int],
) -> tuple[dict[str, Any], list[int]]:
    """The speed model as plain values (sched_state.hpp SpeedModel) and each job's
    family index (-1 = none; an empty list when no job has a family).

    ``replicas(f)``: the most replicas (workers x GPUs per worker) a job of family
    ``f`` can run with; the measured look-up tables are built up to it by the
    model itself (:meth:`SpeedModel.throughput_row`, the same floats).
    """
    if speeds is None:
        if family is not None:
            for f in family:
                if f is not None:
                    raise _no_model(f)
        return {"has_speeds": False}, []
    types = list(gpu_types)
    ref = speeds.reference_gpu_type
    if ref not in types:
        types.append(ref)
    names: dict[str, int] = {}
    idx: list[int] = []
    if family is not None:
        for f in family:
            if f is None:
                idx.append(-1)
            else:
                k = names.get(f)
                if k is None:
                    k = names[f] = len(names)
                idx.append(k)
    luts = []
    for f in names:
        r = max(1, int(replicas(f)))
        luts.append([np.asarray(speeds.throughput_row(f, 0.0, t, 0, r + 1, 1), dtype=np.float64)
                     for t in types])
    prep = {
        "has_speeds": True,
        "factors": [float(speeds.factor(t)) for t in types],
        "ref_type": types.index(ref),
        "luts": luts,
    }
    return prep, (idx if names else [])


def _no_model(family: str) -> Exception:
    from aryl.errors import InvalidInputError

    return InvalidInputError(
        f"model family {family!r}: the state has no speed model for families"
    )


def reclaim_hook(backend: str) -> Callable[[dict[str, Any], int, int], tuple[list[int], list[int]]]:
    """The comparison reclaim policies for the compiled pass: the request it built,
    through :func:`aryl.reclaiming.reclaim` (validated, as the Python pass does)."""
    from aryl.reclaiming import ReclaimRequest, reclaim

    def fn(d: dict[str, Any], policy: int, seed: int) -> tuple[list[int], list[int]]:
        req = ReclaimRequest(
            server_id=d["server_id"], server_gpus=d["server_gpus"],
            placement_job=d["placement_job"], placement_server=d["placement_server"],
            placement_workers=d["placement_workers"], job_id=d["job_id"],
            job_workers=d["job_workers"], job_gpus_per_worker=d["job_gpus_per_worker"],
            job_min_workers=d["job_min_workers"],
            job_elastic=np.asarray(d["job_elastic"], dtype=bool),
            job_preemptible=np.asarray(d["job_preemptible"], dtype=bool),
            n_servers=int(d["n_servers"]),
        )
        plan = reclaim(req, policy=RECLAIM_POLICIES[policy], seed=seed, backend=backend)
        return ([int(s) for s in np.asarray(plan.servers).tolist()],
                [int(j) for j in np.asarray(plan.preempted_jobs).tolist()])

    return fn


def _replicas_of(st: ClusterState) -> Callable[[str], int]:
    """The replicas a family's look-up table must cover: each job's base and reference
    sizes, and as many workers up to its maximum as the whole cluster's GPUs hold (a
    job never runs larger: the table is sized by what can be placed)."""
    total = sum(st.server_gpus)

    def most(f: str) -> int:
        r = 1
        for j, fj in enumerate(st.family):
            if fj == f:
                g = st.gpus_per_worker[j]
                w = max(min(st.max_workers[j], total // g), st.ref_workers[j],
                        st.min_workers[j])
                r = max(r, w * g)
        return r

    return most


def plan_from_native(t: tuple[Any, ...]) -> SchedulePlan:
    """A :class:`SchedulePlan` from the tuples of ``_sched.schedule_state``."""
    now, ra, rs, short, bor, pre, res, sta, ret, memo, reps, wake = t
    plan = SchedulePlan(now_s=float(now))
    plan.reclaim_actions = [(j, None if p is None else dict(p), Reason(r)) for j, p, r in ra]
    plan.reclaimed_servers = list(rs)
    plan.reclaim_shortfall = int(short)
    plan.borrowed_servers = [(s, Reason(r)) for s, r in bor]
    plan.preemptions = [(j, Reason(r)) for j, r in pre]
    plan.resizes = [(j, dict(p), Reason(r)) for j, p, r in res]
    plan.starts = [(j, dict(p), Reason(r)) for j, p, r in sta]
    plan.returned_servers = [(s, Reason(r)) for s, r in ret]
    plan.elastic_memo = (int(memo[0]), int(memo[1]))
    plan.n_extra_repairs = int(reps)
    plan.next_wakeup_s = float(wake)
    return plan


def schedule_native(st: ClusterState, pol: Any) -> SchedulePlan:
    """One pass of ``pol`` over ``st`` in C++ (``st`` is not modified).

    The caller checks :func:`native_policy` first.  Cost: O(servers + queued +
    running jobs) to read the state (the static job columns are read once per
    state, :attr:`ClusterState.native_cache`), then the pass.
    """
    gt = st.gpu_types
    tindex = {t: i for i, t in enumerate(gt)}
    prep: dict[str, Any] = {
        "config": config_prep(st.config),
        "server_type": [tindex[t] for t in st.server_gpu_type],
        "gpu_types": list(gt),
    }
    fam = st.family if st.speeds is not None and any(f is not None for f in st.family) else None
    prep["speeds"], prep["family"] = speeds_prep(st.speeds, gt, fam, _replicas_of(st))
    hook = None if st.config.reclaim_policy == "aryl" else reclaim_hook(st.config.backend)
    core = _core()
    cache = st.native_cache
    if cache is None:
        cache = st.native_cache = core.StateCache()
    from aryl.scheduling.twin import TwinPolicy
    from aryl.scheduling.user import Policy as UserPolicy

    if isinstance(pol, TwinPolicy):
        pol.bind(st.copy())
    pp = user_policy_prep(pol, st.job_id) if isinstance(pol, UserPolicy) else policy_prep(pol)
    return plan_from_native(core.schedule_state(st, cache, prep, pp, hook))

