import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.datasets import (
    SubDataset,
    TupleDataset,
    get_cross_validation_datasets,
    get_cross_validation_datasets_random,
    split_dataset,
    split_dataset_n,
    split_dataset_n_random,
    split_dataset_random,
)

BASE = list(range(100, 120))


def as_list(ds):
    return [ds[i] for i in range(len(ds))]


def test_sub_dataset_without_order():
    sub = SubDataset(BASE, 3, 7)
    assert as_list(sub) == BASE[3:7]
    assert sub[-1] == BASE[6]
    assert sub[1:3] == BASE[4:6]


def test_sub_dataset_with_order():
    order = list(reversed(range(20)))
    sub = SubDataset(BASE, 0, 3, order)
    assert as_list(sub) == [119, 118, 117]


def test_sub_dataset_keeps_batches_of_array_datasets():
    x = np.arange(10)
    sub = SubDataset(TupleDataset(x), 2, 8, np.arange(10)[::-1])
    batch = sub[[0, 1]]
    assert [int(e[0]) for e in batch] == [7, 6]


@pytest.mark.parametrize("start, finish", [(-1, 3), (3, 2), (0, 21)])
def test_sub_dataset_rejects_bad_bounds(start, finish):
    with pytest.raises(ValueError, match=f"start={start}, finish={finish}"):
        SubDataset(BASE, start, finish)


def test_sub_dataset_rejects_order_of_wrong_length():
    with pytest.raises(ValueError, match="length of the base dataset"):
        SubDataset(BASE, 0, 2, [0, 1])


@given(n=st.integers(0, 30), data=st.data())
def test_split_dataset_covers_everything_once(n, data):
    at = data.draw(st.integers(0, n))
    first, second = split_dataset(list(range(n)), at)
    assert as_list(first) + as_list(second) == list(range(n))
    assert len(first) == at


def test_split_dataset_rejects_out_of_range_split():
    with pytest.raises(ValueError, match="split_at.*21"):
        split_dataset(BASE, 21)


def test_split_dataset_random_is_a_seeded_partition():
    a1, b1 = split_dataset_random(BASE, 5, seed=3)
    a2, b2 = split_dataset_random(BASE, 5, seed=3)
    assert as_list(a1) == as_list(a2) and as_list(b1) == as_list(b2)
    assert sorted(as_list(a1) + as_list(b1)) == BASE
    assert len(a1) == 5


@given(n=st.integers(1, 40), data=st.data())
def test_split_dataset_n_partitions_with_sizes_differing_by_at_most_one(n, data):
    parts = data.draw(st.integers(1, n))
    subsets = split_dataset_n(list(range(n)), parts, balanced=True)
    assert len(subsets) == parts
    assert sum((as_list(s) for s in subsets), []) == list(range(n))
    sizes = [len(s) for s in subsets]
    assert max(sizes) - min(sizes) <= 1


@given(n=st.integers(0, 40), parts=st.integers(1, 12))
def test_split_dataset_n_by_default_makes_equal_parts_and_drops_the_tail_like_chainer(n, parts):
    subsets = split_dataset_n(list(range(n)), parts)
    size = n // parts
    assert [as_list(s) for s in subsets] == [list(range(k * size, (k + 1) * size))
                                             for k in range(parts)]


def test_split_dataset_n_random_partitions():
    subsets = split_dataset_n_random(BASE, 3, seed=0, balanced=True)
    assert sorted(sum((as_list(s) for s in subsets), [])) == BASE


@pytest.mark.parametrize("n", [0, -2])
def test_split_dataset_n_rejects_bad_n(n):
    with pytest.raises(ValueError, match=f"n must.*{n}"):
        split_dataset_n(BASE, n)


def test_more_parts_than_examples_are_empty_as_in_chainer():
    assert [len(s) for s in split_dataset_n(BASE[:2], 3)] == [0, 0, 0]


@given(n=st.integers(1, 30), data=st.data())
def test_cross_validation_tests_partition_and_train_is_the_rest(n, data):
    folds = data.draw(st.integers(1, n))
    pairs = get_cross_validation_datasets(list(range(n)), folds)
    assert len(pairs) == folds
    tests = []
    for train, test in pairs:
        assert sorted(as_list(train) + as_list(test)) == list(range(n))
        tests += as_list(test)
    assert sorted(tests) == list(range(n))


def test_cross_validation_random_is_seeded():
    a = get_cross_validation_datasets_random(BASE, 4, seed=1)
    b = get_cross_validation_datasets_random(BASE, 4, seed=1)
    assert [as_list(t) for _, t in a] == [as_list(t) for _, t in b]


def test_cross_validation_rejects_bad_fold_count():
    with pytest.raises(ValueError, match="n_folds"):
        get_cross_validation_datasets(BASE, 0)
