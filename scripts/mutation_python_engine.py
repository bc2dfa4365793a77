"""pytest plugin of ``scripts/mutation.py``: the Python scheduling pass and engine run.

By default ``aryl.schedule`` runs the compiled pass and the simulator the compiled
engine (``SimConfig.engine="native"``), which mutmut cannot mutate: a mutant of
the Python twins would then only be seen by the differential tests.  The
``scheduling`` and ``sim`` groups load this plugin (``-p mutation_python_engine``),
which makes every policy look as if the compiled module had no pass for it, so
``aryl.schedule`` and ``aryl.simulate`` take the Python twins, the code being
mutated.  The compiled pass is held to those twins by the differential tests
(``tests/test_native_*``), which these groups do not run.
"""

from __future__ import annotations

from typing import Any


def pytest_configure(config: Any) -> None:
    import aryl.scheduling.native as native

    def native_policy(policy: Any) -> bool:
        return False

    native.native_policy = native_policy
