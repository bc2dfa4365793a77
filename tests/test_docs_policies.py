"""docs/policies.md: its Python code blocks run, in order, in one namespace (the
guide's three example policies and the runs shown), and the examples' files under
docs/examples/ hold exactly the code the guide shows."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "policies.md"
EXAMPLES = ROOT / "docs" / "examples"

pytestmark = [
    pytest.mark.skipif(not GUIDE.is_file(), reason="docs not present"),
    pytest.mark.skipif(
        not __import__("aryl.sim.native", fromlist=["native_available"]).native_available(),
        reason="needs the compiled engine"),
]


def _blocks() -> list[tuple[str, str]]:
    """(label, code) of each ```python block; the label is the file named on the
    block's first line (``# docs/examples/NAME.py``) or its position."""
    text = GUIDE.read_text(encoding="utf-8")
    out = []
    for i, m in enumerate(re.finditer(r"```python\n(.*?)```", text, flags=re.S)):
        code = m.group(1)
        first = code.splitlines()[0] if code else ""
        label = first[2:].strip() if first.startswith("# docs/examples/") else f"block {i}"
        out.append((label, code))
    return out


def test_the_guide_has_its_examples() -> None:
    labels = [b[0] for b in _blocks()]
    assert "docs/examples/largest_first.py" in labels
    assert "docs/examples/speed_aware_loans.py" in labels
    assert "docs/examples/elastic_extras.py" in labels


@pytest.mark.parametrize("name", ["largest_first.py", "speed_aware_loans.py",
                                  "elastic_extras.py"])
def test_example_files_are_the_guides_code(name: str) -> None:
    code = dict(_blocks())[f"docs/examples/{name}"]
    body = code.split("\n", 1)[1]  # without the "# docs/examples/..." line
    assert body == (EXAMPLES / name).read_text(encoding="utf-8")


def test_the_guides_code_blocks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    ns: dict[str, object] = {"__name__": "guide"}
    try:
        for label, code in _blocks():
            exec(compile(code, f"{GUIDE}:{label}", "exec"), ns)  # the guide's own code
    finally:
        for m in ("largest_first", "speed_aware_loans", "elastic_extras"):
            sys.modules.pop(m, None)
