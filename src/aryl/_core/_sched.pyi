"""Type stub of the pybind11 scheduling pass and simulator engine (``_sched.cpp``).

Private: use :func:`aryl.schedule` (``backend="native"``) and
:func:`aryl.sim.simulate` (``SimConfig(engine="native")``);
:mod:`aryl.scheduling.native` and :mod:`aryl.sim.native` prepare the inputs.
Algorithms: ``sched_state.hpp`` .. ``sim_engine.hpp`` (C++17, header-only).
"""

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]
_F64 = npt.NDArray[np.float64]

ARYL_NATIVE: bool  # the aryl family's pass is compiled in (sched_aryl.hpp)

def _kernel_name() -> str: ...

class Engine:
    """One replay (sim_engine.hpp Engine)."""

    def run(self, max_iterations: int) -> bool: ...  # int64_t; <= 0: to the end; True: ended
    def results(self) -> dict[str, Any]: ...  # moved out once, no copies: per-job columns
    # (counts and sizes int32), time series columns ts_t .. ts_needed, event log
    def pool_split(
        self, done_work: npt.ArrayLike
    ) -> tuple[list[float], npt.NDArray[np.int32]]: ...  # once, after results()
    @property
    def n_open(self) -> int: ...  # int64_t: jobs neither finished nor infeasible
    @property
    def now(self) -> float: ...  # double: the clock, s
    @property
    def t0(self) -> float: ...  # double: the clock start, s
    @property
    def n_iter(self) -> int: ...  # int64_t: loop iterations so far
    @property
    def n_arrived(self) -> int: ...  # int64_t
    @property
    def n_infeasible(self) -> int: ...  # int64_t
    @property
    def n_decisions(self) -> int: ...  # int64_t: scheduling passes
    @property
    def sched_time_s(self) -> float: ...  # double: wall time in the passes, s
    @property
    def counters(self) -> dict[str, float | int]: ...  # the integrals and counts of engine.py

class CallbackPass:
    """One pass of a Python policy (aryl.PassView's per-pass attributes, each a
    read-only copy built on first read; ValueError after the pass)."""

    now_s: float
    valid: bool  # the pass is in progress
    queue: _I64
    queue_remaining_s: _F64
    queue_waited_s: _F64
    queue_attained_gpu_s: _F64
    running: _I64
    running_workers: _I64
    running_ptr: _I64
    running_server: _I64
    running_server_workers: _I64
    running_remaining_s: _F64
    running_speed: _F64
    running_attained_gpu_s: _F64
    free_gpus: _I64
    loaned: _I64
    offered: _I64
    server_status: npt.NDArray[np.int8]
    capacity_gpus: int
    servers_needed: int

def new_engine(spec: dict[str, Any]) -> Engine: ...  # keys: aryl/sim/native.py NativeEngine
def widen_in_place(a: npt.NDArray[np.int64]) -> None: ...  # first half int32 -> int64
def schedule_state(
    state: Any,  # aryl.scheduling.ClusterState, read through the CPython API
    prep: dict[str, Any],  # config, speeds, server_type, gpu_types, family
    policy: dict[str, Any],  # kind, return_idle_loans, bound_option, las_thresholds;
    # kind 8 (a Python policy, sched_callback.hpp): also name, loans, elastic, uses_tick,
    # only_starts, decide(statics, CallbackPass) -> None | aryl.Decision,
    # job_label(j) -> str, to_arrays(decision, now_s) -> 9 int64 arrays
    reclaim_fn: Callable[[dict[str, Any], int, int], tuple[list[int], list[int]]] | None,
) -> tuple[Any, ...]: ...  # the plan's fields (aryl/scheduling/native.py plan_from_native)
def __getattr__(name: str) -> Any: ...  # _aryl_* test hooks of sched_aryl_bind.hpp
