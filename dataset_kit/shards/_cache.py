"""The local shard cache that all processes of a node share: one download per shard, bounded.

* A shard is downloaded under its own lock (:func:`dataset_kit._files.lock_for`)
  into memory; once its sha256 matched the manifest it is written to a
  temporary file that is published with an atomic rename: a cached shard is
  always whole and verified (after an operating-system crash, checked again:
  see ``_reboot``). Readers of the downloading process get the verified bytes
  before they are written (see ``_handoff``).
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
import shutil
import threading
from typing import Any

from dataset_kit import _files
from dataset_kit.formats.shards import _layout
from dataset_kit.formats.shards.manifest import Manifest, ShardInfo
from dataset_kit.shards import _download, _handoff, _reboot, _remote

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
        self._downloads: _handoff.Downloads | None = None
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
        return dict(self.__dict__, _fs=None, _downloads=None)

    @property
    def downloads(self) -> _handoff.Downloads:
        """This process's downloads in flight (threads do not survive ``fork``)."""
        downloads = self._downloads
        if downloads is None or downloads.stale:
            # One table per process: a thread that made its own would wait
            # for a job that another table ends.
            with _handoff.MAKING:
                if self._downloads is None or self._downloads.stale:
                    self._downloads = _handoff.Downloads()
                downloads = self._downloads
        return downloads

    def path(self, shard: int) -> str:
        """The local path of shard number ``shard``."""
        return os.path.join(self.directory, cached_name(self.manifest.shards[shard]))

    def fetch(self, shard: int, keep: frozenset[str] = frozenset()) -> bool:
        """Download shard ``shard`` into the cache unless it is there or on its way (prefetch).

        Returns at once when another thread of this process is downloading it.
        A reader that joins this download and sees it fail tries again itself
        (see :meth:`open`).

        Args:
            shard: the shard number.
            keep: names of shards that making room must not evict (besides
                those in use).

        Returns:
            Whether this call downloaded it.

        Raises:
            The download's errors (see :meth:`open`).
        """
        if os.path.exists(self.path(shard)):
            return False
        job, new = self.downloads.begin(shard, False)
        return new and self._run(shard, keep, job)

    def ensure(self, shard: int) -> None:
        """Return once shard ``shard`` is published in the cache, downloading it if needed.

        Raises:
            The download's errors (see :meth:`open`).
        """
        while not os.path.exists(self.path(shard)):
            job, new = self.downloads.begin(shard, True)
            if new:
                self._run(shard, frozenset(), job)
                continue
            error = self.downloads.wait(job, until_done=True)
            if error is not None and job.for_reader:
                raise error

    def _run(self, shard: int, keep: frozenset[str], job: _handoff.Job) -> bool:
        """Download ``shard`` for ``job`` under the shard's lock; end the job however it goes."""
        path, error = self.path(shard), None
        try:
            lock = _files.lock_for(path)
            # Often another process is finishing this very shard: poll its
            # lock often, or the reader idles up to 50 ms a shard.
            lock.acquire(poll_interval=_POLL)
            try:
                if os.path.exists(path):
                    return False
                self._fetch(shard, keep, job)
                return True
            finally:
                lock.release()
        except BaseException as failure:
            error = failure
            raise
        finally:
            self.downloads.end(shard, job, error)

    def fetch_quietly(self, shard: int, job: _handoff.Job | None = None) -> None:
        """Download ``shard`` for a reader (on a thread of its own): the job keeps any error.

        Args:
            shard: the shard number.
            job: the job begun for it, or None to begin one (if none runs).
        """
        if job is None:
            if os.path.exists(self.path(shard)):
                return
            job, new = self.downloads.begin(shard, True)
            if not new:
                return
        with contextlib.suppress(BaseException):  # the reader raises job.error
            self._run(shard, frozenset(), job)

    def open(self, shard: int) -> _layout.ShardFile:
        """Return shard ``shard`` ready to read, downloading it if needed.

        A cached shard is mapped and marked in use. A shard that this process
        is downloading is read from its verified bytes in memory as soon as
        they matched the sha256, while they are written to the cache.

        Raises:
            ShardIntegrityError: if the shard failed its sha256 twice.
            CacheFullError: if there is no room for it.
            ShardDownloadError: if it cannot be downloaded (or a stall timed out),
                or an earlier shard's verified bytes could not be written.
        """
        info = self.manifest.shards[shard]
        path = self.path(shard)
        compressed = self.manifest.compression is not None
        downloads = self.downloads
        while True:
            if downloads.late_errors:
                error = downloads.late_errors.pop(0)
                raise _download.ShardDownloadError(
                    f"writing a verified shard to the cache {self.directory} failed: "
                    f"{error}") from error
            if not os.path.exists(path):
                job, new = downloads.begin(shard, True)
                if new:
                    threading.Thread(target=self.fetch_quietly, args=(shard, job), daemon=True,
                                     name=f"shard-fetch {info.name}").start()
                data = downloads.wait(job)
                if data is not None:
                    return _layout.ShardFile(path, info.samples, len(self.manifest.columns),
                                             compressed, data=data)
                if job.error is not None and job.for_reader:
                    raise job.error
                continue  # published (or a prefetch failed): look again
            opened = self.open_cached(shard)
            if opened is not None:
                return opened

    def open_cached(self, shard: int) -> _layout.ShardFile | None:
        """Return shard ``shard`` mapped from the cache and marked in use, or None if not cached."""
        info = self.manifest.shards[shard]
        path = self.path(shard)
        try:
            opened = _layout.ShardFile(path, info.samples, len(self.manifest.columns),
                                       self.manifest.compression is not None)
        except FileNotFoundError:
            return None  # not there, or evicted between a check and the open
        fcntl.flock(opened.fileno(), fcntl.LOCK_SH)
        try:
            same = os.stat(path).st_ino == os.fstat(opened.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            opened.close()  # evicted while we waited for the lock
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # most recently used
        return opened

    def _fetch(self, shard: int, keep: frozenset[str], job: _handoff.Job) -> None:
        info = self.manifest.shards[shard]
        path, url = self.path(shard), f"{self.url.rstrip('/')}/{info.name}"
        _files.remove_stale_parts(path)
        digests = []
        for _ in range(2):
            try:
                self._download_verified(shard, path, url, keep, job)
                return
            except _Mismatch as mismatch:
                digests.append(mismatch.digest)
        raise ShardIntegrityError(
            f"shard {info.name} from {url} failed its sha256 twice: the manifest says "
            f"{info.sha256}, the downloads hashed to {digests[0]} and {digests[1]}; it was "
            f"not cached")

    def _download_verified(self, shard: int, path: str, url: str, keep: frozenset[str],
                           job: _handoff.Job) -> None:
        info = self.manifest.shards[shard]
        temp = _files.staging_file(path)
        try:
            out = open(temp, "wb")  # noqa: SIM115 - closed by _publish, or below
            try:
                if self.cache_limit is None:
                    self._reserve(out, info.bytes)
                else:
                    self._reserve_room(out, info, keep, self.cache_limit)
                fs, root = self.fs
                digest = hashlib.sha256()
                pieces = _download.download(fs, f"{root}/{info.name}", url, info.bytes,
                                            digest, **self.options)
                if digest.hexdigest() != info.sha256:
                    raise _Mismatch(digest.hexdigest())
            except BaseException:
                out.close()
                raise
            # Written and published by a thread that is not a daemon, started
            # before a reader has the bytes: a process that ends once it read
            # them (its daemon threads stopped) still publishes them, so no
            # other process downloads them again.
            failed: list[BaseException] = []
            writer = threading.Thread(target=self._publish, name=f"shard-write {info.name}",
                                      args=(out, pieces, info.bytes, temp, path, failed),
                                      daemon=False)  # else it inherits ours
            writer.start()
            self.downloads.hand_over(job, pieces[0] if len(pieces) == 1 else b"".join(pieces))
            writer.join()
            if failed:
                raise failed[0]
        except CacheFullError:
            raise
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise CacheFullError(
                    error.errno, f"no space left in the cache {self.directory} for shard "
                    f"{info.name} ({info.bytes} bytes); nothing of it was kept") from None
            raise
        finally:
            shutil.rmtree(os.path.dirname(temp), ignore_errors=True)

    def _publish(self, out: Any, pieces: list[bytes], size: int, temp: str, path: str,
                 failed: list[BaseException]) -> None:
        """Write verified ``pieces`` to ``out`` (the staging file ``temp``); rename it to ``path``.

        Without fsync where a reboot can be told (see ``_reboot``). A failure
        goes to ``failed``, the staging folder is removed either way.
        """
        try:
            with out:
                for piece in pieces:
                    out.write(piece)
                out.truncate(size)
                if self._durable:
                    out.flush()
                    os.fsync(out.fileno())
            with _files.lock_for(os.path.join(self.directory, ".room")):
                os.replace(temp, path)  # never while room is counted (see _reserve_room)
            if self._durable:
                _files.fsync_directory(self.directory)
        except BaseException as error:  # noqa: BLE001 - raised by the downloading thread
            failed.append(error)
        finally:
            shutil.rmtree(os.path.dirname(temp), ignore_errors=True)

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

    def _reserve_room(self, out: Any, info: ShardInfo, keep: frozenset[str], limit: int) -> None:
        """Make room for shard ``info`` within ``limit`` and reserve its bytes in ``out``.

        Under the cache-wide lock, which every rename into the cache also takes,
        so the usage counted never misses a shard moving out of its staging
        folder. When there is no room, but this process's readers have shards
        still being written (a reader can outrun the disk), those become
        evictable once published: wait for them (outside the lock, which their
        rename needs) and try again.
        """
        room = _files.lock_for(os.path.join(self.directory, ".room"))
        while True:
            with room:
                try:
                    self._make_room(info.bytes, info.name, keep, limit)
                except CacheFullError as full:
                    error = full
                else:
                    self._reserve(out, info.bytes)
                    return
            if not self.downloads.wait_writes():
                raise error

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

