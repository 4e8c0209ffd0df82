import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit import ExampleBatch, concat_examples
from dataset_kit.datasets import DictDataset, TupleDataset


def test_tuple_dataset_returns_tuples():
    x, y = np.arange(10).reshape(5, 2), np.arange(5)
    ds = TupleDataset(x, y)
    assert len(ds) == 5
    ex = ds[-2]
    np.testing.assert_array_equal(ex[0], [6, 7])
    assert ex[1] == 3


@given(n=st.integers(1, 20), data=st.data())
def test_tuple_dataset_index_array_gives_examples_not_columns(n, data):
    x, y = np.arange(n * 3).reshape(n, 3), np.arange(n) * 10
    idx = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=10))
    batch = TupleDataset(x, y)[idx]
    assert isinstance(batch, ExampleBatch)
    assert len(batch) == len(idx)
    for k, i in enumerate(idx):
        np.testing.assert_array_equal(batch[k][0], x[i])
        assert batch[k][1] == y[i]
    xs, ys = concat_examples(batch)
    np.testing.assert_array_equal(xs, x[idx])
    np.testing.assert_array_equal(ys, y[idx])


def test_tuple_dataset_of_lists_gives_list_of_tuples():
    ds = TupleDataset(["a", "b", "c"], [1, 2, 3])
    assert ds[1:] == [("b", 2), ("c", 3)]
    assert ds[[2, 0]] == [("c", 3), ("a", 1)]


def test_tuple_dataset_rejects_unequal_lengths_naming_them():
    with pytest.raises(ValueError, match="column 0: 3, column 1: 2"):
        TupleDataset(np.zeros(3), np.zeros(2))


def test_tuple_dataset_needs_a_column():
    with pytest.raises(ValueError, match="at least one column"):
        TupleDataset()


def test_dict_dataset_returns_dicts_and_batches():
    ds = DictDataset(a=np.arange(4), b=np.arange(4) * 2)
    assert ds[1] == {"a": 1, "b": 2}
    batch = ds[[3, 0]]
    assert batch == [{"a": 3, "b": 6}, {"a": 0, "b": 0}]
    out = concat_examples(batch)
    np.testing.assert_array_equal(out["b"], [6, 0])


def test_dict_dataset_of_lists():
    ds = DictDataset(a=[1, 2], b=["x", "y"])
    assert ds[::-1] == [{"a": 2, "b": "y"}, {"a": 1, "b": "x"}]


def test_dict_dataset_rejects_unequal_lengths_naming_them():
    with pytest.raises(ValueError, match="a: 2, b: 3"):
        DictDataset(a=np.zeros(2), b=np.zeros(3))
    with pytest.raises(ValueError, match="at least one column"):
        DictDataset()
