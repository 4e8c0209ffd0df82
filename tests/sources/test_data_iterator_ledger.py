"""NNabla's DataIterator passes its file-backed source's fingerprint to the ledger (issue 34)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dataset_kit import ResumeMismatchError
from dataset_kit.engine import ResumeMismatchWarning
from dataset_kit.sources import (
    CacheDataSource,
    ConcatDataSource,
    CsvDataSource,
    DataIterator,
    DataSourceWithFileCache,
    DataSourceWithMemoryCache,
    SlicedDataSource,
)


def write_csv(path, offset: int) -> None:
    path.write_text("x,y\n" + "".join(f"{i + offset},{i % 3}\n" for i in range(12)))
    os.utime(path, ns=(offset + 1, offset + 1))  # another mtime even within the clock's tick


def xs(batch) -> list[int]:
    return np.asarray(batch[0]).ravel().astype(int).tolist()


SOURCES = {
    "csv": lambda path: CsvDataSource(str(path), shuffle=True),
    "sliced": lambda path: SlicedDataSource(CsvDataSource(str(path)), shuffle=True,
                                            slice_start=1, slice_end=11),
    "concat": lambda path: ConcatDataSource([CsvDataSource(str(path))] * 2),
    "memory": lambda path: DataSourceWithMemoryCache(CsvDataSource(str(path)), shuffle=True),
}


def iterator(source) -> DataIterator:
    return DataIterator(source, 3, rng=np.random.RandomState(0), use_thread=False)


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_a_rewritten_csv_is_refused_naming_its_files_and_the_iterator_is_unchanged(tmp_path,
                                                                                   kind):
    path = tmp_path / "data.csv"
    write_csv(path, 0)
    saved = iterator(SOURCES[kind](path))
    saved.next()
    state = saved.state_dict()
    assert state["engine"]["ledger"]["fingerprint"]
    write_csv(path, 100)
    it, twin = iterator(SOURCES[kind](path)), iterator(SOURCES[kind](path))
    with pytest.raises(ResumeMismatchError, match="files changed") as info:
        it.load_state_dict(state)
    assert info.value.cause == "files"
    assert [xs(it.next()) for _ in range(4)] == [xs(twin.next()) for _ in range(4)]
    with pytest.warns(ResumeMismatchWarning, match="files changed"):
        iterator(SOURCES[kind](path)).load_state_dict(state, strict=False)


def test_a_rewritten_cache_is_refused_and_a_temporary_cache_of_unchanged_data_is_not(tmp_path):
    path = tmp_path / "data.csv"
    write_csv(path, 0)
    DataSourceWithFileCache(CsvDataSource(str(path)), str(tmp_path / "cache")).close()
    saved = iterator(CacheDataSource(str(tmp_path / "cache")))
    saved.next()
    state = saved.state_dict()
    for name in os.listdir(tmp_path / "cache"):
        if name.endswith(".npy"):
            os.utime(tmp_path / "cache" / name, ns=(7, 7))
    with pytest.raises(ResumeMismatchError) as info:
        iterator(CacheDataSource(str(tmp_path / "cache"))).load_state_dict(state)
    assert info.value.cause == "files"
    # A temporary cache is new files each run: its identity is the cached source's.
    first = iterator(DataSourceWithFileCache(CsvDataSource(str(path)), shuffle=True))
    first.next()
    again = iterator(DataSourceWithFileCache(CsvDataSource(str(path)), shuffle=True))
    again.load_state_dict(first.state_dict())
    assert xs(again.next()) == xs(first.next())
    write_csv(path, 100)
    with pytest.raises(ResumeMismatchError):
        iterator(DataSourceWithFileCache(CsvDataSource(str(path)))).load_state_dict(
            first.state_dict())
