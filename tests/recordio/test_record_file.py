"""Record files: the bytes MXNet 1.9.1 wrote (checked in), round trips, corruption errors."""

import json
import os
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.recordio import (
    IndexedRecordReader,
    IndexedRecordWriter,
    IRHeader,
    RecordIOError,
    RecordReader,
    RecordWriter,
    pack,
    pack_img,
    unpack,
    unpack_img,
)
from dataset_kit.recordio._format import MAGIC_BYTES

DATA = os.path.join(os.path.dirname(__file__), "data")


def reference_payloads():
    with open(os.path.join(DATA, "reference_payloads.json")) as f:
        return [bytes.fromhex(p) for p in json.load(f)]


def test_our_writer_makes_the_bytes_mxnet_wrote(tmp_path):
    with IndexedRecordWriter(tmp_path / "r.idx", tmp_path / "r.rec") as writer:
        for key, payload in enumerate(reference_payloads()):
            writer.write_idx(key, payload)
    for name in ("rec", "idx"):
        with open(os.path.join(DATA, f"reference.{name}"), "rb") as f:
            assert (tmp_path / f"r.{name}").read_bytes() == f.read()


def test_we_read_what_mxnet_wrote_including_multi_part_records():
    payloads = reference_payloads()
    reader = IndexedRecordReader(os.path.join(DATA, "reference.idx"),
                                 os.path.join(DATA, "reference.rec"))
    assert reader.keys == list(range(len(payloads))) and len(reader) == len(payloads)
    assert [reader.read_idx(k) for k in reversed(reader.keys)] == payloads[::-1]
    assert list(RecordReader(os.path.join(DATA, "reference.rec"))) == payloads
    view = reader.read_idx(2, copy=False)
    assert isinstance(view, memoryview) and view == payloads[2]  # one part: no copy


def test_headers_pack_as_mxnet_packs_them():
    with open(os.path.join(DATA, "reference_headers.bin"), "rb") as f:
        data = f.read()
    size = struct.unpack("<I", data[:4])[0]
    first, second = data[4:4 + size], data[4 + size:]
    assert pack(IRHeader(0, [1.5, 2.0, -3.0], 7, 9), b"payload") == first
    assert pack(IRHeader(3, 4.25, 11, 0), b"more") == second
    header, rest = unpack(first)
    assert header.flag == 3 and header.label.tolist() == [1.5, 2.0, -3.0]
    assert (header.id, header.id2, bytes(rest)) == (7, 9, b"payload")
    header, rest = unpack(second)
    assert (header.flag, header.label, bytes(rest)) == (0, 4.25, b"more")


payloads = st.lists(st.one_of(
    st.binary(max_size=40),
    st.lists(st.sampled_from([MAGIC_BYTES, b"a", b"bc", b"\0\0\0", MAGIC_BYTES[:3]]),
             max_size=8).map(b"".join)), max_size=12)


@given(records=payloads)
def test_any_payloads_round_trip_through_both_writers_and_readers(tmp_path_factory, records):
    directory = tmp_path_factory.mktemp("rec")
    with RecordWriter(directory / "plain.rec") as writer:
        for record in records:
            writer.write(record)
    assert list(RecordReader(directory / "plain.rec")) == records
    with IndexedRecordWriter(directory / "i.idx", directory / "i.rec") as writer:
        for key, record in enumerate(records):
            writer.write_idx(key, record)
    assert (directory / "i.rec").read_bytes() == (directory / "plain.rec").read_bytes()
    reader = IndexedRecordReader(directory / "i.idx", directory / "i.rec")
    assert [reader.read_idx(k) for k in range(len(records))] == records
    clone = pickle.loads(pickle.dumps(reader))  # pickles paths and the index, not data
    assert [clone.read_idx(k, copy=False) for k in range(len(records))] == records


def test_seek_and_tell_revisit_a_record(tmp_path):
    with RecordWriter(tmp_path / "r.rec") as writer:
        for record in (b"one", b"two", b"three"):
            writer.write(record)
    reader = RecordReader(tmp_path / "r.rec")
    reader.read()
    offset = reader.tell()
    assert reader.read() == b"two" and reader.read() == b"three" and reader.read() is None
    reader.seek(offset)
    assert reader.read() == b"two"


def test_an_interrupted_writer_leaves_no_file_that_looks_complete(tmp_path):
    with pytest.raises(RuntimeError):
        with IndexedRecordWriter(tmp_path / "r.idx", tmp_path / "r.rec") as writer:
            writer.write_idx(0, b"record")
            raise RuntimeError("crash")
    assert os.listdir(tmp_path) == []
    writer = RecordWriter(tmp_path / "open.rec")
    writer.write(b"x")
    assert os.listdir(tmp_path) == [n for n in os.listdir(tmp_path) if n.endswith(".part")]
    writer.close()
    assert (tmp_path / "open.rec").exists()


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-3], "past the end"),
    (lambda b: b"\x01\x02\x03\x04" + b[4:], "no record at offset 0"),
    (lambda b: b[:5], "truncated record header at offset 0"),
])
def test_a_corrupt_file_is_an_error_naming_file_and_offset(tmp_path, damage, message):
    with RecordWriter(tmp_path / "r.rec") as writer:
        writer.write(b"hello world")
    path = tmp_path / "r.rec"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(RecordIOError, match=f"r.rec.*{message}"):
        RecordReader(path).read()


def test_an_index_that_does_not_point_at_a_record_names_the_key(tmp_path):
    with IndexedRecordWriter(tmp_path / "r.idx", tmp_path / "r.rec") as writer:
        writer.write_idx(0, b"abcdefgh")
        writer.write_idx(1, b"ijkl")
    (tmp_path / "r.idx").write_text("0\t0\n1\t4\n")
    with pytest.raises(RecordIOError, match="r.idx does not belong to .*r.rec: key 1 points at "
                                            "offset 4, where no record starts"):
        IndexedRecordReader(tmp_path / "r.idx", tmp_path / "r.rec")
    (tmp_path / "bad.idx").write_text("0 0\n")
    with pytest.raises(RecordIOError, match="bad.idx, line 1"):
        IndexedRecordReader(tmp_path / "bad.idx", tmp_path / "r.rec")


def test_images_pack_and_unpack_in_rgb():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (16, 20, 3), dtype=np.uint8)
    header, back = unpack_img(pack_img(IRHeader(0, 3.0, 1, 0), image, img_fmt=".png"))
    assert header.label == 3.0 and np.array_equal(back, image)
    assert unpack_img(pack_img((0, 1.0, 2, 0), image, quality=9, img_fmt=".png"), 0)[1].shape \
        == (16, 20)
    _, lossy = unpack_img(pack_img((0, [1, 2], 3, 0), image, quality=95))
    assert lossy.shape == (16, 20, 3)
    with pytest.raises(ValueError, match="img_fmt"):
        pack_img((0, 1.0, 0, 0), image, img_fmt=".gif")


def test_sequential_views_equal_the_records_without_copying(tmp_path):
    records = [b"a" * 10, MAGIC_BYTES * 2, b""]
    with RecordWriter(tmp_path / "r.rec") as writer:
        for record in records:
            writer.write(record)
    views = list(RecordReader(tmp_path / "r.rec", copy=False))
    assert views == records and isinstance(views[0], memoryview)
