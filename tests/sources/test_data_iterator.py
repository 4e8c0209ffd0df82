"""DataIterator: NNabla's sizes and callbacks, slices, resume, workers, the factories."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.sources import (
    DataIterator,
    SimpleDataSource,
    data_iterator,
    data_iterator_concat_datasets,
    data_iterator_simple,
    slice_bounds,
)


def _load(i):
    return np.full(3, i, np.float32), np.array([i % 5], np.int32)


def _ids(batch) -> list[int]:
    return [int(v) for v in batch[0][:, 0]]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), batch=st.integers(1, 8), steps=st.integers(0, 30),
       shuffle=st.booleans())
def test_callbacks_fire_at_each_epochs_last_batch(n, batch, steps, shuffle):
    if n < batch:
        with pytest.raises(ValueError, match="no full batch"):
            DataIterator(SimpleDataSource(_load, n, shuffle=shuffle), batch)
        return
    events: list = []
    it = DataIterator(SimpleDataSource(_load, n, shuffle=shuffle), batch, use_thread=False,
                      epoch_begin_callbacks=[lambda e: events.append(("begin", e, it.epoch))],
                      epoch_end_callbacks=[lambda e: events.append(("end", e, it.epoch))])
    per_epoch = n // batch
    assert it.size == per_epoch * batch
    seen: list = []
    for step in range(1, steps + 1):
        seen.append(_ids(it.next()))
        if step % per_epoch == 0:
            e = step // per_epoch - 1
            # end(e) then begin(e + 1), both before next() returned, epoch already e + 1
            assert events[-2:] == [("end", e, e + 1), ("begin", e + 1, e + 1)]
        assert it.epoch == step // per_epoch
        assert it.position == (step % per_epoch) * batch
    assert len(events) == 2 * (steps // per_epoch)
    for e in range(steps // per_epoch):  # each epoch: size examples, none twice
        epoch = [i for b in seen[e * per_epoch:(e + 1) * per_epoch] for i in b]
        assert len(set(epoch)) == it.size


def test_registered_callbacks_join_the_given_ones():
    events: list = []
    it = DataIterator(SimpleDataSource(_load, 4), 2, use_thread=False,
                      epoch_end_callbacks=[lambda e: events.append(("a", e))])
    it.register_epoch_end_callback(lambda e: events.append(("b", e)))
    it.register_epoch_begin_callback(lambda e: events.append(("c", e)))
    for _ in range(4):
        it.next()
    assert events == [("a", 0), ("b", 0), ("c", 1), ("a", 1), ("b", 1), ("c", 2)]
    with pytest.raises(TypeError, match="callback"):
        it.register_epoch_begin_callback(3)


def test_stop_exhausted_ends_after_one_epoch():
    it = DataIterator(SimpleDataSource(_load, 7), 3, stop_exhausted=True, use_thread=False)
    assert [len(b[0]) for b in it] == [3, 3]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(4, 40), batch=st.integers(1, 4), cut=st.integers(0, 25),
       shuffle=st.booleans())
def test_resume_from_any_step_gives_the_same_batches(n, batch, cut, shuffle):
    def make():
        return data_iterator_simple(_load, n, batch, shuffle=shuffle, rng=np.random.RandomState(4),
                                    with_file_cache=False, use_thread=False)

    whole = make()
    expected = [_ids(whole.next()) for _ in range(cut + 8)]
    first = make()
    for _ in range(cut):
        first.next()
    state = json.loads(json.dumps(first.state_dict()))
    second = make()
    second.load_state_dict(state)
    assert [_ids(second.next()) for _ in range(8)] == expected[cut:]


@pytest.mark.parametrize("options", [{"use_thread": True}, {"n_processes": 2}])
def test_threads_and_processes_give_the_same_batches(options):
    def batches(**kw):
        with data_iterator_simple(_load, 37, 4, shuffle=True, rng=np.random.RandomState(9),
                                  with_file_cache=False, **kw) as it:
            return [it.next() for _ in range(20)]

    plain = batches(use_thread=False)
    other = batches(**options)
    for a, b in zip(plain, other):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_the_same_rng_seed_gives_the_same_orders():
    def first_batches(seed):
        it = data_iterator_simple(_load, 30, 5, shuffle=True, rng=np.random.RandomState(seed),
                                  with_file_cache=False, use_thread=False)
        return [_ids(it.next()) for _ in range(6)]

    assert first_batches(1) == first_batches(1) != first_batches(2)


@pytest.mark.parametrize("size,n,expected", [
    # Worked from NNabla's DataIterator.slice (drop_last=False).
    (12, 3, [(0, 4), (4, 8), (8, 12)]),
    (10, 3, [(0, 4), (4, 8), (6, 10)]),
    (10, 4, [(0, 3), (3, 6), (6, 9), (7, 10)]),
])
def test_nnabla_slice_bounds(size, n, expected):
    assert [slice_bounds(size, n, k) for k in range(n)] == expected


@settings(max_examples=30, deadline=None)
@given(slices=st.integers(1, 5), per_slice=st.integers(1, 6), batch=st.integers(1, 3),
       extra=st.integers(0, 2))
def test_slices_partition_the_data(slices, per_slice, batch, extra):
    size = slices * per_slice * batch  # the iterator's size; extra examples are not visited
    parent = data_iterator_simple(_load, size + extra, batch, with_file_cache=False,
                                  use_thread=False)
    if extra >= batch:
        return  # then the parent's size grows; covered by the bounds test
    seen: list[int] = []
    for k in range(slices):
        part = parent.slice(None, num_of_slices=slices, slice_pos=k)
        start, end = slice_bounds(size, slices, k)
        assert part.size == end - start
        ids = [i for _ in range(part.size // batch) for i in _ids(part.next())]
        assert sorted(ids) == list(range(start, end))
        seen += ids
    assert sorted(seen) == list(range(size))


def test_slice_by_range_and_its_cache(tmp_path):
    parent = data_iterator_simple(_load, 40, 4, with_file_cache=True, cache_dir=str(tmp_path),
                                  use_thread=False)
    part = parent.slice(None, slice_start=8, slice_end=16, use_cache=True)
    assert sorted(i for _ in range(2) for i in _ids(part.next())) == list(range(8, 16))
    assert (tmp_path / "cache_sliced_00000008_00000016" / "cache_index.csv").exists()
    assert (tmp_path / "cache_index.csv").exists()  # the parent's cache is untouched


@pytest.mark.parametrize("kwargs,match", [
    ({}, "num_of_slices=None"),
    ({"num_of_slices": 2}, "slice_pos=None"),
    ({"num_of_slices": 2, "slice_pos": 0, "slice_start": 0}, "slice_start=0"),
    ({"slice_start": 0}, "slice_end=None"),
    ({"num_of_slices": 2, "slice_pos": 2}, "slice_pos must be in"),
    ({"num_of_slices": 0, "slice_pos": 0}, "num_of_slices"),
    ({"slice_start": 5, "slice_end": 50}, "slice_end=50"),
])
def test_bad_slice_arguments_are_named(kwargs, match):
    parent = data_iterator_simple(_load, 20, 2, with_file_cache=False, use_thread=False)
    with pytest.raises(ValueError, match=match):
        parent.slice(None, **kwargs)


def test_memory_cache_gives_float32_like_nnabla():
    with data_iterator(SimpleDataSource(_load, 6), 3, use_thread=False) as it:
        x, y = it.next()
    assert x.dtype == np.float32 and y.dtype == np.float32
    with data_iterator(SimpleDataSource(_load, 6), 3, with_memory_cache=False,
                       use_thread=False) as it:
        assert it.next()[1].dtype == np.int32


def test_concat_datasets():
    a = SimpleDataSource(_load, 5)
    b = SimpleDataSource(lambda i: _load(100 + i), 3)
    with data_iterator_concat_datasets([a, b], 8, use_thread=False) as it:
        assert sorted(_ids(it.next())) == [0, 1, 2, 3, 4, 100, 101, 102]


def test_bad_arguments():
    with pytest.raises(TypeError, match="data_source"):
        DataIterator([1, 2], 1)
    with pytest.raises(ValueError, match="batch_size"):
        DataIterator(SimpleDataSource(_load, 4), 0)
    with pytest.raises(TypeError, match="load_func"):
        SimpleDataSource(3, 4)
