"""Readers of the downloading process read a shard's verified bytes while they are written."""

import errno
import os
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataset_kit._files import sha256_of
from dataset_kit.shards import ShardDownloadError, StreamingDataset
from dataset_kit.shards._cache import cached_name
from tests.http_server import Route
from tests.shards.conftest import check, write
from tests.shards.test_dataset import files_in, serve


class _CorruptFirst(Route):
    """A route whose first answer has its last byte flipped (a transfer that went wrong)."""

    @property
    def body(self):
        good = self.__dict__["_body"]
        return good[:-1] + bytes([good[-1] ^ 1]) if self.gets <= 1 else good

    @body.setter
    def body(self, value):
        self.__dict__["_body"] = value


def test_a_shard_corrupt_once_reaches_the_reader_only_as_verified_bytes(tmp_path, http_server):
    manifest = write(tmp_path / "set", n=20, shard_size=10_000)
    serve(http_server, tmp_path / "set")
    name = manifest.shards[0].name
    route = _CorruptFirst((tmp_path / "set" / name).read_bytes())
    http_server.add(f"/set/{name}", route)
    ds = StreamingDataset(http_server.url("/set"), local=tmp_path / "cache")
    for i in range(manifest.shards[0].samples):
        check(ds[i], i)
    ds.close()
    assert route.gets == 2
    cached = tmp_path / "cache" / cached_name(manifest.shards[0])
    assert sha256_of(cached) == manifest.shards[0].sha256


def test_threads_of_one_process_share_one_download_and_read_it_before_it_is_cached(
        tmp_path, http_server):
    manifest = write(tmp_path / "set", n=40, shard_size=1000)
    routes = serve(http_server, tmp_path / "set", delay=0.02)
    ds = StreamingDataset(http_server.url("/set"), local=tmp_path / "cache")
    start, results = threading.Barrier(8), []

    def read(i):
        start.wait(30)
        results.append((i, ds[i]))

    count = manifest.shards[0].samples
    threads = [threading.Thread(target=read, args=(k % count,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a reader hung"
    for i, example in results:
        check(example, i)
    assert len(results) == 8
    ds.close()  # returns once the shard is published
    assert routes[manifest.shards[0].name].gets == 1
    assert cached_name(manifest.shards[0]) in os.listdir(tmp_path / "cache")


def test_a_shard_read_from_memory_is_mapped_from_the_cache_once_published(tmp_path):
    manifest = write(tmp_path / "set", n=30, shard_size=1000)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    check(ds[0], 0)
    ds._cache.downloads.wait_all()  # published
    check(ds[1], 1)
    with ds._shards.hold(0) as opened:
        assert not opened.in_memory and opened.path.endswith(cached_name(manifest.shards[0]))
    ds.close()


def test_a_reader_gets_the_verified_bytes_without_waiting_for_the_disk(tmp_path, monkeypatch):
    # A disk that takes its time cannot be made for real in a test: the rename
    # that publishes a shard waits here until the reader has its sample.
    from dataset_kit.filecache import _cache

    manifest = write(tmp_path / "set", n=30, shard_size=1000)
    replace, disk_done = os.replace, threading.Event()

    def slow(source, target):
        if str(target).endswith(".dks"):
            disk_done.wait(60)
        return replace(source, target)

    monkeypatch.setattr(_cache.os, "replace", slow)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    got = []
    reader = threading.Thread(target=lambda: got.append(ds[0]), daemon=True)
    reader.start()
    reader.join(20)
    try:
        assert got, "the reader waited for the shard to be written to the cache"
        check(got[0], 0)
        assert cached_name(manifest.shards[0]) not in os.listdir(tmp_path / "cache")
    finally:
        disk_done.set()
    ds.close()
    assert cached_name(manifest.shards[0]) in os.listdir(tmp_path / "cache")


def test_a_reader_that_outruns_the_disk_waits_for_room_not_fails(tmp_path, monkeypatch):
    # A slow disk, as above: each publishing rename takes a while, so the
    # reader has moved on to later shards while earlier ones are written.
    from dataset_kit.filecache import _cache

    manifest = write(tmp_path / "set", n=100, shard_size=1000)
    limit = 2 * max(s.bytes for s in manifest.shards)
    replace = os.replace

    def slow(source, target):
        if str(target).endswith(".dks"):
            time.sleep(0.2)
        return replace(source, target)

    monkeypatch.setattr(_cache.os, "replace", slow)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache", cache_limit=limit,
                          open_shards=1)
    for i in range(len(ds)):
        check(ds[i], i)
        assert ds.cache_usage() <= limit
    ds.close()


def test_a_failed_write_of_verified_bytes_is_raised_by_the_next_read(tmp_path, monkeypatch):
    # An I/O error of the cache's disk cannot be made for real in a test: the
    # rename that publishes a shard fails here as a dying disk would make it.
    from dataset_kit.filecache import _cache

    manifest = write(tmp_path / "set", n=30, shard_size=1000)
    replace = os.replace

    def broken(source, target):
        if not str(target).endswith(".dks"):
            return replace(source, target)
        raise OSError(errno.EIO, "Input/output error", target)

    monkeypatch.setattr(_cache.os, "replace", broken)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    check(ds[0], 0)  # the verified bytes, read before the write failed
    ds._cache.downloads.wait_all()
    monkeypatch.undo()
    last = len(ds) - 1
    with pytest.raises(ShardDownloadError, match=r"writing a verified shard to the cache .* "
                                                 r"failed: .*Input/output error"):
        ds[last]
    check(ds[last], last)
    ds.close()
    assert files_in(tmp_path / "cache") == [cached_name(manifest.shards[-1])]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reads=st.lists(st.lists(st.integers(0, 59), min_size=1, max_size=12), min_size=1,
                      max_size=4),
       open_shards=st.integers(1, 3), limit_shards=st.sampled_from([None, 1, 2, 4]))
def test_any_reads_by_threads_get_their_samples_and_leave_only_whole_shards(
        tmp_path_factory, reads, open_shards, limit_shards):
    folder = tmp_path_factory.mktemp("set")
    manifest = write(folder, n=60, shard_size=700)
    largest = max(s.bytes for s in manifest.shards)
    limit = None if limit_shards is None else limit_shards * largest
    cache = tmp_path_factory.mktemp("cache")
    # Each thread its own dataset (as each worker has), all sharing the cache.
    readers = [StreamingDataset(folder, local=cache, cache_limit=limit, open_shards=open_shards)
               for _ in reads]
    errors = []

    def read(ds, indices):
        try:
            for i in indices:
                check(ds[i], i)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            ds.close()

    threads = [threading.Thread(target=read, args=job) for job in zip(readers, reads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a reader hung"
    # A cache_limit too small for the shards several threads hold open at
    # once is a CacheFullError, which is allowed; a wrong sample is not.
    assert all(type(e).__name__ == "CacheFullError" for e in errors), errors
    for name in os.listdir(cache):
        if name.endswith(".dks"):
            info = next(s for s in manifest.shards if cached_name(s) == name)
            assert sha256_of(cache / name) == info.sha256
    if limit is not None:
        assert sum((cache / n).stat().st_size for n in os.listdir(cache)
                   if n.endswith(".dks")) <= limit


def test_a_reader_handed_the_bytes_gets_them_even_if_it_wakes_after_the_write_failed():
    # The race CI met: the bytes are handed over, the write fails at once and the job
    # ends, and only then does the waiting reader wake. It must get the verified bytes;
    # the write's error is for the next read.
    from dataset_kit.filecache._handoff import Downloads

    downloads = Downloads()
    job, new = downloads.begin(3, True)
    assert new
    downloads.hand_over(job, b"verified")
    error = OSError(errno.EIO, "Input/output error")
    downloads.end(3, job, error)
    assert downloads.wait(job) == b"verified"
    assert downloads.late_errors == [error]
    ok, _ = downloads.begin(4, True)
    downloads.hand_over(ok, b"published")
    downloads.end(4, ok, None)
    assert downloads.wait(ok) is None  # published: the file replaces the bytes
