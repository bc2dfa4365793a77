"""``aryl replay`` / ``aryl compare``: bad options name the option; the run says what it ran."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from aryl.cli import main
from aryl.cli.replay import POLICIES, RECLAIM_POLICIES


def test_cli_choices_match_the_registries() -> None:
    from aryl.reclaiming import RECLAIM_POLICIES as registry
    from aryl.scheduling import available_policies

    assert sorted(POLICIES) == sorted(available_policies())
    assert set(RECLAIM_POLICIES) == set(registry)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--training-servers", "0"], "--training-servers"),
        (["--reclaim-policy", "greedy"], "--reclaim-policy"),
        (["--policy", "aryll"], "--policy"),
        (["--elastic-fraction", "1.5"], "--elastic-fraction"),
        (["--gpus-per-server", "0"], "--gpus-per-server"),
        (["--seed", "-1"], "--seed"),
    ],
)
def test_bad_option_is_a_usage_error_naming_it(args: list[str], option: str) -> None:
    r = CliRunner().invoke(main, ["replay", *args])
    assert r.exit_code == 2, r.output
    assert option in r.output


@pytest.mark.parametrize(
    ("args", "prefix", "code"),
    [
        # checked with every other setting before the trace is read: a usage error
        (["--inference", "foo"], "Error: --inference: expected 'bundled', 'diurnal', 'none'", 2),
        (["--trace", "itp-c7"], "Error: --trace/--window: ", 2),  # input errors: 2 everywhere
    ],
)
def test_bad_value_names_the_option(args: list[str], prefix: str, code: int) -> None:
    r = CliRunner().invoke(main, ["replay", *args])
    assert r.exit_code == code, r.output
    assert r.output.strip().splitlines()[-1].startswith(prefix), r.output


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    rows = [{"job_id": f"j{i}", "submit_time_s": 100.0 * i, "duration_s": 1000.0, "gpus": 8}
            for i in range(6)]
    path = tmp_path / "tiny.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_run_header_says_what_is_replayed(tiny: Path) -> None:
    r = CliRunner().invoke(main, ["replay", "--trace", str(tiny), "--training-servers", "2",
                                  "--inference-servers", "1", "--policy", "aryl"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "6 jobs on 2 training + 1 inference servers (8 GPUs each)" in flat
    assert "50% of jobs elastic" in flat
    assert "seed 0" in flat


def test_fifo_header_does_not_claim_elastic_jobs(tiny: Path) -> None:
    # fifo runs every job at its traced size: the elastic share does not apply to it
    r = CliRunner().invoke(main, ["replay", "--trace", str(tiny), "--training-servers", "2",
                                  "--inference-servers", "1", "--policy", "fifo"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "elastic" not in flat.split("aryl replay")[0]
    assert "every job at its traced size (fifo does not scale jobs)" in flat
    # compare names which policies get the elastic share
    r = CliRunner().invoke(main, ["compare", "--trace", str(tiny), "--training-servers", "2",
                                  "--inference-servers", "1", "--policies", "fifo,aryl,sjf"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "50% of jobs elastic under aryl; traced sizes under fifo, sjf" in flat


def test_auto_sizing_message_shows_the_numbers_used(tiny: Path) -> None:
    # six 8-GPU jobs of 1,000 s, 100 s apart: 1 server -> fifo delays 0, 900, 1800, ...
    r = CliRunner().invoke(main, ["replay", "--trace", str(tiny), "--training-servers", "auto",
                                  "--policy", "fifo"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "None" not in flat
    assert "+ 16 inference servers" in flat  # not auto: the default


def test_compare_lists_an_unlisted_baseline(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    r = CliRunner().invoke(main, ["compare", "--trace", str(tiny), "--training-servers", "1",
                                  "--inference-servers", "1", "--policies", "sjf",
                                  "--baseline", "fifo", "--out", str(out)])
    assert r.exit_code == 0, r.output
    table = pd.read_csv(out / "compare.csv")
    assert list(table["policy"]) == ["fifo", "sjf"]
    fifo = table.iloc[0]
    assert fifo["queuing_delay_ratio"] == 1.0
    assert fifo["jct_ratio"] == 1.0
