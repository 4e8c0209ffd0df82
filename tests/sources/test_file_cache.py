"""The file cache: NNabla's layout both ways, atomic chunks, a killed writer, one build."""

from __future__ import annotations

import contextlib
import csv
import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from dataset_kit.sources import (
    CacheDataSource,
    CacheFormatError,
    DataSourceWithFileCache,
    SimpleDataSource,
    data_iterator_cache,
)
from dataset_kit.sources.file_cache import CHUNK_SIZE
from tests.http_server import Route


def _load(i):
    return np.full((3, 4, 5), i % 256, np.uint8), np.array([i], np.int64), float(i) / 2


def _nnabla_read(cache_dir: Path) -> dict:
    """Read a cache as NNabla's CacheDataSource does: the CSVs, then np.load per variable."""
    with open(cache_dir / "cache_info.csv") as f:
        variables = [row[0] for row in csv.reader(f)]
    out: dict = {v: [] for v in variables}
    with open(cache_dir / "cache_index.csv") as f:
        for row in csv.reader(f):  # NNabla reads the first two columns
            name, count = row[0], row[1]
            with open(cache_dir / name, "rb") as chunk:
                for v in variables:
                    data = np.load(chunk, allow_pickle=True)
                    assert len(data) == int(count)
                    out[v].append(data)
    return {v: np.concatenate(parts) for v, parts in out.items()}


def _nnabla_write(cache_dir: Path, variables, examples, chunk=CHUNK_SIZE) -> None:
    """Write a cache as NNabla's DataSourceWithFileCache does (.npy format)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for first in range(0, len(examples), chunk):
        part = examples[first:first + chunk]
        name = f"cache_{first:08d}_{first + len(part) - 1:08d}.npy"
        with open(cache_dir / name, "wb") as f:
            for k, _ in enumerate(variables):
                np.save(f, [ex[k] if isinstance(ex[k], np.ndarray)
                            else np.array(ex[k]).astype(np.float32) for ex in part])
        names.append((name, len(part)))
    with open(cache_dir / "cache_index.csv", "w") as f:
        csv.writer(f, lineterminator="\n").writerows(names)
    with open(cache_dir / "cache_info.csv", "w") as f:
        csv.writer(f, lineterminator="\n").writerows((v,) for v in variables)


def test_the_layout_field_by_field(tmp_path):
    source = SimpleDataSource(_load, 250)
    DataSourceWithFileCache(source, tmp_path, cache_file_name_prefix="cache")
    assert sorted(os.listdir(tmp_path)) == [
        "cache_00000000_00000099.npy", "cache_00000100_00000199.npy",
        "cache_00000200_00000249.npy", "cache_index.csv", "cache_info.csv"]
    assert (tmp_path / "cache_info.csv").read_text() == "x0\nx1\nx2\n"
    assert (tmp_path / "cache_index.csv").read_text() == (
        "cache_00000000_00000099.npy,100,250\ncache_00000100_00000199.npy,100,250\n"
        "cache_00000200_00000249.npy,50,250\n")
    with open(tmp_path / "cache_00000100_00000199.npy", "rb") as f:
        x, y, z = np.load(f), np.load(f), np.load(f)
    assert x.dtype == np.uint8 and x.shape == (100, 3, 4, 5) and x[7, 0, 0, 0] == 107
    assert y.dtype == np.int64 and y.shape == (100, 1) and y[7, 0] == 107
    assert z.dtype == np.float32 and z.shape == (100,) and z[7] == 53.5  # NNabla's float32


def test_nnabla_reads_ours(tmp_path):
    DataSourceWithFileCache(SimpleDataSource(_load, 130), tmp_path)
    read = _nnabla_read(tmp_path)
    for i in (0, 99, 100, 129):
        x, y, z = _load(i)
        np.testing.assert_array_equal(read["x0"][i], x)
        np.testing.assert_array_equal(read["x1"][i], y)
        assert read["x2"][i] == np.float32(z)


@pytest.mark.parametrize("normalize", [False, True])
def test_we_read_nnablas(tmp_path, normalize):
    examples = [_load(i) for i in range(130)]
    _nnabla_write(tmp_path, ["image", "label", "value"], examples)
    source = CacheDataSource(tmp_path, normalize=normalize)
    assert source.variables == ("image", "label", "value") and source.size == 130
    image, label, value = source.get_example(117)
    want = examples[117][0].astype(np.float32) / np.float32(255) if normalize else examples[117][0]
    np.testing.assert_allclose(image, want, rtol=1e-6)
    assert image.dtype == (np.float32 if normalize else np.uint8)
    assert label.tolist() == [117] and value == np.float32(58.5)
    with data_iterator_cache(str(tmp_path), 10, normalize=normalize,
                             with_memory_cache=False) as it:
        got = [it.next() for _ in range(13)]
    images = np.concatenate([g[0] for g in got])
    raw = np.stack([e[0] for e in examples])
    np.testing.assert_allclose(images, raw / np.float32(255) if normalize else raw, rtol=1e-6)


def test_a_cache_written_by_the_file_cache_reads_back_identically(tmp_path):
    ours = DataSourceWithFileCache(SimpleDataSource(_load, 205), tmp_path / "c")
    with data_iterator_cache(str(tmp_path / "c"), 5, normalize=False,
                             with_memory_cache=False, use_thread=False) as it:
        batches = [it.next() for _ in range(41)]
    for k in range(3):
        column = np.concatenate([b[k] for b in batches])
        np.testing.assert_array_equal(column, np.stack([ours.get_example(i)[k]
                                                        for i in range(205)]))


def test_an_unfinished_directory_is_refused_by_the_reader(tmp_path):
    DataSourceWithFileCache(SimpleDataSource(_load, 30), tmp_path)
    (tmp_path / "cache_index.csv").unlink()
    with pytest.raises(CacheFormatError, match="cache_index.csv is missing"):
        CacheDataSource(tmp_path)


def test_a_truncated_chunk_is_a_clear_error(tmp_path):
    DataSourceWithFileCache(SimpleDataSource(_load, 30), tmp_path)
    chunk = tmp_path / "cache_00000000_00000029.npy"
    chunk.write_bytes(chunk.read_bytes()[:100])
    with pytest.raises(CacheFormatError, match="cache_00000000_00000029.npy"):
        CacheDataSource(tmp_path).get_example(3)


def test_ragged_parts_are_refused_naming_the_variable(tmp_path):
    source = SimpleDataSource(lambda i: (np.zeros(i % 2 + 1),), 4)
    with pytest.raises(ValueError, match="variable 'x0': example 1 has shape"):
        DataSourceWithFileCache(source, tmp_path)
    assert not (tmp_path / "cache_index.csv").exists()


def test_a_temporary_cache_goes_with_close_and_with_the_object(tmp_path):
    first = DataSourceWithFileCache(SimpleDataSource(_load, 10))
    folder = first.cache_dir
    assert os.path.isdir(folder)
    first.close()
    assert not os.path.exists(folder)
    second = DataSourceWithFileCache(SimpleDataSource(_load, 10))
    folder = second.cache_dir
    del second
    import gc

    gc.collect()
    assert not os.path.exists(folder)


def test_a_remote_cache_directory_is_fetched(tmp_path, http_server, dataset_root):
    _nnabla_write(tmp_path, ["x", "y"], [(np.arange(4) + i, np.array([i])) for i in range(7)],
                  chunk=3)
    for name in os.listdir(tmp_path):
        http_server.add(f"/cache/{name}", Route((tmp_path / name).read_bytes()))
    source = CacheDataSource(http_server.url("/cache"))
    assert source.size == 7
    np.testing.assert_array_equal(source.get_example(5)[0], np.arange(4) + 5)


_WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    sys.path.insert(0, {root!r})
    from dataset_kit.sources import DataSourceWithFileCache, SimpleDataSource

    def load(i):
        with open({log!r}, "a") as f:
            f.write(f"{{i}}\\n")
        time.sleep({delay})
        return (np.full(8, i, np.float32),)

    DataSourceWithFileCache(SimpleDataSource(load, {n}), {cache!r})
    print("done", flush=True)
""")


def _writer(tmp_path, name, n=250, delay=0.0):
    log = tmp_path / f"{name}.log"
    script = _WRITER.format(root=str(Path(__file__).resolve().parents[2]), log=str(log),
                            delay=delay, n=n, cache=str(tmp_path / "cache"))
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True), log


def _loaded(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def test_a_killed_writer_leaves_no_index_and_the_cache_is_rebuilt(tmp_path):
    proc, log = _writer(tmp_path, "killed", delay=0.004)
    deadline = time.monotonic() + 60
    while len(_loaded(log)) < 150 and time.monotonic() < deadline:  # past the first chunk
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    cache = tmp_path / "cache"
    assert (cache / "cache_00000000_00000099.npy").exists()
    assert not (cache / "cache_index.csv").exists()
    with pytest.raises(CacheFormatError):
        CacheDataSource(cache)
    rebuilt = DataSourceWithFileCache(SimpleDataSource(
        lambda i: (np.full(8, i, np.float32),), 250), cache)
    assert rebuilt.size == 250
    for i in (0, 120, 249):
        np.testing.assert_array_equal(rebuilt.get_example(i)[0], np.full(8, i, np.float32))
    assert not [p for p in os.listdir(cache) if p.startswith(".")]  # no staging left


def test_concurrent_builders_build_the_cache_once(tmp_path):
    procs = [_writer(tmp_path, f"w{k}", delay=0.001) for k in range(3)]
    for proc, _ in procs:
        assert proc.communicate(timeout=120)[0].strip() == "done"
    loads = [_loaded(log) for _, log in procs]
    # Each process reads example 0 once to name the variables; the cache
    # itself is built by one of them.
    builds = [sorted(set(calls) - {0}) for calls in loads if len(calls) > 1]
    assert builds == [list(range(1, 250))]
    assert CacheDataSource(tmp_path / "cache").size == 250


def test_parts_of_another_dtype_in_a_later_chunk_are_refused_before_publishing(tmp_path):
    source = SimpleDataSource(lambda i: (np.array([i], np.int64 if i < 100 else np.int32),), 150)
    with pytest.raises(ValueError, match=r"variable 'x0': example 100 is int32 of shape \(1,\), "
                                         r"but example 0 is int64"):
        DataSourceWithFileCache(source, tmp_path)
    assert os.listdir(tmp_path) == []  # the chunk written before is gone too


_STUCK_WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    sys.path.insert(0, {root!r})
    from dataset_kit.sources import DataSourceWithFileCache, SimpleDataSource

    class Stuck:  # converted to an array while the first chunk is being written
        def __array__(self, dtype=None, copy=None):
            print("writing", flush=True)
            time.sleep(120)
            return np.zeros(1)

    DataSourceWithFileCache(SimpleDataSource(lambda i: (np.zeros(4), Stuck()), 250), {cache!r})
""")


def _debris(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(".part"))


def test_the_next_build_or_open_removes_what_a_killed_builder_left(tmp_path):
    cache = tmp_path / "cache"
    script = _STUCK_WRITER.format(root=str(Path(__file__).resolve().parents[2]), cache=str(cache))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    left = _debris(cache)
    assert len(left) == 1 and left[0].startswith(f".cache_00000000_00000099.npy.{proc.pid}-")
    # The same debris in a complete cache that a reader opens: its writer is dead.
    complete = tmp_path / "complete"
    DataSourceWithFileCache(SimpleDataSource(_load, 30), complete)
    os.rename(cache / left[0], complete / left[0])
    shutil.copytree(complete / left[0], cache / left[0])
    assert CacheDataSource(complete).size == 30
    assert _debris(complete) == []
    # The next build of the killed builder's cache.
    rebuilt = DataSourceWithFileCache(SimpleDataSource(_load, 250), cache)
    assert rebuilt.size == 250 and _debris(cache) == []


@contextlib.contextmanager
def _small_disk(folder: Path, size: str):
    """A tmpfs of ``size`` mounted at ``folder`` (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill up needs root")
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def _big(i):
    return np.full(1000, i, np.float32), np.array([i])  # 4 kB: 400 kB per chunk


def test_a_full_disk_leaves_no_partial_cache_and_says_so(tmp_path):
    with _small_disk(tmp_path / "disk", "1m") as disk:
        cache = disk / "cache"
        DataSourceWithFileCache(SimpleDataSource(_big, 50), cache)  # a complete older cache
        with pytest.raises(OSError) as raised:
            DataSourceWithFileCache(SimpleDataSource(_big, 500), cache)
        assert raised.value.errno == errno.ENOSPC
        assert f"the disk holding the file cache {cache} is full" in str(raised.value)
        assert sorted(os.listdir(cache)) == []  # nothing that looks complete, no debris
        with pytest.raises(CacheFormatError, match="cache_index.csv is missing"):
            CacheDataSource(cache)
        again = DataSourceWithFileCache(SimpleDataSource(_big, 150), cache)  # room again
        assert again.get_example(120)[1].tolist() == [120]
