"""Figures of replays (matplotlib, Agg backend), written atomically as PNG.

* ``cdf_jct.png``, ``cdf_queuing_delay.png``: empirical CDFs per policy
  (log-scaled x axis, delays of 0 s shown at 1 s).
* ``busy_gpus.png``, ``loaned_servers.png``: the time series per policy, in
  days since the clock start.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from aryl.sim.metrics import SimResult

__all__ = ["plot_results"]


def _save(fig: object, path: Path) -> Path:
    from aryl._io import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")  # type: ignore[attr-defined]
    return atomic_write_bytes(path, buf.getvalue())


def plot_results(results: Mapping[str, SimResult], out_dir: str | Path) -> list[Path]:
    """Write the four figures for one or more policies; returns the paths.

    Parameters
    ----------
    results : mapping policy name -> SimResult
    out_dir : path
        Created if missing.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for col, fname, label in (
        ("jct_s", "cdf_jct.png", "JCT (s)"),
        ("queuing_delay_s", "cdf_queuing_delay.png", "queuing delay (s)"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, res in results.items():
            done = res.jobs[res.jobs["status"] == "finished"]
            x = np.sort(np.maximum(done[col].to_numpy(dtype=np.float64), 1.0))
            if x.size:
                ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=name)
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of jobs")
        ax.grid(alpha=0.3)
        ax.legend()
        paths.append(_save(fig, out / fname))
        plt.close(fig)
    for col, fname, label in (
        ("busy_gpus", "busy_gpus.png", "busy training GPUs"),
        ("loaned_servers", "loaned_servers.png", "loaned inference servers"),
    ):
        fig, ax = plt.subplots(figsize=(8, 3.5))
        for name, res in results.items():
            ts = res.timeseries
            if len(ts):
                days = (ts["time_s"] - ts["time_s"].iloc[0]) / 86400.0
                ax.plot(days, ts[col], label=name, linewidth=0.8)
        ax.set_xlabel("days since start")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
        paths.append(_save(fig, out / fname))
        plt.close(fig)
    return paths
