"""The cache reader trusts nothing it has not checked: counts, variables, headers, identity."""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dataset_kit.sources import CacheDataSource, CacheFormatError, SimpleDataSource
from dataset_kit.sources.file_cache import write_cache

ROOT = str(Path(__file__).resolve().parents[2])


def _example(i):
    return np.full((3, 32, 32), i % 251, np.uint8), np.array([i], np.int64)


def _build(cache: Path, n=30, chunk_size=10, load=_example) -> None:
    write_cache(str(cache), SimpleDataSource(load, n), chunk_size=chunk_size)


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def _write_rows(path: Path, rows) -> None:
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


def _as_nnabla_index(cache: Path, **counts) -> None:
    """Rewrite the index in NNabla's two columns, some counts replaced (line number -> text)."""
    rows = [[row[0], counts.get(f"line{k}", row[1])]
            for k, row in enumerate(_rows(cache / "cache_index.csv"), start=1)]
    _write_rows(cache / "cache_index.csv", rows)


def _run(script: str, *args: str, timeout: float = 120, **popen) -> subprocess.CompletedProcess:
    """Run a Python script in a child process (killed if it outlives ``timeout``)."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": ROOT}, **popen)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("count", ["0", "-3", "+10", "1e1", " 10"])
def test_a_count_that_is_not_a_positive_number_is_refused_naming_the_line(tmp_path, count):
    _build(tmp_path)
    _as_nnabla_index(tmp_path, line2=count)
    with pytest.raises(CacheFormatError, match=r"cache_index.csv line 2: expected"):
        CacheDataSource(tmp_path)


def test_a_huge_count_is_refused_before_anything_is_allocated(tmp_path):
    _build(tmp_path)
    _as_nnabla_index(tmp_path, line3=str(2 ** 40))
    with pytest.raises(CacheFormatError, match=r"cache_00000020_00000029.npy: variable 'x0'.*"
                                               r"holds 1099511627776 examples"):
        CacheDataSource(tmp_path)


def test_a_count_must_match_the_arrays_of_its_chunk(tmp_path):
    _build(tmp_path)
    _as_nnabla_index(tmp_path, line1="9")
    with pytest.raises(CacheFormatError, match=r"cache_00000000_00000009.npy: variable 'x0' "
                                               r"\(header at byte 0\) has shape \(10, 3, 32, 32\)"):
        CacheDataSource(tmp_path)


def test_a_cut_index_is_noticed_by_its_total_column(tmp_path):
    _build(tmp_path)
    _write_rows(tmp_path / "cache_index.csv", _rows(tmp_path / "cache_index.csv")[:2])
    with pytest.raises(CacheFormatError, match=r"cache_index.csv: its lines hold 20 examples, "
                                               r"but the total column says \[30\]"):
        CacheDataSource(tmp_path)


def test_a_chunk_listed_twice_is_refused(tmp_path):
    _build(tmp_path)
    rows = _rows(tmp_path / "cache_index.csv")
    _write_rows(tmp_path / "cache_index.csv", [rows[0], rows[1], rows[0]])
    with pytest.raises(CacheFormatError, match=r"line 3: 'cache_00000000_00000009.npy' is "
                                               r"listed again \(first on line 1\)"):
        CacheDataSource(tmp_path)


def test_a_cache_info_missing_a_line_is_refused_not_a_variable_dropped(tmp_path):
    _build(tmp_path)
    (tmp_path / "cache_info.csv").write_text("x0\n")
    with pytest.raises(CacheFormatError, match=r"cache_00000000_00000009.npy: .* the file "
                                               r"holds more arrays than the variables of "
                                               r"cache_info.csv"):
        CacheDataSource(tmp_path)


def test_a_cache_info_with_a_line_too_many_is_refused(tmp_path):
    _build(tmp_path)
    (tmp_path / "cache_info.csv").write_text("x0\nx1\nx2\n")
    with pytest.raises(CacheFormatError, match=r"cache_00000000_00000009.npy: the file ends "
                                               r".* after 2 arrays, but cache_info.csv names 3"):
        CacheDataSource(tmp_path)


def _damage_header(path: Path, old: bytes, new: bytes, which: int = 0) -> None:
    data = path.read_bytes()
    at = -1
    for _ in range(which + 1):
        at = data.index(old, at + 1)
    path.write_bytes(data[:at] + new + data[at + len(old):])


@pytest.mark.parametrize("old, new, which", [
    (b"'shape': (", b"'shape': )", 0),      # numpy's parser: SyntaxError
    (b"{'descr'", b"{'descr", 0),           # TokenError / SyntaxError (unterminated string)
    (b"'|u1'", b"'|u0'", 0),                # TypeError: data type not understood
    (b"'<i8'", b"'>i8'", 0),                # a byte-order flip: the same bytes read wrongly
    (b"'<i8'", b"'<m8'", 0),                # a flip to timedelta64, as big as int64
    (b"\x93NUMPY\x01", b"\x93NUMPY\x03", 1),  # a version flip: a 4-byte header length
    (b"(10, 3", b"(1, 3", 0),               # a count that is not the index's
])
def test_a_damaged_header_is_a_cache_format_error_naming_file_and_offset(tmp_path, old, new,
                                                                         which):
    _build(tmp_path)
    _damage_header(tmp_path / "cache_00000010_00000019.npy", old, new, which)
    with pytest.raises(CacheFormatError, match=r"cache_00000010_00000019.npy: .*byte \d+"):
        CacheDataSource(tmp_path)


def test_chunks_that_disagree_on_a_dtype_are_refused(tmp_path):
    _build(tmp_path)
    chunk = tmp_path / "cache_00000010_00000019.npy"
    with open(chunk, "rb") as f:
        x, y = np.load(f), np.load(f)
    with open(chunk, "wb") as f:  # as NNabla's writer stacks a chunk of int32 labels
        np.save(f, x)
        np.save(f, y.astype(np.int32))
    first = tmp_path / "cache_00000000_00000009.npy"
    with pytest.raises(CacheFormatError, match=re.escape(f"{chunk}: variable 'x1' holds int32")
                       + f".* but {re.escape(str(first))} holds int64"):
        CacheDataSource(tmp_path)


def test_a_chunk_copied_over_while_open_is_refused_not_served(tmp_path):
    _build(tmp_path / "a")
    _build(tmp_path / "b", load=lambda i: _example(i + 100))
    source = CacheDataSource(tmp_path / "a")
    assert source.get_batch(np.array([12, 3])).columns[1][:, 0].tolist() == [12, 3]
    # cp of a file of the same size: same inode, new bytes (rsync --inplace does the same)
    name = "cache_00000010_00000019.npy"
    with open(tmp_path / "b" / name, "rb") as src, open(tmp_path / "a" / name, "r+b") as dst:
        shutil.copyfileobj(src, dst)
    with pytest.raises(CacheFormatError, match=re.escape(f"{tmp_path / 'a' / name} changed "
                                                         f"after the reader opened")):
        source.get_batch(np.array([14, 11]))
    assert source.get_batch(np.array([5])).columns[1][:, 0].tolist() == [5]  # others read


# Every cache's chunks are called cache_00000000_00000009.npy ...: a message naming only
# that says nothing about which of a job's caches is damaged.

def test_a_directory_in_place_of_a_chunk_is_refused_naming_its_full_path(tmp_path):
    _build(tmp_path)
    chunk = tmp_path / "cache_00000010_00000019.npy"
    chunk.unlink()
    chunk.mkdir()
    with pytest.raises(CacheFormatError, match=re.escape(f"{chunk} is a directory")):
        CacheDataSource(tmp_path)


def test_a_directory_swapped_in_under_the_reader_is_refused_naming_its_full_path(tmp_path):
    _build(tmp_path)
    source = CacheDataSource(tmp_path)
    chunk = tmp_path / "cache_00000020_00000029.npy"
    chunk.unlink()
    chunk.mkdir()
    with pytest.raises(CacheFormatError, match=re.escape(f"{chunk} changed after")):
        source.get_batch(np.array([25]))


_FIFO = """
    import sys
    from dataset_kit.sources import CacheDataSource, CacheFormatError
    try:
        CacheDataSource(sys.argv[1])
    except CacheFormatError as error:
        print("refused:", error)
"""


def test_a_fifo_in_place_of_a_chunk_is_refused_without_waiting_for_a_writer(tmp_path):
    _build(tmp_path)
    chunk = tmp_path / "cache_00000000_00000009.npy"
    chunk.unlink()
    os.mkfifo(chunk)
    done = _run(_FIFO, str(tmp_path), timeout=60)  # a blocking open would be killed here
    assert done.stdout.strip() == f"refused: {chunk} is not a regular file, where the index " \
                                  f"names a chunk file", (done.returncode, done.stderr[-2000:])


@pytest.mark.parametrize("damage", ["truncate", "header", "dtype"])
def test_chunk_errors_name_the_chunks_full_path(tmp_path, damage):
    for cache in ("a", "b"):
        _build(tmp_path / cache)
    chunk = tmp_path / "b" / "cache_00000010_00000019.npy"
    data = chunk.read_bytes()
    if damage == "truncate":
        chunk.write_bytes(data[:-100])
    elif damage == "header":
        chunk.write_bytes(data.replace(b"'descr'", b"'descX'", 1))
    else:
        with open(chunk, "rb") as f:
            x, y = np.load(f), np.load(f)
        with open(chunk, "wb") as f:
            np.save(f, x)
            np.save(f, y.astype(np.int32))
    CacheDataSource(tmp_path / "a")
    with pytest.raises(CacheFormatError) as caught:
        CacheDataSource(tmp_path / "b")
    assert str(chunk) in str(caught.value)


_TRUNCATE = """
    import sys
    import numpy as np
    from dataset_kit.sources import CacheDataSource, CacheFormatError
    source = CacheDataSource(sys.argv[1])
    source.get_batch(np.array([5, 2, 17]))  # scattered rows: mapped, before
    source._get_data(19)
    with open(sys.argv[2], "r+b") as f:  # what cp does first: O_TRUNC
        f.truncate(64)
    for read in (lambda: source.get_batch(np.array([27, 12, 18])),
                 lambda: source._get_data(18)):
        try:
            read()
            print("served")
        except CacheFormatError as error:
            print("refused:", error)
"""


def test_a_chunk_truncated_under_the_reader_is_an_error_not_sigbus(tmp_path):
    _build(tmp_path)
    chunk = tmp_path / "cache_00000010_00000019.npy"
    done = _run(_TRUNCATE, str(tmp_path), str(chunk))
    assert done.returncode == 0, (done.returncode, -signal.SIGBUS, done.stderr[-2000:])
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith(f"refused: {chunk}: read 0 of")
                                   for line in lines), done.stdout


_SHUFFLED_EPOCH = """
    import os, resource, sys
    import numpy as np
    from dataset_kit.sources import data_iterator_cache
    resource.setrlimit(resource.RLIMIT_NOFILE,
                       (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    peak = 0
    with data_iterator_cache(sys.argv[1], 20, shuffle=True, normalize=False,
                             with_memory_cache=False, stop_exhausted=True) as it:
        seen = []
        for x, y in it:
            assert (x[:, 0, 0, 0] == y[:, 0] % 251).all()
            seen += y[:, 0].tolist()
            peak = max(peak, len(os.listdir("/proc/self/fd")))
    assert sorted(seen) == list(range(600)), len(seen)
    print("epoch", peak)
"""


def test_a_shuffled_epoch_over_more_chunks_than_the_fd_limit_stays_under_it(tmp_path):
    _build(tmp_path, n=600, chunk_size=2)  # 300 chunk files, limit 256
    done = _run(_SHUFFLED_EPOCH, str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    word, peak = done.stdout.split()
    assert word == "epoch" and int(peak) < 256


_READER = """
    import sys
    import numpy as np
    from dataset_kit.sources import CacheDataSource, CacheFormatError
    source = CacheDataSource(sys.argv[1])
    labels = source.get_batch(np.arange(source.size)).columns[1][:, 0]
    print("ready", source.size, int(labels.sum()), flush=True)
    sys.stdin.readline()  # the other job rebuilds the cache meanwhile
    try:
        print("served", source.get_batch(np.array([3, 150, 199])).columns[1][:, 0].tolist())
    except CacheFormatError as error:
        print("refused:", error)
"""

_REBUILDER = """
    import sys
    import numpy as np
    from dataset_kit.sources import DataSourceWithFileCache, SimpleDataSource
    DataSourceWithFileCache(SimpleDataSource(lambda i: (np.full((3, 32, 32), 7, np.uint8),
                                                        np.array([1000 + i])), 300), sys.argv[1])
"""


def test_a_reader_refuses_a_cache_that_another_job_rebuilt_for_another_size(tmp_path):
    cache = tmp_path / "shared"
    _build(cache, n=250, chunk_size=100)
    reader = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_READER), str(cache)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert reader.stdout.readline().split() == ["ready", "250", str(sum(range(250)))]
        rebuilt = _run(_REBUILDER, str(cache))
        assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
        out, err = reader.communicate("go\n", timeout=60)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert out.startswith("refused: ") and "cache_index.csv changed after this reader" in out, \
        (out, err[-2000:])
    assert CacheDataSource(cache).size == 300  # a reader opened now reads the new cache


def _nnabla_venv() -> Path | None:
    for candidate in (os.environ.get("NNSUITE_VENV"),
                      os.path.expanduser("~/.cache/dataset_kit_nnabla_suite/venv")):
        if candidate and (Path(candidate) / "nnabla_py/nnabla/utils").is_dir():
            return Path(candidate)
    return None


_NNABLA_READS = """
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from nnabla.utils.data_source_implements import CacheDataSource
    source = CacheDataSource(sys.argv[2], shuffle=False)
    rows = [source.next() for _ in range(source.size)]
    np.savez(sys.argv[3], *[np.stack([r[k] for r in rows]) for k in range(len(rows[0]))])
    print(source.size, list(source.variables))
"""


@pytest.mark.skipif(_nnabla_venv() is None,
                    reason="NNabla's reference build is absent: run "
                           "../shared/peer_suites/nnabla/run_nnabla_suite.sh once (or set "
                           "NNSUITE_VENV) to build it")
def test_nnablas_own_reader_reads_a_cache_we_wrote(tmp_path):
    venv = _nnabla_venv()
    _build(tmp_path / "cache", n=250, chunk_size=100)
    proc = subprocess.run([str(venv / "bin/python"), "-c", textwrap.dedent(_NNABLA_READS),
                           str(venv / "nnabla_py"), str(tmp_path / "cache"),
                           str(tmp_path / "out.npz")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[0] == "250 ['x0', 'x1']"
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_array_equal(got["arr_0"], np.stack([_example(i)[0] for i in range(250)]))
        np.testing.assert_array_equal(got["arr_1"], np.arange(250)[:, None])
