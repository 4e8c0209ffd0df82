"""NNabla's file cache as a format: written from plain examples, no data source needed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.formats.nnabla_cache import CacheFormatError, CacheReader, write_cache


def rows(reader: CacheReader, indices: list[int]) -> list[np.ndarray]:
    columns = reader.empty_columns(len(indices))
    chunks = np.searchsorted(reader.ends, indices, side="right")
    starts = np.concatenate([[0], reader.ends])
    for where, (i, k) in enumerate(zip(indices, chunks.tolist())):
        reader.gather(k, [i - int(starts[k])], [where], columns)
    return columns


@settings(max_examples=15, deadline=None)
@given(size=st.integers(1, 25), chunk_size=st.integers(1, 10))
def test_a_written_cache_reads_back_every_example(tmp_path_factory, size, chunk_size):
    cache_dir = str(tmp_path_factory.mktemp("cache"))
    asked: list[range] = []

    def examples(positions: range) -> list[tuple]:
        asked.append(positions)
        return [(np.full(2, p, np.int32), float(p)) for p in positions]

    reader = write_cache(cache_dir, ("x", "y"), size, examples, chunk_size=chunk_size)
    try:
        assert [list(r) for r in asked] == [list(range(f, min(f + chunk_size, size)))
                                            for f in range(0, size, chunk_size)]
        assert reader.variables == ("x", "y") and reader.size == size
        x, y = rows(reader, list(range(size)))
        assert np.array_equal(x, np.repeat(np.arange(size), 2).reshape(size, 2))
        assert y.dtype == np.float32 and np.array_equal(y, np.arange(size))
    finally:
        reader.close()


def test_a_failing_example_leaves_nothing_that_looks_complete(tmp_path):
    def examples(positions: range) -> list[tuple]:
        if positions.start >= 4:
            raise RuntimeError("the source broke")
        return [(np.zeros(1),) for _ in positions]

    with pytest.raises(RuntimeError, match="the source broke"):
        write_cache(str(tmp_path), ("x",), 8, examples, chunk_size=4)
    assert list(tmp_path.glob("*.npy")) == [] and not (tmp_path / "cache_index.csv").exists()
    with pytest.raises(CacheFormatError):
        CacheReader(str(tmp_path))
