"""LibSVMIter: sparse batches, MXNet's round batch, labels, errors."""

import warnings

import numpy as np
import pytest

from dataset_kit.io import CSRMatrix, LibSVMIter, MXNetError
from dataset_kit.io import csr as csr_module

DATA = "1.0 0:0.5 2:1.2\n-2.0\n-3.0 0:0.6 1:2.4 2:1.2\n4 2:-1.2\n"
LABEL = "1.0\n-2.0 0:0.125\n-3.0 2:1.2\n4 1:1.0 2:-1.2\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "data.t").write_text(DATA)
    (tmp_path / "label.t").write_text(LABEL)
    return str(tmp_path / "data.t"), str(tmp_path / "label.t")


def test_batches_are_mxnets_documented_example(files):
    it = LibSVMIter(data_libsvm=files[0], data_shape=(3,), batch_size=3)
    first, second = list(it)
    data = it.getdata()
    data.check_format(True)
    np.testing.assert_allclose(first.data[0].asnumpy(), [[0.5, 0, 1.2], [0, 0, 0],
                                                        [0.6, 2.4, 1.2]])
    np.testing.assert_allclose(second.data[0].asnumpy(), [[0, 0, -1.2], [0.5, 0, 1.2],
                                                         [0, 0, 0]])
    assert first.label[0].tolist() == [1, -2, -3] and second.label[0].tolist() == [4, 1, -2]
    assert (first.pad, second.pad) == (0, 2)


def test_labels_from_a_label_file_are_sparse_rows(files):
    it = LibSVMIter(data_libsvm=files[0], label_libsvm=files[1], data_shape=(3,),
                    label_shape=(3,), batch_size=3)
    np.testing.assert_allclose(next(it).label[0].asnumpy(), [[0, 0, 0], [0.125, 0, 0],
                                                            [0, 0, 1.2]])


def test_without_scipy_batches_are_csr_matrices(files, monkeypatch):
    monkeypatch.setattr(csr_module, "_scipy_csr", lambda: None)
    batch = next(LibSVMIter(data_libsvm=files[0], data_shape=(3,), batch_size=3))
    assert isinstance(batch.data[0], CSRMatrix)
    batch.data[0].check_format(True)
    np.testing.assert_allclose(batch.data[0].asnumpy()[2], [0.6, 2.4, 1.2])


@pytest.mark.parametrize("line", ["-3.0 -1:0.6 1:2.4", "-3.0 3:0.6", "-3.0 x:1"])
def test_a_bad_index_is_mxnets_error_naming_file_and_line(tmp_path, line):
    path = tmp_path / "bad.t"
    path.write_text(f"1.0 0:0.5\n{line}\n")
    with pytest.raises(MXNetError, match="bad.t, line 2"):
        LibSVMIter(data_libsvm=str(path), data_shape=(3,), batch_size=1)


def test_shapes_mxnet_refuses_are_its_error(files):
    with pytest.raises(MXNetError, match="data_shape is expected to be 1"):
        LibSVMIter(data_libsvm=files[0], data_shape=(3, 1))
    with pytest.raises(MXNetError, match="label_shape is not expected to be"):
        LibSVMIter(data_libsvm=files[0], label_libsvm=files[1], data_shape=(3,))


def test_data_name_and_label_name_name_the_inputs_as_in_mxnet(files):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # named, not ignored with a warning
        it = LibSVMIter(data_libsvm=files[0], data_shape=(3,), batch_size=3, data_name="x",
                        label_name="y")
    assert [d.name for d in it.provide_data + it.provide_label] == ["x", "y"]
