"""The batch wire format: a batch laid out in a block arrives equal, as views of the block."""

from __future__ import annotations

import mmap

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.batch import ExampleBatch, RaggedColumn
from dataset_kit.engine import _wire

LAYOUTS = ["contiguous", "permuted", "strided"]


def _example(layout: str, k: int) -> np.ndarray:
    hwc = (np.arange(4 * 5 * 3, dtype=np.int16).reshape(4, 5, 3) * (k + 1)).astype(np.int16)
    if layout == "permuted":
        return hwc.transpose(2, 0, 1)  # a CHW view of a contiguous HWC array
    if layout == "strided":
        return hwc[::2, ::2]
    return hwc


def _send(examples: list) -> object:
    structure, columns = _wire.uniform_columns(examples)
    offsets, total = _wire.layout_sizes([len(c) * c[0].nbytes for c in columns])
    block = mmap.mmap(-1, max(total, 1))
    skeleton = _wire.stack_columns(structure, columns, offsets, block)
    return skeleton, _wire.unpack(skeleton, np.frombuffer(block, np.uint8))


@given(layout=st.sampled_from(LAYOUTS), size=st.integers(1, 6))
def test_stacked_columns_arrive_equal_whatever_the_layout_of_the_examples(layout, size):
    examples = [(_example(layout, k), np.int64(k)) for k in range(size)]
    _, batch = _send(examples)
    images, labels = batch.columns
    np.testing.assert_array_equal(images, np.stack([x for x, _ in examples]))
    np.testing.assert_array_equal(labels, np.arange(size))


def test_a_column_of_permuted_views_travels_as_stored_and_arrives_as_the_same_views():
    # Stacking CHW views into a CHW block is a strided copy; the block holds
    # the HWC arrays as they lie (one memcpy each) and the main process gets
    # the CHW view of them.
    examples = [_example("permuted", k) for k in range(3)]
    skeleton, batch = _send(examples)
    assert skeleton.columns.shape == (3, 4, 5, 3)
    assert skeleton.columns.axes == (0, 3, 1, 2)
    assert batch.columns.shape == (3, 3, 4, 5)
    assert batch.columns.transpose(0, 2, 3, 1).flags.c_contiguous


def _uniform_reference(batch: list) -> bool:
    """Whether a batch is uniform, decided the slow way: every element of every example."""
    def elements(ex):
        return tuple(ex.values()) if isinstance(ex, dict) else ex if isinstance(ex, tuple) \
            else (ex,)

    def keys(ex):
        return tuple(ex) if isinstance(ex, dict) else len(ex) if isinstance(ex, tuple) else None

    first = batch[0]
    if any(type(ex) is not type(first) or keys(ex) != keys(first) for ex in batch):
        return False
    return all(isinstance(v, (np.ndarray, np.generic)) and not v.dtype.hasobject
               and type(v) is type(h) and v.shape == h.shape and v.dtype == h.dtype
               for ex in batch for v, h in zip(elements(ex), elements(first)))


_VALUES = st.sampled_from([np.zeros(2), np.zeros(3), np.zeros(2, np.int32), np.int64(1),
                           np.array([None, 1], dtype=object), b"bytes", "text", 3, 0.5])


@given(st.lists(st.one_of(_VALUES, st.tuples(_VALUES, _VALUES),
                          st.fixed_dictionaries({"x": _VALUES, "y": _VALUES})),
                min_size=1, max_size=5))
def test_a_batch_travels_stacked_exactly_when_every_example_is_arrays_of_one_structure(batch):
    # uniform_columns turns down a shard's rows (bytes, str, numbers) on the
    # first example; it must still turn down a batch whose later examples
    # differ, and accept every uniform one.
    assert (_wire.uniform_columns(batch) is not None) == _uniform_reference(batch)


def _through_a_block(batch: ExampleBatch) -> tuple[ExampleBatch, np.ndarray]:
    """``batch`` split, placed in a block and unpacked: the batch that arrives, and the block."""
    arrays: list = []
    skeleton = _wire.split_arrays(batch, arrays)
    # A ragged column's arrays are arrays of the skeleton (placed in the
    # block when large enough); no row is an object of its own.
    assert all(type(a) is np.ndarray and a.dtype != object for a in arrays)
    offsets, total = _wire.layout(arrays)
    block = mmap.mmap(-1, max(total, 1))
    placed = _wire.place_arrays(skeleton, arrays, offsets, block)
    lease = np.frombuffer(block, np.uint8)
    return _wire.unpack(placed, lease), lease


@given(lengths=st.lists(st.integers(0, 700), min_size=1, max_size=12))
def test_a_ragged_column_travels_as_its_two_arrays_and_arrives_as_views(lengths):
    rows = [np.arange(n, dtype=np.int32) + k for k, n in enumerate(lengths)]
    column = RaggedColumn.from_rows(rows)
    batch = ExampleBatch({"id": np.arange(len(rows), dtype=np.int64), "tokens": column})
    arrived, lease = _through_a_block(batch)
    tokens = arrived.columns["tokens"]
    assert isinstance(tokens, RaggedColumn) and tokens == column
    assert [r.tolist() for r in (row["tokens"] for row in arrived)] == [r.tolist() for r in rows]
    if column.values.nbytes >= _wire.MIN_SHARED_BYTES:
        assert np.shares_memory(tokens.values, lease)


@given(rows=st.lists(st.one_of(st.none(), st.integers(0, 700)), min_size=1, max_size=12)
       .filter(lambda rows: any(n is not None for n in rows)),
       flags_shared=st.booleans())
def test_a_ragged_column_with_null_rows_travels_as_arrays_and_keeps_them_null(rows, flags_shared):
    # Many rows make the validity flags large enough to be placed in the block too.
    rows = rows * (200 if flags_shared else 1)
    arrays_in = [None if n is None else np.arange(n, dtype=np.int32) + k
                 for k, n in enumerate(rows)]
    column = RaggedColumn.from_rows(arrays_in)
    arrived, lease = _through_a_block(ExampleBatch({"tokens": column}))
    tokens = arrived.columns["tokens"]
    assert isinstance(tokens, RaggedColumn) and tokens == column
    assert [None if r is None else r.tolist() for r in tokens] == \
        [None if a is None else a.tolist() for a in arrays_in]
    if column.valid is not None and column.valid.nbytes >= _wire.MIN_SHARED_BYTES:
        assert np.shares_memory(tokens.valid, lease)
