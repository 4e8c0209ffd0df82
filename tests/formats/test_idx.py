"""The one IDX reader: plain and gzipped files, refusals that name the file."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.formats.idx import IdxFormatError, read_idx


def idx_bytes(values: np.ndarray) -> bytes:
    header = (0x800 + values.ndim).to_bytes(4, "big")
    header += b"".join(n.to_bytes(4, "big") for n in values.shape)
    return header + values.astype(np.uint8).tobytes()


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), zipped=st.booleans())
def test_an_idx_file_reads_back_as_written(tmp_path_factory, shape, zipped):
    values = np.arange(int(np.prod(shape)), dtype=np.uint8).reshape(shape)
    path = tmp_path_factory.mktemp("idx") / "x.idx"
    data = idx_bytes(values)
    path.write_bytes(gzip.compress(data) if zipped else data)
    got = read_idx(path, len(shape))
    assert got.dtype == np.uint8 and np.array_equal(got, values)


def test_a_wrong_magic_names_the_file(tmp_path):
    path = tmp_path / "labels.idx"
    path.write_bytes(idx_bytes(np.zeros(3, np.uint8)))
    with pytest.raises(IdxFormatError, match=f"{path} has magic 2049 at offset 0, expected 2051"):
        read_idx(path, 3)


def test_a_truncated_file_names_the_file_and_the_offset(tmp_path):
    path = tmp_path / "images.idx"
    path.write_bytes(idx_bytes(np.zeros((2, 2, 2), np.uint8))[:-1])
    with pytest.raises(IdxFormatError, match=f"{path} holds 7 values from offset 16"):
        read_idx(path, 3)


def test_the_idx_error_is_a_value_error():
    assert issubclass(IdxFormatError, ValueError)
