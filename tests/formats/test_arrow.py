"""Arrow columns as numpy: a list of numbers is a RaggedColumn, null lists flagged."""

from __future__ import annotations

import numpy as np
import pytest

from dataset_kit.batch import RaggedColumn
from dataset_kit.formats import _arrow

pa = pytest.importorskip("pyarrow", reason="the Arrow conversions need pyarrow (the parquet extra)")


def test_a_list_of_numbers_is_ragged_whether_or_not_it_may_hold_nulls():
    t = pa.list_(pa.int32())
    assert _arrow.kind_of(t, nullable=False) == _arrow.RAGGED
    assert _arrow.kind_of(t, nullable=True) == _arrow.RAGGED
    assert _arrow.numpy_dtype(t, _arrow.RAGGED, False) == np.int32
    # A fixed-size list is a 2-D array unless a row may be null (None is no row of one).
    fixed = pa.list_(pa.float32(), 3)
    assert _arrow.kind_of(fixed, nullable=False) == _arrow.FIXED_LIST
    assert _arrow.kind_of(fixed, nullable=True) == _arrow.RAGGED


def test_a_sliced_list_column_becomes_the_rows_of_its_slice():
    column = pa.array([[1], [2, 3], [], [4, 5, 6]], pa.list_(pa.int64())).slice(1, 3)
    ragged = _arrow.to_numpy(pa.chunked_array([column]), _arrow.RAGGED, np.dtype(np.int64))
    assert isinstance(ragged, RaggedColumn)
    assert [r.tolist() for r in ragged] == [[2, 3], [], [4, 5, 6]]


@pytest.mark.parametrize("list_type", [pa.list_(pa.int64()), pa.large_list(pa.int64())])
def test_null_lists_are_flagged_rows_and_empty_lists_empty_rows(list_type):
    column = pa.array([[1], None, [], [2, 3], None], list_type)
    ragged = _arrow.to_numpy(column, _arrow.RAGGED, np.dtype(np.int64))
    assert isinstance(ragged, RaggedColumn) and ragged.null_count == 2
    assert [None if r is None else r.tolist() for r in ragged] == column.to_pylist()
    assert ragged.lengths.tolist() == [1, 0, 0, 2, 0]


def test_a_null_fixed_size_list_spans_no_values_once_read():
    # Arrow keeps a null fixed-size list's slots (nulls here): they are dropped.
    column = pa.array([[1, 2], None, [3, 4]], pa.list_(pa.int32(), 2)).slice(1)
    ragged = _arrow.to_numpy(column, _arrow.RAGGED, np.dtype(np.int32))
    assert [None if r is None else r.tolist() for r in ragged] == [None, [3, 4]]
    assert ragged.values.tolist() == [3, 4] and ragged.offsets.tolist() == [0, 0, 2]


def test_a_null_inside_a_list_of_integers_is_refused_and_nan_in_floats():
    with pytest.raises(ValueError, match="1 nulls inside the lists"):
        _arrow.to_numpy(pa.array([[1], [None, 2]], pa.list_(pa.int64())), _arrow.RAGGED,
                        np.dtype(np.int64))
    floats = _arrow.to_numpy(pa.array([[1.5, None]], pa.list_(pa.float32())), _arrow.RAGGED,
                             np.dtype(np.float32))
    assert floats[0][0] == 1.5 and np.isnan(floats[0][1])
    # Read as float64 (the dtype from_hf gives a list of integers holding a null): NaN.
    wide = _arrow.to_numpy(pa.array([[1, None]], pa.list_(pa.int64())), _arrow.RAGGED,
                           np.dtype(np.float64))
    assert wide[0][0] == 1.0 and np.isnan(wide[0][1])


def test_a_null_list_that_spans_values_spans_none_once_read():
    # Arrow allows a null list whose offsets cover values (here 3 and None).
    column = pa.ListArray.from_arrays(pa.array([0, 2, 4, 5], pa.int32()),
                                      pa.array([1, 2, 3, None, 5], pa.int64()),
                                      mask=pa.array([False, True, False]))
    ragged = _arrow.to_numpy(column, _arrow.RAGGED, np.dtype(np.int64))
    assert [None if r is None else r.tolist() for r in ragged] == [[1, 2], None, [5]]
    assert ragged.values.tolist() == [1, 2, 5] and ragged.lengths.tolist() == [2, 0, 1]
