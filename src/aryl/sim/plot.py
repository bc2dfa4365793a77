"""Figures of replays (matplotlib, Agg backend), written atomically as PNG.

* ``cdf_jct.png``: empirical CDF of the JCT per policy (log x axis).
* ``cdf_queuing_delay.png``: empirical CDF of the queuing delay per policy on
  a symlog x axis (linear below 1 s), so the jobs that start at arrival
  (delay 0) show as the CDF's value at 0; the legend gives that share.
* ``busy_gpus.png``: GPUs busy with training jobs (on training *and* loaned
  servers) per policy, with the training capacity and, for loaning policies,
  training + loaned capacity.
* ``loaned_servers.png``: loaned inference servers per policy over the
  inference demand (servers needed) and the inference cluster size; the second
  panel zooms on the 3 days with the most loans.  Policies that never loan
  (``fifo``, ``sjf``, ...) get no loan curve, and the titles say so.

Time axes are in days since the clock start.  With several policies the
legend sits outside the axes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from aryl.sim.metrics import SimResult

__all__ = ["plot_results"]

ZOOM_DAYS = 3.0


def _save(fig: object, path: Path) -> Path:
    from aryl._io import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")  # type: ignore[attr-defined]
    return atomic_write_bytes(path, buf.getvalue())


def _legend(ax: Any) -> None:
    """Legend outside the data area (right of the axes)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8)


def _days(ts: Any) -> np.ndarray:
    t = ts["time_s"].to_numpy(dtype=np.float64)
    return (t - t[0]) / 86400.0 if t.size else t


def _zoom_window(results: Mapping[str, SimResult]) -> tuple[float, float]:
    """Start and end (days) of the ``ZOOM_DAYS`` window with the most loaned servers."""
    best_start, best = 0.0, -1.0
    for res in results.values():
        ts = res.timeseries
        if not len(ts):
            continue
        days = _days(ts)
        loaned = ts["loaned_servers"].to_numpy(dtype=np.float64)
        csum = np.concatenate([[0.0], np.cumsum(loaned)])
        ends = np.searchsorted(days, days + ZOOM_DAYS, side="left")
        tot = csum[ends] - csum[np.arange(days.size)]
        i = int(np.argmax(tot))  # first maximum: earliest window
        if tot[i] > best:
            best, best_start = float(tot[i]), float(days[i])
    return best_start, best_start + ZOOM_DAYS


def _loans(res: SimResult, name: str) -> bool:
    """Whether the run's policy loans servers (unknown names: judged by the data)."""
    from aryl.errors import InvalidInputError
    from aryl.policies.base import policy_class

    try:
        return bool(policy_class(str(res.summary.get("policy", name))).loans)
    except InvalidInputError:
        return True


def _loan_titles(results: Mapping[str, SimResult], z0: float, z1: float) -> tuple[str, str]:
    """Titles of the two panels of ``loaned_servers.png`` (whole run, zoom).

    Loans are described only for policies that loan: with none, both panels
    show the inference demand and say so.
    """
    loaning = [name for name, res in results.items() if _loans(res, name)]
    days = f"zoom: days {z0:.1f}-{z1:.1f}"
    if not loaning:
        who = ", ".join(results)
        verb = "never loans" if len(results) == 1 else "never loan"
        return (f"inference demand ({who} {verb} servers)",
                f"{days} (inference demand; {who} {verb})")
    any_loans = any(
        len(results[n].timeseries) and results[n].timeseries["loaned_servers"].max() > 0
        for n in loaning
    )
    what = f"the {ZOOM_DAYS:g} days with the most loans" if any_loans else \
        f"no server was loaned by {', '.join(loaning)}"
    return "loaned inference servers and inference demand", f"{days} ({what})"


def plot_results(results: Mapping[str, SimResult], out_dir: str | Path) -> list[Path]:
    """Write the four figures for one or more policies; returns the paths.

    Parameters
    ----------
    results : mapping policy name -> SimResult
        Runs on the same cluster (capacities are read from the first run's
        ``summary["config"]``).
    out_dir : path
        Created if missing.

    Returns
    -------
    list of Path
        ``cdf_jct.png, cdf_queuing_delay.png, busy_gpus.png, loaned_servers.png``.

    Notes
    -----
    O(n_jobs log n_jobs + n_steps) per policy.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    first = next(iter(results.values()), None)
    cfg: dict[str, Any] = dict(first.summary.get("config", {})) if first is not None else {}
    gps = int(cfg.get("gpus_per_server", 8))
    n_train = int(cfg.get("n_training_servers", 0))
    n_inf = int(cfg.get("n_inference_servers", 0))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    # JCT: log axis (a JCT of 0 s is drawn at 1 s)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, res in results.items():
        done = res.jobs[res.jobs["status"] == "finished"]
        x = np.sort(np.maximum(done["jct_s"].to_numpy(dtype=np.float64), 1.0))
        if x.size:
            ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (s)")
    ax.set_ylabel("fraction of finished jobs")
    ax.set_title("JCT (finish - arrival)")
    ax.grid(alpha=0.3)
    _legend(ax)
    paths.append(_save(fig, out / "cdf_jct.png"))
    plt.close(fig)

    # queuing delay: symlog axis, the CDF starts at P(delay = 0)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, res in results.items():
        done = res.jobs[res.jobs["status"] == "finished"]
        x = np.sort(done["queuing_delay_s"].to_numpy(dtype=np.float64))
        if x.size:
            zero = float(np.count_nonzero(x <= 0) / x.size)
            y = np.arange(1, x.size + 1) / x.size
            line = ax.step(np.concatenate([[0.0], x]), np.concatenate([[zero], y]),
                           where="post", label=f"{name} ({100 * zero:.1f}% wait 0 s)")
            ax.plot([0.0], [zero], "o", color=line[0].get_color(), markersize=4)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlim(left=0.0)
    ax.set_xlabel("queuing delay (s), symlog: linear below 1 s")
    ax.set_ylabel("fraction of finished jobs")
    ax.set_title("queuing delay (first start - arrival);\nthe value at 0 s = share started "
                 "at arrival", fontsize=10)
    ax.grid(alpha=0.3)
    _legend(ax)
    paths.append(_save(fig, out / "cdf_queuing_delay.png"))
    plt.close(fig)

    # busy GPUs with the capacities
    fig, ax = plt.subplots(figsize=(9, 3.8))
    cap = n_train * gps
    for k, (name, res) in enumerate(results.items()):
        ts = res.timeseries
        if not len(ts):
            continue
        c = colours[k % len(colours)]
        days = _days(ts)
        ax.plot(days, ts["busy_gpus"], label=f"{name}: busy", linewidth=0.7, color=c, alpha=0.85)
        loaned = ts["loaned_servers"].to_numpy(dtype=np.float64)
        if loaned.max(initial=0.0) > 0:
            ax.step(days, cap + gps * loaned, where="post", linewidth=1.2, linestyle=":",
                    color="black" if len(results) == 1 else c, alpha=0.8,
                    label=f"{name}: training + loaned GPUs")
    if cap:
        ax.axhline(cap, color="black", linestyle="--", linewidth=1.0,
                   label=f"training GPUs ({cap:,})")
    ax.set_xlabel("days since start")
    ax.set_ylabel("GPUs")
    ax.set_title("GPUs busy with training jobs (training and loaned servers)")
    ax.grid(alpha=0.3)
    _legend(ax)
    paths.append(_save(fig, out / "busy_gpus.png"))
    plt.close(fig)

    # loaned servers over the inference demand: whole run and a zoom
    fig, axes = plt.subplots(2, 1, figsize=(9, 6))
    z0, z1 = _zoom_window(results)
    top_title, zoom_title = _loan_titles(results, z0, z1)
    for ax, zoom in zip(axes, (False, True), strict=True):
        drawn_demand = False
        for k, (name, res) in enumerate(results.items()):
            ts = res.timeseries
            if not len(ts):
                continue
            days = _days(ts)
            if not drawn_demand and "inference_servers_needed" in ts:
                ax.fill_between(days, ts["inference_servers_needed"], step="post",
                                color="0.8", linewidth=0, label="inference demand (servers)")
                drawn_demand = True
            if _loans(res, name):  # a policy that never loans has no loan curve
                ax.step(days, ts["loaned_servers"], where="post", linewidth=0.8,
                        color=colours[k % len(colours)], label=f"{name}: loaned servers")
        if n_inf:
            ax.axhline(n_inf, color="black", linestyle="--", linewidth=1.0,
                       label=f"inference servers ({n_inf})")
        ax.set_ylabel("servers")
        ax.grid(alpha=0.3)
        if zoom:
            ax.set_xlim(z0, z1)
            ax.set_title(zoom_title, fontsize=10)
            ax.set_xlabel("days since start")
        else:
            ax.set_title(top_title, fontsize=10)
            _legend(ax)
    fig.tight_layout()
    paths.append(_save(fig, out / "loaned_servers.png"))
    plt.close(fig)
    return paths
