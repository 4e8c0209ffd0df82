"""Real Parquet files for the columnar tests, written by pyarrow."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="the Parquet tests need pyarrow (the parquet extra)")
pq = pytest.importorskip("pyarrow.parquet", reason="the Parquet tests need pyarrow")


def table(start: int, n: int):
    """Rows ``start:start+n`` of the test data: every kind of column, with distinct values."""
    ids = np.arange(start, start + n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "x": pa.array([[float(i), -float(i)] for i in ids], pa.list_(pa.float32(), 2)),
        "tokens": pa.array([list(range(i % 5)) for i in ids], pa.list_(pa.int32())),
        "name": pa.array([f"row-{i}" for i in ids], pa.string()),
        "raw": pa.array([bytes([i % 256]) * 3 for i in ids], pa.binary()),
        "meta": pa.array([{"k": int(i), "tag": str(i % 3)} for i in ids],
                         pa.struct([("k", pa.int64()), ("tag", pa.string())])),
    })


def write(path, groups: list[int], start: int = 0, **options) -> int:
    """Write :func:`table` rows as row groups of the given sizes (zeros too); return the count."""
    schema = table(0, 0).schema
    with pq.ParquetWriter(os.fspath(path), schema, **options) as writer:
        for size in groups:
            writer.write_table(table(start, size), row_group_size=max(size, 1))
            start += size
    return sum(groups)


def parquet_bytes(groups: list[int], start: int = 0, **options) -> bytes:
    """The bytes of a file :func:`write` would write (for a server to serve)."""
    out = io.BytesIO()
    schema = table(0, 0).schema
    with pq.ParquetWriter(out, schema, **options) as writer:
        for size in groups:
            writer.write_table(table(start, size), row_group_size=max(size, 1))
            start += size
    return out.getvalue()


def expected_row(i: int) -> dict:
    return {"id": i, "x": [float(i), -float(i)], "tokens": list(range(i % 5)),
            "name": f"row-{i}", "raw": bytes([i % 256]) * 3, "meta": {"k": i, "tag": str(i % 3)}}


def check_row(row: dict, i: int) -> None:
    expected = expected_row(i)
    assert set(row) <= set(expected)
    for key, value in row.items():
        got = value.tolist() if isinstance(value, np.ndarray) else value
        got = got.item() if isinstance(got, np.generic) else got
        assert got == expected[key], (key, i, got, expected[key])
