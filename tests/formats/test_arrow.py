"""Arrow columns as numpy: a list of numbers without nulls is a RaggedColumn."""

from __future__ import annotations

import numpy as np
import pytest

from dataset_kit.batch import RaggedColumn
from dataset_kit.formats import _arrow

pa = pytest.importorskip("pyarrow", reason="the Arrow conversions need pyarrow (the parquet extra)")


def test_a_list_of_numbers_is_ragged_unless_it_may_hold_nulls():
    t = pa.list_(pa.int32())
    assert _arrow.kind_of(t, nullable=False) == _arrow.RAGGED
    assert _arrow.kind_of(t, nullable=True) == _arrow.LIST
    assert _arrow.numpy_dtype(t, _arrow.RAGGED, False) == np.int32


def test_a_sliced_list_column_becomes_the_rows_of_its_slice():
    column = pa.array([[1], [2, 3], [], [4, 5, 6]], pa.list_(pa.int64())).slice(1, 3)
    ragged = _arrow.to_numpy(pa.chunked_array([column]), _arrow.RAGGED, np.dtype(np.int64))
    assert isinstance(ragged, RaggedColumn)
    assert [r.tolist() for r in ragged] == [[2, 3], [], [4, 5, 6]]


def test_a_null_in_a_column_read_as_ragged_is_refused():
    column = pa.array([[1], None], pa.list_(pa.int64()))
    with pytest.raises(ValueError, match="1 nulls"):
        _arrow.to_numpy(column, _arrow.RAGGED, np.dtype(np.int64))
