"""Pickle datasets: opening runs no code; a cut or corrupt file is an error naming the offset."""

import pickle
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
