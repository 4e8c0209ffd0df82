"""NDArrayIter: idx, MXNet NDArray inputs, sparse inputs, empty epochs."""

import numpy as np
import pytest

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


@pytest.mark.parametrize("sparse", [lambda: FakeCSR(np.eye(3)),
                                    lambda: pytest.importorskip("scipy.sparse").csr_matrix(
                                        np.eye(3))])
def test_sparse_input_is_mxnets_not_implemented_error(sparse):
    with pytest.raises(NotImplementedError, match="sparse"):
        NDArrayIter({"data": sparse()}, np.zeros(3), batch_size=1)


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
