"""The local shard cache that all processes of a node share: one download per shard, bounded.

* A shard is downloaded under its own lock (:func:`dataset_kit._files.lock_for`),
  into a temporary file that is published with an atomic rename after its
  sha256 matched the manifest: a cached shard is always whole and verified
  (after an operating-system crash, checked again: see ``_reboot``).
* Room is made under one cache-wide lock: least-recently-used shards (by
  modification time, touched on every open) are deleted until the new shard
  fits ``cache_limit``; the new shard's bytes are then reserved on disk
  (``posix_fallocate``) before it is downloaded, so concurrent downloads count
  and a full disk fails at once, before any transfer.
* A shard in use is held open with a shared ``flock``; eviction takes an
  exclusive non-blocking ``flock`` first, so it never deletes an open shard.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from typing import Any

from dataset_kit import _files
from dataset_kit.shards import _download, _layout, _reboot, _remote
from dataset_kit.shards.manifest import Manifest, ShardInfo

_POLL = 0.002  # seconds between tries of a shard's lock held elsewhere


class ShardIntegrityError(ValueError):
    """A shard failed its sha256 twice (names the shard, its URL and both hashes)."""


class CacheFullError(OSError):
    """The cache cannot hold a shard: ``cache_limit`` is taken by shards in use, or the disk
    is full."""


class _Mismatch(Exception):
    def __init__(self, digest: str) -> None:
        super().__init__(digest)
        self.digest = digest


class ShardCache:
    """Shards of one manifest, fetched on demand into ``directory``.

    Args:
        directory: the cache folder (shared by every process of the node).
        url: the remote folder's URL.
        storage_options: fsspec's options for it.
        manifest: the shards' manifest.
        cache_limit: bytes the folder may hold, or None for no limit.
        timeout, retries, chunk_size: see :func:`._download.download`.
    """

    def __init__(self, directory: str, url: str, storage_options: dict | None,
                 manifest: Manifest, cache_limit: int | None, timeout: float, retries: int,
                 chunk_size: int) -> None:
        self.directory, self.url, self.storage_options = directory, url, storage_options
        self._fs: tuple[int, Any, str] | None = None
        self.manifest, self.cache_limit = manifest, cache_limit
        self.options: dict[str, Any] = {"timeout": timeout, "retries": retries,
                                        "chunk_size": chunk_size}
        self.names = {cached_name(s) for s in manifest.shards}
        os.makedirs(directory, exist_ok=True)
        # Shards are published without fsync where a reboot can be told (see _reboot).
        self._durable = _reboot.boot_id() is None
        with _files.lock_for(os.path.join(directory, ".room")):
            _reboot.check_after_reboot(directory)

    @property
    def fs(self) -> tuple[Any, str]:
        """``(fsspec filesystem, remote folder inside it)``, made in this process.

        A filesystem is not shared across ``fork``: fsspec's asynchronous ones
        (HTTP, S3) refuse to run in a forked child, so each process makes its own.
        """
        if self._fs is None or self._fs[0] != os.getpid():
            fs, root = _remote.filesystem(self.url, self.storage_options)
            self._fs = (os.getpid(), fs, root.rstrip("/"))
        return self._fs[1], self._fs[2]

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _fs=None)

    def path(self, shard: int) -> str:
        """The local path of shard number ``shard``."""
        return os.path.join(self.directory, cached_name(self.manifest.shards[shard]))

    def fetch(self, shard: int, keep: frozenset[str] = frozenset()) -> bool:
        """Make sure shard ``shard`` is in the cache (downloading it once per node).

        Args:
            shard: the shard number.
            keep: names of shards that making room must not evict (besides
                those in use), for prefetches.

        Returns:
            Whether this call downloaded it.
        """
        path = self.path(shard)
        if os.path.exists(path):
            return False
        lock = _files.lock_for(path)
        # Often another thread or process is finishing this very shard (a
        # prefetch): poll its lock often, or the reader idles up to 50 ms a shard.
        lock.acquire(poll_interval=_POLL)
        try:
            if os.path.exists(path):
                return False
            self._fetch(shard, keep)
            return True
        finally:
            lock.release()

    def open(self, shard: int) -> _layout.ShardFile:
        """Return shard ``shard`` opened and marked in use, downloading it if needed.

        Raises:
            ShardIntegrityError: if the shard failed its sha256 twice.
            CacheFullError: if there is no room for it.
            ShardDownloadError: if it cannot be downloaded (or a stall timed out).
        """
        info = self.manifest.shards[shard]
        path = self.path(shard)
        compressed = self.manifest.compression is not None
        while True:
            self.fetch(shard)
            try:
                opened = _layout.ShardFile(path, info.samples, len(self.manifest.columns),
                                           compressed)
            except FileNotFoundError:
                continue  # evicted between the check and the open
            fcntl.flock(opened.fileno(), fcntl.LOCK_SH)
            try:
                same = os.stat(path).st_ino == os.fstat(opened.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                with contextlib.suppress(OSError):
                    os.utime(path)  # most recently used
                return opened
            opened.close()  # evicted while we waited for the lock: fetch again

    def _fetch(self, shard: int, keep: frozenset[str]) -> None:
        info = self.manifest.shards[shard]
        path, url = self.path(shard), f"{self.url.rstrip('/')}/{info.name}"
        _files.remove_stale_parts(path)
        digests = []
        for _ in range(2):
            try:
                self._download_verified(shard, path, url, keep)
                return
            except _Mismatch as mismatch:
                digests.append(mismatch.digest)
        raise ShardIntegrityError(
            f"shard {info.name} from {url} failed its sha256 twice: the manifest says "
            f"{info.sha256}, the downloads hashed to {digests[0]} and {digests[1]}; it was "
            f"not cached")

    def _download_verified(self, shard: int, path: str, url: str,
                           keep: frozenset[str]) -> None:
        info = self.manifest.shards[shard]
        try:
            with _reboot.publish(path, self._durable) as temp:
                with open(temp, "wb") as out:
                    if self.cache_limit is None:
                        self._reserve(out, info.bytes)
                    else:
                        with _files.lock_for(os.path.join(self.directory, ".room")):
                            self._make_room(info.bytes, info.name, keep, self.cache_limit)
                            self._reserve(out, info.bytes)
                    fs, root = self.fs
                    digest = hashlib.sha256()
                    _download.download(fs, f"{root}/{info.name}", url, info.bytes, out,
                                       digest, **self.options)
                    out.truncate(info.bytes)
                if digest.hexdigest() != info.sha256:
                    raise _Mismatch(digest.hexdigest())
        except CacheFullError:
            raise
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise CacheFullError(
                    error.errno, f"no space left in the cache {self.directory} for shard "
                    f"{info.name} ({info.bytes} bytes); nothing of it was kept") from None
            raise

    @staticmethod
    def _reserve(out: Any, size: int) -> None:
        """Take the shard's bytes on disk now: a full disk fails before any transfer."""
        if size and hasattr(os, "posix_fallocate"):
            os.posix_fallocate(out.fileno(), 0, size)

    def usage(self) -> int:
        """Bytes in the cache folder, downloads in progress included."""
        total = 0
        for base, _, files in os.walk(self.directory):
            for name in files:
                if name == _reboot.MARKER and base == self.directory:
                    continue  # a few bytes of bookkeeping, not a shard
                with contextlib.suppress(FileNotFoundError):
                    total += os.stat(os.path.join(base, name)).st_size
        return total

    def _make_room(self, need: int, name: str, keep: frozenset[str], limit: int) -> None:
        """Evict least-recently-used shards not in use nor in ``keep`` until ``need`` more fit.

        ``limit`` is ``cache_limit``, passed by the caller that checked it is set.
        """
        self._remove_dead_downloads()
        usage = self.usage()
        if usage + need <= limit:
            return
        cached = []
        for entry in os.scandir(self.directory):
            if entry.name in self.names and entry.name not in keep and entry.is_file():
                with contextlib.suppress(FileNotFoundError):
                    cached.append((entry.stat().st_mtime_ns, entry.path))
        for _, victim in sorted(cached):
            if usage + need <= limit:
                break
            usage -= _evict(victim)
        if usage + need > limit:
            raise CacheFullError(
                errno.ENOSPC, f"the cache {self.directory} (cache_limit {self.cache_limit} "
                f"bytes) cannot hold shard {name} ({need} bytes): {usage} bytes are taken by "
                f"shards in use or being downloaded")

    def _remove_dead_downloads(self) -> None:
        """Remove the staging files of downloads whose process died (they count as usage)."""
        for name in os.listdir(self.directory):
            if name.startswith(".") and name.endswith(_files.PART_SUFFIX):
                base = name[1:-len(_files.PART_SUFFIX)].rsplit(".", 1)[0]
                if base in self.names:
                    _files.remove_stale_parts(os.path.join(self.directory, base),
                                              under_lock=False)


def cached_name(info: ShardInfo) -> str:
    """The cache's file name of a shard: its name, prefixed by its sha256.

    A shard rewritten at the same URL (a dataset written again with
    ``overwrite=True``) then never matches what an older manifest cached.
    """
    return _reboot.cached_name(info.sha256, info.name)


def _evict(path: str) -> int:
    """Delete ``path`` unless a process holds it open; return the bytes freed."""
    try:
        with open(path, "rb") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0  # in use
            size = os.fstat(f.fileno()).st_size
            os.unlink(path)
            return size
    except FileNotFoundError:
        return 0

