"""Arrow columns as numpy: which types a dataset can serve, and their conversion.

Every column of a row group becomes one numpy array of the group's length:

* fixed-width numbers, booleans and timestamps: an array of their dtype (an
  integer or boolean column that may hold nulls: float64, a null as NaN);
* fixed-size lists of numbers that hold no null: a 2-D array;
* lists of numbers (token ids), and fixed-size lists of numbers that may
  hold nulls: a :class:`~dataset_kit.batch.RaggedColumn`, the group's values
  and offsets as they are (no object per row), with validity flags when a
  row is null: a null list is None, an empty list an empty array;
* strings, binaries, structs and lists of those: an object array of ``str``,
  ``bytes``, dicts and lists (a null as None).

Whether a column may hold nulls is decided once, at open, from the files'
footer statistics, so a column's dtype never changes from one batch to the
next. Parquet's statistics count an empty list, a null list and a null
inside a list alike, so they cannot tell a list column's values apart: the
values of a list keep their own dtype whatever the statistics say, and a
null inside a list of integers or booleans, which that dtype cannot hold,
is refused when its row group is read (a null inside a list of floats is NaN).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit.batch import RaggedColumn

FIXED, FIXED_LIST, RAGGED, OBJECT = "fixed", "fixed_list", "ragged", "object"


def require_pyarrow(what: str) -> Any:
    """Import and return :mod:`pyarrow`, or raise an ImportError naming the extra.

    Args:
        what: what needs it, for the message.
    """
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 - the reader is a separate module
    except ImportError:
        raise ImportError(f"{what} needs pyarrow: pip install 'dataset_kit[parquet]'") from None
    return pyarrow


def _numeric(pa: Any, t: Any) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


def _plain(pa: Any, t: Any) -> Any:
    """The value type of a dictionary type; any other type as it is."""
    return t.value_type if pa.types.is_dictionary(t) else t


def _nested_ok(pa: Any, t: Any) -> bool:
    """Whether a value of type ``t`` becomes a plain Python or numpy value."""
    t = _plain(pa, t)
    if _numeric(pa, t) or pa.types.is_temporal(t) or pa.types.is_string(t) \
            or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _nested_ok(pa, t.value_type)
    if pa.types.is_struct(t):
        return all(_nested_ok(pa, t.field(k).type) for k in range(t.num_fields))
    return False  # maps, unions, decimals, nulls, extension types


def kind_of(data_type: Any, nullable: bool) -> str | None:
    """The conversion of a column of ``data_type``, or None if it cannot become numpy.

    Args:
        data_type: the column's Arrow type.
        nullable: whether the column may hold nulls (a fixed-size list that
            may is served as a ragged column: None is not a row of a 2-D array).
    """
    import pyarrow as pa

    t = _plain(pa, data_type)
    if _numeric(pa, t) or (pa.types.is_temporal(t) and not pa.types.is_time(t)):
        return FIXED
    if pa.types.is_fixed_size_list(t) and _numeric(pa, t.value_type):
        return RAGGED if nullable else FIXED_LIST
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and _numeric(pa, t.value_type):
        return RAGGED
    return OBJECT if _nested_ok(pa, t) else None


def numpy_dtype(data_type: Any, kind: str, nullable: bool) -> np.dtype:
    """The dtype of a column's arrays (of a ragged column's values; object for other
    lists, strings and structs).

    Args:
        data_type: the column's Arrow type.
        kind: its :func:`kind_of`.
        nullable: whether the column may hold nulls; for kind :data:`RAGGED`,
            whether its lists' values may (known exactly only from the data:
            see the module's note), which makes integers and booleans float64.
    """
    import pyarrow as pa

    t = _plain(pa, data_type)
    if kind in (RAGGED, FIXED_LIST):
        t = t.value_type
    elif kind != FIXED:
        return np.dtype(object)
    dtype = np.dtype(t.to_pandas_dtype())
    if nullable and dtype.kind in "iub":
        return np.dtype(np.float64)
    return dtype


def to_numpy(column: Any, kind: str, dtype: np.dtype) -> np.ndarray | RaggedColumn:
    """One Arrow column (array or chunked array) of a row group as a numpy array
    (a :class:`~dataset_kit.batch.RaggedColumn` for kind :data:`RAGGED`).

    Args:
        column: the column.
        kind: its :func:`kind_of`.
        dtype: its :func:`numpy_dtype`.

    Raises:
        ValueError: if a column of kind RAGGED of integers or booleans holds
            a null inside a list (its dtype cannot hold it).
    """
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    n = len(column)
    if kind == FIXED:
        return np.asarray(column.to_numpy(zero_copy_only=False)).astype(dtype, copy=False)
    if kind == FIXED_LIST:
        width = column.type.list_size
        values = column.flatten().to_numpy(zero_copy_only=False)
        return np.asarray(values).astype(dtype, copy=False).reshape(n, width)
    if kind == RAGGED:
        return _ragged(pa, column, dtype)
    return _object_array(column.to_pylist())


def _ragged(pa: Any, column: Any, dtype: np.dtype) -> RaggedColumn:
    """A list or fixed-size list column as a RaggedColumn of ``dtype`` values (null rows
    flagged, spanning no values)."""
    n = len(column)
    if pa.types.is_fixed_size_list(column.type):
        width = column.type.list_size
        offsets = np.arange(column.offset, column.offset + n + 1, dtype=np.int64) * width
    else:
        offsets = column.offsets.to_numpy().astype(np.int64)
    valid = None
    child = column.values
    if column.null_count:
        valid = ~np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if np.any(np.diff(offsets)[~valid]):
            # Arrow lets a null list span values (a fixed-size list's always
            # do, often nulls): they are dropped, so a null row spans none.
            import pyarrow.compute as pc

            lengths = np.where(valid, np.diff(offsets), 0)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            child = pc.list_flatten(column)  # the values of the rows that are not null
    used = child.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if used.null_count and dtype.kind in "iub":
        raise ValueError(f"{used.null_count} nulls inside the lists of {column.type}, whose "
                         f"values are read as {dtype}, which cannot hold a null")
    values = np.asarray(child.to_numpy(zero_copy_only=False)).astype(dtype, copy=False)
    return RaggedColumn.from_checked(values, offsets, valid)


def _object_array(values: list) -> np.ndarray:
    """``values`` as a 1-D object array, each item one element (never broadcast).

    A trailing None keeps numpy from reading items of equal length (arrays,
    lists) as a second axis; it is cut off again.
    """
    rows = np.empty(len(values) + 1, dtype=object)
    rows[:] = values + [None]
    return rows[:-1]
