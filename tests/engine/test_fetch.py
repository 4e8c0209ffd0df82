"""What a batch is: the same type, mutability and values whatever the iterator.

A list of uniform numpy examples is delivered as a read-only ExampleBatch of
stacked columns; any other batch as the dataset answered it (a mutable list
for a list dataset). Serial, thread and process executors agree, with the
first batch of a process pool split across its workers, and with arrays small
enough to be pickled or large enough to travel through shared memory.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataset_kit import ExampleBatch
from dataset_kit.engine._fetch import as_batch
from dataset_kit.iterators import (
    MultiprocessIterator,
    MultithreadIterator,
    SerialIterator,
)

N, BATCH = 10, 4


def _leaf(kind: str, size: int, i: int):
    if kind == "int":
        return i
    if kind == "np.int64":
        return np.int64(i)
    if kind == "float":
        return i / 3
    if kind == "np.float32":
        return np.float32(i / 3)
    if kind == "array":  # 8 * size bytes: from pickled (small) to shared memory (large)
        return np.full(size, i, np.float64)
    return np.zeros(i % 3 + 1)  # "ragged": shapes differ between examples


LEAVES = st.sampled_from(["int", "np.int64", "float", "np.float32", "array", "ragged"])
SHAPES = st.one_of(
    st.tuples(st.just("leaf"), LEAVES),
    st.tuples(st.just("tuple"), st.lists(LEAVES, min_size=1, max_size=3)),
    st.tuples(st.just("dict"), st.lists(LEAVES, min_size=1, max_size=3)),
)


def _example(shape, size: int, i: int):
    form, kinds = shape
    if form == "leaf":
        return _leaf(kinds, size, i)
    values = [_leaf(kind, size, i) for kind in kinds]
    return tuple(values) if form == "tuple" else {f"k{n}": v for n, v in enumerate(values)}


def _plain(batch) -> list:
    """A batch's examples with every value as a (type name, list) pair, for comparing."""
    def leaf(v):
        return type(v).__name__, np.asarray(v).dtype.str, np.asarray(v).tolist()

    out = []
    for example in batch:
        if isinstance(example, tuple):
            out.append(("tuple", [leaf(v) for v in example]))
        elif isinstance(example, dict):
            out.append(("dict", {k: leaf(v) for k, v in example.items()}))
        else:
            out.append(leaf(example))
    return out


def _describe(batch) -> tuple:
    return type(batch), hasattr(batch, "__setitem__"), _plain(batch)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=SHAPES, size=st.sampled_from([1, 200]), seed=st.integers(0, 2**16))
def test_every_iterator_delivers_the_same_batch_type_mutability_and_values(shape, size, seed):
    dataset = [_example(shape, size, i) for i in range(N)]
    serial = SerialIterator(dataset, BATCH, seed=seed)
    want = [_describe(next(serial)) for _ in range(4)]
    with MultithreadIterator(dataset, BATCH, seed=seed, n_threads=2) as threads:
        assert [_describe(next(threads)) for _ in range(4)] == want
    with MultiprocessIterator(dataset, BATCH, seed=seed, n_processes=2) as processes:
        assert [_describe(next(processes)) for _ in range(4)] == want


def test_as_batch_stacks_only_a_list_of_uniform_numpy_examples():
    assert isinstance(as_batch([np.int64(1), np.int64(2)]), ExampleBatch)
    assert type(as_batch([1, 2])) is list
    assert type(as_batch([np.zeros(1), np.zeros(2)])) is list
    own = ExampleBatch(np.arange(3))
    assert as_batch(own) is own


def test_uniform_numpy_examples_are_an_example_batch_and_python_values_a_list():
    uniform = [(np.zeros(3), np.int64(i)) for i in range(4)]
    python_label = [(np.zeros(3), i) for i in range(4)]
    for iterator in (SerialIterator, MultithreadIterator, MultiprocessIterator):
        with iterator(uniform, 4, shuffle=False) as it:
            batch = next(it)
        assert isinstance(batch, ExampleBatch) and not hasattr(batch, "__setitem__")
        with iterator(python_label, 4, shuffle=False) as it:
            batch = next(it)
        assert type(batch) is list
        batch[0] = None  # a list batch is the caller's to change
