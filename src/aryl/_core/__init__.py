"""Compiled kernels (private).  Use the public wrappers in :mod:`aryl`.

* ``_mckp``    — exact multiple-choice knapsack (Cython over a C++ header).
* ``_reclaim`` — reclaim greedy with an indexed heap (C++17 via pybind11).

Each kernel has a pure-Python twin in :mod:`aryl._reference` with the same
signature and tie rules; the tests drive both in lockstep.
"""
