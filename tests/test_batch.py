import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit import ExampleBatch
from dataset_kit.batch import RaggedColumn


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


# -- RaggedColumn -----------------------------------------------------------------

_rows = st.lists(st.lists(st.integers(-50, 50), max_size=40), min_size=1, max_size=30)


def _column(rows: list[list[int]], lead: int = 0) -> RaggedColumn:
    """``rows`` as a column whose values start ``lead`` values into a larger array."""
    lengths = [len(r) for r in rows]
    values = np.array([7] * lead + [v for r in rows for v in r], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64) + lead
    return RaggedColumn(values, offsets)


@settings(max_examples=60, deadline=None)
@given(rows=_rows, lead=st.integers(0, 3), data=st.data())
def test_ragged_take_and_padded_give_the_rows_asked_for(rows, lead, data):
    column = _column(rows, lead)
    assert [r.tolist() for r in column] == rows
    picks = data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=50))
    taken = column.take(np.array(picks, dtype=np.int64))
    assert [r.tolist() for r in taken] == [rows[i] for i in picks]
    assert taken.offsets[0] == 0 and taken.offsets[-1] == len(taken.values)
    if picks:
        padded = taken.padded(-1)
        longest = max(len(rows[i]) for i in picks)
        assert padded.shape == (len(picks), longest) and padded.dtype == np.int32
        for out, i in zip(padded.tolist(), picks):
            assert out == rows[i] + [-1] * (longest - len(rows[i]))


@settings(max_examples=30, deadline=None)
@given(parts=st.lists(_rows, min_size=1, max_size=4))
def test_ragged_concatenate_keeps_every_row_in_order(parts):
    joined = RaggedColumn.concatenate([_column(rows, lead=1) for rows in parts])
    assert [r.tolist() for r in joined] == [r for rows in parts for r in rows]


def test_a_ragged_row_is_a_view_and_out_of_range_rows_are_refused():
    column = _column([[1, 2], [], [3]])
    assert np.shares_memory(column[0], column.values) and column[-1].tolist() == [3]
    assert [r.tolist() for r in column[::2]] == [[1, 2], [3]]
    with pytest.raises(IndexError, match="row 3"):
        column[3]


@pytest.mark.parametrize("values, offsets, error, match", [
    ([1, 2], np.array([0, 2]), TypeError, "values"),
    (np.arange(3), [0, 3], TypeError, "offsets"),
    (np.arange(3), np.array([0.0, 3.0]), TypeError, "offsets"),
    (np.arange(3), np.array([], dtype=np.int64), ValueError, "empty"),
    (np.arange(3), np.array([0, 2, 1]), ValueError, "non-decreasing"),
    (np.arange(3), np.array([0, 4]), ValueError, "non-decreasing"),
])
def test_ragged_columns_refuse_bad_arrays(values, offsets, error, match):
    with pytest.raises(error, match=match):
        RaggedColumn(values, offsets)


def test_a_batch_with_a_ragged_column_behaves_as_dicts_and_pickles_whole():
    batch = ExampleBatch({"id": np.arange(3), "tokens": _column([[1, 2], [], [3]], lead=2)})
    assert batch.ragged and not ExampleBatch({"id": np.arange(3)}).ragged
    assert [r["tokens"].tolist() for r in batch] == [[1, 2], [], [3]]
    assert [int(r["id"]) for r in batch] == [0, 1, 2]
    back = pickle.loads(pickle.dumps(batch))
    assert back.columns["tokens"] == batch.columns["tokens"]
    with pytest.raises(ValueError, match="differ in length"):
        ExampleBatch((np.arange(2), _column([[1], [2], [3]])))


# -- RaggedColumn with null rows ------------------------------------------------------

_maybe_rows = st.lists(st.one_of(st.none(), st.lists(st.integers(-50, 50), max_size=20)),
                       min_size=1, max_size=25).filter(lambda rows: any(r is not None
                                                                        for r in rows))


def _nullable(rows: list) -> RaggedColumn:
    return RaggedColumn.from_rows([None if r is None else np.array(r, dtype=np.int32)
                                   for r in rows])


def _as_lists(column) -> list:
    return [None if r is None else r.tolist() for r in column]


@settings(max_examples=60, deadline=None)
@given(rows=_maybe_rows, data=st.data())
def test_null_rows_are_none_and_empty_rows_empty_however_the_column_is_indexed(rows, data):
    column = _nullable(rows)
    assert _as_lists(column) == rows and len(column) == len(rows)
    assert column.null_count == sum(r is None for r in rows)
    assert column.lengths.tolist() == [0 if r is None else len(r) for r in rows]
    k = data.draw(st.integers(-len(rows), len(rows) - 1))
    assert (None if column[k] is None else column[k].tolist()) == rows[k]
    picks = data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=40))
    taken = column.take(np.array(picks, dtype=np.int64))
    assert _as_lists(taken) == [rows[i] for i in picks]
    assert _as_lists(column[np.array(picks, dtype=np.int64)]) == [rows[i] for i in picks]
    step = data.draw(st.sampled_from([1, 2, -1, -3]))
    assert _as_lists(column[::step]) == rows[::step]
    assert _as_lists(pickle.loads(pickle.dumps(column))) == rows
    assert pickle.loads(pickle.dumps(column)) == column
    split = data.draw(st.integers(0, len(rows)))
    parts = [column.take(np.arange(split)), column.take(np.arange(split, len(rows)))]
    assert RaggedColumn.concatenate(parts) == column


def test_a_null_row_differs_from_an_empty_row_and_is_not_padded():
    nulls, empties = _nullable([[1], None]), _nullable([[1], []])
    assert nulls != empties and empties == _nullable([[1], []])
    assert nulls == RaggedColumn(np.array([1], np.int32), np.array([0, 1, 1]),
                                 np.array([True, False]))
    assert "nulls=1" in repr(nulls) and nulls.nbytes == 4 + 24 + 2
    assert empties.padded(-1).tolist() == [[1], [-1]]
    with pytest.raises(ValueError, match="row 1 is null"):
        nulls.padded(-1)


@pytest.mark.parametrize("valid, error, match", [
    ([True, False], TypeError, "valid must be None or a 1-D numpy array of booleans"),
    (np.array([1, 0]), TypeError, "valid must be"),
    (np.array([True]), ValueError, "one flag per row"),
    (np.array([False, True]), ValueError, "row 0 is marked null"),
])
def test_ragged_columns_refuse_bad_validity_flags(valid, error, match):
    with pytest.raises(error, match=match):
        RaggedColumn(np.arange(3), np.array([0, 2, 3]), valid)


def test_a_batch_with_a_null_row_gives_none_in_its_examples():
    batch = ExampleBatch({"id": np.arange(3), "tokens": _nullable([[1, 2], None, []])})
    assert [None if r["tokens"] is None else r["tokens"].tolist() for r in batch] == \
        [[1, 2], None, []]
    back = pickle.loads(pickle.dumps(batch))
    assert back.columns["tokens"] == batch.columns["tokens"] and back[1]["tokens"] is None
    with pytest.raises(ValueError, match="at least one row that is an array"):
        RaggedColumn.from_rows([None, None])
