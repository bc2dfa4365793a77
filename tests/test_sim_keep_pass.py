"""The exact keep pass of the ``aryl`` phase 2 (``ArylPass.keep_exact``) equals the
general one (``ArylPass.keep``) on every call of replays with loans and reclaims."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from aryl.scheduling.aryl import ArylPass
from aryl.sim import SimConfig, simulate
from aryl.traces import load_trace, synthesize_elastic


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    tr = load_trace("itp-c07")
    jobs = tr.jobs.iloc[:600].reset_index(drop=True)
    return synthesize_elastic(tr.replace(jobs=jobs), elastic_fraction=0.7, seed=5).jobs


@pytest.mark.parametrize("policy", ["aryl", "elastic-greedy"])
def test_exact_keep_pass_matches_the_general_one(
    trace: pd.DataFrame, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = ArylPass.keep_exact
    calls = {"n": 0, "changed": 0}

    def checked(
        free: list[int], free_wo_extras: list[int], cand: list[int],
        extras_now: dict[int, dict[int, int]], k: np.ndarray, ext: np.ndarray,
        order_a: np.ndarray, n_run: int, k_l: list[int], g_l: list[int],
        new_extra: dict[int, dict[int, int]],
    ) -> Any:
        # the precondition: free = free_wo_extras + the GPUs of every current extra
        expect = list(free_wo_extras)
        for i, j in enumerate(cand):
            for s, c in extras_now.get(j, {}).items():
                expect[s] += c * g_l[i]
        assert expect == free
        ref_free, ref_k, ref_new = list(free), list(k_l), {}
        ref_order = order_a.tolist()
        ArylPass.keep(ref_free, cand, extras_now, ref_order, ref_k, g_l, ref_new)
        out = exact(free, free_wo_extras, cand, extras_now, k, ext, order_a, n_run,
                    k_l, g_l, new_extra)
        order, touched = out
        assert free == ref_free
        assert order == [i for i in ref_order if ref_k[i] > 0]
        assert [k_l[i] for i in order] == [ref_k[i] for i in order]
        for i in range(n_run):
            j = cand[i]
            ref = ref_new.get(j, {})
            if j in new_extra:  # same extras, in the same order (it shapes the placement)
                assert list(new_extra[j].items()) == list(ref.items())
            else:  # unchanged, so no resize either way
                assert i not in touched
                assert ref == extras_now.get(j, {})
        calls["n"] += 1
        calls["changed"] += len(touched)
        return out

    monkeypatch.setattr(ArylPass, "keep_exact", staticmethod(checked))
    res = simulate(trace, policy=policy, config=SimConfig(  # the Python pass is patched
        n_training_servers=6, n_inference_servers=4, loan_reserve_servers=0, check=True,
        engine="python"))
    assert calls["n"] > 100
    assert calls["changed"] > 0
    assert res.summary["n_scale_in"] > 0
    assert res.summary["n_scale_out"] > 0
    if policy == "aryl":
        assert res.summary["n_reclaims"] > 0
