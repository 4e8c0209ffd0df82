"""default_collate built as numpy then wrapped: PyTorch's results, types and errors."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.torch.helpers import Point, assert_same, torch

from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402
from torch.utils.data import default_collate as torch_collate  # noqa: E402

from dataset_kit import ExampleBatch  # noqa: E402
from dataset_kit.batch import RaggedColumn  # noqa: E402
from dataset_kit.torch import DataLoader, default_collate, default_convert  # noqa: E402
from dataset_kit.torch._collate import collate_to_numpy, numpy_to_tensors  # noqa: E402

Pair = collections.namedtuple("Pair", "a b")

_leaf = st.one_of(
    st.integers(-2**40, 2**40), st.floats(allow_nan=False), st.booleans(), st.text(max_size=3),
    st.sampled_from([np.float32(1.5), np.int8(-3), np.bool_(True), np.uint16(7)]),
    st.sampled_from([np.zeros((2, 3), np.float32), np.arange(4, dtype=np.int64),
                     np.ones((), np.float64), torch.arange(3, dtype=torch.int32)]),
)


def _nest(children):
    return st.one_of(st.tuples(children, children), st.lists(children, min_size=1, max_size=3),
                     st.dictionaries(st.sampled_from("xyz"), children, min_size=1),
                     st.builds(Pair, children, children))


@given(st.recursive(_leaf, _nest, max_leaves=6), st.integers(1, 3))
def test_default_collate_returns_exactly_what_pytorchs_does(example, size):
    batch = [example] * size
    assert_same(default_collate(batch), torch_collate(batch))


def test_pytorchs_errors_are_raised_for_what_it_rejects():
    for bad in ([np.array(["a"]), np.array(["b"])], [object(), object()]):
        with pytest.raises(TypeError) as theirs:
            torch_collate(bad)
        with pytest.raises(TypeError) as ours:
            default_collate(bad)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        default_collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        default_collate([(1, 2), (1,)])


def test_stacked_columns_are_collated_without_restacking():
    images, labels = np.zeros((4, 2, 2), np.float32), np.arange(4)
    collated = collate_to_numpy(ExampleBatch((images, labels)))
    assert collated[0] is images and collated[1] is labels
    assert_same(numpy_to_tensors(collated), torch_collate(list(ExampleBatch((images, labels)))))


def test_arrays_become_tensors_that_share_their_memory():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = numpy_to_tensors(array)
    assert tensor.data_ptr() == array.ctypes.data


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_array_dataset_gives_pytorchs_batches(num_workers):
    data = np.random.default_rng(1).random((30, 5)).astype(np.float32)
    ours = DataLoader(data, batch_size=8, shuffle=True, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(2))
    theirs = TorchDataLoader(data, batch_size=8, shuffle=True,
                             generator=torch.Generator().manual_seed(2))
    try:
        for a, b in zip(ours, theirs, strict=True):
            assert_same(a, b)
    finally:
        ours.close()


def test_default_convert_is_pytorchs():
    example = {"a": np.arange(3), "p": Point(np.float32(1), "s")}
    assert_same(default_convert(example), torch.utils.data.default_convert(example))


def test_a_batch_with_a_ragged_column_collates_as_its_rows_do():
    rows = [np.arange(3) + k for k in range(4)]  # of one length: torch stacks them
    batch = ExampleBatch({"id": np.arange(4), "tokens": RaggedColumn.from_rows(rows)})
    listed = [{"id": np.int64(k), "tokens": rows[k]} for k in range(4)]
    assert_same(default_collate(batch), torch_collate(listed))


def test_a_none_among_arrays_is_pytorchs_own_error():
    # An array and a None (a null list read row by row): PyTorch's
    # torch.as_tensor error, not an AttributeError of our stacking.
    bad = [{"tokens": np.arange(2)}, {"tokens": None}]
    with pytest.raises(RuntimeError) as theirs:
        torch_collate(bad)
    for collate in (default_collate, collate_to_numpy):  # the worker's numpy collate too
        with pytest.raises(RuntimeError) as ours:
            collate(bad)
        assert str(ours.value) == str(theirs.value)


def test_a_null_row_of_a_ragged_column_is_refused_naming_its_key_and_example():
    rows = [np.arange(2), None, np.arange(2)]
    batch = ExampleBatch({"id": np.arange(3), "tokens": RaggedColumn.from_rows(rows)})
    with pytest.raises(TypeError, match=r"key 'tokens' of example 1 is None \(a null list\)"):
        default_collate(batch)
    loose = ExampleBatch((np.arange(3), RaggedColumn.from_rows(rows)))
    with pytest.raises(TypeError, match=r"element 1 of example 1 is None"):
        default_collate(loose)
