"""Long steps show progress: every rich progress bar of the CLI shows an ETA."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.progress import TimeRemainingColumn

from aryl.cli._progress import make_progress

CLI = Path(__file__).resolve().parents[1] / "src" / "aryl" / "cli"


def test_the_bar_has_an_eta_column() -> None:
    bar = make_progress(Console(file=io.StringIO()))
    assert any(isinstance(c, TimeRemainingColumn) for c in bar.columns)


def test_every_bar_of_the_cli_is_made_by_make_progress() -> None:
    for path in CLI.glob("*.py"):
        if path.name == "_progress.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\bProgress\(", text), f"{path.name} builds its own bar"
    used = [p.name for p in CLI.glob("*.py") if "make_progress(" in p.read_text("utf-8")]
    assert {"replay.py", "experiment.py"} <= set(used)


def test_replay_bar_shows_elapsed_time_and_eta() -> None:
    from aryl.cli.replay import _run
    from aryl.sim import SimConfig
    from aryl.traces import Trace

    # 2,000 one-GPU jobs (the bar's threshold), 10 s apart, on one server
    jobs = pd.DataFrame({"job_id": [f"j{i}" for i in range(2000)],
                         "submit_time_s": 10.0 * pd.RangeIndex(2000).to_numpy(),
                         "duration_s": 5.0, "gpus": 1})
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100, color_system=None)
    res = _run(Trace(jobs=jobs, meta={}), "fifo", SimConfig(n_training_servers=1,
               n_inference_servers=0), None, True, None, console)
    assert res.summary["n_finished"] == 2000
    text = buf.getvalue()
    assert "fifo" in text
    assert "/2,000 jobs" in text
    assert re.search(r"eta (\d+:\d\d:\d\d|-:--:--)", text), text[-500:]
    assert re.search(r"elapsed \d+:\d\d:\d\d", text)
