"""take_rows: gathers straight into a worker's block, with numpy's answers everywhere."""

from __future__ import annotations

import mmap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit import _gather, concat_examples
from dataset_kit.batch import ExampleBatch, RaggedColumn
from dataset_kit.datasets import DictDataset, TupleDataset
from dataset_kit.iterators import MultiprocessIterator, SerialIterator
from dataset_kit.tabular import from_data


@pytest.fixture
def arena():
    buffer = mmap.mmap(-1, 1 << 16)
    arena = _gather.Arena(buffer)
    previous = _gather.install(arena)
    yield arena
    _gather.install(previous)


@settings(max_examples=50, deadline=None)
@given(rows=st.integers(1, 20), index=st.lists(st.integers(-25, 25), max_size=12))
def test_take_rows_answers_like_numpy(rows, index):
    array = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    indices = np.asarray(index, dtype=np.int64)
    previous = _gather.install(_gather.Arena(mmap.mmap(-1, 1 << 16)))
    try:
        try:
            want = array[indices]
        except IndexError:
            with pytest.raises(IndexError):
                _gather.take_rows(array, indices)
            return
        np.testing.assert_array_equal(_gather.take_rows(array, indices), want)
    finally:
        _gather.install(previous)


def test_rows_land_in_the_arena_and_are_found_there(arena):
    array = np.arange(40.0).reshape(10, 4)
    got = _gather.take_rows(array, np.array([3, 1, 9]))
    assert arena.offset_of(got) == 0
    np.testing.assert_array_equal(got, array[[3, 1, 9]])
    elsewhere = array[[0, 1]]
    assert arena.offset_of(elsewhere) is None


def test_a_full_arena_falls_back_to_numpy(arena):
    big = np.zeros((2, 1 << 15), np.float64)  # 512 KiB > the 64 KiB arena
    got = _gather.take_rows(big, np.array([1, 0]))
    assert arena.offset_of(got) is None and got.shape == (2, 1 << 15)


def test_stacked_examples_land_in_the_arena(arena):
    examples = [np.full((2, 3), k, np.int16) for k in range(4)]
    got = _gather.stack(examples)
    assert arena.offset_of(got) == 0
    np.testing.assert_array_equal(got, np.stack(examples))
    big = [np.zeros(1 << 14, np.float64)] * 2  # 256 KiB > the 64 KiB arena
    assert arena.offset_of(_gather.stack(big)) is None


def test_examples_allocated_in_the_arena_are_stacked_without_a_copy(arena):
    examples = []
    for k in range(3):
        example = _gather.empty((4, 8), np.float32)  # 128 bytes: back to back
        example[...] = k
        examples.append(example)
    got = _gather.stack(examples)
    assert arena.offset_of(got) == 0 and arena.used == 3 * 128  # no second copy
    assert all(np.shares_memory(got[k], examples[k]) for k in range(3))
    np.testing.assert_array_equal(got, np.stack([np.full((4, 8), k, np.float32)
                                                 for k in range(3)]))


@pytest.mark.parametrize("order", [[1, 0, 2], [0, 0, 1], [0, 2]])
def test_arena_examples_out_of_order_or_repeated_are_copied(arena, order):
    made = [_gather.empty((4, 8), np.float32) for _ in range(3)]
    for k, example in enumerate(made):
        example[...] = k
    examples = [made[k] for k in order]
    got = _gather.stack(examples)
    assert arena.offset_of(got) == 3 * 128  # a copy after them
    np.testing.assert_array_equal(got, np.stack(examples))


def test_unaligned_arena_examples_are_copied(arena):
    examples = [_gather.empty((3,), np.uint8) for _ in range(2)]  # 3 bytes, 64 apart
    for k, example in enumerate(examples):
        example[...] = k
    got = _gather.stack(examples)
    np.testing.assert_array_equal(got, [[0, 0, 0], [1, 1, 1]])
    assert arena.offset_of(got) == 128


def test_empty_outside_a_worker_is_numpy_and_a_full_arena_falls_back(arena):
    assert arena.offset_of(_gather.empty((1 << 14,), np.float64)) is None  # 128 KiB
    previous = _gather.install(None)
    try:
        out = _gather.empty((2, 3), np.int16)
    finally:
        _gather.install(previous)
    assert out.shape == (2, 3) and out.dtype == np.int16 and arena.offset_of(out) is None


@pytest.mark.parametrize("make", [
    lambda x, y: TupleDataset(x, y),
    lambda x, y: DictDataset(x=x, y=y),
    lambda x, y: x,
    lambda x, y: from_data((("x", x), ("y", y))),
])
@pytest.mark.parametrize("converter", [None, concat_examples])
def test_gathered_in_place_batches_equal_serial_and_stay_intact(make, converter):
    x = np.random.default_rng(0).random((48, 3, 8, 8)).astype(np.float32)
    y = np.arange(48, dtype=np.int32)
    ds = make(x, y)
    want = [concat_examples(b) for b in
            (next(it) for it in [SerialIterator(ds, 8, seed=2)] for _ in range(18))]
    with MultiprocessIterator(ds, 8, seed=2, n_processes=2, converter=converter) as it:
        # Batches dropped at once free their blocks, which are lent again and
        # gathered into; the last ones are held while more arrive.
        got, held = [], []
        for k in range(18):
            batch = next(it)
            columns = _arrays(batch if converter else concat_examples(batch))
            got.append([c.copy() for c in columns])
            if k >= 14:
                held.append((columns, got[-1]))
        for _ in range(10):
            next(it)
        for columns, copies in held:
            for a, b in zip(columns, copies):
                np.testing.assert_array_equal(a, b)
    for a, b in zip(got, want):
        for u, v in zip(a, _arrays(b)):
            np.testing.assert_array_equal(u, v)


def _arrays(batch) -> list:
    if isinstance(batch, dict):
        return list(batch.values())
    return list(batch) if isinstance(batch, tuple) else [batch]


def test_concat_examples_in_a_worker_stacks_into_the_arena(arena):
    # concat_examples as a worker's converter: the stacked arrays lie in the block
    # the batch travels in, so the worker copies them no second time.
    batch = [(np.full((2, 3), k, np.float32), np.int64(k)) for k in range(4)]
    images, labels = concat_examples(batch)
    assert arena.offset_of(images) is not None and arena.offset_of(labels) is not None
    np.testing.assert_array_equal(images, np.stack([x for x, _ in batch]))


def test_concat_examples_of_mixed_dtypes_promotes_as_numpy_does_even_in_a_worker(arena):
    got = concat_examples([np.zeros(3, np.int16), np.ones(3, np.float32)])
    assert got.dtype == np.float32 and arena.offset_of(got) is None


def test_concat_examples_pads_ragged_columns_into_the_arena(arena):
    # A padded token column is the batch's result: made in the block it travels in.
    tokens = RaggedColumn(np.arange(9, dtype=np.int32), np.array([0, 4, 4, 9]))
    got = concat_examples(ExampleBatch({"tokens": tokens, "label": np.arange(3)}),
                          padding=-1)
    assert arena.offset_of(got["tokens"]) is not None
    np.testing.assert_array_equal(got["tokens"], [[0, 1, 2, 3, -1], [-1] * 5, [4, 5, 6, 7, 8]])


@settings(max_examples=50, deadline=None)
@given(lengths=st.lists(st.integers(0, 6), min_size=1, max_size=8),
       padding=st.sampled_from([0, -1, 2.5, 300]), in_worker=st.booleans())
def test_padded_rows_equal_numpy_full_in_or_out_of_an_arena(lengths, padding, in_worker):
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    column = RaggedColumn(np.arange(offsets[-1], dtype=np.int16), offsets)
    want = np.full((len(lengths), max(lengths)), padding, np.int16)
    for k, row in enumerate(column):
        want[k, :len(row)] = row
    previous = _gather.install(_gather.Arena(mmap.mmap(-1, 1 << 12)) if in_worker else None)
    try:
        np.testing.assert_array_equal(column.padded(padding, _gather.empty), want)
        np.testing.assert_array_equal(column.padded(padding), want)
    finally:
        _gather.install(previous)
