"""Fixtures shared by test files (pytest hands them to any test that names them)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# the tests' own helper modules (replay_identity, sweep_helpers) import by name
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

#: two training pools of different server sizes and an inference pool of a third:
#: ``small`` 1 x 4-GPU V100 (server 0), ``big`` 1 x 8-GPU V100 (server 1), ``inf``
#: 2 x 2-GPU servers (servers 2 and 3) of the GPU type the test names
_MIXED_CLUSTER = """
[[pools]]
name = "small"
role = "training"
n_servers = 1
gpus_per_server = 4
gpu_type = "V100"

[[pools]]
name = "big"
role = "training"
n_servers = 1
gpus_per_server = 8
gpu_type = "V100"

[[pools]]
name = "inf"
role = "inference"
n_servers = 2
gpus_per_server = 2
gpu_type = "{inference_gpu_type}"
"""


@pytest.fixture
def mixed_cluster(tmp_path: Path) -> Callable[..., Path]:
    """Writes the mixed cluster spec (4- and 8-GPU training pools, 2 x 2-GPU inference).

    Call it with the inference pool's GPU type (default ``"V100"``); it returns the
    TOML file's path in the test's ``tmp_path``.
    """
    def write(inference_gpu_type: str = "V100") -> Path:
        path = tmp_path / f"mixed-{inference_gpu_type}.toml"
        path.write_text(_MIXED_CLUSTER.format(inference_gpu_type=inference_gpu_type))
        return path

    return write


@pytest.fixture(scope="session")
def quick_experiment(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One ``aryl experiment paper --quick`` run: its output folder and terminal text.

    Shared by tests/test_experiment.py (the tables recomputed from runs.csv) and
    tests/test_printed_vs_data.py (every printed cell against its CSV), which read it
    only.  250 columns: every table row whole on one line (the 60- and 80-column
    layouts are tests/test_cli_tables.py's).
    """
    from click.testing import CliRunner

    from aryl.cli import main

    out = tmp_path_factory.mktemp("paper") / "out"
    result = CliRunner().invoke(
        main, ["experiment", "paper", "--quick", "--out", str(out), "-j", "1",
               "--reclaim-instances", "40"], env={"COLUMNS": "250"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out, result.output
