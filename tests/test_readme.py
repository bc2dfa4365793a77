"""The README's Python example runs and says what its comments claim."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.skipif(not README.exists(), reason="README not shipped with this install")
def test_readme_python_example() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    scope: dict[str, object] = {}
    exec(compile(blocks[0], str(README), "exec"), scope)
    res = scope["res"]
    assert res.value == 13.5  # type: ignore[attr-defined]
    np.testing.assert_array_equal(res.choice, [1, 1])  # type: ignore[attr-defined]
    assert res.used_gpus == 6  # type: ignore[attr-defined]
    plan = scope["plan"]
    np.testing.assert_array_equal(plan.servers, [1])  # type: ignore[attr-defined]
    np.testing.assert_array_equal(plan.scaled_new_workers, [8])  # type: ignore[attr-defined]
    assert len(plan.preempted_jobs) == 0  # type: ignore[attr-defined]
    (decision,) = scope["reply"].decisions  # type: ignore[attr-defined]
    assert decision.target_workers == 6
    step = scope["step"]
    assert [(j, p) for j, p, _ in step.starts] == [(0, {0: 8, 1: 8})]  # type: ignore[attr-defined]
    assert [r.name for _, r in step.borrowed_servers] == ["LOAN_FOR_EXTRA"]  # type: ignore[attr-defined]
    result = scope["result"]
    assert result.summary["n_finished"] == 12_699  # type: ignore[attr-defined]
