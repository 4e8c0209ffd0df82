"""CSVIter.getdata()/getlabel(): the array itself, as MXNet's C++ iterators return it."""

import numpy as np

from dataset_kit.io import CSVIter


def test_getdata_and_getlabel_return_the_arrays_not_lists(tmp_path):
    data, label = tmp_path / "d.csv", tmp_path / "l.csv"
    data.write_text("1,2\n3,4\n5,6\n")
    label.write_text("7\n8\n9\n")
    it = CSVIter(str(data), (2,), str(label), batch_size=2, dtype="int32")
    batch = next(it)
    assert isinstance(it.getdata(), np.ndarray) and it.getdata().dtype == np.int32
    assert it.getdata().tolist() == [[1, 2], [3, 4]] == batch.data[0].tolist()
    assert it.getlabel().tolist() == [7.0, 8.0] == batch.label[0].tolist()
