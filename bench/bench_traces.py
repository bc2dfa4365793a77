"""Trace loading benchmarks.

The Microsoft Philly job table is not bundled (no licence file): it is read
from the path in ``$ARYL_PHILLY_CSV``; the Philly benchmarks are skipped when
it is not set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aryl.traces import load_trace, synthesize_elastic

PHILLY = Path(os.environ.get("ARYL_PHILLY_CSV", "")).expanduser()
needs_philly = pytest.mark.skipif(not PHILLY.is_file(),
                                  reason="set ARYL_PHILLY_CSV to the Philly job table")


@needs_philly
@pytest.mark.benchmark(group="traces-load")
def test_load_philly_full(benchmark) -> None:
    trace = benchmark(load_trace, PHILLY)
    assert trace.n_jobs == 82247


@needs_philly
@pytest.mark.benchmark(group="traces-load")
def test_load_philly_busiest_15d(benchmark) -> None:
    trace = benchmark(load_trace, PHILLY, window="busiest-15d")
    assert trace.n_jobs == 28563


@pytest.mark.benchmark(group="traces-load")
def test_load_preset_itp_c07(benchmark) -> None:
    trace = benchmark(load_trace, "itp-c07")
    assert trace.n_jobs == 12699


@pytest.mark.benchmark(group="traces-synthesis")
def test_synthesize_elastic_itp_all(benchmark) -> None:
    trace = load_trace("itp-all")
    out = benchmark(synthesize_elastic, trace, elastic_fraction=0.5, seed=0)
    assert int(out.jobs["elastic"].sum()) == round(0.5 * 69351)
