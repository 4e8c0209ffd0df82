"""Fuzzing the cache reader: cut and bit-flipped index, info and chunk files.

For every damage the reader returns the cache's data exactly (through every read
path) or raises CacheFormatError naming a file; never another exception (no
MemoryError from a claimed size, no TokenError from numpy's header parser), a
hang or other data. Flips inside the arrays' data bytes are not fuzzed: the
format has no checksum, so those bytes are trusted (docs/design.rst says so).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from dataset_kit.sources import CacheDataSource, CacheFormatError, SimpleDataSource
from dataset_kit.sources.cache_reader import INDEX_FILE, INFO_FILE, CacheReader
from dataset_kit.sources.file_cache import write_cache

N = 7


def _example(i):
    return (np.arange(6, dtype=np.uint8).reshape(2, 3) + i, np.array([i * 10], np.int64),
            np.float32(i) / 4)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The files of a 3-chunk cache, the damageable byte ranges of each, and its columns."""
    cache = tmp_path_factory.mktemp("pristine")
    write_cache(str(cache), SimpleDataSource(_example, N), chunk_size=3)
    reader = CacheReader(str(cache))
    files = {name: (cache / name).read_bytes() for name in [INDEX_FILE, INFO_FILE, *reader.files]}
    spans = {INDEX_FILE: [(0, len(files[INDEX_FILE]))], INFO_FILE: [(0, len(files[INFO_FILE]))]}
    for name, chunk in zip(reader.files, reader.chunks):
        starts = [0] + [a.offset + a.nbytes for a in chunk.arrays[:-1]]
        spans[name] = [(start, a.offset) for start, a in zip(starts, chunk.arrays)]  # headers
    columns = [np.stack([_example(i)[k] for i in range(N)]) for k in range(3)]
    return files, spans, columns


_damage = st.tuples(st.sampled_from(["cut", "flip"]), st.integers(0, 1 << 30),
                    st.integers(0, 7))


def _damaged(files: dict, spans: dict, target: str, kind: str, at: int, bit: int) -> bytes:
    data = bytearray(files[target])
    offsets = [o for start, end in spans[target] for o in range(start, min(end, len(data)))]
    if kind == "cut" and data:
        return bytes(data[:at % len(data)])
    if kind == "flip" and offsets:
        data[offsets[at % len(offsets)]] ^= 1 << bit
    return bytes(data)


def _read_every_way(cache: str) -> list[list[np.ndarray]]:
    source = CacheDataSource(cache)
    assert source.size == N
    order = np.random.default_rng(0).permutation(N)
    batch = source.get_batch(order).columns
    in_order = [np.empty_like(c) for c in batch]
    for c, got in zip(in_order, batch):
        c[order] = got
    singles = [np.stack(parts) for parts in zip(*(source._get_data(i) for i in range(N)))]
    return [list(source.get_batch(np.arange(N)).columns), in_order, singles]


@given(damages=st.lists(st.tuples(st.sampled_from([INDEX_FILE, INFO_FILE, "chunk0", "chunk2"]),
                                  _damage), min_size=1, max_size=2))
def test_a_damaged_cache_reads_right_or_raises_naming_a_file(pristine, damages):
    files, spans, columns = pristine
    chunks = [name for name in files if name.endswith(".npy")]
    files = dict(files)
    targets = []
    for target, (kind, at, bit) in damages:
        target = {"chunk0": chunks[0], "chunk2": chunks[2]}.get(target, target)
        files[target] = _damaged(files, spans, target, kind, at, bit)
        targets.append(target)
    # Both CSVs cut to nothing say "a cache of no variables and no examples", which is
    # what they would say of an empty source: nothing is left to tell the difference.
    assume(files[INDEX_FILE] or files[INFO_FILE])
    with tempfile.TemporaryDirectory() as cache:
        for name, data in files.items():
            Path(cache, name).write_bytes(data)
        try:
            ways = _read_every_way(cache)
        except CacheFormatError as error:
            message = str(error)
            assert any(t in message for t in targets) or (
                {INDEX_FILE, INFO_FILE} & set(targets) and any(n in message for n in files)), \
                message
            return
    for way in ways:
        assert len(way) == len(columns)
        for got, want in zip(way, columns):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
