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


def _read(source) -> list[int]:
    return [int(source.next()[0][0]) for _ in range(source.size)]


def test_nnabla_attributes_and_sequential_reading():
    source = SimpleDataSource(_load, 5)
    assert (source.size, source.variables, source.shuffle, source.position) == \
        (5, ("x0", "x1"), False, 0)
    assert source.next()[0][0] == 0 and source.next()[0][0] == 1 and source.position == 2
    source.reset()
    assert source.position == 0 and _read(source) == [0, 1, 2, 3, 4]
    source.shuffle = True
    assert source.shuffle


def test_a_simple_source_reads_its_own_shuffled_order_and_apply_order_draws_the_next():
    # NNabla's SimpleDataSource: the order is drawn at construction and by
    # apply_order(); reset() goes back to the start of the same order.
    source = SimpleDataSource(_load, 30, shuffle=True, rng=np.random.RandomState(1))
    first = _read(source)
    assert sorted(first) == list(range(30)) and first != list(range(30))
    assert list(source.order) == first
    source.reset()
    assert _read(source) == first
    with pytest.raises(IndexError, match="reset"):
        source.next()
    source.reset()
    source.apply_order()
    second = _read(source)
    assert sorted(second) == list(range(30)) and second != first


def test_csv_and_concat_sources_draw_a_new_order_at_each_reset(tmp_path):
    from dataset_kit.sources import CsvDataSource

    path = tmp_path / "d.csv"
    path.write_text("x,y\n" + "".join(f"{i},{i}\n" for i in range(20)))
    for source in (CsvDataSource(str(path), shuffle=True),
                   ConcatDataSource([SimpleDataSource(_load, 8), SimpleDataSource(_load, 12)],
                                    shuffle=True)):
        orders = []
        for _ in range(3):
            source.reset()
            orders.append([int(np.ravel(source.next()[0])[0]) for _ in range(source.size)])
        assert all(sorted(o) == sorted(orders[0]) for o in orders)
        assert orders[0] != orders[1] != orders[2]
    plain = CsvDataSource(str(path))
    assert [int(plain.next()[0][0]) for _ in range(20)] == list(range(20))


def test_iterators_own_their_order_whatever_the_source_has_read():
    from dataset_kit.sources import DataIterator

    def batches(read_first):
        source = SimpleDataSource(_load, 11, shuffle=True, rng=np.random.RandomState(3))
        if read_first:
            _read(source)
            source.apply_order()
        it = DataIterator(source, 4, rng=np.random.RandomState(5), use_thread=False)
        return [it.next()[0][:, 0].tolist() for _ in range(6)], source.position

    (plain, _), (after_reading, position) = batches(False), batches(True)
    assert plain == after_reading and position == 11  # the iterator moved nothing


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
    big = DataSourceWithMemoryCache(SimpleDataSource(load, 20))  # 20 * 100 bytes > 1000
    big.get_example(3)
    big.get_example(3)
    assert calls.count(3) == 2 and big.get_example(3)[0].dtype == np.uint8
    monkeypatch.setattr(data_source_module, "MEMORY_CACHE_MAX_BYTES", 10**6)
    calls.clear()
    small = DataSourceWithMemoryCache(SimpleDataSource(load, 20))
    small.get_example(3)
    small.get_example(3)
    assert calls.count(3) == 1 and small.get_example(3)[0].dtype == np.uint8  # kept as it is


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
