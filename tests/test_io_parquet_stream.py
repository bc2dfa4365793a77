"""Parquet output streamed in row groups (``aryl._io.atomic_write_dataframe``).

The oracle is pyarrow's own one-shot ``write_table`` of the whole frame with the
same row-group size: the streamed file must be the same bytes, read back to the
in-memory frame, and an interrupted write must leave nothing behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import aryl._io as aio
from aryl.sim import SimConfig, simulate


def _one_shot(df: pd.DataFrame, rows: int, metadata: dict[str, str] | None = None) -> bytes:
    table = pa.Table.from_pandas(df, preserve_index=False)
    if metadata:
        merged = dict(table.schema.metadata or {})
        merged.update({k.encode(): v.encode() for k, v in metadata.items()})
        table = table.replace_schema_metadata(merged)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=rows)
    return sink.getvalue().to_pybytes()


def test_a_replay_table_streams_to_the_same_file(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    res = simulate("itp-c07", policy="fifo", config=SimConfig(n_training_servers=46))
    jobs = res.jobs  # 12,699 rows: 13 row groups of 1,000 (the last one 699)
    monkeypatch.setattr(aio, "PARQUET_ROW_GROUP_ROWS", 1000)
    path = aio.atomic_write_dataframe(jobs, tmp_path / "jobs.parquet", metadata={"k": "v"})
    assert path.read_bytes() == _one_shot(jobs, 1000, {"k": "v"})
    f = pq.ParquetFile(path)
    assert f.metadata.num_row_groups == 13
    assert f.metadata.row_group(12).num_rows == 699
    assert f.schema_arrow.metadata[b"k"] == b"v"
    pd.testing.assert_frame_equal(pd.read_parquet(path), jobs, check_exact=True)
    assert [p.name for p in tmp_path.iterdir()] == ["jobs.parquet"]


def test_an_empty_frame_keeps_its_columns(tmp_path: Path) -> None:
    df = pd.DataFrame({"a": np.array([], dtype=np.int64), "b": np.array([], dtype=np.float64)})
    path = aio.atomic_write_dataframe(df, tmp_path / "e.parquet")
    assert path.read_bytes() == _one_shot(df, aio.PARQUET_ROW_GROUP_ROWS)
    back = pd.read_parquet(path)
    assert list(back.columns) == ["a", "b"]
    assert len(back) == 0


def test_an_interrupted_write_leaves_the_old_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "t.parquet"
    dest.write_bytes(b"old")
    monkeypatch.setattr(aio, "PARQUET_ROW_GROUP_ROWS", 10)
    calls = []

    class Failing(pq.ParquetWriter):  # type: ignore[misc]
        def write_table(self, table: pa.Table, *args: object, **kwargs: object) -> None:
            calls.append(table.num_rows)
            if len(calls) == 2:  # the second row group
                raise OSError("disk full")
            super().write_table(table, *args, **kwargs)

    monkeypatch.setattr(pq, "ParquetWriter", Failing)
    with pytest.raises(OSError, match="disk full"):
        aio.atomic_write_dataframe(pd.DataFrame({"a": np.arange(25)}), dest)
    assert dest.read_bytes() == b"old"
    assert calls == [10, 10]  # the first row group was written, the second failed
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]  # no temporary file left


# ------------------------------------------------------------------ CSV, streamed


def _gzip_one_shot(text: str) -> bytes:
    """The earlier writer: the whole text, gzip-compressed in memory (mtime 0)."""
    import gzip
    import io

    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        gz.write(text.encode("utf-8"))
    return buf.getvalue()


def test_a_replay_streams_its_csv_files_to_the_one_shot_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = simulate("itp-c07", policy="aryl", config=SimConfig(n_training_servers=46))
    monkeypatch.setattr(aio, "CSV_BLOCK_ROWS", 1000)  # 13 blocks of jobs, more of events
    assert len(res.jobs) > 12_000
    assert len(res.events) > 30_000
    jobs_text = res.jobs.to_csv(index=False, lineterminator="\n")
    path = aio.atomic_write_dataframe(res.jobs, tmp_path / "jobs.csv")
    assert path.read_bytes() == jobs_text.encode("utf-8")
    ev_text = res.events.to_csv(index=False, lineterminator="\n")
    path = aio.atomic_write_dataframe(res.events, tmp_path / "events.csv.gz")
    # the same bytes as the one-shot gzip: no file name (not the temporary file's)
    # and no timestamp in the header
    assert path.read_bytes() == _gzip_one_shot(ev_text)
    back = pd.read_csv(path)
    assert len(back) == len(res.events)
    assert back["job_id"].fillna("").tolist() == res.events["job_id"].astype(str).tolist()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.csv.gz", "jobs.csv"]


@pytest.mark.parametrize("name", ["e.csv", "e.csv.gz"])
def test_an_empty_frame_writes_its_header(tmp_path: Path, name: str) -> None:
    df = pd.DataFrame({"a": np.array([], dtype=np.int64), "b": np.array([], dtype=np.float64)})
    path = aio.atomic_write_dataframe(df, tmp_path / name)
    expected = b"a,b\n" if name.endswith(".csv") else _gzip_one_shot("a,b\n")
    assert path.read_bytes() == expected
    assert list(pd.read_csv(path).columns) == ["a", "b"]


def test_an_interrupted_csv_write_leaves_the_old_file(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "t.csv"
    dest.write_bytes(b"old")
    monkeypatch.setattr(aio, "CSV_BLOCK_ROWS", 10)
    calls: list[int] = []
    real = pd.DataFrame.to_csv

    def failing(self: pd.DataFrame, *args: object, **kwargs: object) -> object:
        calls.append(len(self))
        if len(calls) == 2:  # the second block
            raise OSError("disk full")
        return real(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(pd.DataFrame, "to_csv", failing)
    with pytest.raises(OSError, match="disk full"):
        aio.atomic_write_dataframe(pd.DataFrame({"a": np.arange(25)}), dest)
    assert dest.read_bytes() == b"old"
    assert calls == [10, 10]
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_csv_text_goes_to_the_file_in_small_pieces() -> None:
    """A block's text is formatted into the sink as it goes: no write holds a whole
    block (262,144 rows here would be megabytes), and the bytes are the one-shot's."""
    import io

    n = 300_000
    df = pd.DataFrame({"a": np.arange(n, dtype=np.int64), "b": np.arange(n) / 7.0})

    class Sink(io.BytesIO):
        largest = 0

        def write(self, b: Any) -> int:
            Sink.largest = max(Sink.largest, len(b))
            return super().write(b)

    sink = Sink()
    aio._write_csv_chunks(df, sink)
    assert sink.getvalue() == df.to_csv(index=False, lineterminator="\n").encode("utf-8")
    assert len(sink.getvalue()) > 5_000_000
    assert 0 < Sink.largest <= 1 << 20


@pytest.mark.parametrize("name", ["e.csv", "e.csv.gz"])
def test_text_categoricals_write_as_their_values(tmp_path: Path, name: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Categoricals of text (str or object categories; a missing code; quotes and
    commas; an empty category) and of numbers write the one-shot bytes block by block."""
    monkeypatch.setattr(aio, "CSV_BLOCK_ROWS", 7)
    cats = pd.Index(pd.array(["a", 'q"uote', "x,y", "", "é"], dtype="str"))
    codes = np.array([0, 1, 2, 3, 4, -1, 2, 0, 3, 3, 1, -1, 4, 0, 2, 1, 0], dtype=np.int8)
    df = pd.DataFrame({
        "s": pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(cats)),
        "o": pd.Categorical.from_codes(codes, categories=pd.Index(list(cats), dtype=object)),
        "n": pd.Categorical.from_codes(codes, categories=[1.5, 2.0, 3.25, 4.0, 5.0]),
        "w": np.arange(len(codes), dtype=np.int64),
    })
    want = df.to_csv(index=False, lineterminator="\n")
    assert '"q""uote"' in want
    path = aio.atomic_write_dataframe(df, tmp_path / name)
    expected = want.encode("utf-8") if name.endswith(".csv") else _gzip_one_shot(want)
    assert path.read_bytes() == expected
    assert isinstance(df["s"].dtype, pd.CategoricalDtype)  # the caller's frame unchanged
