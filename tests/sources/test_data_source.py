"""Data sources as datasets: NNabla's attributes, and every iterator consumes them."""

from __future__ import annotations

import numpy as np
import pytest

from dataset_kit import concat_examples
from dataset_kit.iterators import MultiprocessIterator, SerialIterator
from dataset_kit.sources import (
    ConcatDataSource,
    DataSourceWithFileCache,
    DataSourceWithMemoryCache,
    SimpleDataSource,
    SlicedDataSource,
)
from dataset_kit.sources import data_source as data_source_module


def _load(i):
    return np.full(4, i, np.float64), np.array(i % 3)


def test_nnabla_attributes_and_sequential_reading():
    source = SimpleDataSource(_load, 5, shuffle=True)
    assert (source.size, source.variables, source.shuffle, source.position) == \
        (5, ("x0", "x1"), True, 0)
    assert source.next()[0][0] == 0 and source.next()[0][0] == 1 and source.position == 2
    source.reset()
    assert source.position == 0
    source.shuffle = False
    assert not source.shuffle


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
@pytest.mark.parametrize("wrap", ["plain", "memory", "file"])
def test_every_iterator_gives_the_same_batches(wrap, start_method, tmp_path):
    source = SimpleDataSource(_load, 23)
    if wrap == "memory":
        source = DataSourceWithMemoryCache(source)
    elif wrap == "file":
        source = DataSourceWithFileCache(source, tmp_path)
    expected = [concat_examples(next(it)) for it in [SerialIterator(source, 4, seed=2)]
                for _ in range(12)]
    with MultiprocessIterator(source, 4, seed=2, n_processes=2,
                              start_method=start_method) as it:
        got = [concat_examples(next(it)) for _ in range(12)]
    for a, b in zip(got, expected):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_the_memory_cache_stays_out_of_the_way_when_the_data_is_big(monkeypatch):
    calls: list[int] = []

    def load(i):
        calls.append(i)
        return (np.zeros(100, np.uint8),)

    monkeypatch.setattr(data_source_module, "MEMORY_CACHE_MAX_BYTES", 1000)
    big = DataSourceWithMemoryCache(SimpleDataSource(load, 20))  # 20 * 400 bytes > 1000
    big.get_example(3)
    big.get_example(3)
    assert calls.count(3) == 2 and big.get_example(3)[0].dtype == np.uint8
    monkeypatch.setattr(data_source_module, "MEMORY_CACHE_MAX_BYTES", 10**6)
    calls.clear()
    small = DataSourceWithMemoryCache(SimpleDataSource(load, 20))
    small.get_example(3)
    small.get_example(3)
    assert calls.count(3) == 1 and small.get_example(3)[0].dtype == np.float32


def test_sliced_and_concatenated_sources():
    source = SimpleDataSource(_load, 10)
    part = SlicedDataSource(source, slice_start=3, slice_end=7)
    assert part.size == 4 and part.get_example(0)[0][0] == 3
    with pytest.raises(ValueError, match="slice_end=11"):
        SlicedDataSource(source, slice_start=0, slice_end=11)
    both = ConcatDataSource([part, SimpleDataSource(_load, 2)], shuffle=False)
    assert [int(both.get_example(i)[0][0]) for i in range(6)] == [3, 4, 5, 6, 0, 1]
    with pytest.raises(ValueError, match="same variables"):
        ConcatDataSource([source, SimpleDataSource(lambda i: (i,), 2)])
    with pytest.raises(ValueError, match="at least one"):
        ConcatDataSource([])
