"""Build the compiled core: only the extension modules live here.

All metadata is in ``pyproject.toml``.  Four modules:

* ``aryl._core._mckp``    — the multiple-choice knapsack (Cython, C++ mode).
* ``aryl._core._reclaim`` — the reclaim greedy (C++17, pybind11).
* ``aryl._core._sched``   — the scheduling pass and simulator engine (C++17, pybind11).
* ``aryl._core._serve``   — the FCFS request queue of the serving replay (C++17, pybind11).

Developers may set ``ARYL_EXTENSIONS=mckp`` (comma-separated short names) to
rebuild only some kernels in place while another is being edited.
"""

from __future__ import annotations

import os

import numpy as np
from Cython.Build import cythonize
from pybind11.setup_helpers import Pybind11Extension
from setuptools import Extension, setup

# Portable flags only: no -march=native (wheels must run on any x86-64 / aarch64).
CXX_FLAGS = ["-O3", "-std=c++17"] if os.name != "nt" else ["/O2", "/std:c++17"]

mckp = Extension(
    "aryl._core._mckp",
    sources=["src/aryl/_core/_mckp.pyx"],
    depends=["src/aryl/_core/mckp.hpp"],
    include_dirs=[np.get_include(), "src/aryl/_core"],
    language="c++",
    extra_compile_args=CXX_FLAGS,
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
)

reclaim = Pybind11Extension(
    "aryl._core._reclaim",
    sources=["src/aryl/_core/_reclaim.cpp"],
    depends=["src/aryl/_core/reclaim.hpp"],
    include_dirs=["src/aryl/_core"],
    cxx_std=17,
    extra_compile_args=["-O3"] if os.name != "nt" else ["/O2"],
)

# The scheduling pass and simulator engine.  -ffp-contract=off: no fused
# multiply-add, so every float operation is the Python twin's (bit-identical replays).
sched = Pybind11Extension(
    "aryl._core._sched",
    sources=["src/aryl/_core/_sched.cpp"],
    depends=[
        "src/aryl/_core/sched_state.hpp",
        "src/aryl/_core/sched_plan.hpp",
        "src/aryl/_core/sched_place.hpp",
        "src/aryl/_core/sched_simple.hpp",
        "src/aryl/_core/sched_pass.hpp",
        "src/aryl/_core/sched_aryl.hpp",
        "src/aryl/_core/sched_aryl_bind.hpp",
        "src/aryl/_core/sim_engine.hpp",
        "src/aryl/_core/reclaim.hpp",
        "src/aryl/_core/mckp.hpp",
    ],
    include_dirs=["src/aryl/_core"],
    cxx_std=17,
    extra_compile_args=["-O3", "-ffp-contract=off"] if os.name != "nt" else ["/O2", "/fp:precise"],
)

serve = Pybind11Extension(
    "aryl._core._serve",
    sources=["src/aryl/_core/_serve.cpp"],
    depends=["src/aryl/_core/serve.hpp"],
    include_dirs=["src/aryl/_core"],
    cxx_std=17,
    extra_compile_args=["-O3"] if os.name != "nt" else ["/O2"],
)

ALL = {"mckp": mckp, "reclaim": reclaim, "sched": sched, "serve": serve}
selected = os.environ.get("ARYL_EXTENSIONS")
names = [n.strip() for n in selected.split(",") if n.strip()] if selected else list(ALL)
unknown = sorted(set(names) - set(ALL))
if unknown:
    raise SystemExit(f"ARYL_EXTENSIONS: unknown kernel(s) {unknown}; known: {sorted(ALL)}")

cython_exts = [ALL[n] for n in names if n == "mckp"]
other_exts = [ALL[n] for n in names if n != "mckp"]

setup(
    # The extensions compile side by side, one per core: a build takes about as long as
    # its longest extension (_sched), not the sum of the four.
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
    ext_modules=cythonize(
        cython_exts,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
    + other_exts,
)
