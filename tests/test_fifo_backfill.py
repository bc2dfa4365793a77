"""``fifo-backfill`` (EASY backfilling) on hand-computed scenarios, against strict ``fifo``."""

from __future__ import annotations

import pandas as pd

from aryl.sim import SimConfig, simulate


def _run(rows: list[tuple[str, float, int, float]], policy: str) -> dict[str, tuple[float, float]]:
    df = pd.DataFrame([dict(job_id=j, submit_time_s=t, duration_s=d, gpus=g, gpus_per_worker=1,
                            min_workers=g, max_workers=g, elastic=False, alpha=0.0)
                       for j, t, g, d in rows])
    res = simulate(df, policy=policy, inference=False, config=SimConfig(
        n_training_servers=1, n_inference_servers=0, check=True))
    j = res.jobs.set_index("job_id")
    return {x: (float(j.loc[x, "first_start_s"]), float(j.loc[x, "finish_s"])) for x in j.index}


def test_a_short_job_backfills_before_the_reservation() -> None:
    # One 8-GPU server.  A (t=0, 6 GPUs, 100 s) runs 0..100.  B (t=1, 8 GPUs, 50 s)
    # is the head: shadow time 100 (A's end frees 2 + 6 = 8 GPUs), extra 0.
    # C (t=2, 2 GPUs, 50 s) fits now and ends at 52 <= 100: backfilled, 2..52.
    # D (t=3, 2 GPUs, 200 s) would end after 100 and there is no extra GPU: it waits.
    # At 100 B starts (ends 150); D starts at 150 and ends at 350.
    rows = [("A", 0, 6, 100), ("B", 1, 8, 50), ("C", 2, 2, 50), ("D", 3, 2, 200)]
    got = _run(rows, "fifo-backfill")
    assert got == {"A": (0, 100), "B": (100, 150), "C": (2, 52), "D": (150, 350)}
    # strict fifo: C and D wait behind B, both start at 150
    assert _run(rows, "fifo") == {"A": (0, 100), "B": (100, 150), "C": (150, 200),
                                  "D": (150, 350)}


def test_a_long_job_backfills_on_the_extra_gpus() -> None:
    # A (t=0, 4 GPUs, 100 s).  B (t=1, 6 GPUs, 50 s) is the head: at 100 A frees
    # 4 + 4 = 8 >= 6, shadow 100, extra 2.  C (t=2, 2 GPUs, 500 s) ends after 100
    # but uses only the 2 extra GPUs: started, 2..502.  D (t=3, 2 GPUs, 500 s):
    # no extra GPU left, waits.  At 100 B starts on the 6 free GPUs (8 - C's 2),
    # ends 150; D starts at 150, ends 650.
    rows = [("A", 0, 4, 100), ("B", 1, 6, 50), ("C", 2, 2, 500), ("D", 3, 2, 500)]
    assert _run(rows, "fifo-backfill") == {"A": (0, 100), "B": (100, 150), "C": (2, 502),
                                           "D": (150, 650)}
