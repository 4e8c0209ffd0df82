"""MXNet's DataIters: expected values as MXNet 1.9.1 gives them, resume, errors."""

import json
import pickle
import sys

import numpy as np
import pytest

from dataset_kit.io import CSVIter, DataBatch, DataDesc, NDArrayIter, PrefetchingIter, ResizeIter

# What MXNet 1.9.1 prints for NDArrayIter(arange(10), batch_size=3), three epochs with reset().
NDARRAY_EXPECTED = {
    "pad": [[([0, 1, 2], 0), ([3, 4, 5], 0), ([6, 7, 8], 0), ([9, 0, 1], 2)]] * 3,
    "discard": [[([0, 1, 2], 0), ([3, 4, 5], 0), ([6, 7, 8], 0)]] * 3,
    "roll_over": [[([0, 1, 2], 0), ([3, 4, 5], 0), ([6, 7, 8], 0)],
                  [([9, 0, 1], 1), ([2, 3, 4], 0), ([5, 6, 7], 0)],
                  [([8, 9, 0], 2), ([1, 2, 3], 0), ([4, 5, 6], 0), ([7, 8, 9], 0)]],
}


def run_epochs(it, count):
    out = []
    for _ in range(count):
        out.append([(b.data[0].ravel().tolist(), b.pad) for b in it])
        it.reset()
    return out


@pytest.mark.parametrize("handle", sorted(NDARRAY_EXPECTED))
def test_ndarray_iter_gives_mxnets_batches_and_pad(handle):
    it = NDArrayIter(np.arange(10).reshape(10, 1), np.arange(10), batch_size=3,
                     last_batch_handle=handle)
    assert run_epochs(it, 3) == NDARRAY_EXPECTED[handle]


def test_ndarray_iter_names_inputs_like_mxnet_and_describes_them():
    it = NDArrayIter({"b": np.zeros((5, 2)), "a": np.ones((5, 3), np.float32)},
                     [np.arange(5), np.arange(5)], batch_size=2)
    assert [d.name for d in it.provide_data] == ["a", "b"]
    assert [d.name for d in it.provide_label] == ["_0_softmax_label", "_1_softmax_label"]
    assert it.provide_data[0].shape == (2, 3) and it.provide_data[0].dtype == np.float32
    batch = next(it)
    assert isinstance(batch, DataBatch) and batch.index is None
    assert [d.shape for d in batch.data] == [(2, 3), (2, 2)]


def test_a_reset_mid_epoch_restarts_and_drops_a_roll_over_not_yet_reached():
    it = NDArrayIter(np.arange(10), batch_size=3, last_batch_handle="roll_over")
    for _ in range(3):
        next(it)  # the last full batch; MXNet has not met the short one yet
    it.reset()
    assert [b.data[0].tolist() for b in it] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


@pytest.mark.parametrize("handle", sorted(NDARRAY_EXPECTED))
def test_ndarray_iter_resumes_anywhere_with_the_same_batches(handle):
    def make():
        return NDArrayIter(np.arange(11.0), np.arange(11), batch_size=3, shuffle=True,
                           last_batch_handle=handle, seed=2)

    expected = run_epochs(make(), 3)
    flat = [b for epoch in expected for b in epoch + ["reset"]]
    for k in range(len(flat)):
        it, done = make(), []
        while len(done) < k:
            try:
                b = next(it)
                done.append((b.data[0].ravel().tolist(), b.pad))
            except StopIteration:
                it.reset()
                done.append("reset")
        state = json.loads(json.dumps(it.state_dict()))
        fresh = make()
        fresh.load_state_dict(state)
        rest = []
        while len(done) + len(rest) < len(flat):
            try:
                b = next(fresh)
                rest.append((b.data[0].ravel().tolist(), b.pad))
            except StopIteration:
                fresh.reset()
                rest.append("reset")
        assert done + rest == flat


@pytest.fixture(params=["pandas", "numpy"])
def parser(request, monkeypatch):
    """Run a CSV test with pandas' parser and with numpy's fallback."""
    if request.param == "numpy":
        monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    return request.param


@pytest.fixture
def csv_files(tmp_path, parser):
    data, label = tmp_path / "d.csv", tmp_path / "l.csv"
    data.write_text("1,2\n3,4\n5,6\n7,8\n9,10\n")
    label.write_text("1\n2\n3\n4\n5\n")
    return str(data), str(label)


def test_csv_iter_round_batch_is_mxnets(csv_files):
    # MXNet 1.9.1: the third batch wraps around (pad 1), the next epoch starts after it.
    it = CSVIter(csv_files[0], (2,), csv_files[1], batch_size=2)
    got = []
    for _ in range(3):
        got.append([(b.data[0][:, 0].tolist(), b.label[0].tolist(), b.pad) for b in it])
        it.reset()
    assert got == [
        [([1.0, 3.0], [1.0, 2.0], 0), ([5.0, 7.0], [3.0, 4.0], 0), ([9.0, 1.0], [5.0, 1.0], 1)],
        [([3.0, 5.0], [2.0, 3.0], 0), ([7.0, 9.0], [4.0, 5.0], 0)],
        [([1.0, 3.0], [1.0, 2.0], 0), ([5.0, 7.0], [3.0, 4.0], 0), ([9.0, 1.0], [5.0, 1.0], 1)],
    ]


def test_csv_iter_without_round_batch_pads_and_without_labels_gives_zeros(csv_files):
    it = CSVIter(csv_files[0], (2,), batch_size=2, round_batch=False)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 1]
    assert batches[-1].data[0][:1].tolist() == [[9.0, 10.0]]  # the padded row is not data
    assert batches[0].label[0].tolist() == [0.0, 0.0]
    assert batches[0].index.tolist() == [0, 1] and batches[0].data[0].dtype == np.float32
    assert it.provide_label[0].shape == (2,) and it.provide_data[0].shape == (2, 2)


@pytest.mark.parametrize("content, line", [("1,2\n3\n5,6\n", 2), ("1,2\n3,x\n", 2),
                                           ("1,2\n\n5,6\n", 2)])
def test_a_malformed_csv_row_names_the_file_and_line(tmp_path, parser, content, line):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    it = CSVIter(str(path), (2,), batch_size=3)
    with pytest.raises(ValueError, match=f"bad.csv.*line {line}"):
        next(it)


def test_csv_label_and_data_line_counts_must_match(tmp_path, csv_files):
    short = tmp_path / "short.csv"
    short.write_text("1\n2\n")
    with pytest.raises(ValueError, match="label_csv has 2 lines but data_csv has 5"):
        CSVIter(csv_files[0], (2,), str(short))


def test_resize_and_prefetching_iters_combine_and_resume(csv_files):
    resized = ResizeIter(NDArrayIter(np.arange(5), batch_size=2), size=4)
    assert [b.data[0].tolist() for b in resized] == [[0, 1], [2, 3], [4, 0], [0, 1]]
    resized.reset()
    next(resized)
    state = resized.state_dict()
    again = ResizeIter(NDArrayIter(np.arange(5), batch_size=2), size=4)
    again.load_state_dict(state)
    assert [b.data[0].tolist() for b in again] == [[2, 3], [4, 0], [0, 1]]
    both = PrefetchingIter([NDArrayIter(np.arange(4), batch_size=2),
                            NDArrayIter(np.arange(4) * 10, batch_size=2, data_name="x")],
                           rename_data=[{"data": "first"}, {"x": "second"}])
    assert [d.name for d in both.provide_data] == ["first", "second"]
    assert [[d.tolist() for d in b.data] for b in both] == [[[0, 1], [0, 10]],
                                                            [[2, 3], [20, 30]]]


def test_data_desc_is_mxnets_name_shape_pair_carrying_dtype_and_layout():
    it = NDArrayIter({"x": np.zeros((4, 2))}, np.zeros(4), batch_size=2)
    pairs = [(name, shape) for name, shape in it.provide_data + it.provide_label]
    assert pairs == [("x", (2, 2)), ("softmax_label", (2,))]
    desc = DataDesc("x", (2, 3), np.uint8, "NHWC")
    assert len(desc) == 2 and desc == ("x", (2, 3))
    assert (desc.dtype, desc.layout) == (np.uint8, "NHWC")
    assert repr(desc) == f"DataDesc[x,(2, 3),{np.uint8},NHWC]"
    for copy in (pickle.loads(pickle.dumps(desc)), desc._replace(name="y")):
        assert (copy.dtype, copy.layout) == (np.uint8, "NHWC")
    assert DataDesc.get_list([("a", (1,))], [("a", np.int32)])[0].dtype == np.int32


def test_prefetching_iter_renames_keep_dtype_and_layout():
    inner = NDArrayIter({"x": np.zeros((4, 2))}, batch_size=2, layout="NC")
    renamed = PrefetchingIter(inner, rename_data=[{"x": "y"}]).provide_data[0]
    assert (renamed.name, renamed.dtype, renamed.layout) == ("y", np.float32, "NC")
