"""MXNet's MXRecordIO and MXIndexedRecordIO, over our record readers and writers."""

import io
import os
import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataset_kit import recordio
from dataset_kit.recordio import (
    IndexedRecordReader,
    MXIndexedRecordIO,
    MXRecordIO,
    RecordIOError,
    RecordReader,
)


def test_the_tutorials_first_cell_writes_and_reads_records_in_order(tmp_path):
    path = str(tmp_path / "tmp.rec")
    record = MXRecordIO(path, "w")
    for i in range(5):
        record.write(b"record_%d" % i)
    record.close()
    record = MXRecordIO(path, "r")
    assert [record.read() for _ in range(6)] == [b"record_%d" % i for i in range(5)] + [None]
    record.reset()
    assert record.read() == b"record_0" and record.tell() == 16
    record.close()
    assert not record.is_open


def test_indexed_records_read_by_key_in_any_order_and_read_goes_on_after_them(tmp_path):
    idx, rec = str(tmp_path / "tmp.idx"), str(tmp_path / "tmp.rec")
    writer = MXIndexedRecordIO(idx, rec, "w")
    offsets = []
    for i in range(5):
        offsets.append(writer.tell())
        writer.write_idx(i, b"record_%d" % i)
    assert writer.keys == list(range(5)) and writer.idx == dict(enumerate(offsets))
    del writer  # MXNet's users drop the writer: it is published then
    reader = MXIndexedRecordIO(idx, rec, "r")
    assert reader.keys == list(range(5)) and reader.idx == dict(enumerate(offsets))
    random.Random(0).shuffle(reader.keys)  # MXNet's own test shuffles the list in place
    for key in reader.keys:
        assert reader.read_idx(key) == b"record_%d" % key
    assert reader.read_idx(2) == b"record_2" and reader.read() == b"record_3"
    reader.seek(1)
    assert reader.read() == b"record_1" and reader.read() == b"record_2"
    reader.seek(4)
    assert reader.read() == b"record_4" and reader.read() is None
    with pytest.raises(KeyError):
        reader.read_idx(9)


def test_string_keys_and_a_key_type(tmp_path):
    idx, rec = tmp_path / "s.idx", tmp_path / "s.rec"
    with MXIndexedRecordIO(idx, rec, "w", key_type=str) as writer:
        writer.write_idx("cat", b"meow")
        writer.write_idx("dog", b"woof")
    assert idx.read_text() == "cat\t0\ndog\t12\n"
    with MXIndexedRecordIO(idx, rec, "r", key_type=str) as reader:
        assert reader.keys == ["cat", "dog"] and reader.read_idx("dog") == b"woof"


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.binary(max_size=40), max_size=8))
def test_files_written_through_either_name_are_the_same_bytes(tmp_path_factory, records):
    d = tmp_path_factory.mktemp("same")
    with recordio.IndexedRecordWriter(d / "a.idx", d / "a.rec") as ours:
        for key, record in enumerate(records):
            ours.write_idx(key, record)
    theirs = MXIndexedRecordIO(str(d / "b.idx"), str(d / "b.rec"), "w")
    for key, record in enumerate(records):
        theirs.write_idx(key, bytearray(record))
    theirs.close()
    for name in ("rec", "idx"):
        assert (d / f"a.{name}").read_bytes() == (d / f"b.{name}").read_bytes()
    reader = MXRecordIO(d / "b.rec", "r")
    assert [reader.read() for _ in records] == records and reader.read() is None


def test_a_writer_reset_starts_the_file_over(tmp_path):
    idx, rec = tmp_path / "r.idx", tmp_path / "r.rec"
    writer = MXIndexedRecordIO(idx, rec, "w")
    writer.write_idx(0, b"dropped")
    writer.reset()
    assert writer.keys == [] and writer.tell() == 0
    writer.write_idx(7, b"kept")
    writer.close()
    writer.close()  # idempotent
    reader = MXIndexedRecordIO(idx, rec, "r")
    assert reader.keys == [7] and reader.read() == b"kept" and reader.read() is None


def test_a_with_block_left_by_an_exception_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError), MXRecordIO(tmp_path / "r.rec", "w") as writer:
        writer.write(b"x")
        raise RuntimeError("crash")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("make", [
    lambda d: MXRecordIO(d / "r.rec", "r"),
    lambda d: MXIndexedRecordIO(d / "r.idx", d / "r.rec", "r"),
])
def test_a_pickled_reader_reopens_at_the_first_record_and_the_original_stays_open(tmp_path,
                                                                                    make):
    with MXIndexedRecordIO(tmp_path / "r.idx", tmp_path / "r.rec", "w") as writer:
        for i in range(3):
            writer.write_idx(i, b"%d" % i)
    reader = make(tmp_path)
    assert reader.read() == b"0"
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.read() == b"0" and reader.read() == b"1"  # MXNet's copy also starts over
    closed = make(tmp_path)
    closed.close()
    again = pickle.loads(pickle.dumps(closed))
    assert not again.is_open
    again.open()
    assert again.read() == b"0"


def test_an_open_writer_cannot_be_pickled_a_closed_one_can(tmp_path):
    writer = MXRecordIO(tmp_path / "r.rec", "w")
    with pytest.raises(TypeError, match="cannot pickle an MXRecordIO writing .*r.rec"):
        pickle.dumps(writer)
    writer.close()
    assert not pickle.loads(pickle.dumps(writer)).is_open


def test_wrong_mode_flag_and_arguments_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="flag must be 'r' .* or 'w' .*, got 'a'"):
        MXRecordIO(tmp_path / "r.rec", "a")
    with pytest.raises(TypeError, match="uri must be a path"):
        MXRecordIO(3, "w")
    with pytest.raises(TypeError, match="idx_path must be a path"):
        MXIndexedRecordIO(None, tmp_path / "r.rec", "r")
    with pytest.raises(FileNotFoundError, match="r.rec does not exist"):
        MXRecordIO(tmp_path / "r.rec", "r")
    writer = MXIndexedRecordIO(tmp_path / "r.idx", tmp_path / "r.rec", "w")
    with pytest.raises(io.UnsupportedOperation, match="cannot read: .*r.rec is open for writing"):
        writer.read()
    with pytest.raises(io.UnsupportedOperation, match="cannot seek"):
        writer.seek(0)
    with pytest.raises(TypeError, match="buf must be bytes-like, got str"):
        writer.write_idx(0, "text")
    writer.close()
    with pytest.raises(ValueError, match="cannot write_idx: .*r.rec is closed"):
        writer.write_idx(0, b"x")
    reader = MXIndexedRecordIO(tmp_path / "r.idx", tmp_path / "r.rec", "r")
    with pytest.raises(io.UnsupportedOperation, match="cannot write: .*open for reading"):
        reader.write(b"x")


def test_a_forked_child_cannot_write_through_its_parents_writer(tmp_path):
    writer = MXRecordIO(tmp_path / "r.rec", "w")
    writer.write(b"parent")
    pid = os.fork()
    if pid == 0:  # the child: report by exit status, never return into pytest
        try:
            writer.write(b"child")
        except RuntimeError:
            os._exit(0)
        os._exit(1)
    try:
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        writer.close()
    assert list(RecordReader(tmp_path / "r.rec")) == [b"parent"]


def test_an_indexed_reader_reads_on_in_order_from_where_read_idx_left_it(tmp_path):
    with recordio.IndexedRecordWriter(tmp_path / "r.idx", tmp_path / "r.rec") as writer:
        for key, size in enumerate([3, 40_000, 5, 70_000]):  # small and large records
            writer.write_idx(key, bytes([key]) * size)
    reader = IndexedRecordReader(tmp_path / "r.idx", tmp_path / "r.rec")
    assert len(reader.read_idx(1)) == 40_000 and reader.read() == bytes([2]) * 5
    assert reader.read_idx(0) == b"\0" * 3 and len(reader.read()) == 40_000
    reader.seek(reader.idx[3])
    assert len(reader.read()) == 70_000 and reader.read() is None
    with pytest.raises(RecordIOError, match="no record at offset 8"):
        reader.seek(8)
