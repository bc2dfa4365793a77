"""Type stub of the pybind11 reclaim kernel (``_reclaim.cpp`` over ``reclaim.hpp``).

Private: use :func:`aryl.reclaiming.reclaim`, which validates first.  Every
array argument is converted to a C-contiguous ``int64`` array (forcecast).
"""

import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]
_F64 = npt.NDArray[np.float64]

def _kernel_name() -> str: ...
def reclaim_greedy(
    server_id: npt.ArrayLike,  # const int64_t* (m,) unique ids, tie rule only
    server_gpus: npt.ArrayLike,  # const int64_t* (m,)
    server_allowed: npt.ArrayLike,  # const int64_t* (m,) 1 = of the requested GPU type
    placement_job: npt.ArrayLike,  # const int64_t* (p,) job index in [0, J)
    placement_server: npt.ArrayLike,  # const int64_t* (p,) server index in [0, m)
    placement_workers: npt.ArrayLike,  # const int64_t* (p,) >= 1
    job_workers: npt.ArrayLike,  # const int64_t* (J,) total workers everywhere
    job_gpus_per_worker: npt.ArrayLike,  # const int64_t* (J,) >= 1
    job_min_workers: npt.ArrayLike,  # const int64_t* (J,) base, 1 <= base <= workers
    job_elastic: npt.ArrayLike,  # const int64_t* (J,) 0/1
    job_preemptible: npt.ArrayLike,  # const int64_t* (J,) 0/1
    n_return: int,  # int64_t >= 0
) -> tuple[
    _I64,  # taken: server indices, in the order taken
    _F64,  # cost: double, each server's cost when taken
    _I64,  # act_server: server index of each action
    _I64,  # act_job: job index, -1 for RETURN
    _I64,  # act_kind: 0 RETURN, 1 SCALE_IN, 2 PREEMPT
    _I64,  # act_workers: workers removed
    _I64,  # act_reason: ReclaimReason value
    _I64,  # preempted: job indices in order
    _I64,  # scaled: job indices scaled in (not preempted)
    _I64,  # scaled_new_workers: their final totals
    int,  # shortfall: int64_t
]: ...
