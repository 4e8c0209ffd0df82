"""The cache's usage, read while files are evicted and fetched, never exceeds its limit."""

from __future__ import annotations

import hashlib
import threading

from dataset_kit.filecache import CachedFile, FileCache, Sha256, cached_name

SIZE = 4096
FILES = 6
FITS = 2  # files the limit holds


def _cache(tmp_path) -> FileCache:
    store = tmp_path / "store"
    store.mkdir()
    files = []
    for k in range(FILES):
        data = bytes([k]) * SIZE
        digest = hashlib.sha256(data).hexdigest()
        (store / f"f{k}").write_bytes(data)
        files.append(CachedFile(cached_name(digest, f"f{k}"), str(store / f"f{k}"), SIZE,
                                Sha256(digest), f"f{k}"))
    return FileCache(str(tmp_path / "cache"), files, None, FITS * SIZE, timeout=10, retries=1,
                     chunk_size=SIZE)


def test_usage_read_during_evictions_is_never_over_the_limit(tmp_path):
    # A walk of the folder that is not under the cache's lock can count a file
    # being evicted and the room reserved for the next one in the same walk.
    cache = _cache(tmp_path)
    seen: list[int] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            seen.append(cache.usage())

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        for step in range(300):
            cache.ensure(step % FILES)
    finally:
        done.set()
        poller.join()
    assert seen and max(seen) <= FITS * SIZE, max(seen)
    assert cache.usage() == FITS * SIZE
