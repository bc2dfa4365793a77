"""Trace summary figures against hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aryl.traces import Trace
from aryl.traces.summary import gpu_histogram, offered_load, summarize


def _trace() -> Trace:
    jobs = pd.DataFrame({
        "job_id": pd.array(["a", "b", "c", "d"], dtype="str"),
        "submit_time_s": np.array([0.0, 100.0, 150.0, 200.0]),
        "duration_s": np.array([200.0, 50.0, 10.0, 100.0]),
        "gpus": np.array([1, 4, 4, 2], dtype=np.int64),
    })
    return Trace(jobs=jobs, source="hand", format="canonical", dropped={"zero_gpus": 2})


def test_offered_load_by_hand() -> None:
    load = offered_load(_trace(), n_bins=2)
    # bins [0, 100), [100, 200]: a gives 100 GPU-s to each; b 4 x 50 and c 4 x 10 to bin 2;
    # d starts at 200 (overlap 0)
    assert load["start_s"].tolist() == [0.0, 100.0]
    assert load["gpus"].tolist() == pytest.approx([1.0, (100 + 200 + 40) / 100])


def test_summary_and_histogram() -> None:
    s = summarize(_trace())
    assert s["n_jobs"] == 4
    assert s["span_s"] == 200.0
    assert s["gpu_hours"] == pytest.approx((200 + 200 + 40 + 200) / 3600)
    # between the first and last submit [0, 200]: a 200, b 4 x 50, c 4 x 10, d 0 GPU-s
    assert s["mean_offered_load_gpus"] == pytest.approx(440 / 200)
    # = the mean of the offered-load table, for any bins: (1.0 + 3.4) / 2 with two
    for n_bins in (1, 2, 7):
        assert offered_load(_trace(), n_bins)["gpus"].mean() == pytest.approx(440 / 200)
    # all the work (d's 200 GPU-s run after the last submit) over the span
    assert s["submitted_load_gpus"] == pytest.approx(640 / 200)
    assert s["gpu_hours_after_last_submit"] == pytest.approx(200 / 3600)
    assert s["duration_p50_s"] == pytest.approx(75.0)
    assert s["dropped"] == {"zero_gpus": 2}
    hist = gpu_histogram(_trace())
    assert hist["gpus"].tolist() == [1, 2, 4]
    assert hist["n_jobs"].tolist() == [1, 1, 2]
    assert hist["share"].tolist() == [0.25, 0.25, 0.5]
