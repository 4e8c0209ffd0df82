import pickle

import numpy as np
import pytest

from dataset_kit import ExampleBatch


def test_tuple_columns_behave_as_list_of_tuples():
    x = np.arange(6).reshape(3, 2)
    y = np.array([7, 8, 9])
    batch = ExampleBatch((x, y))
    assert len(batch) == 3
    first = batch[0]
    assert isinstance(first, tuple)
    np.testing.assert_array_equal(first[0], [0, 1])
    assert first[1] == 7
    assert [int(e[1]) for e in batch] == [7, 8, 9]
    assert [int(e[1]) for e in batch[1:]] == [8, 9]


def test_dict_columns_behave_as_list_of_dicts():
    batch = ExampleBatch({"a": np.array([1, 2]), "b": np.array([3, 4])})
    assert batch == [{"a": 1, "b": 3}, {"a": 2, "b": 4}]


def test_array_column_behaves_as_list_of_rows():
    batch = ExampleBatch(np.array([5, 6]))
    assert batch == [5, 6]
    assert batch != [5, 7]


def test_pickle_round_trip_keeps_columns():
    batch = ExampleBatch((np.arange(4), np.arange(4) * 2))
    restored = pickle.loads(pickle.dumps(batch))
    np.testing.assert_array_equal(restored.columns[1], [0, 2, 4, 6])


def test_columns_of_different_lengths_are_rejected():
    with pytest.raises(ValueError, match=r"\[2, 3\]"):
        ExampleBatch((np.zeros(2), np.zeros(3)))


@pytest.mark.parametrize("columns", [[np.zeros(2)], (), (np.float32(1),), 3])
def test_non_array_columns_are_rejected(columns):
    with pytest.raises(TypeError, match="ExampleBatch columns"):
        ExampleBatch(columns)
