"""NDArrayIter: idx, MXNet NDArray inputs, sparse inputs, empty epochs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.io import NDArrayIter


class FakeNDArray:
    """An object with MXNet NDArray's asnumpy() (and no __array__): how mx.nd arrays look."""

    stype = "default"

    def __init__(self, array):
        self._array = np.asarray(array)
        self.shape = self._array.shape

    def __len__(self):
        return len(self._array)

    def __getitem__(self, k):  # np.asarray would loop over this forever-ish and fail
        raise TypeError("not indexable like numpy")

    def asnumpy(self):
        return self._array.copy()


class FakeCSR(FakeNDArray):
    stype = "csr"


def test_idx_is_the_order_of_the_epoch_being_read():
    data = np.arange(10) * 10
    it = NDArrayIter(data, batch_size=1, shuffle=True, seed=3)
    order = it.idx
    assert sorted(order.tolist()) == list(range(10))
    assert [b.data[0][0] for b in it] == data[order].tolist()
    assert it.idx.tolist() == order.tolist()  # still the epoch just read, until reset()
    it.reset()
    assert [b.data[0][0] for b in it] == data[it.idx].tolist()


def test_idx_without_shuffle_is_the_identity():
    assert NDArrayIter(np.zeros((4, 2)), batch_size=2).idx.tolist() == [0, 1, 2, 3]


def test_mxnet_ndarrays_are_taken_through_asnumpy():
    it = NDArrayIter({"a": FakeNDArray(np.arange(6).reshape(3, 2))}, FakeNDArray([1, 2, 3]),
                     batch_size=3)
    batch = next(it)
    assert batch.data[0].tolist() == [[0, 1], [2, 3], [4, 5]]
    assert batch.label[0].tolist() == [1, 2, 3]


def test_a_sparse_array_other_than_csr_is_mxnets_not_implemented_error():
    row_sparse = FakeCSR(np.eye(3))
    row_sparse.stype = "row_sparse"
    with pytest.raises(NotImplementedError, match="row_sparse"):
        NDArrayIter({"data": row_sparse}, np.zeros(3), batch_size=1, last_batch_handle="discard")


@pytest.mark.parametrize("handle", ["pad", "roll_over"])
def test_csr_input_needs_discard_as_in_mxnet(handle):
    sparse = pytest.importorskip("scipy.sparse", reason="scipy is in the test extra")
    with pytest.raises(NotImplementedError, match="discard"):
        NDArrayIter({"data": sparse.csr_matrix(np.eye(3))}, np.zeros(3), batch_size=1,
                    last_batch_handle=handle)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 12), columns=st.integers(1, 6), batch_size=st.integers(1, 12),
       shuffle=st.booleans(), seed=st.integers(0, 2**16))
def test_csr_batches_are_the_dense_batches_kept_sparse(rows, columns, batch_size, shuffle, seed):
    sparse = pytest.importorskip("scipy.sparse", reason="scipy is in the test extra")
    dense = np.random.default_rng(seed).integers(0, 3, (rows, columns)).astype(np.float64)
    csr = NDArrayIter({"csr": sparse.csr_matrix(dense), "dense": dense}, dense[:, 0],
                      batch_size=batch_size, shuffle=shuffle, seed=seed,
                      last_batch_handle="discard")
    reference = NDArrayIter({"csr": dense, "dense": dense}, dense[:, 0], batch_size=batch_size,
                            shuffle=shuffle, seed=seed, last_batch_handle="discard")
    got, expected = list(csr), list(reference)
    assert len(got) == len(expected) == rows // batch_size
    for a, b in zip(got, expected):
        assert sparse.issparse(a.data[0]) and a.data[0].shape == (batch_size, columns)
        assert np.array_equal(a.data[0].asnumpy(), b.data[0])
        assert np.array_equal(a.data[1], b.data[1]) and np.array_equal(a.label[0], b.label[0])
    # The CSR column keeps its dtype (MXNet's sparse array does); the dense ones become float32.
    assert [d.dtype for d in csr.provide_data] == [np.float64, np.float32]


def test_numpy_inputs_become_float32_as_in_mxnet_and_are_described_so():
    it = NDArrayIter(np.arange(12, dtype=np.float64).reshape(6, 2), np.arange(6), batch_size=3)
    batch = next(it)
    assert batch.data[0].dtype == np.float32 and batch.label[0].dtype == np.float32
    assert [(d.dtype, d.shape) for d in it.provide_data] == [(np.float32, (3, 2))]
    assert [(d.dtype, d.shape) for d in it.provide_label] == [(np.float32, (3,))]


def test_ndarrays_keep_their_dtype_as_in_mxnet():
    it = NDArrayIter(FakeNDArray(np.arange(6, dtype=np.int32)), batch_size=2)
    assert next(it).data[0].dtype == np.int32 and it.provide_data[0].dtype == np.int32


def test_a_list_of_one_array_keeps_the_plain_name_as_in_mxnet():
    it = NDArrayIter([np.zeros((4, 2))], [np.zeros(4)], batch_size=2)
    assert [d.name for d in it.provide_data + it.provide_label] == ["data", "softmax_label"]


@pytest.mark.parametrize("handle", ["discard", "roll_over"])
def test_batch_size_above_the_length_gives_empty_epochs_as_in_mxnet(handle):
    it = NDArrayIter(np.arange(3), batch_size=5, last_batch_handle=handle)
    assert list(it) == []
    with pytest.raises(StopIteration):
        it.next()
    it.reset()
    epoch = [b.data[0].tolist() for b in it]
    # MXNet: 'discard' stays empty; 'roll_over' completes a batch with the rolled-over three.
    assert epoch == ([] if handle == "discard" else [[0, 1, 2, 0, 1]])


def test_an_empty_epoch_resumes_exactly():
    it = NDArrayIter(np.arange(3), batch_size=5, last_batch_handle="roll_over")
    assert list(it) == []
    again = NDArrayIter(np.arange(3), batch_size=5, last_batch_handle="roll_over")
    again.load_state_dict(it.state_dict())
    it.reset()
    again.reset()
    assert [b.data[0].tolist() for b in again] == [b.data[0].tolist() for b in it]
