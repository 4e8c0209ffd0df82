"""Record files: the bytes MXNet 1.9.1 wrote (checked in), round trips, corruption errors."""

import json
import os
import pickle
import re
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataset_kit.formats.recordio._format import MAGIC_BYTES
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


# --- files truncated under a reader, hostile lengths and flags ---------------------------

def _child(*args, **kwargs):
    from tests.recordio.test_publish import child
    return child(*args, **kwargs)


def test_a_file_truncated_under_open_readers_is_an_error_naming_it_not_a_sigbus(tmp_path):
    import subprocess

    rec = tmp_path / "r.rec"
    with IndexedRecordWriter(tmp_path / "r.idx", rec) as writer:
        for key in range(100):  # 400 KB: more than a reader reads ahead
            writer.write_idx(key, bytes([key]) * 4096)
    original = rec.read_bytes()
    p = _child("open_then_wait", rec, "-", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
               stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        with open(rec, "r+b") as f:  # what cp and rsync --inplace do to a live file
            f.truncate(0)
            f.write(original[:len(original) // 3])
        out, err = p.communicate("go\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    assert p.returncode == 0, (p.returncode, err)  # -7 would be SIGBUS
    lines = out.splitlines()
    assert lines[0].startswith("indexed error: ") and lines[1].startswith("sequential error: ")
    for line in lines:
        assert f"{rec} shrank under the reader" in line and "offset" in line


def test_a_length_past_the_end_is_refused_before_anything_is_allocated(tmp_path):
    import tracemalloc

    path = tmp_path / "r.rec"
    path.write_bytes(MAGIC_BYTES + struct.pack("<I", (1 << 29) - 1) + bytes(64))
    tracemalloc.start()
    try:
        with pytest.raises(RecordIOError, match=f"{path}: record at offset 0 claims 536870911"):
            RecordReader(path).read()
        with pytest.raises(RecordIOError, match=f"{path}: record at offset 0 claims"):
            IndexedRecordReader(None, path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_record_of_millions_of_parts_costs_memory_in_proportion_to_the_file(tmp_path):
    import tracemalloc

    parts = 1 << 18  # 2 MiB of empty parts
    head = struct.Struct("<II")
    body = (head.pack(0xCED7230A, 1 << 29) + head.pack(0xCED7230A, 2 << 29) * (parts - 2)
            + head.pack(0xCED7230A, 3 << 29))
    path = tmp_path / "parts.rec"
    path.write_bytes(body)
    tracemalloc.start()
    try:
        record = RecordReader(path).read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert record == MAGIC_BYTES * (parts - 1)
    assert peak < 4 * len(body)


@pytest.mark.parametrize("cflag", [4, 5, 6, 7])
def test_undefined_part_flags_are_refused_naming_file_and_offset(tmp_path, cflag):
    path = tmp_path / "r.rec"
    with RecordWriter(path) as writer:
        writer.write(b"good")
        writer.write(b"flag")
    data = bytearray(path.read_bytes())
    data[12 + 4:12 + 8] = struct.pack("<I", cflag << 29 | 4)
    path.write_bytes(bytes(data))
    reader = RecordReader(path)
    with pytest.raises(RecordIOError, match=f"{path}: undefined part flag {cflag} at offset 12"):
        list(reader)
    with pytest.raises(RecordIOError, match=f"{path}: undefined part flag {cflag} at offset 12"):
        _read_at(path, 12)


def _read_at(path, offset):
    reader = RecordReader(path)
    reader.seek(offset)
    return reader.read()


@pytest.mark.parametrize("text, message", [
    ("0\t0\n1\t16\n0\t32\n", "line 3: duplicate key 0 (first on line 1)"),
    ("0\t0\nx\t16\n", "line 2: key 'x' is not a valid int"),
    ("0\t0\n1\t-16\n", "line 2: expected 'key<TAB>offset'"),
    ("0\t0\n\n", "line 2: expected 'key<TAB>offset'"),
    ("0\t0\n1\t1\xb2\n", "line 2: expected 'key<TAB>offset'"),
])
def test_index_errors_name_the_file_the_line_and_the_key(tmp_path, text, message):
    with IndexedRecordWriter(tmp_path / "r.idx", tmp_path / "r.rec") as writer:
        for key in range(3):
            writer.write_idx(key, b"12345678")
    (tmp_path / "bad.idx").write_text(text)
    with pytest.raises(RecordIOError, match=re.escape(f"{tmp_path / 'bad.idx'}, {message}")):
        IndexedRecordReader(tmp_path / "bad.idx", tmp_path / "r.rec")
    (tmp_path / "bin.idx").write_bytes(b"0\t0\n\xff\t16\n")
    with pytest.raises(RecordIOError, match="bin.idx, line 2: not UTF-8"):
        IndexedRecordReader(tmp_path / "bin.idx", tmp_path / "r.rec")


def test_a_directory_is_named_as_a_directory(tmp_path):
    with pytest.raises(IsADirectoryError, match=f"record file {tmp_path} is a directory"):
        RecordReader(tmp_path)
    (tmp_path / "d.idx").mkdir()
    with RecordWriter(tmp_path / "r.rec") as writer:
        writer.write(b"x")
    with pytest.raises(IsADirectoryError, match="index file .*d.idx is a directory"):
        IndexedRecordReader(tmp_path / "d.idx", tmp_path / "r.rec")


def test_a_pickled_reader_refuses_a_record_file_replaced_since_it_was_opened(tmp_path):
    from tests.recordio._children import payload, write_pair
    write_pair(str(tmp_path / "r.rec"), 1)
    reader = IndexedRecordReader(tmp_path / "r.idx", tmp_path / "r.rec")
    state = pickle.dumps(reader)
    assert pickle.loads(state).read_idx(3) == reader.read_idx(3)
    write_pair(str(tmp_path / "r.rec"), 2)
    with pytest.raises(RecordIOError, match="r.rec was replaced or changed since it was opened"):
        pickle.loads(state)
    assert reader.read_idx(3) == payload(1, 3)  # the open reader keeps its own generation


# --- writers publish when closed or collected, never after a crash ------------------------

def test_a_writer_that_is_deleted_or_goes_out_of_scope_publishes_its_files(tmp_path):
    writer = IndexedRecordWriter(tmp_path / "a.idx", tmp_path / "a.rec")
    writer.write_idx(0, b"deleted")
    del writer
    assert IndexedRecordReader(tmp_path / "a.idx", tmp_path / "a.rec").read_idx(0) == b"deleted"

    def scope():
        plain = RecordWriter(tmp_path / "b.rec")
        plain.write(b"scoped")

    scope()
    assert list(RecordReader(tmp_path / "b.rec")) == [b"scoped"]
    assert sorted(os.listdir(tmp_path)) == ["a.idx", "a.rec", "b.rec"]


@pytest.mark.parametrize("how, published", [("exit", True), ("exception", False),
                                            ("sigkill", False)])
def test_a_writer_left_open_publishes_at_a_normal_exit_and_never_after_a_crash(tmp_path, how,
                                                                              published):
    import subprocess

    from tests.recordio._children import check_pair
    p = _child("leave_open", tmp_path / "r.rec", how, stderr=subprocess.PIPE)
    try:
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    complete = [n for n in os.listdir(tmp_path) if not n.endswith(".part")]
    if published:
        assert sorted(complete) == ["r.idx", "r.rec"] and check_pair(str(tmp_path / "r.rec")) == 1
    else:
        assert complete == []


def test_a_forked_child_that_drops_a_copy_of_an_open_writer_publishes_nothing(tmp_path):
    p = _child("fork_and_drop", tmp_path / "r.rec")
    try:
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    assert list(RecordReader(tmp_path / "r.rec")) == [b"first", b"second"]


# --- damage met in order, offsets and positions that are no record -----------------------

@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.binary(max_size=30), min_size=1, max_size=6), data=st.data())
def test_reading_in_order_gives_every_record_before_the_damage_then_names_its_offset(
        tmp_path_factory, records, data):
    path = tmp_path_factory.mktemp("damaged") / "r.rec"
    offsets = []
    with RecordWriter(path) as writer:
        for record in records:
            offsets.append(writer.tell())
            writer.write(record)
    damaged = data.draw(st.integers(0, len(records) - 1))
    content = bytearray(path.read_bytes())
    content[offsets[damaged]] ^= 0xFF  # the damaged record's magic
    path.write_bytes(bytes(content))
    reader, got = RecordReader(path), []
    with pytest.raises(RecordIOError, match=re.escape(f"{path}: no record at offset "
                                                      f"{offsets[damaged]}")):
        while (record := reader.read()) is not None:
            got.append(record)
    assert got == records[:damaged]  # as MXNet 1.9.1: the record before the damage too


@pytest.mark.parametrize("tail, message", [
    (b"\x01\x02\x03", "truncated record header at offset 24"),
    (b"garbage!", "no record at offset 24"),
])
def test_bytes_after_the_last_record_do_not_hide_it(tmp_path, tail, message):
    path = tmp_path / "r.rec"
    with RecordWriter(path) as writer:
        writer.write(b"A")
        writer.write(b"B")
    path.write_bytes(path.read_bytes() + tail)
    reader = RecordReader(path)
    assert reader.read() == b"A" and reader.read() == b"B"
    with pytest.raises(RecordIOError, match=re.escape(f"{path}: {message}")):
        reader.read()


def test_an_index_offset_beyond_int64_names_the_file_and_line(tmp_path):
    with IndexedRecordWriter(tmp_path / "r.idx", tmp_path / "r.rec") as writer:
        writer.write_idx(0, b"12345678")
    for offset in (str(1 << 63), "9" * 5000):
        (tmp_path / "big.idx").write_text(f"0\t0\n1\t{offset}\n")
        with pytest.raises(RecordIOError, match=re.escape(
                f"{tmp_path / 'big.idx'}, line 2: offset {offset[:40]} of key 1 is beyond")):
            IndexedRecordReader(tmp_path / "big.idx", tmp_path / "r.rec")
    (tmp_path / "zeros.idx").write_text("0\t" + "0" * 40 + "\n")  # leading zeros are no harm
    assert IndexedRecordReader(tmp_path / "zeros.idx", tmp_path / "r.rec").read_idx(0) \
        == b"12345678"


@pytest.mark.parametrize("offset, message", [
    (-8, "offset -8 is outside the file (0 to 32)"),
    (36, "offset 36 is outside the file (0 to 32)"),
    (2, "offset 2 is not 4-byte aligned"),
    (8, "no record at offset 8"),
    (28, "truncated record header at offset 28"),
])
def test_seek_refuses_a_position_where_no_record_starts(tmp_path, offset, message):
    path = tmp_path / "r.rec"
    with RecordWriter(path) as writer:
        writer.write(b"first record")  # 8 + 12 bytes
        writer.write(b"")  # 8 bytes, ending at 28
    path.write_bytes(path.read_bytes() + b"\0" * 4)  # 32 bytes
    reader = RecordReader(path)
    reader.read()
    with pytest.raises(RecordIOError, match=re.escape(f"{path}: {message}")):
        reader.seek(offset)
    assert reader.tell() == 20 and reader.read() == b""  # the position is unchanged
    with pytest.raises(TypeError, match="offset must be an integer, got '20'"):
        reader.seek("20")
    reader.seek(32)  # the end of the file: nothing more to read
    assert reader.read() is None


def test_seek_refuses_a_later_part_of_a_record(tmp_path):
    path = tmp_path / "r.rec"
    with RecordWriter(path) as writer:
        writer.write(b"abcd" + MAGIC_BYTES + b"efgh")  # two parts: 8+4, then 8+4 at 12
    reader = RecordReader(path)
    with pytest.raises(RecordIOError, match=re.escape(
            f"{path}: offset 12 holds a later part of a record (part flag 3)")):
        reader.seek(12)


# Small records come in one read each, large ones as a header, then the payload; either
# way the file is larger than what a reader reads ahead (64 KiB).
@pytest.mark.parametrize("size, count", [(4096, 40), (100 << 10, 8)])
@pytest.mark.parametrize("kind", ["indexed", "sequential"])
def test_a_file_truncated_under_an_open_reader_is_an_error_naming_file_and_offset(
        tmp_path, size, count, kind):
    rec = tmp_path / "r.rec"
    with IndexedRecordWriter(tmp_path / "r.idx", rec) as writer:
        for key in range(count):
            writer.write_idx(key, bytes([key]) * size)
    reader = IndexedRecordReader(tmp_path / "r.idx", rec) if kind == "indexed" \
        else RecordReader(rec)
    first = reader.read_idx(0) if kind == "indexed" else reader.read()
    assert first == bytes(size)
    with open(rec, "r+b") as f:  # what cp and rsync --inplace do to a live file
        f.truncate(len(rec.read_bytes()) // 2)
    with pytest.raises(RecordIOError, match=re.escape(f"{rec} shrank under the reader") +
                       ".* bytes at offset [0-9]+"):
        if kind == "indexed":
            for key in range(count):
                assert reader.read_idx(key) == bytes([key]) * size
        else:
            while reader.read() is not None:
                pass


@pytest.mark.parametrize("img_fmt", [".jpg", ".png"])
def test_a_one_channel_image_packs_as_a_gray_image(img_fmt):
    gray = np.random.default_rng(3).integers(0, 255, (12, 17), dtype=np.uint8)
    packed = pack_img((0, 1.0, 5, 0), gray[:, :, None], img_fmt=img_fmt)
    assert packed == pack_img((0, 1.0, 5, 0), gray, img_fmt=img_fmt)
    header, back = unpack_img(packed)
    assert header.id == 5 and back.shape == (12, 17)
    if img_fmt == ".png":
        assert np.array_equal(back, gray)
    with pytest.raises(ValueError, match=r"img must be HxW, .* got shape \(12, 17, 2\)"):
        pack_img((0, 1.0, 5, 0), np.zeros((12, 17, 2), np.uint8), img_fmt=img_fmt)
