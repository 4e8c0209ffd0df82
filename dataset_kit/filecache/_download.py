"""One remote file into memory: ranged reads, resumed, with a stall timeout.

Any fsspec filesystem answers ``cat_file(path, start, end)``, so a file is
read in ranges: a connection cut mid-file costs one retried range, not the
whole file. Each range runs on a daemon thread that the caller waits on with
a timeout, so a stalled store becomes an error naming the file, never a hang
(and never blocks interpreter exit). The next range is asked for before the
last one is hashed, so the transfer overlaps the hashing. The bytes stay in
memory until the caller has checked the hash: nothing unverified reaches
the disk or a reader.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class CacheDownloadError(OSError):
    """A file could not be downloaded into the cache (names the file, its URL and the cause)."""


class CacheDownloadTimeoutError(CacheDownloadError, TimeoutError):
    """A ranged read of a file did not finish within ``timeout`` seconds."""


class _Read:
    """One ranged read running on a daemon thread (so a stall cannot block exit)."""

    def __init__(self, fs: Any, path: str, start: int, end: int) -> None:
        self.start, self.end = start, end
        self._done = threading.Event()
        self._result: dict[str, Any] = {}
        threading.Thread(target=self._run, args=(fs, path), daemon=True,
                         name=f"cache-read {path}").start()

    def _run(self, fs: Any, path: str) -> None:
        try:
            self._result["data"] = fs.cat_file(path, start=self.start, end=self.end)
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
            self._result["error"] = error
        self._done.set()

    def wait(self, timeout: float) -> bytes | None:
        """Return the bytes read, or None if none came within ``timeout`` seconds."""
        if not self._done.wait(timeout):
            return None
        if "error" in self._result:
            raise self._result["error"]
        # A server may answer a range with more than was asked (the rest of the file).
        return self._result["data"][:self.end - self.start]


def range_size(size: int, chunk_size: int) -> int:
    """Bytes per ranged read of a ``size``-byte file: as few ranges as ``chunk_size``
    allows, of equal size (a small last range would cost a whole request for little)."""
    return -(-size // -(-size // chunk_size))


def download(fs: Any, path: str, url: str, size: int, digest: Any, *,
             timeout: float, retries: int, chunk_size: int, kind: str = "file") -> list[bytes]:
    """Read the ``size`` bytes of ``path``, hashing them into ``digest`` as they arrive.

    Args:
        fs: the fsspec filesystem.
        path: the file's path inside ``fs``.
        url: the file's URL, for errors.
        size: its size in bytes (from a manifest or the store's listing).
        digest: a :mod:`hashlib` object fed every byte read, in order.
        timeout: seconds a range may take before the download is given up.
        retries: consecutive failed ranges tolerated (with backoff) before giving up.
        chunk_size: the most bytes per ranged read (the file is cut into equal ranges).
        kind: what the file is, for errors ("shard", "file").

    Returns:
        The file's bytes, as the ranges read (``size`` bytes in all).

    Raises:
        CacheDownloadTimeoutError: if a ranged read did not finish within ``timeout`` seconds.
        CacheDownloadError: if ``retries`` consecutive ranges failed, or the
            store has fewer bytes than ``size``.
    """
    pieces: list[bytes] = []
    if not size:
        return pieces
    step = range_size(size, chunk_size)
    received, failures = 0, 0
    pending = _Read(fs, path, 0, min(size, step))
    while received < size:
        end = pending.end
        try:
            data = pending.wait(timeout)
        except FileNotFoundError as error:
            raise CacheDownloadError(f"{kind} {url} does not exist in the store: {error}") from None
        except Exception as error:  # noqa: BLE001 - fsspec backends raise their own types
            failures += 1
            if failures > retries:
                raise CacheDownloadError(
                    f"downloading {kind} {url} failed {failures} times in a row at byte "
                    f"{received} of {size}: {type(error).__name__}: {error}") from error
            time.sleep(min(2.0, 0.05 * 2 ** failures))
            pending = _Read(fs, path, received, min(size, received + step))
            continue
        if data is None:
            raise CacheDownloadTimeoutError(f"downloading {kind} {url} stalled: reading bytes "
                                    f"{received}-{end} of {size} did not finish within "
                                    f"{timeout} s")
        if not data:
            raise CacheDownloadError(f"{kind} {url} ended at byte {received}, but it should have "
                                f"{size} bytes")
        received += len(data)
        failures = 0
        if received < size:
            # Ask for the next range before hashing this one: the transfer
            # overlaps the work (hashlib releases the GIL).
            pending = _Read(fs, path, received, min(size, received + step))
        pieces.append(data)
        digest.update(data)
    return pieces
