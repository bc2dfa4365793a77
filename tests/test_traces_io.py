"""Atomic writes (``aryl._io``)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from aryl._io import atomic_write_bytes, atomic_write_dataframe, atomic_write_text
from aryl.errors import InvalidInputError


def test_write_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    atomic_write_text(path, "old")
    atomic_write_text(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_failed_write_keeps_old_file(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    atomic_write_bytes(path, b"old")
    with pytest.raises(TypeError):
        atomic_write_bytes(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]
    with pytest.raises(InvalidInputError, match="does not exist"):
        atomic_write_bytes(tmp_path / "nope" / "f.bin", b"x")


def test_dataframe_by_suffix(tmp_path: Path) -> None:
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    atomic_write_dataframe(df, tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text() == "a,b\n1,x\n2,y\n"
    atomic_write_dataframe(df, tmp_path / "t.csv.gz")
    assert gzip.decompress((tmp_path / "t.csv.gz").read_bytes()) == b"a,b\n1,x\n2,y\n"
    atomic_write_dataframe(df, tmp_path / "t.parquet", metadata={"k": "v"})
    assert pq.read_schema(tmp_path / "t.parquet").metadata[b"k"] == b"v"
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "t.parquet"), df)
    with pytest.raises(InvalidInputError, match="suffix"):
        atomic_write_dataframe(df, tmp_path / "t.xlsx")
