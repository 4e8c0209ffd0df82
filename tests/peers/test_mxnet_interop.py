"""NDArrayIter, CSVIter and DataLoader batches against MXNet 1.9.1's own.

Runs where MXNet 1.9.1 is installed (it needs numpy<2, and numpy.bool set
before import). CI installs it into the peers environment; see .ci/run.
"""

import numpy as np
import pytest

if not hasattr(np, "bool"):
    np.bool = bool  # MXNet 1.9.1 still reads numpy.bool
mx = pytest.importorskip("mxnet", reason="MXNet 1.9.1 is not installed here (CI runs "
                         "tests/peers in a numpy<2 environment that has it)")

from dataset_kit import io, loader  # noqa: E402


def batches(it, epochs):
    """The batches of each epoch, read as MXNet code reads them (ours are NDArrays too)."""
    out = []
    for _ in range(epochs):
        out.append([([d.asnumpy().tolist() for d in b.data],
                     [x.asnumpy().tolist() for x in (b.label or [])], b.pad) for b in it])
        it.reset()
    return out


@pytest.mark.parametrize("handle", ["pad", "discard", "roll_over"])
@pytest.mark.parametrize("n, batch", [(10, 3), (9, 3), (7, 4), (5, 2), (12, 5)])
def test_ndarray_iter_equals_mxnets(handle, n, batch):
    data = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    label = np.arange(n, dtype=np.float32)
    theirs = mx.io.NDArrayIter(data, label, batch_size=batch, last_batch_handle=handle)
    ours = io.NDArrayIter(data, label, batch_size=batch, last_batch_handle=handle)
    assert batches(ours, 4) == batches(theirs, 4)
    assert [tuple(d.shape) for d in ours.provide_data] == \
        [tuple(d.shape) for d in theirs.provide_data]


@pytest.mark.parametrize("round_batch", [True, False])
@pytest.mark.parametrize("n, batch", [(5, 2), (7, 3), (6, 3), (4, 5)])
def test_csv_iter_equals_mxnets(tmp_path, round_batch, n, batch):
    data = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    np.savetxt(tmp_path / "d.csv", data, delimiter=",", fmt="%g")
    np.savetxt(tmp_path / "l.csv", np.arange(n), delimiter=",", fmt="%g")
    kwargs = dict(data_csv=str(tmp_path / "d.csv"), data_shape=(3,),
                  label_csv=str(tmp_path / "l.csv"), batch_size=batch, round_batch=round_batch)
    theirs = mx.io.CSVIter(**kwargs)
    ours = io.CSVIter(**kwargs)
    for _ in range(3):
        got, want = list(ours), list(theirs)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.pad == b.pad
            keep = batch - a.pad if not round_batch else batch  # MXNet's pad rows are stale
            assert a.data[0].asnumpy()[:keep].tolist() == b.data[0].asnumpy()[:keep].tolist()
            assert a.label[0].asnumpy()[:keep].tolist() == b.label[0].asnumpy()[:keep].tolist()
            assert a.index[:keep].tolist() == b.index[:keep].tolist()
        ours.reset()
        theirs.reset()


@pytest.mark.parametrize("last_batch", ["keep", "discard", "rollover"])
def test_dataloader_equals_gluons(last_batch):
    x = np.arange(22, dtype=np.float32).reshape(11, 2)
    y = np.arange(11, dtype=np.float32)
    theirs = mx.gluon.data.DataLoader(mx.gluon.data.ArrayDataset(x, y), 3,
                                      last_batch=last_batch)
    ours = loader.DataLoader(loader.ArrayDataset(x, y), 3, last_batch=last_batch)
    for _ in range(3):
        assert len(ours) == len(theirs)
        want = [[f.asnumpy().tolist() for f in b] for b in theirs]
        got = list(ours)
        assert all(isinstance(f, mx.nd.NDArray) for b in got for f in b)
        assert [[f.asnumpy().tolist() for f in b] for b in got] == want


def test_ndarray_batches_leave_a_users_array_writeable():
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    batch = next(iter(loader.DataLoader(loader.ArrayDataset(x), 4, batchify_fn=lambda _: x)))
    assert isinstance(batch, mx.nd.NDArray) and x.flags.writeable  # copied, not taken over
    ours = next(io.NDArrayIter(x, batch_size=2))  # a batch just gathered: taken over
    assert isinstance(ours.data[0], mx.nd.NDArray) and x.flags.writeable
