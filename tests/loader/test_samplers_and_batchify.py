"""Gluon's samplers, batchify functions and dataset operations."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.loader import (
    ArrayDataset,
    BatchSampler,
    Dict,
    FilterSampler,
    IntervalSampler,
    List,
    Pad,
    RandomSampler,
    SequentialSampler,
    SimpleDataset,
    Stack,
    Tuple,
    default_batchify_fn,
)


def test_samplers_yield_gluons_sequences():
    assert list(SequentialSampler(4, start=3)) == [3, 4, 5, 6]
    assert list(IntervalSampler(10, 3)) == [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]
    assert list(IntervalSampler(10, 3, rollover=False)) == [0, 3, 6, 9]
    assert len(IntervalSampler(10, 3, rollover=False)) == 4
    # MXNet 1.9.1 allows interval == length: every index once, in order.
    assert list(IntervalSampler(4, 4)) == [0, 1, 2, 3]
    assert list(IntervalSampler(4, 4, rollover=False)) == [0]
    assert list(FilterSampler(lambda x: x % 2, SimpleDataset(list(range(7))))) == [1, 3, 5]
    assert list(BatchSampler(SequentialSampler(10), 3, "keep")) == \
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    rolling = BatchSampler(SequentialSampler(10), 3, "rollover")
    assert list(rolling) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]] and len(rolling) == 3
    assert list(rolling)[0] == [9, 0, 1]


def test_random_sampler_is_a_seeded_permutation_per_epoch():
    a, b = RandomSampler(20, seed=4), RandomSampler(20, seed=4)
    first, second = list(a), list(a)
    assert sorted(first) == list(range(20)) and first != second
    assert [list(b), list(b)] == [first, second]


@pytest.mark.parametrize("make, message", [
    (lambda: IntervalSampler(5, 6), "interval must be smaller than or equal to length"),
    (lambda: BatchSampler(SequentialSampler(4), 0), "batch_size"),
    (lambda: BatchSampler(SequentialSampler(4), 2, "pad"), "last_batch must be one of"),
    (lambda: SequentialSampler(-1), "length"),
])
def test_bad_sampler_arguments_are_named(make, message):
    with pytest.raises((TypeError, ValueError), match=message):
        make()


@given(lengths=st.lists(st.integers(0, 6), min_size=1, max_size=5),
       round_to=st.sampled_from([None, 1, 4]), pad_val=st.integers(-3, 3))
def test_pad_pads_to_the_longest_rounded_and_returns_lengths(lengths, round_to, pad_val):
    data = [np.arange(n, dtype=np.int64) + 1 for n in lengths]
    out, got = Pad(pad_val=pad_val, ret_length=True, round_to=round_to)(data)
    width = max(lengths) if not round_to else -(-max(lengths) // round_to) * round_to
    assert out.shape == (len(lengths), width) and got.dtype == np.int32
    assert got.tolist() == lengths
    for row, n in zip(out, lengths):
        assert row[:n].tolist() == list(range(1, n + 1)) and (row[n:] == pad_val).all()


def test_pad_along_another_axis_and_the_combinators():
    a, b = np.ones((2, 3)), np.ones((2, 1))
    assert Pad(axis=1, pad_val=-1)([a, b])[1].tolist() == [[1, -1, -1], [1, -1, -1]]
    batch = [([1, 2], "x", 0), ([3], "y", 1)]
    padded, texts, labels = Tuple(Pad(), List(), Stack())(batch)
    assert padded.tolist() == [[1, 2], [3, 0]] and texts == ["x", "y"]
    assert labels.tolist() == [0, 1]
    out = Dict({"a": Stack()}, b=List())([{"a": 1, "b": "s"}, {"a": 2, "b": "t"}])
    assert out["a"].tolist() == [1, 2] and out["b"] == ["s", "t"]
    with pytest.raises(ValueError, match="3 fields but Tuple has 2"):
        Tuple(Stack(), Stack())(batch)
    with pytest.raises(TypeError, match="not callable"):
        Tuple(Stack(), 3)


def test_default_batchify_stacks_like_gluon():
    fields = default_batchify_fn([(np.ones(2), 1), (np.zeros(2), 2)])
    assert isinstance(fields, list) and fields[0].shape == (2, 2) and fields[1].tolist() == [1, 2]
    batch = ArrayDataset(np.arange(6).reshape(3, 2), np.arange(3))[[2, 0]]
    x, y = default_batchify_fn(batch)
    assert x is batch.columns[0] and y.tolist() == [2, 0]


@given(n=st.integers(0, 30), shards=st.integers(1, 7))
def test_shards_partition_the_dataset_with_sizes_differing_by_at_most_one(n, shards):
    data = ArrayDataset(np.arange(n))
    parts = [[int(x) for x in data.shard(shards, k)[:]] for k in range(shards)]
    assert sum(parts, []) == list(range(n))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_dataset_operations_follow_gluon():
    data = ArrayDataset(np.arange(6), np.arange(6) * 10)
    assert [int(x) for x, _ in data.take(2)[:]] == [0, 1]
    assert len(data.take(None)) == 6 and len(data.take(99)) == 6
    assert [int(x) for x, _ in data.filter(lambda e: e[0] % 2 == 0)[:]] == [0, 2, 4]
    assert [int(x) for x, _ in data.sample(SequentialSampler(2, start=4))[:]] == [4, 5]
    assert data.transform(lambda x, y: x + y)[2] == 22
    assert data.transform_first(lambda x: -x)[3] == (-3, 30)
    calls = []
    eager = data.transform(lambda x, y: calls.append(x) or x, lazy=False)
    assert len(calls) == 6 and eager[1] == 1 and len(calls) == 6
    with pytest.raises(ValueError, match="index must be below num_shards=2"):
        data.shard(2, 2)


def test_array_dataset_arguments_are_checked():
    with pytest.raises(ValueError, match="at least one array"):
        ArrayDataset()
    with pytest.raises(ValueError, match="array 0: 2, array 1: 1"):
        ArrayDataset([1, 2], [1])
