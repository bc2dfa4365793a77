"""Package-level behaviour: version, lazy exports, the CLI entry point."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import aryl
from aryl.cli import main
from aryl.errors import InvalidInputError, TraceFormatError


def test_version_is_pep440() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", aryl.__version__)


def test_unknown_attribute_raises() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = aryl.no_such_name  # type: ignore[attr-defined]


def test_errors_are_value_errors_and_name_the_place() -> None:
    err = TraceFormatError("duration is negative", path="t.csv", line=7, column="duration")
    assert isinstance(err, InvalidInputError)
    assert isinstance(err, ValueError)
    assert str(err) == "t.csv, line 7, column 'duration': duration is negative"


def test_cli_version_and_help() -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["--version"])
    assert result.exit_code == 0
    assert aryl.__version__ in result.output
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in ("replay", "compare", "trace", "solve"):
        assert name in result.output


def test_every_public_name_resolves() -> None:
    # __all__ and the lazy table agree, and each name imports from its module.
    for name in aryl.__all__:
        assert getattr(aryl, name) is not None, name
    assert callable(aryl.solve_mckp)
    assert callable(aryl.reclaim)
    assert callable(aryl.simulate)
