"""Pickle datasets: opening runs no code; a cut or corrupt file is an error naming the offset."""

import pickle
import pickletools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataset_kit.datasets import (
    PickleDatasetWriter,
    open_pickle_dataset,
    open_pickle_dataset_writer,
)

EXAMPLES = [{"k": 0, "x": np.arange(3)}, "two", (3, 3.5, None), b"\x00" * 70_000, [5] * 40]


class CreatesAMarkerFile:
    """Unpickling this runs ``open(marker, "w")``: code named by the file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


def write_examples(path, examples, protocol=pickle.HIGHEST_PROTOCOL):
    with open_pickle_dataset_writer(path, protocol) as writer:
        for example in examples:
            writer.write(example)


def same(a, b):
    return pickle.dumps(a) == pickle.dumps(b)


def test_opening_runs_no_code_from_the_file_reading_the_example_does(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "hostile.pkl"
    write_examples(path, [1, CreatesAMarkerFile(str(marker)), 3])
    with open_pickle_dataset(path) as dataset:
        assert len(dataset) == 3 and dataset[2] == 3
        assert not marker.exists()  # scanning walked the opcodes, ran nothing
        dataset[1].close()
    assert marker.exists()  # the file really would run code when read: trust matters


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_protocol_reads_back(tmp_path, protocol):
    write_examples(tmp_path / "p.pkl", EXAMPLES, protocol)
    with open_pickle_dataset(tmp_path / "p.pkl") as dataset:
        assert len(dataset) == len(EXAMPLES)
        assert all(same(dataset[i], e) for i, e in enumerate(EXAMPLES))


def test_our_files_read_the_same_in_a_plain_unpickler_loop(tmp_path):
    """Chainer's reader calls pickle.load until EOF: the markers are invisible to it."""
    write_examples(tmp_path / "p.pkl", EXAMPLES)
    got = []
    with open(tmp_path / "p.pkl", "rb") as f:
        while True:
            try:
                got.append(pickle.load(f))
            except EOFError:
                break
    assert len(got) == len(EXAMPLES) and all(same(a, b) for a, b in zip(got, EXAMPLES))


@pytest.mark.parametrize("count", [1, 3])
def test_a_file_cut_at_any_byte_is_an_error_naming_the_offset(tmp_path, count):
    write_examples(tmp_path / "full.pkl", EXAMPLES[:2] + EXAMPLES[-1:] if count == 3
                   else EXAMPLES[:1])
    data = (tmp_path / "full.pkl").read_bytes()
    cut_path = tmp_path / "cut.pkl"
    for cut in range(1, len(data)):  # 0 bytes is an empty file: an empty dataset
        cut_path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=r"cut.pkl: .*offset \d+") as info:
            open_pickle_dataset(cut_path)
        assert re.search(r"truncated", str(info.value)), (cut, str(info.value))
    cut_path.write_bytes(data)
    assert len(open_pickle_dataset(cut_path)) == count


def test_a_stream_file_cut_inside_an_example_is_an_error(tmp_path):
    """Files without the markers (Chainer's writer, a stream): cut inside an example is caught."""
    path = tmp_path / "stream.pkl"
    with PickleDatasetWriter(open(path, "wb")) as writer:
        for example in EXAMPLES[:3] + EXAMPLES[4:]:  # small ones: every byte is a case
            writer.write(example)
    data = path.read_bytes()
    with open(path, "rb") as f:
        boundaries = set()
        while f.tell() < len(data):
            pickle.load(f)
            boundaries.add(f.tell())
    for cut in range(1, len(data)):
        path.write_bytes(data[:cut])
        if cut in boundaries:  # nothing records how many were written: whole examples
            assert len(open_pickle_dataset(path)) == sorted(boundaries).index(cut) + 1
        else:
            with pytest.raises(ValueError, match=r"stream.pkl: example \d+ \(starting at offset"):
                open_pickle_dataset(path)


def test_a_huge_length_field_is_refused_before_any_allocation(tmp_path):
    path = tmp_path / "huge.pkl"
    # PROTO 5, BINBYTES8 claiming 2**62 bytes, then nothing.
    path.write_bytes(b"\x80\x05\x8e" + (2**62).to_bytes(8, "little") + b"ab.")
    with pytest.raises(ValueError, match=r"needs 4611686018427387904 bytes at offset 11"):
        open_pickle_dataset(path)


def test_a_directory_and_a_missing_file_are_named(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        open_pickle_dataset(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_pickle_dataset(tmp_path / "missing.pkl")


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_open_gives_sound_offsets_or_an_error_naming_file_and_offset(tmp_path, data):
    path = tmp_path / "fuzz.pkl"
    write_examples(path, EXAMPLES[:3] + [EXAMPLES[4]])
    raw = bytearray(path.read_bytes())
    how = data.draw(st.sampled_from(["flip", "cut", "random"]))
    if how == "random":
        raw = bytearray(data.draw(st.binary(max_size=300)))
    elif how == "cut":
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    for position in data.draw(st.lists(st.integers(0, len(raw) - 1), max_size=4)
                              if raw and how == "flip" else st.just([])):
        raw[position] ^= 1 << data.draw(st.integers(0, 7))
    path.write_bytes(bytes(raw))
    try:
        dataset = open_pickle_dataset(path)
    except ValueError as error:
        assert "fuzz.pkl" in str(error) and re.search(r"offset \d+", str(error))
        return
    positions = dataset._positions
    assert positions == sorted(set(positions)) and all(0 <= p < len(raw) for p in positions)
    assert not positions or positions[0] == 0
    dataset.close()


# -- damage that the unpickler would turn into a huge allocation or a raw error ----------

def _ops(raw, opname):
    """``(offset, argument)`` of each ``opname`` in the pickles of ``raw``, in file order."""
    found, position = [], 0
    while position < len(raw):
        for op, arg, pos in pickletools.genops(raw[position:]):
            if op.name == opname:
                found.append((position + pos, arg))
            if op.name == "STOP":
                position += pos + 1
                break
    return found


@pytest.mark.parametrize("protocol, opname, damage", [
    (5, "FRAME", lambda raw, at: raw.__setitem__(at + 7, raw[at + 7] ^ 0x01)),  # 2**48 bytes
    (2, "LONG_BINPUT", lambda raw, at: raw.__setitem__(at + 4, raw[at + 4] ^ 0x40)),  # 2**30
    (0, "PUT", lambda raw, at: raw.__setitem__(slice(at + 1, raw.index(b"\n", at)),
                                               b"4000000000")),
])
def test_a_damaged_size_is_refused_at_open_before_any_allocation(tmp_path, protocol, opname,
                                                                  damage):
    # Each of these makes pickle.load allocate for what the damaged field says: a whole
    # frame read ahead at once, or a memo list grown to twice an entry's index.
    path = tmp_path / "damaged.pkl"
    write_examples(path, [[[i] for i in range(300)], "two"], protocol)
    raw = bytearray(path.read_bytes())
    at, _ = _ops(bytes(raw), opname)[-1 if opname == "FRAME" else 0]
    damage(raw, at)
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=rf"damaged.pkl: example \d+ \(starting at offset \d+\)"
                                         rf" (has a frame|stores memo entry).* at offset {at}"):
        open_pickle_dataset(path)


def test_a_frame_that_runs_into_the_next_example_is_refused_on_read(tmp_path):
    # A frame over the unpickler's read-ahead (8 KiB) is read whole, past the example's
    # end when its length is damaged: the next read would start in the wrong place.
    path = tmp_path / "frames.pkl"
    first = list(range(5000))
    write_examples(path, [first, "second", "third"], 5)
    raw = bytearray(path.read_bytes())
    (at, length), *_ = _ops(bytes(raw), "FRAME")
    assert length > 8192
    raw[at + 1:at + 9] = (length + 10).to_bytes(8, "little")  # still inside the file
    path.write_bytes(bytes(raw))
    with open_pickle_dataset(path) as dataset, \
            pytest.raises(ValueError, match=r"frames.pkl: example 0 at offset 0 was unpickled up "
                                            r"to offset \d+, but its pickle ends at offset \d+"):
        dataset[0]


def test_a_damaged_string_is_an_error_naming_file_and_offset(tmp_path):
    path = tmp_path / "text.pkl"
    write_examples(path, ["first", "s\u00e9cond"], 4)
    raw = path.read_bytes()
    start = raw.index("s\u00e9cond".encode())
    path.write_bytes(raw[:start + 1] + b"\xff" + raw[start + 2:])  # no longer UTF-8
    with open_pickle_dataset(path) as dataset:
        assert dataset[0] == "first"
        with pytest.raises(ValueError, match=r"text.pkl: example 1 at offset \d+ cannot be "
                                             r"unpickled \(UnicodeDecodeError") as caught:
            dataset[1]
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)


def _spans(positions, size):
    return list(zip(positions, positions[1:] + [size]))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_damage_is_our_error_or_the_examples_it_did_not_touch(tmp_path, data):
    """Flipped bits and cuts: opening and reading raise only our error, never a huge allocation
    (MemoryError, or OverflowError under ours); examples whose bytes are untouched read back."""
    path = tmp_path / "fuzz.pkl"
    protocol = data.draw(st.integers(0, pickle.HIGHEST_PROTOCOL))
    examples = [EXAMPLES[0], "two", [[i] for i in range(300)], (3, 3.5, None)]
    write_examples(path, examples, protocol)
    with open_pickle_dataset(path) as dataset:
        original = _spans(dataset._positions, path.stat().st_size)
    raw = bytearray(path.read_bytes())
    if data.draw(st.booleans()):
        flips = data.draw(st.lists(st.integers(0, len(raw) - 1), min_size=1, max_size=4))
        for position in flips:
            raw[position] ^= 1 << data.draw(st.integers(0, 7))
    else:
        cut = data.draw(st.integers(0, len(raw) - 1))
        flips = list(range(cut, len(raw)))
        raw = raw[:cut]
    path.write_bytes(bytes(raw))
    try:
        dataset = open_pickle_dataset(path)
    except ValueError as error:
        assert "fuzz.pkl" in str(error) and re.search(r"offset \d+", str(error))
        assert not isinstance(error.__cause__, (MemoryError, OverflowError))
        return
    with dataset:
        same_offsets = _spans(dataset._positions, len(raw)) == original
        for i in range(len(dataset)):
            try:
                example = dataset[i]
            except ValueError as error:
                assert re.search(rf"fuzz.pkl: example {i} at offset \d+", str(error))
                assert not isinstance(error.__cause__, (MemoryError, OverflowError))
                continue
            begin, end = original[i] if i < len(original) else (0, 0)
            if same_offsets and not any(begin <= p < end for p in flips):
                assert same(example, examples[i])
