import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.formats.shards._layout import (
    ShardFile,
    ShardFormatError,
    sample_bytes,
    shard_bytes,
)

SHARD = shard_bytes([sample_bytes([b"a" * i, b"bc"], None) for i in range(6)])


def test_fields_come_back_as_written(tmp_path):
    path = tmp_path / "s.dks"
    path.write_bytes(SHARD)
    shard = ShardFile(str(path), 6, 2, False)
    try:
        assert [bytes(f) for f in shard.fields(4)] == [b"aaaa", b"bc"]
    finally:
        shard.close()


@given(st.integers(0, len(SHARD) - 1))
def test_a_truncated_shard_is_refused_naming_the_file(tmp_path_factory, cut):
    path = tmp_path_factory.mktemp("t") / "s.dks"
    path.write_bytes(SHARD[:cut])
    with pytest.raises(ShardFormatError, match="s.dks"):
        ShardFile(str(path), 6, 2, False)


@given(st.integers(8, 8 + 8 + 7 * 8 - 1), st.integers(1, 255))
def test_a_damaged_header_is_refused_never_misread(tmp_path_factory, where, flip):
    data = bytearray(SHARD)
    data[where] ^= flip
    path = tmp_path_factory.mktemp("t") / "s.dks"
    path.write_bytes(bytes(data))
    try:
        shard = ShardFile(str(path), 6, 2, False)
    except ShardFormatError:
        return
    # The offsets still fit the file: every sample is either whole or refused.
    try:
        for i in range(6):
            try:
                fields = shard.fields(i)
            except ShardFormatError:
                continue
            assert sum(len(f) for f in fields) + 8 <= len(SHARD)
    finally:
        shard.close()


@pytest.mark.parametrize("compressed", [False, True])
@given(offsets=st.lists(st.integers(0, 5), max_size=20))
def test_a_batch_of_samples_is_what_reading_them_one_by_one_gives(tmp_path_factory, compressed,
                                                                   offsets):
    import numpy as np
    import zstandard

    compressor = zstandard.ZstdCompressor() if compressed else None
    path = tmp_path_factory.mktemp("t") / "s.dks"
    path.write_bytes(shard_bytes([sample_bytes([b"a" * i, b"bc" * i], compressor)
                                  for i in range(6)]))
    shard = ShardFile(str(path), 6, 2, compressed)
    try:
        columns = shard.columns_of(np.array(offsets, dtype=np.int64))
        assert [list(row) for row in zip(*columns)] == [shard.fields(i) for i in offsets]
    finally:
        shard.close()


def test_column_lengths_that_overrun_the_sample_are_refused_naming_file_and_offset(tmp_path):
    import struct

    bad = struct.pack("<2I", 5, 9) + b"abc"  # says 14 bytes of columns, has 3
    path = tmp_path / "s.dks"
    path.write_bytes(shard_bytes([sample_bytes([b"x"], None)[:0] + bad]))
    shard = ShardFile(str(path), 1, 2, False)
    try:
        with pytest.raises(ShardFormatError, match=r"s\.dks: the sample at offset 32 has 11 "
                                                   r"bytes, its column lengths say 22"):
            shard.fields(0)
    finally:
        shard.close()
