"""The default multiprocess path: uniform examples travel as stacked columns.

A worker lays a batch of uniform examples (same structure, shapes and dtypes)
out as one stacked column per element in shared memory, so concat_examples in
the main process returns those columns without copying; ragged or mixed
examples keep travelling as lists. The first batch of a fresh pool is split
across the workers. Neither changes a batch.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit import DatasetMixin, ExampleBatch, concat_examples, example_rng
from dataset_kit.iterators import MultiprocessIterator, SerialIterator


class Images(DatasetMixin):
    """Uniform tuples (a CHW view of an HWC array, a numpy scalar), with augmentation."""

    def __len__(self) -> int:
        return 40

    def get_example(self, i):
        hwc = np.full((6, 5, 3), i, np.float32) + example_rng().random()
        return hwc.transpose(2, 0, 1), np.int32(i % 7)


class Dicts(Images):
    def get_example(self, i):
        image, label = super().get_example(i)
        return {"image": image, "label": label}


class Ragged(Images):
    def get_example(self, i):
        return np.zeros(i % 3 + 1, np.float32), np.int32(i)


class PythonLabels(Images):
    def get_example(self, i):
        return np.zeros(4, np.float32), i  # a Python int stays a Python int


def _take(it, k):
    return [next(it) for _ in range(k)]


def _same(got, want) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if isinstance(b, dict):
            assert a.keys() == b.keys()
            a, b = tuple(a.values()), tuple(b.values())
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
            assert np.asarray(x).dtype == np.asarray(y).dtype


@pytest.mark.parametrize("dataset", [Images(), Dicts()])
def test_uniform_examples_arrive_as_columns_of_shared_views(dataset):
    expected = _take(SerialIterator(dataset, 8, seed=1), 10)
    with MultiprocessIterator(dataset, 8, seed=1, n_processes=2) as it:
        for k, want in enumerate(expected):
            batch = next(it)
            _same(batch, want)
            if k == 0:
                continue  # the first batch is joined from the workers' halves
            assert isinstance(batch, ExampleBatch)
            columns = concat_examples(batch)
            arrays = columns.values() if isinstance(columns, dict) else columns
            assert all(a.base is not None for a in arrays)  # views, not copies
            want_columns = concat_examples(want)
            if isinstance(want_columns, dict):
                columns, want_columns = tuple(columns.values()), tuple(want_columns.values())
            for a, b in zip(columns, want_columns):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dataset", [Ragged(), PythonLabels()])
def test_other_examples_keep_travelling_as_lists(dataset):
    expected = _take(SerialIterator(dataset, 6, seed=2), 8)
    with MultiprocessIterator(dataset, 6, seed=2, n_processes=2) as it:
        got = _take(it, 8)
    assert all(type(batch) is list for batch in got)
    for a, b in zip(got, expected):
        _same(a, b)
    assert all(type(example[1]) is type(want[1]) for batch, wants in zip(got, expected)
               for example, want in zip(batch, wants))


@settings(max_examples=10, deadline=None)
@given(batch=st.integers(1, 13), workers=st.integers(1, 3), seed=st.integers(0, 100),
       start_method=st.sampled_from(["fork", "spawn"]))
def test_the_split_first_batch_and_the_rest_equal_serial(batch, workers, seed, start_method):
    expected = _take(SerialIterator(Images(), batch, seed=seed), 4)
    with MultiprocessIterator(Images(), batch, seed=seed, n_processes=workers,
                              start_method=start_method) as it:
        got = _take(it, 4)
    for a, b in zip(got, expected):
        _same(a, b)


class ShapeChangesMidBatch(Images):
    """Each half of the first batch is uniform on its own, but with another shape."""

    def get_example(self, i):
        return np.full(3 if i < 4 else 4, i, np.float32), np.int32(i)


def test_a_split_first_batch_whose_halves_differ_in_shape_equals_serial():
    expected = _take(SerialIterator(ShapeChangesMidBatch(), 8, shuffle=False), 3)
    with MultiprocessIterator(ShapeChangesMidBatch(), 8, shuffle=False, n_processes=2) as it:
        got = _take(it, 3)
    assert type(got[0]) is list  # ragged across the batch: a list, as one worker gives
    for a, b in zip(got, expected):
        _same(a, b)
