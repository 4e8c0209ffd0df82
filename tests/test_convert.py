import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataset_kit import ExampleBatch, concat_examples, to_device
from dataset_kit.batch import RaggedColumn


def test_arrays_stack_along_a_new_axis_keeping_dtype():
    batch = [np.full((2, 3), k, dtype=np.float16) for k in range(4)]
    out = concat_examples(batch)
    assert out.shape == (4, 2, 3) and out.dtype == np.float16
    np.testing.assert_array_equal(out[:, 0, 0], [0, 1, 2, 3])


def test_tuples_give_tuple_of_arrays():
    batch = [(np.zeros(2, np.float32), np.int32(k)) for k in range(3)]
    x, y = concat_examples(batch)
    assert x.shape == (3, 2) and x.dtype == np.float32
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [0, 1, 2])


def test_dicts_give_dict_of_arrays():
    out = concat_examples([{"a": 1, "b": 2.0}, {"b": 3.0, "a": 4}])
    np.testing.assert_array_equal(out["a"], [1, 4])
    np.testing.assert_array_equal(out["b"], [2.0, 3.0])


def test_python_scalars_become_an_array():
    np.testing.assert_array_equal(concat_examples([1, 2, 3]), [1, 2, 3])


def test_empty_batch_is_an_error():
    with pytest.raises(ValueError, match="empty batch"):
        concat_examples([])


@pytest.mark.parametrize("batch, message", [
    ([(1, 2), {"a": 1}], "example 1 is a dict"),
    ([(1, 2), (1, 2, 3)], "example 1 has length 3"),
    ([{"a": 1}, {"b": 1}], r"keys \['a'\] but example 1 has keys \['b'\]"),
    ([1, (1, 2)], "example 1 is a tuple"),
])
def test_mixed_structures_are_named(batch, message):
    with pytest.raises(ValueError, match=message):
        concat_examples(batch)


def test_shape_mismatch_names_example_and_shapes():
    batch = [(np.zeros(3), 0), (np.zeros(3), 1), (np.zeros(4), 2)]
    with pytest.raises(ValueError, match=r"element 0 of example 2 has shape \(4,\).*\(3,\)"):
        concat_examples(batch)


ragged = st.lists(
    hnp.arrays(np.int16, hnp.array_shapes(min_dims=2, max_dims=2, max_side=4),
               elements=st.integers(0, 100)),
    min_size=1, max_size=6,
)


@given(arrays=ragged, pad=st.integers(-5, -1))
def test_padding_puts_each_example_in_its_corner(arrays, pad):
    out = concat_examples(arrays, padding=pad)
    rows = max(a.shape[0] for a in arrays)
    cols = max(a.shape[1] for a in arrays)
    assert out.shape == (len(arrays), rows, cols)
    assert out.dtype == np.int16
    for k, a in enumerate(arrays):
        np.testing.assert_array_equal(out[k, :a.shape[0], :a.shape[1]], a)
        mask = np.ones((rows, cols), bool)
        mask[:a.shape[0], :a.shape[1]] = False
        assert (out[k][mask] == pad).all()


def test_tuple_and_dict_padding_give_one_value_per_element():
    batch = [(np.ones(1), np.ones(2)), (np.ones(3), np.ones(1))]
    x, y = concat_examples(batch, padding=(-1, -2))
    np.testing.assert_array_equal(x, [[1, -1, -1], [1, 1, 1]])
    np.testing.assert_array_equal(y, [[1, 1], [1, -2]])
    out = concat_examples([{"a": np.ones(1)}, {"a": np.ones(2)}], padding={"a": 9})
    np.testing.assert_array_equal(out["a"], [[1, 9], [1, 1]])


@pytest.mark.parametrize("batch, padding, message", [
    ([(np.ones(1),)], (0, 0), "tuple of length 2"),
    ([{"a": np.ones(1)}], {"b": 0}, r"padding has keys \['b'\]"),
    ([np.ones(1)], (0,), "scalar or None"),
    ([np.ones(1), np.ones((1, 1))], 0, "2 dimensions"),
])
def test_bad_padding_is_named(batch, padding, message):
    with pytest.raises(ValueError, match=message):
        concat_examples(batch, padding=padding)


def test_example_batch_uses_columns_without_restacking():
    x, y = np.arange(6).reshape(3, 2), np.arange(3)
    out = concat_examples(ExampleBatch((x, y)))
    assert out[0] is x and out[1] is y
    assert concat_examples(ExampleBatch((x, y)), padding=0)[0] is x


def test_example_batch_and_list_convert_identically():
    x, y = np.random.default_rng(0).random((5, 3)), np.arange(5)
    fast = concat_examples(ExampleBatch((x, y)))
    slow = concat_examples(list(ExampleBatch((x, y))))
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


@pytest.mark.parametrize("device", [None, -1, "cpu"])
def test_host_devices_are_accepted(device):
    x = np.ones(2)
    assert to_device(device, x) is x


@pytest.mark.parametrize("device", [0, "gpu0"])
def test_other_devices_are_rejected_by_name(device):
    with pytest.raises(ValueError, match=repr(device).replace("'", ".")):
        concat_examples([np.ones(1)], device=device)


def test_a_pytorch_device_needs_pytorch_and_must_exist():
    try:
        import torch
    except ImportError:
        with pytest.raises(ImportError, match=r"dataset_kit\[torch\]"):
            concat_examples([np.ones(1)], device="cuda:0")
        return
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="'cuda:0' is not available"):
            concat_examples([np.ones(1)], device="cuda:0")
    x = np.arange(6.0).reshape(3, 2)
    tensor = concat_examples([x[0], x[1], x[2]], device="torch:cpu")
    assert isinstance(tensor, torch.Tensor) and tensor.tolist() == x.tolist()
    shared = to_device(torch.device("cpu"), x)
    shared[0, 0] = 42.0  # from_numpy: no copy on the host
    assert x[0, 0] == 42.0


@given(rows=st.lists(st.lists(st.integers(0, 9), max_size=6), min_size=1, max_size=8),
       pad=st.integers(-3, 3))
def test_a_ragged_column_pads_as_the_same_rows_in_a_list_do(rows, pad):
    tokens = [np.array(r, dtype=np.int32) for r in rows]
    column = RaggedColumn.from_rows(tokens)
    ids = np.arange(len(rows))
    columnar = concat_examples(ExampleBatch({"id": ids, "tokens": column}), padding=pad)
    listed = concat_examples([{"id": i, "tokens": t} for i, t in zip(ids, tokens)], padding=pad)
    assert set(columnar) == {"id", "tokens"}
    np.testing.assert_array_equal(columnar["tokens"], listed["tokens"])
    assert columnar["tokens"].dtype == np.int32
    per_key = concat_examples(ExampleBatch((ids, column)), padding=(0, pad))
    np.testing.assert_array_equal(per_key[1], listed["tokens"])


def test_a_ragged_column_without_padding_stacks_only_rows_of_one_length():
    even = RaggedColumn.from_rows([np.arange(3), np.arange(3, 6)])
    np.testing.assert_array_equal(concat_examples(ExampleBatch(even)),
                                  np.arange(6).reshape(2, 3))
    uneven = RaggedColumn.from_rows([np.arange(3), np.arange(2)])
    with pytest.raises(ValueError, match=r"key 'tokens' of example 1 has shape \(2,\)"):
        concat_examples(ExampleBatch({"tokens": uneven}))
    with pytest.raises(ValueError, match="padding must be a scalar"):
        concat_examples(ExampleBatch(uneven), padding=(0,))
