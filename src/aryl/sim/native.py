"""The compiled simulator engine (``SimConfig(engine="native")``).

:class:`NativeEngine` runs a whole replay in C++ (``aryl._core._sched``:
``sim_engine.hpp``, the event loop; ``sched_pass.hpp``, the scheduling pass;
both twins of :mod:`aryl.sim.engine` and :mod:`aryl.scheduling`, bit-identical
to them) and then offers the attributes :func:`aryl.sim.metrics.build_result`
reads, as the Python :class:`~aryl.sim.engine.Engine` does, so both engines
give the same :class:`~aryl.sim.SimResult`.

Memory: the job table's columns go to C++ as arrays; the C++ state keeps
fixed-width vectors per job (no Python object per job or per event); the event
log and the time series come back as columns.

The loop runs in chunks of 2,048 iterations (the Python engine's progress
period), so the progress callback sees the same calls and Ctrl-C stops a run
between chunks.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from aryl.cluster import ClusterSpec
from aryl.errors import InvalidInputError
from aryl.scheduling import ClusterState, make_policy
from aryl.scheduling.native import (
    config_prep,
    policy_prep,
    reclaim_hook,
    speeds_prep,
    user_policy_prep,
)
from aryl.scheduling.speed import SpeedModel
from aryl.scheduling.state import INFEASIBLE
from aryl.sim.config import SimConfig, check_timeseries_size
from aryl.sim.jobs import JobTable, release_free_memory
from aryl.sim.metrics import EVENT_NAMES

log = logging.getLogger("aryl.sim.engine")  # the Python engine's logger: same messages

__all__ = ["EVENT_NAMES", "NativeEngine", "native_available", "uses_native"]


_CHUNK = 2048  # loop iterations between progress calls (engine.py)


class _StateView:
    """What :func:`build_result` reads of the final cluster state: the servers (a
    :class:`ClusterState` without jobs) and the per-job columns as arrays (set to
    None as build_result takes or releases them)."""

    def __init__(self, servers: ClusterState, cols: dict[str, np.ndarray]) -> None:
        self._servers = servers
        self.status: np.ndarray | None = cols["status"]
        self.waited_s: np.ndarray | None = cols["waited_s"]
        self.queued_since_s: np.ndarray | None = cols["queued_since_s"]
        self.attained_gpu_s: np.ndarray | None = cols["attained_gpu_s"]
        self.remaining_s: np.ndarray | None = cols["remaining_s"]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._servers, name)


class _ResultTable:
    """The job table's columns as the engine hands them back after the run, with
    the attributes of :class:`JobTable` that :func:`build_result` reads.  Unlike a
    JobTable it lets build_result take its columns one at a time (the sizes come
    as int32 and are widened then, each int32 column freed once widened)."""

    def __init__(self, job_id: Any, r: dict[str, Any]) -> None:
        self.job_id = job_id
        self.submit_time_s: np.ndarray | None = r.pop("arrival_s")
        self.duration_s: np.ndarray | None = r.pop("duration_s")
        gpw, ref = r.pop("gpus_per_worker"), r.pop("ref_workers")
        # gpus = g x traced workers exactly (build_job_table), in int64
        self.gpus: np.ndarray | None = np.multiply(gpw, ref, dtype=np.int64)
        self.gpus_per_worker: np.ndarray | None = gpw
        self.traced_workers: np.ndarray | None = ref
        self.min_workers: np.ndarray | None = r.pop("min_workers")
        self.max_workers: np.ndarray | None = r.pop("max_workers")
        self.elastic: np.ndarray | None = r.pop("elastic").view(np.bool_)
        self.alpha: np.ndarray | None = r.pop("alpha")

    @property
    def n_jobs(self) -> int:
        return int(self.job_id.shape[0])


class NativeEngine:
    """One replay in C++; the same constructor as :class:`aryl.sim.engine.Engine`.

    Raises
    ------
    InvalidInputError
        As the Python engine: a start after the first arrival, a horizon before
        the clock start, a time series too long, a bad job column, families
        without a speed model.
    """

    def __init__(
        self,
        table: JobTable,
        policy: Any,
        config: SimConfig,
        inference: Any,
        progress: Callable[[int, int, float], None] | None = None,
        policy_options: dict[str, Any] | None = None,
        cluster: ClusterSpec | None = None,
        speeds: SpeedModel | None = None,
        families: list[str | None] | None = None,
    ) -> None:
        from aryl.sim.engine import ServerLayout

        self.table: Any = table  # a JobTable, then (after the run) a _ResultTable
        self.config = config
        from aryl.scheduling.registry import policy_label, resolve_policy
        from aryl.scheduling.user import Policy as UserPolicy

        self.policy = resolve_policy(policy, dict(policy_options or {}))
        self.policy_name = policy_label(self.policy)
        pol = self.policy
        n = table.n_jobs
        self.n_inf = (cluster.n_inference_servers if cluster is not None
                      else config.n_inference_servers)
        self.inference = inference if (inference is not None and self.n_inf > 0) else None
        # the servers, as the Python engine adds them (a state without jobs)
        layout = ServerLayout(config, cluster, speeds, serving=self.inference is not None)
        spec = self.cluster = layout.spec
        self.n_train = spec.n_training_servers
        st = self._servers = layout.state
        self.train_S, self.inf_S = layout.train_S, layout.inf_S
        self.gpus_per_server = layout.gpus_per_server
        self.training_text = layout.training_text
        slots = layout.slots
        # jobs: the checks of ClusterState.add_jobs, on the arrays
        sub = np.ascontiguousarray(table.submit_time_s, dtype=np.float64)
        gpw = np.ascontiguousarray(table.gpus_per_worker, dtype=np.int64)
        ref = np.ascontiguousarray(table.traced_workers, dtype=np.int64)
        mn = np.ascontiguousarray(table.min_workers, dtype=np.int64)
        mx = np.ascontiguousarray(table.max_workers, dtype=np.int64)
        el = np.ascontiguousarray(table.elastic, dtype=bool)
        al = np.ascontiguousarray(table.alpha, dtype=np.float64)
        dur = np.ascontiguousarray(table.duration_s, dtype=np.float64)
        st.check_job_columns(table.job_id, arrival_s=sub, gpus_per_worker=gpw, ref_workers=ref,
                             remaining_s=dur, min_workers=mn, max_workers=mx, elastic=el,
                             alpha=al)

        total_gpus = sum(st.server_gpus)

        def replicas(f: str) -> int:
            # sized by what can be placed (aryl.scheduling.native._replicas_of)
            sel = np.asarray([x == f for x in families or []], dtype=bool)
            g = gpw[sel].astype(np.int64)
            placeable = np.minimum(mx[sel], total_gpus // g)
            w = np.maximum(np.maximum(placeable, ref[sel]), mn[sel]) * g
            return int(w.max()) if w.size else 1

        speed_d, fam_idx = speeds_prep(st.speeds, st.gpu_types, families, replicas)
        # None: no families (-1 for every job, filled by the engine)
        family = np.asarray(fam_idx, dtype=np.int64) if fam_idx else None
        # clock
        t0 = config.start_time_s
        if t0 is None:
            t0 = float(sub[0]) if n else 0.0
        if n and t0 > float(sub[0]):
            raise InvalidInputError("start_time_s: must not be after the first arrival")
        if config.horizon_s is not None and config.horizon_s < t0:
            raise InvalidInputError(
                f"horizon_s: {config.horizon_s:g} s is before the clock start {t0:g} s "
                "(start_time_s, by default the first arrival): nothing would be simulated"
            )
        self.t0 = float(t0)
        last = float(sub[-1]) if n else self.t0
        if config.horizon_s is not None:
            last = min(last, config.horizon_s)
        check_timeseries_size(last - self.t0, config.timeseries_step_s)
        inf = self.inference
        tindex = {t: i for i, t in enumerate(st.gpu_types)}
        spec_d: dict[str, Any] = {
            "config": config_prep(st.config),
            "server_training": np.asarray([s < len(st.training_servers)
                                           for s in range(st.n_servers)], dtype=np.uint8),
            "server_gpus": np.asarray(st.server_gpus, dtype=np.int64),
            "server_pool_idx": np.asarray(st.server_pool_idx, dtype=np.int64),
            "server_type": np.asarray([tindex[t] for t in st.server_gpu_type], dtype=np.int64),
            "server_status": np.asarray(st.server_status, dtype=np.int8),
            "gpu_types": list(st.gpu_types),
            "n_pools": len(st.pool_names),
            "speeds": speed_d,
            "arrival_s": sub, "gpus_per_worker": gpw, "ref_workers": ref, "remaining_s": dur,
            "min_workers": mn, "max_workers": mx, "elastic": el.astype(np.uint8), "alpha": al,
            "family": family,
            "policy": (user_policy_prep(pol, table.job_id) if isinstance(pol, UserPolicy)
                       else policy_prep(pol)),
            "t0": self.t0,
            "horizon_s": config.horizon_s,
            "tick_s": float(config.tick_s) if pol.uses_tick else 0.0,
            "reclaim_grace_s": float(config.reclaim_grace_s),
            "timeseries_step_s": float(config.timeseries_step_s),
            "record_events": bool(config.record_events),
            "check": bool(config.check),
            "n_inf": int(self.n_inf),
            "inf_offsets_s": None if inf is None else np.asarray(inf.offsets_s, dtype=np.float64),
            "inf_servers_needed": (None if inf is None
                                   else np.asarray(inf.servers_needed, dtype=np.int64)),
            "inf_period_s": math.inf if inf is None else float(inf.period_s),
            "slots": list(slots.values()),
            "duration_s": dur,
            "reclaim_hook": (None if st.config.reclaim_policy == "aryl"
                             else reclaim_hook(st.config.backend)),
            "record_requests": False,
        }
        self._spec = spec_d
        from aryl.scheduling.twin import TwinPolicy

        if isinstance(pol, TwinPolicy):
            # the twin's mirror: the servers and the jobs as the Python engine adds them
            mirror = st.copy()
            mirror.add_jobs(table.job_id.tolist(), arrival_s=sub.tolist(),
                            gpus_per_worker=gpw.tolist(), ref_workers=ref.tolist(),
                            remaining_s=dur.tolist(), min_workers=mn.tolist(),
                            max_workers=mx.tolist(), elastic=el.tolist(), alpha=al.tolist(),
                            family=families)
            mirror.now_s = self.t0
            pol.bind(mirror)
        self.progress = progress
        self.reclaim_log: list[Any] | None = None
        self.now = self.t0
        self.events: Any = None
        self._ev: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._ts: list[np.ndarray] | None = None
        self._core: Any = None

    # --------------------------------------------------------------- run
    def run(self) -> None:
        """Run the replay to the end (or the horizon) in C++."""
        from aryl._core import _sched

        spec = self._spec
        spec["record_requests"] = self.reclaim_log is not None
        core = _sched.new_engine(spec)
        self._spec = {}
        del spec  # the C++ engine has its own copies: no second set of job columns
        n = self.table.n_jobs
        # For the run, keep only the ids of the table: its static columns come back
        # from the engine with the results (the same values), and no result reads
        # the input rows, so a caller that holds no reference to the table
        # (aryl.simulate) has one set of job columns during the loop, not two.
        self._table_ids = self.table.job_id
        self.table = None
        if n >= 200_000:
            release_free_memory()  # the table's static columns, before the event log grows
        chunk = _CHUNK if self.progress is not None else 64 * _CHUNK
        while not core.run(chunk):
            if self.progress is not None:
                self.progress(n - core.n_open, n, core.now)
        if self.progress is not None:
            self.progress(n - core.n_open, n, core.now)
        self._collect(core)
        # its results were moved out; it keeps only the GPU-seconds per pool, for
        # pool_split (then it goes)
        self._core = core
        del core
        if n >= 200_000:
            release_free_memory()  # before the result frames are built

    def _collect(self, core: Any) -> None:
        r = core.results()
        self.table = _ResultTable(self._table_ids, r)
        del self._table_ids
        self.now = float(core.now)
        st = _StateView(self._servers, r)
        self.state = st
        self.n_infeasible = int(core.n_infeasible)
        if self.n_infeasible:
            bad = np.flatnonzero(r["status"] == INFEASIBLE)
            jid = self.table.job_id
            if log.isEnabledFor(logging.DEBUG):
                for j in bad.tolist():
                    log.debug(
                        "job %s (%d workers x %d GPUs) can never fit the training cluster "
                        "(%s, whole workers per server); reported as infeasible",
                        jid[j], int(self._base_of(j)), int(self.table.gpus_per_worker[j]),
                        self.training_text,
                    )
            first = [str(jid[j]) for j in bad[:5].tolist()]
            log.warning(
                "%d job(s) can never fit the training cluster (%s); "
                "reported as infeasible (status 'infeasible' in the jobs table), e.g. %s",
                self.n_infeasible, self.training_text, ", ".join(first),
            )
        c = core.counters
        self.busy_int = c["busy_int"]
        self.busy_loaned_int = c["busy_loaned_int"]
        self.loan_gpu_int = c["loan_gpu_int"]
        self.cap_int = c["cap_int"]
        self.loan_int = c["loan_int"]
        self.serving_int = c["serving_int"]
        self.n_loans = c["n_loans"]
        self.n_loan_returns = c["n_loan_returns"]
        self.n_reclaims = c["n_reclaims"]
        self.n_reclaim_preempt = c["n_reclaim_preempt"]
        self.reclaim_deadline_misses = c["reclaim_deadline_misses"]
        self.busy_pool_int = list(r["busy_pool_int"])
        self.loan_pool_int = list(r["loan_pool_int"])
        self.first_start = r["first_start"]
        self.finish_t = r["finish_t"]
        self.n_preempt = r["n_preempt"]  # the counts: int32
        self.n_scale_in = r["n_scale_in"]
        self.n_scale_out = r["n_scale_out"]
        self.n_move = r["n_move"]
        self._ts = [r[k] for k in (
            "ts_t", "ts_q", "ts_busy", "ts_loaned", "ts_running", "ts_needed")]
        self.sched_time_s = float(core.sched_time_s)
        self.n_decisions = int(core.n_decisions)
        self.n_arrived = int(core.n_arrived)
        self.submit = self.table.submit_time_s
        self._ev = (r["ev_time"], r["ev_job"], r["ev_what"], r["ev_workers"])
        # as the Python engine's list: None when not recorded, empty-like when none
        self.events = True if (self.config.record_events and len(r["ev_time"])) else None
        if self.reclaim_log is not None:
            from aryl.reclaiming import ReclaimRequest

            for d in r["reclaim_requests"]:
                d = dict(d)
                d["job_elastic"] = np.asarray(d["job_elastic"], dtype=bool)
                d["job_preemptible"] = np.asarray(d["job_preemptible"], dtype=bool)
                self.reclaim_log.append(ReclaimRequest(**d))
        del r  # (the dict's references: each column's only owner is its attribute now)

    def _base_of(self, j: int) -> int:
        t = self.table
        if self.policy.elastic and bool(t.elastic[j]):
            return int(t.min_workers[j])
        return int(t.traced_workers[j])

    def release_job_state(self, *names: str) -> None:
        """Let go of per-job state that :func:`build_result` has read and that is
        not in the result: the state columns ``names`` (``"waited_s"``,
        ``"queued_since_s"``, ``"remaining_s"``) or, without names, all three, the
        traced worker counts and the engine's pool accounting, so that these
        arrays are not held while the rest of the result is built."""
        st = self.state
        for name in names or ("waited_s", "queued_since_s", "remaining_s"):
            if name not in ("waited_s", "queued_since_s", "remaining_s"):
                raise ValueError(f"release_job_state: no column {name!r}")
            setattr(st, name, None)
        if not names:
            self.table.traced_workers = None
            self._core = None

    # ------------------------------------------------------- result views
    #: build_result may take the engine's result columns (set its attributes to
    #: None once read, update them in place): they are this engine's own arrays
    hands_over = True

    def event_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The event log: time (float64), job index (int32, -1 for server events),
        event code (int8, :data:`EVENT_NAMES`), workers or server index (int64).

        Handed over once (the engine keeps no reference: the result's event frame
        is the only copy that stays).  The workers come from the engine as int32 in
        the first half of their int64 array and are widened here, in place: call
        this last, once the rest of the result is built."""
        from aryl._core import _sched

        ev, self._ev = self._ev, None
        if ev is None:
            raise RuntimeError("event_columns: the event log was already handed over")
        _sched.widen_in_place(ev[3])
        return ev

    def timeseries_columns(self) -> list[np.ndarray]:
        """The time series rows as columns: time (float64), queue length, busy
        GPUs, loaned servers, running jobs, inference servers needed (int64 each).

        Handed over once, as a list the caller may empty column by column."""
        ts, self._ts = self._ts, None
        if ts is None:
            raise RuntimeError("timeseries_columns: the series was already handed over")
        return ts

    def pool_split(self, done_work: np.ndarray) -> tuple[list[float], np.ndarray]:
        """Useful work per pool and each job's main pool index (int32, -1: none),
        in C++ with the arithmetic of :meth:`aryl.sim.engine.Engine.pool_split`.

        Once: the engine's per-job GPU-seconds by pool are released after the split."""
        core = self._core
        if core is None:
            raise RuntimeError("pool_split: the replay has not run, or the split was "
                               "already taken")
        useful, main = core.pool_split(np.ascontiguousarray(done_work, dtype=np.float64))
        # once (build_result): the engine goes now, with its pool accounting, before
        # the rest of the result is built
        self._core = None
        return list(useful), main


def native_available() -> bool:
    """Whether the compiled engine module is importable."""
    try:
        from aryl._core import _sched  # noqa: F401
    except ImportError:  # pragma: no cover - build without it
        return False
    return True


def uses_native(config: SimConfig, policy: Any) -> bool:
    """Whether :func:`aryl.sim.simulate` runs ``policy`` with the compiled engine:
    ``engine="native"``, the compiled kernels (``backend="native"``; the
    reference kernels are Python) and a policy the compiled pass has.  A Python
    policy (:class:`aryl.Policy`) always does.

    Raises
    ------
    InvalidInputError
        A Python policy with ``engine="python"`` or ``backend="reference"``, or
        without the compiled module: it runs in the compiled event loop only.
    """
    from aryl.scheduling.registry import is_policy_name
    from aryl.scheduling.user import Policy as UserPolicy

    user = isinstance(policy, UserPolicy) or (
        isinstance(policy, str) and is_policy_name(policy) and policy not in _registered())
    if user:
        if config.engine != "native" or config.backend != "native" or not native_available():
            raise InvalidInputError(
                "policy: a Python policy (aryl.Policy) runs in the compiled engine only; "
                f"got engine={config.engine!r}, backend={config.backend!r}"
                + ("" if native_available() else " and no compiled module"))
        return True
    if config.engine != "native" or config.backend != "native" or not native_available():
        return False
    from aryl.scheduling.native import native_policy

    return native_policy(make_policy(policy))


def _registered() -> dict[str, Any]:
    from aryl.scheduling.registry import POLICIES

    return POLICIES

