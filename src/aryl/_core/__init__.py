"""Compiled kernels (private).  Use the public wrappers in :mod:`aryl`.

* ``_mckp``    — exact multiple-choice knapsack (Cython over a C++ header).
* ``_reclaim`` — reclaim greedy with an indexed heap (C++17 via pybind11).
* ``_sched``   — the scheduling pass and the simulator's event loop (C++17 via
  pybind11); twins: :mod:`aryl.scheduling` and :mod:`aryl.sim.engine`.

Each kernel has a pure-Python twin in :mod:`aryl._reference` with the same
signature and tie rules; the tests drive both in lockstep.
"""
