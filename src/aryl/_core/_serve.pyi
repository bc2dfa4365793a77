import numpy as np

def fcfs_starts(
    arrival: np.ndarray, service: np.ndarray, cap_t: np.ndarray, cap_v: np.ndarray
) -> np.ndarray: ...
