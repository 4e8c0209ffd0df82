"""A local cache of remote files that all processes of a node share: one download per file.

* A file is downloaded under its own lock (:func:`dataset_kit._files.lock_for`)
  into memory; once it passed its verification (a :class:`Verifier`: a
  manifest's sha256, or the size and ETag the store listed) it is written to a
  temporary file that is published with an atomic rename: a cached file is
  always whole and verified (after an operating-system crash, checked again:
  see ``_reboot``). Readers of the downloading process get the verified bytes
  before they are written (see ``_handoff``).
* Room is made under one cache-wide lock: least-recently-used files (by
  modification time, touched on every open) are deleted until the new file
  fits ``cache_limit``; the new file's bytes are then reserved on disk
  (``posix_fallocate``) before it is downloaded, so concurrent downloads count
  and a full disk fails at once, before any transfer.
* A file in use is held open with a shared ``flock``; eviction takes an
  exclusive non-blocking ``flock`` first, so it never deletes an open file.

Moved here from ``shards/`` so that every remote format shares it: the shards
door caches shards (verified by their manifest's sha256) and
``ParquetDataset(cache=...)`` caches Parquet files (verified by size and ETag).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from dataset_kit import _files, _fsspec
from dataset_kit.filecache import _download, _handoff, _reboot

_POLL = 0.002  # seconds between tries of a file's lock held elsewhere


class IntegrityError(ValueError):
    """A downloaded file failed its verification twice (names the file, its URL and why)."""


class CacheFullError(OSError):
    """The cache cannot hold a file: ``cache_limit`` is taken by files in use, or the disk
    is full."""


class Verifier(Protocol):
    """How a download is checked before anything of it is kept or read.

    ``digest()`` makes a :mod:`hashlib`-like object that is fed every byte
    downloaded, in order; ``check(digest, fs, path)`` then returns None when
    the bytes are right, or a short description of what was found instead
    (the download is tried once more), or raises when trying again cannot
    help (the file changed in the store). ``refuse(name, url, found)`` is the
    error raised after two downloads failed, given both descriptions.
    """

    def digest(self) -> Any: ...

    def check(self, digest: Any, fs: Any, path: str) -> str | None: ...

    def refuse(self, name: str, url: str, found: list[str]) -> BaseException: ...


@dataclass(frozen=True)
class CachedFile:
    """One remote file the cache may hold.

    Attributes:
        name: its file name in the cache (unique per version of the file: see
            :func:`cached_name`).
        url: its URL (or local path), which fsspec opens.
        size: its size in bytes.
        verifier: how its download is checked.
        shown: its name in errors (the shard's name, the file's URL).
    """

    name: str
    url: str
    size: int
    verifier: Verifier
    shown: str


class _Mismatch(Exception):
    def __init__(self, found: str) -> None:
        super().__init__(found)
        self.found = found


class _Opened(Protocol):
    def fileno(self) -> int: ...

    def close(self) -> None: ...


T = TypeVar("T", bound=_Opened)


def cached_name(digest: str, name: str) -> str:
    """The cache's name of remote file ``name`` whose version ``digest`` (hex) identifies.

    ``digest`` is the file's sha256 where a manifest gives one, else a sha256
    of its URL and stamp (size, modification time, ETag): a file rewritten at
    the same URL then never matches what was cached of an older version.
    """
    return _reboot.cached_name(digest, os.path.basename(name.rstrip("/")) or "file")


class FileCache:
    """Remote files fetched on demand into ``directory``.

    Args:
        directory: the cache folder (shared by every process of the node).
        files: the files it may hold; each is named by its number in this list.
        storage_options: fsspec's options for their URLs.
        cache_limit: bytes the folder may hold, or None for no limit.
        timeout, retries, chunk_size: see :func:`._download.download`.
        kind: what a file is, in errors ("shard", "file").
    """

    def __init__(self, directory: str, files: Sequence[CachedFile], storage_options: dict | None,
                 cache_limit: int | None, timeout: float, retries: int, chunk_size: int,
                 kind: str = "file") -> None:
        self.directory, self.storage_options = directory, storage_options
        self.files = list(files)
        self.kind = kind
        self._fs: dict[str, tuple[int, Any, str]] = {}
        self.cache_limit = cache_limit
        self.options: dict[str, Any] = {"timeout": timeout, "retries": retries,
                                        "chunk_size": chunk_size, "kind": kind}
        self.names = {f.name for f in self.files}
        self._downloads: _handoff.Downloads | None = None
        os.makedirs(directory, exist_ok=True)
        # Files are published without fsync where a reboot can be told (see _reboot).
        self._durable = _reboot.boot_id() is None
        with self._room():
            _reboot.check_after_reboot(directory)

    def _room(self) -> Any:
        """The cache-wide lock: held to count, make room, reserve and publish."""
        return _files.lock_for(os.path.join(self.directory, ".room"))

    def fs(self, url: str) -> tuple[Any, str]:
        """``(fsspec filesystem, path inside it)`` of ``url``, made in this process.

        A filesystem is not shared across ``fork``: fsspec's asynchronous ones
        (HTTP, S3) refuse to run in a forked child, so each process makes its own.
        """
        made = self._fs.get(url)
        if made is None or made[0] != os.getpid():
            fs, path = _fsspec.filesystem(url, self.storage_options, f"reading {url}")
            made = self._fs[url] = (os.getpid(), fs, path)
        return made[1], made[2]

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _fs={}, _downloads=None)

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

    def path(self, item: int) -> str:
        """The local path of file number ``item``."""
        return os.path.join(self.directory, self.files[item].name)

    def fetch(self, item: int, keep: frozenset[str] = frozenset()) -> bool:
        """Download file ``item`` into the cache unless it is there or on its way (prefetch).

        Returns at once when another thread of this process is downloading it.
        A reader that joins this download and sees it fail tries again itself
        (see :meth:`open`).

        Args:
            item: the file number.
            keep: cache names of files that making room must not evict
                (besides those in use).

        Returns:
            Whether this call downloaded it.

        Raises:
            The download's errors (see :meth:`open`).
        """
        if os.path.exists(self.path(item)):
            return False
        job, new = self.downloads.begin(item, False)
        return new and self._run(item, keep, job)

    def ensure(self, item: int) -> None:
        """Return once file ``item`` is published in the cache, downloading it if needed.

        Raises:
            The download's errors (see :meth:`open`).
        """
        while not os.path.exists(self.path(item)):
            job, new = self.downloads.begin(item, True)
            if new:
                self._run(item, frozenset(), job)
                continue
            error = self.downloads.wait(job, until_done=True)
            if error is not None and job.for_reader:
                raise error

    def _run(self, item: int, keep: frozenset[str], job: _handoff.Job) -> bool:
        """Download ``item`` for ``job`` under the file's lock; end the job however it goes."""
        path, error = self.path(item), None
        try:
            lock = _files.lock_for(path)
            # Often another process is finishing this very file: poll its
            # lock often, or the reader idles up to 50 ms a file.
            lock.acquire(poll_interval=_POLL)
            try:
                if os.path.exists(path):
                    return False
                self._fetch(item, keep, job)
                return True
            finally:
                lock.release()
        except BaseException as failure:
            error = failure
            raise
        finally:
            self.downloads.end(item, job, error)

    def fetch_quietly(self, item: int, job: _handoff.Job | None = None) -> None:
        """Download ``item`` for a reader (on a thread of its own): the job keeps any error.

        Args:
            item: the file number.
            job: the job begun for it, or None to begin one (if none runs).
        """
        if job is None:
            if os.path.exists(self.path(item)):
                return
            job, new = self.downloads.begin(item, True)
            if not new:
                return
        with contextlib.suppress(BaseException):  # the reader raises job.error
            self._run(item, frozenset(), job)

    def open(self, item: int, make: Callable[[str, bytes | None], T]) -> T:
        """Return file ``item`` ready to read, downloading it if needed.

        A cached file is opened with ``make(path, None)`` and marked in use
        (a shared ``flock`` on ``make``'s ``fileno()``, until it is closed). A
        file that this process is downloading is read from its verified bytes
        in memory, ``make(path, data)``, as soon as they passed their check,
        while they are written to the cache.

        Raises:
            IntegrityError: if the file failed its verification twice (or the
                verifier's own error, such as a file changed in the store).
            CacheFullError: if there is no room for it.
            CacheDownloadError: if it cannot be downloaded (or a stall timed out),
                or an earlier file's verified bytes could not be written.
        """
        path = self.path(item)
        downloads = self.downloads
        while True:
            if downloads.late_errors:
                error = downloads.late_errors.pop(0)
                raise _download.CacheDownloadError(
                    f"writing a verified {self.kind} to the cache {self.directory} failed: "
                    f"{error}") from error
            if not os.path.exists(path):
                job, new = downloads.begin(item, True)
                if new:
                    threading.Thread(target=self.fetch_quietly, args=(item, job), daemon=True,
                                     name=f"cache-fetch {self.files[item].name}").start()
                data = downloads.wait(job)
                if data is not None:
                    return make(path, data)
                if job.error is not None and job.for_reader:
                    raise job.error
                continue  # published (or a prefetch failed): look again
            opened = self.open_cached(item, make)
            if opened is not None:
                return opened

    def open_cached(self, item: int, make: Callable[[str, bytes | None], T]) -> T | None:
        """Return file ``item`` opened from the cache by ``make(path, None)`` and marked in use,
        or None if it is not cached."""
        path = self.path(item)
        try:
            opened = make(path, None)
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

    def _fetch(self, item: int, keep: frozenset[str], job: _handoff.Job) -> None:
        entry = self.files[item]
        path = self.path(item)
        _files.remove_stale_parts(path)
        found = []
        for _ in range(2):
            try:
                self._download_verified(item, path, keep, job)
                return
            except _Mismatch as mismatch:
                found.append(mismatch.found)
        raise entry.verifier.refuse(entry.shown, entry.url, found)

    def _download_verified(self, item: int, path: str, keep: frozenset[str],
                           job: _handoff.Job) -> None:
        entry = self.files[item]
        temp = _files.staging_file(path)
        try:
            out = open(temp, "wb")  # noqa: SIM115 - closed by _publish, or below
            try:
                if self.cache_limit is None:
                    self._reserve(out, entry.size)
                else:
                    self._reserve_room(out, entry, keep, self.cache_limit)
                fs, remote = self.fs(entry.url)
                digest = entry.verifier.digest()
                pieces = _download.download(fs, remote, entry.url, entry.size, digest,
                                            **self.options)
                found = entry.verifier.check(digest, fs, remote)
                if found is not None:
                    raise _Mismatch(found)
            except BaseException:
                out.close()
                raise
            # Written and published by a thread that is not a daemon, started
            # before a reader has the bytes: a process that ends once it read
            # them (its daemon threads stopped) still publishes them, so no
            # other process downloads them again.
            failed: list[BaseException] = []
            writer = threading.Thread(target=self._publish, name=f"cache-write {entry.name}",
                                      args=(out, pieces, entry.size, temp, path, failed),
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
                    error.errno, f"no space left in the cache {self.directory} for "
                    f"{self.kind} {entry.shown} ({entry.size} bytes); nothing of it was "
                    f"kept") from None
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
            with self._room():
                os.replace(temp, path)  # never while room is counted (see _reserve_room)
            if self._durable:
                _files.fsync_directory(self.directory)
        except BaseException as error:  # noqa: BLE001 - raised by the downloading thread
            failed.append(error)
        finally:
            shutil.rmtree(os.path.dirname(temp), ignore_errors=True)

    @staticmethod
    def _reserve(out: Any, size: int) -> None:
        """Take the file's bytes on disk now: a full disk fails before any transfer."""
        if size and hasattr(os, "posix_fallocate"):
            os.posix_fallocate(out.fileno(), 0, size)

    def usage(self) -> int:
        """Bytes in the cache folder, downloads in progress included.

        Counted under the cache-wide lock: a walk of the folder without it can
        count a file that an eviction deletes and, later in the same walk, the
        room reserved for its successor, both at once (a figure over
        ``cache_limit`` that the folder never held).
        """
        with self._room():
            return self._counted_usage()

    def _counted_usage(self) -> int:
        """Bytes in the cache folder; the caller holds the cache-wide lock."""
        total = 0
        for base, _, files in os.walk(self.directory):
            for name in files:
                if name == _reboot.MARKER and base == self.directory:
                    continue  # a few bytes of bookkeeping, not a file
                with contextlib.suppress(FileNotFoundError):
                    total += os.stat(os.path.join(base, name)).st_size
        return total

    def _make_room(self, need: int, name: str, keep: frozenset[str], limit: int) -> None:
        """Evict least-recently-used files not in use nor in ``keep`` until ``need`` more fit.

        ``limit`` is ``cache_limit``, passed by the caller that checked it is set.
        """
        self._remove_dead_downloads()
        usage = self._counted_usage()
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
                f"bytes) cannot hold {self.kind} {name} ({need} bytes): {usage} bytes are "
                f"taken by {self.kind}s in use or being downloaded")

    def _reserve_room(self, out: Any, entry: CachedFile, keep: frozenset[str],
                      limit: int) -> None:
        """Make room for file ``entry`` within ``limit`` and reserve its bytes in ``out``.

        Under the cache-wide lock, which every rename into the cache also takes,
        so the usage counted never misses a file moving out of its staging
        folder. When there is no room, but this process's readers have files
        still being written (a reader can outrun the disk), those become
        evictable once published: wait for them (outside the lock, which their
        rename needs) and try again.
        """
        room = self._room()
        while True:
            with room:
                try:
                    self._make_room(entry.size, entry.shown, keep, limit)
                except CacheFullError as full:
                    error = full
                else:
                    self._reserve(out, entry.size)
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

