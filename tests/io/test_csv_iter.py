"""CSVIter's file errors and missing values (the batching itself is in test_io.py)."""

import sys
import warnings

import numpy as np
import pytest

from dataset_kit.io import CSVIter


@pytest.fixture(params=["pandas", "numpy"])
def parser(request, monkeypatch):
    """Run with pandas' parser, and with pandas' import failing in this process."""
    if request.param == "numpy":
        monkeypatch.setitem(sys.modules, "pandas", None)
    return request.param


def test_an_empty_data_file_is_an_error_naming_it(tmp_path):
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(ValueError, match=r"data_csv .*empty.csv is empty"):
        CSVIter(str(tmp_path / "empty.csv"), (2,), batch_size=2)


def test_a_directory_is_named_as_a_directory(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        CSVIter(str(tmp_path), (2,))


@pytest.mark.parametrize("which", ["data", "label"])
def test_missing_values_are_errors_unless_filled(tmp_path, parser, which):
    data, label = tmp_path / "d.csv", tmp_path / "l.csv"
    data.write_text("1,2\n3,4\n" + ("NA,6\n" if which == "data" else "5,6\n"))
    label.write_text("1\n2\n" + ("\n" if which == "label" else "3\n"))
    it = CSVIter(str(data), (2,), str(label), batch_size=3)
    with pytest.raises(ValueError, match=rf"{which[0]}.csv, line 3: missing value"):
        next(it)
    filled = next(CSVIter(str(data), (2,), str(label), batch_size=3, fill_value=-1))
    assert filled.data[0].tolist()[2] == ([-1, 6] if which == "data" else [5, 6])
    assert filled.label[0].tolist() == ([1, 2, 3] if which == "data" else [1, 2, -1])


def test_getdata_and_getlabel_return_the_arrays_not_lists(tmp_path):
    data, label = tmp_path / "d.csv", tmp_path / "l.csv"
    data.write_text("1,2\n3,4\n5,6\n")
    label.write_text("7\n8\n9\n")
    it = CSVIter(str(data), (2,), str(label), batch_size=2, dtype="int32")
    batch = next(it)
    assert isinstance(it.getdata(), np.ndarray) and it.getdata().dtype == np.int32
    assert it.getdata().tolist() == [[1, 2], [3, 4]] == batch.data[0].tolist()
    assert it.getlabel().tolist() == [7.0, 8.0] == batch.label[0].tolist()


def test_data_name_and_label_name_name_the_inputs_as_in_mxnet(tmp_path):
    data, label = tmp_path / "d.csv", tmp_path / "l.csv"
    data.write_text("1,2\n3,4\n")
    label.write_text("7\n8\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        it = CSVIter(str(data), (2,), str(label), batch_size=2, data_name="x", label_name="y")
    assert [d.name for d in it.provide_data + it.provide_label] == ["x", "y"]
