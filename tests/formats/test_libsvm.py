"""The LibSVM reader: rows as CSR arrays, refusals that name the file and line."""

from __future__ import annotations

import numpy as np
import pytest

from dataset_kit.formats.libsvm import LibSVMFormatError, read_libsvm


def test_rows_read_as_csr_arrays_skipping_comments_and_qids(tmp_path):
    path = tmp_path / "a.libsvm"
    path.write_text("1 0:0.5 3:2\n# a comment\n\n0:2 qid:7 1:1 # trailing\n-1\n")
    labels, (data, indices, indptr) = read_libsvm(path, 4)
    assert labels.tolist() == [1.0, 0.0, -1.0] and labels.dtype == np.float32
    assert data.tolist() == [0.5, 2.0, 1.0] and indices.tolist() == [0, 3, 1]
    assert indptr.tolist() == [0, 2, 3, 3]


@pytest.mark.parametrize("row, reason", [("1 4:1", "index 4 is outside"), ("x 1:1", "x"),
                                         ("1 2", "not enough values")])
def test_a_bad_row_names_the_file_and_line(tmp_path, row, reason):
    path = tmp_path / "b.libsvm"
    path.write_text(f"1 0:1\n{row}\n")
    with pytest.raises(LibSVMFormatError, match=f"{path}, line 2: not a LibSVM row: .*{reason}"):
        read_libsvm(path, 4)
