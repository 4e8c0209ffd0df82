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


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 25), batch=st.integers(1, 12), steps=st.integers(0, 30),
       shuffle=st.booleans())
def test_every_example_is_served_each_epoch_and_batches_run_on(n, batch, steps, shuffle):
    # NNabla's code: size is the source's size, a batch that reaches the end of an
    # epoch runs on into the next, and batch_size > size just wraps.
    events: list = []
    it = DataIterator(SimpleDataSource(_load, n, shuffle=shuffle), batch, use_thread=False,
                      epoch_begin_callbacks=[lambda e: events.append(("begin", e, it.epoch))],
                      epoch_end_callbacks=[lambda e: events.append(("end", e, it.epoch))])
    assert it.size == n
    stream: list[int] = []
    for step in range(1, steps + 1):
        before = it.epoch
        stream += _ids(it.next())
        after = (step * batch) // n
        assert (it.epoch, it.position) == (after, (step * batch) % n)
        # end(e) then begin(e + 1) for every epoch the batch ended, it.epoch reading e, e + 1
        expected = [x for e in range(before, after)
                    for x in (("end", e, e), ("begin", e + 1, e + 1))]
        assert events[len(events) - len(expected):] == expected
    assert len(events) == 2 * ((steps * batch) // n)
    for e in range(len(stream) // n):  # each whole epoch serves every example once
        assert sorted(stream[e * n:(e + 1) * n]) == list(range(n))
    if not shuffle:
        assert stream == [i % n for i in range(len(stream))]


def test_the_last_examples_are_not_lost_without_shuffle():
    it = DataIterator(SimpleDataSource(_load, 10), 3, use_thread=False)
    assert [_ids(it.next()) for _ in range(4)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 0, 1]]
    assert (it.size, it.epoch, it.position) == (10, 1, 2)


def test_a_batch_larger_than_the_source_wraps():
    ends: list[int] = []
    it = DataIterator(SimpleDataSource(_load, 3), 7, use_thread=False,
                      epoch_end_callbacks=[ends.append])
    assert _ids(it.next()) == [0, 1, 2, 0, 1, 2, 0]
    assert (ends, it.epoch, it.position) == ([0, 1], 2, 1)


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


@pytest.mark.parametrize("n,batch,sizes", [(7, 3, [3, 3]), (9, 3, [3, 3, 3]), (4, 5, []),
                                          (0, 2, [])])
def test_stop_exhausted_serves_the_full_batches_of_one_epoch(n, batch, sizes):
    # NNabla's code: one epoch of full batches, then StopIteration, for good; the
    # epoch never ends (the source is never reset), so no callback runs.
    events: list = []
    it = DataIterator(SimpleDataSource(_load, n) if n else _Empty(), batch,
                      stop_exhausted=True, use_thread=False,
                      epoch_begin_callbacks=[events.append], epoch_end_callbacks=[events.append])
    assert [len(b[0]) for b in it] == sizes
    assert (it.epoch, it.position, events) == (0, sum(sizes), [])
    with pytest.raises(StopIteration):
        it.next()


class _Empty(SimpleDataSource):
    def __init__(self):
        super().__init__(_load, 0)
        self._variables = ("x0", "x1")


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), batch=st.integers(1, 12), cut=st.integers(0, 25),
       shuffle=st.booleans(), stop_exhausted=st.booleans())
def test_resume_from_any_step_gives_the_same_batches(n, batch, cut, shuffle, stop_exhausted):
    def make(events):
        return data_iterator_simple(_load, n, batch, shuffle=shuffle, rng=np.random.RandomState(4),
                                    use_thread=False, stop_exhausted=stop_exhausted,
                                    epoch_end_callbacks=[events.append])

    def run(it, steps):
        out = []
        for _ in range(steps):
            try:
                out.append((_ids(it.next()), it.epoch, it.position))
            except StopIteration:
                out.append(None)
        return out

    whole_events: list = []
    expected = run(make(whole_events), cut + 8)
    first = make([])
    run(first, cut)
    state = json.loads(json.dumps(first.state_dict()))
    events: list = []
    second = make(events)
    second.load_state_dict(state)
    assert run(second, 8) == expected[cut:]
    # the callbacks after the resume are those the whole run made after step `cut`
    assert events == whole_events[len(whole_events) - len(events):]


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
@given(size=st.integers(1, 40), slices=st.integers(1, 6), batch=st.integers(1, 4),
       drop_last=st.booleans())
def test_slices_are_cut_from_the_sources_real_size(size, slices, batch, drop_last):
    parent = data_iterator_simple(_load, size, batch, use_thread=False)
    seen: set[int] = set()
    for k in range(slices):
        start, end = slice_bounds(size, slices, k, drop_last)
        if end <= start:
            return  # drop_last with fewer examples than slices: NNabla's empty slices
        part = parent.slice(None, num_of_slices=slices, slice_pos=k, drop_last=drop_last)
        assert part.size == end - start
        ids = [i for _ in range(-(-part.size // batch)) for i in _ids(part.next())]
        assert set(ids) == set(range(start, end))
        seen |= set(ids)
    if not drop_last:  # every example is in some slice
        assert seen == set(range(size))


def test_slices_of_ten_examples_in_batches_of_three():
    parent = data_iterator_simple(_load, 10, 3, use_thread=False)
    parts = [parent.slice(None, num_of_slices=3, slice_pos=k) for k in range(3)]
    assert [p.size for p in parts] == [4, 4, 4]
    assert [sorted(set(_ids(p.next()) + _ids(p.next()))) for p in parts] == \
        [[0, 1, 2, 3], [4, 5, 6, 7], [6, 7, 8, 9]]


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


def _mixed(i):
    return np.full((2, 2), i, np.uint8), [float(i)], np.array(i, np.int32)


@pytest.mark.parametrize("memory", [False, True])
@pytest.mark.parametrize("file", [False, True])
def test_only_non_arrays_become_float32_and_only_in_the_file_cache(memory, file, tmp_path):
    # NNabla's code: the file cache stores a value that is not an array as float32 and
    # an array as it is; the memory cache keeps what its source returned.
    with data_iterator(SimpleDataSource(_mixed, 5), 5, None, memory, file,
                       str(tmp_path) if file else None, use_thread=False) as it:
        x, y, z = it.next()
    assert x.dtype == np.uint8 and z.dtype == np.int32
    assert y.dtype == (np.float32 if file else np.float64)
    assert x[3].tolist() == [[3, 3], [3, 3]] and y[:, 0].tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("memory", [False, True])
def test_data_iterator_cache_without_normalize_returns_what_was_stored(memory, tmp_path):
    from dataset_kit.sources import data_iterator_cache

    with data_iterator(SimpleDataSource(_mixed, 5), 5, with_file_cache=True,
                       cache_dir=str(tmp_path), use_thread=False):
        pass
    with data_iterator_cache(str(tmp_path), 5, normalize=False, with_memory_cache=memory,
                             use_thread=False) as it:
        assert [a.dtype for a in it.next()] == [np.uint8, np.float32, np.int32]
    with data_iterator_cache(str(tmp_path), 5, with_memory_cache=memory,
                             use_thread=False) as it:
        x = it.next()[0]
        assert x.dtype == np.float32 and x.max() == np.float32(4 / 255)


# NNabla 1.39's code: (with_memory_cache, with_file_cache) defaults of each factory.
NNABLA_CACHE_DEFAULTS = {
    "data_iterator": (True, False),
    "data_iterator_simple": (False, False),
    "data_iterator_csv_dataset": (True, True),
    "data_iterator_cache": (True, None),
    "data_iterator_concat_datasets": (True, False),
}


@pytest.mark.parametrize("name", sorted(NNABLA_CACHE_DEFAULTS))
def test_factories_keep_the_signatures_and_nnablas_defaults(name):
    import inspect

    from dataset_kit import sources

    params = inspect.signature(getattr(sources, name)).parameters
    positional = [p for p, v in params.items() if v.kind is v.POSITIONAL_OR_KEYWORD]
    # The seed documentation's positional order: rng, then with_memory_cache, ...
    assert positional[positional.index("rng") + 1:][:1] in (["with_memory_cache"], ["normalize"])
    memory, file = NNABLA_CACHE_DEFAULTS[name]
    assert params["with_memory_cache"].default is memory
    if file is not None:
        assert params["with_file_cache"].default is file
    for keyword, default in (("use_thread", True), ("stop_exhausted", False)):
        assert params[keyword].kind is params[keyword].KEYWORD_ONLY
        assert params[keyword].default is default


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


def test_n_processes_auto_gives_the_batches_of_0_and_3_workers():
    import dataset_kit

    def batches(**kw):
        with data_iterator_simple(_load, 37, 2, shuffle=True, rng=np.random.RandomState(9),
                                  with_file_cache=False, **kw) as it:
            return [[x.tolist() for x in it.next()] for _ in range(40)]

    expected = batches(use_thread=False)
    assert batches(n_processes=3) == expected
    with dataset_kit.profile() as p:
        assert batches(n_processes="auto") == expected
    # The engine's controller decided after 4 and 8 batches, then every 16.
    assert [d["batch"] for d in p.to_json()["decisions"]] == [4, 12, 28]
    with pytest.raises(ValueError, match="memory_limit is for n_processes='auto'"):
        DataIterator(SimpleDataSource(_load, 4), 2, n_processes=2, memory_limit=1 << 30)
