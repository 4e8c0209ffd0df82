"""ParquetDataset(cache=...): remote files downloaded once per node into the file cache.

Real parts only: a moto S3 server and the HTTP test server on 127.0.0.1,
worker processes, a SIGKILL, a small tmpfs (as root).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from dataset_kit.datasets import ParquetDataset, RowGroupOrderSampler
from dataset_kit.filecache import CacheDownloadError, CacheFullError
from dataset_kit.formats import FileChangedError
from tests.datasets.parquet_files import check_row, pq
from tests.datasets.parquet_files import parquet_bytes as _bytes
from tests.http_server import Route
from tests.processes import run_together
from tests.shards.conftest import sigkill_when, small_tmpfs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cached(folder, wait_for: int = 0) -> list[str]:
    """The files published in a cache folder (no staging folders, no boot marker).

    A reader gets a file's verified bytes before they are written to the cache
    (see filecache/_handoff.py): ``wait_for`` waits until that many are there.
    """
    deadline = time.monotonic() + 30
    while True:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".parquet"))
        if len(names) >= wait_for or time.monotonic() > deadline:
            return names
        time.sleep(0.01)


def leftovers(folder) -> list[str]:
    """Anything in a cache folder but its boot marker."""
    return sorted(n for n in os.listdir(folder) if n != ".boot")


@pytest.fixture
def served(http_server):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    route = Route(_bytes([40, 40, 40], compression="none"))
    return route, http_server.add("/d.parquet", route)


def test_s3_files_read_through_the_cache_are_the_rows_ranged_reads_give(s3, tmp_path):
    s3fs = pytest.importorskip("s3fs")
    fs = s3fs.S3FileSystem(**s3)
    fs.pipe("data/c/a.parquet", _bytes([5, 4]))
    fs.pipe("data/c/b.parquet", _bytes([6], start=9))
    ds = ParquetDataset("s3://data/c", storage_options=s3, cache=tmp_path / "cache")
    assert cached(tmp_path / "cache") == []  # opening reads footers only
    for row, i in zip(ds[np.arange(15)[::-1]], range(14, -1, -1)):
        check_row(row, i)
    names = cached(tmp_path / "cache", wait_for=2)
    assert sorted(n.split(".", 1)[1] for n in names) == ["a.parquet", "b.parquet"]
    sizes = sorted(os.path.getsize(tmp_path / "cache" / n) for n in names)
    assert sizes == sorted(fs.size(p) for p in ("data/c/a.parquet", "data/c/b.parquet"))
    ranged = ParquetDataset("s3://data/c", storage_options=s3)
    assert [r["name"] for r in ranged[0:15]] == [r["name"] for r in ds[0:15]]


def test_each_file_is_downloaded_once_then_read_from_the_cache(served, tmp_path):
    route, url = served
    ds = ParquetDataset(url, ["id"], cache=tmp_path / "cache")
    opened = route.gets
    assert [int(r["id"]) for r in ds[np.array([100, 5, 45, 119])]] == [100, 5, 45, 119]
    # The whole file in one ranged read, then the listing again (this server's
    # ETag is no MD5 of the bytes, so the check asks whether it still holds).
    assert route.gets == opened + 2
    again = ParquetDataset(url, ["id"], cache=tmp_path / "cache")
    opened = route.gets
    assert [int(r["id"]) for r in again[0:120]] == list(range(120))
    assert route.gets == opened  # another dataset over the same folder: no download


def _read_first(ds, barrier, results) -> None:
    barrier.wait(60)
    results.put(int(ds[0]["id"]))


def test_processes_reading_one_file_at_once_cause_one_download(served, tmp_path):
    route, url = served
    route.delay = 0.05  # a download long enough for every process to want it meanwhile
    ds = ParquetDataset(url, ["id"], cache=tmp_path / "cache", chunk_size=1 << 16)
    before = route.gets
    ranges = -(-len(route.body) // (1 << 16))
    assert sorted(run_together(6, _read_first, ds, timeout=120)) == [0] * 6
    # One download (its ranges and one listing to check the ETag) for six processes.
    assert route.gets - before == ranges + 1
    assert len(cached(tmp_path / "cache", wait_for=1)) == 1


def test_worker_processes_read_the_cached_files_as_the_serial_iterator_does(served, tmp_path):
    from dataset_kit.iterators import MultiprocessIterator, SerialIterator

    route, url = served
    ds = ParquetDataset(url, ["id", "name"], cache=tmp_path / "cache")

    def ids(it):
        with it:
            return [[int(r["id"]) for r in batch] for batch in it]

    opened = route.gets
    # The workers download (one of them; the other waits on the file's lock)...
    workers = ids(MultiprocessIterator(ds, 16, repeat=False, n_processes=2,
                                       order_sampler=RowGroupOrderSampler(ds, 1, seed=4)))
    assert route.gets == opened + 2  # one ranged read and one listing, for both workers
    serial = ids(SerialIterator(ds, 16, repeat=False,
                                order_sampler=RowGroupOrderSampler(ds, 1, seed=4)))
    assert workers == serial and sorted(sum(serial, [])) == list(range(120))


def test_a_file_changed_in_the_store_is_refused_and_a_new_open_downloads_it(s3, tmp_path):
    s3fs = pytest.importorskip("s3fs")
    fs = s3fs.S3FileSystem(**s3)
    fs.pipe("data/v/a.parquet", _bytes([6]))
    first = ParquetDataset("s3://data/v", storage_options=s3, cache=tmp_path / "cache")
    check_row(first[2], 2)  # version 1 cached
    unread = ParquetDataset("s3://data/v", storage_options=s3, cache=tmp_path / "other")
    state = RowGroupOrderSampler(first, seed=1).state_dict()
    fs.pipe("data/v/a.parquet", _bytes([7], start=100))
    # A dataset opened on version 1 never reads version 2 as if it were 1...
    with pytest.raises(FileChangedError, match=r"file s3://data/v/a\.parquet changed in its "
                                               r"store since the dataset was opened \(size"):
        unread[0]
    assert leftovers(tmp_path / "other") == []
    check_row(first[2], 2)  # ...and what it cached is still version 1, verified
    # Opened again, the dataset sees version 2 and downloads it (another cache name).
    second = ParquetDataset("s3://data/v", storage_options=s3, cache=tmp_path / "cache")
    check_row(second[6], 106)
    assert len(cached(tmp_path / "cache", wait_for=2)) == 2
    with pytest.raises(FileChangedError, match=r"s3://data/v/a\.parquet changed"):
        RowGroupOrderSampler(second).load_state_dict(state)  # as before: resume is refused


def test_least_recently_used_files_are_evicted_within_cache_limit(http_server, tmp_path):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    bodies = [_bytes([30], start=30 * k, compression="none") for k in range(3)]
    urls = [http_server.add(f"/e{k}.parquet", Route(b)) for k, b in enumerate(bodies)]
    limit = 2 * max(map(len, bodies))
    ds = ParquetDataset(urls, ["id"], cache=tmp_path / "cache", cache_limit=limit)
    for i in range(90):
        assert int(ds[i]["id"]) == i
        usage = sum(os.path.getsize(tmp_path / "cache" / n) for n in cached(tmp_path / "cache"))
        assert usage <= limit
    names = cached(tmp_path / "cache", wait_for=2)
    assert len(names) == 2 and not any(n.endswith(".e0.parquet") for n in names)
    assert int(ds[0]["id"]) == 0  # evicted, downloaded again


def test_a_cache_limit_below_the_largest_file_names_both_figures(served, tmp_path):
    route, url = served
    size = len(route.body)
    with pytest.raises(ValueError, match=rf"cache_limit {size - 1} bytes is smaller than the "
                                         rf"file {url} \({size} bytes\)"):
        ParquetDataset(url, cache=tmp_path / "cache", cache_limit=size - 1)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"cache": 3}, TypeError, "cache must be a local folder"),
    ({"cache": "c", "cache_limit": -1}, ValueError, "cache_limit"),
    ({"cache": "c", "cache_limit": 1.5}, TypeError, "cache_limit"),
    ({"cache_limit": 10}, ValueError, r"cache_limit 10 bytes needs a cache folder"),
    ({"cache": "c", "chunk_size": 0}, ValueError, "chunk_size"),
])
def test_bad_cache_arguments_are_named(tmp_path, kwargs, error, message):
    path = tmp_path / "a.parquet"
    path.write_bytes(_bytes([3]))
    with pytest.raises(error, match=message):
        ParquetDataset(path, **kwargs)


def test_local_files_are_read_in_place_even_with_a_cache(tmp_path):
    path = tmp_path / "a.parquet"
    path.write_bytes(_bytes([3]))
    ds = ParquetDataset(path, cache=tmp_path / "cache", cache_limit=1)
    check_row(ds[2], 2)
    assert not (tmp_path / "cache").exists()


def test_a_cut_download_is_retried_then_named_and_nothing_is_kept(served, tmp_path):
    route, url = served
    ds = ParquetDataset(url, ["id"], cache=tmp_path / "cache", retries=1)
    route.drop_after, route.drops = len(route.body) // 2, 2  # every try cut mid-file
    with pytest.raises(CacheDownloadError, match=rf"downloading file {url} failed 2 times"):
        ds[0]
    assert leftovers(tmp_path / "cache") == []
    route.drops = 1  # one cut: retried from where it stopped
    assert [int(r["id"]) for r in ds[0:120]] == list(range(120))
    assert len(cached(tmp_path / "cache", wait_for=1)) == 1


def test_a_full_disk_is_a_clear_error_and_leaves_nothing(http_server, tmp_path):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    body = _payload_file(3 << 20)
    url = http_server.add("/big.parquet", Route(body))
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        ds = ParquetDataset(url, cache=disk / "cache")
        with pytest.raises(CacheFullError, match=rf"no space left in the cache .* for file "
                                                  rf"{url} \({len(body)} bytes\)"):
            ds[0]
        assert leftovers(disk / "cache") == []


def _payload_file(size: int) -> bytes:
    """A Parquet file of about ``size`` bytes of random (incompressible) binary values."""
    pa = pytest.importorskip("pyarrow")
    out = io.BytesIO()
    pq.write_table(pa.table({"blob": [os.urandom(size // 4) for _ in range(4)]}), out,
                   compression="none", row_group_size=2)
    return out.getvalue()


def test_sigkill_mid_download_leaves_nothing_and_the_next_reader_downloads_again(
        http_server, tmp_path):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    body = _payload_file(1 << 20)
    route = Route(body, delay=0.2)  # about 3 s for the file
    url = http_server.add("/slow.parquet", route)
    cache = tmp_path / "cache"
    script = (f"from dataset_kit.datasets import ParquetDataset\n"
              f"ParquetDataset({url!r}, cache={str(cache)!r}, chunk_size=1 << 16)[0]\n")
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": ROOT})
    try:
        sigkill_when(proc, lambda: any(n.endswith(".part") and "slow.parquet" in n
                                       for n in (os.listdir(cache) if cache.exists() else [])),
                     "a download started", 60, 0.02)
    finally:
        proc.kill()
        proc.wait()
    assert cached(cache) == []
    route.delay = 0.0
    ds = ParquetDataset(url, cache=cache, cache_limit=2 << 20)
    expected = pq.read_table(io.BytesIO(body)).column("blob").to_pylist()
    assert [r["blob"] for r in ds[0:4]] == expected
    assert len(cached(cache, wait_for=1)) == 1
    # The killed download's staging folder went before the new download; the
    # new one's goes once its writer has renamed the file into place.
    deadline = time.monotonic() + 30
    while any(n.endswith(".part") for n in os.listdir(cache)):
        assert time.monotonic() < deadline, os.listdir(cache)
        time.sleep(0.01)
