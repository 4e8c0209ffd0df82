"""The dataset cache: root directory, downloads, cached files and extraction.

Dataset modules call these at import or construction time, often from many
processes at once. Every cached file appears through an atomic ``os.replace``
of a complete, process-unique temporary file, under a per-file lock: callers
never see a partial file, and a crash at any moment leaves the cache usable.
Both come from :mod:`dataset_kit._files` (``atomic_write``, ``atomic_dir``,
``lock_for``); locks are keyed to the target path, not to the dataset root.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from tqdm import tqdm

from dataset_kit import _files, _hash_stamp, _http
from dataset_kit._archive import UnsafeArchiveError, extract_archive
from dataset_kit._checks import non_negative_int
from dataset_kit._http import DownloadError

__all__ = [
    "DownloadError",
    "HashMismatchError",
    "OfflineError",
    "UnsafeArchiveError",
    "cache_or_load_file",
    "cached_download",
    "cached_download_path",
    "cached_extract",
    "download_file",
    "extract_archive",
    "get_dataset_directory",
    "get_dataset_root",
    "set_dataset_root",
]

ROOT_ENV = "DATASET_KIT_DATASET_ROOT"
# Chainer's variable, read after ours so that a Chainer user's existing cache is found.
CHAINER_ROOT_ENV = "CHAINER_DATASET_ROOT"
OFFLINE_ENV = "DATASET_KIT_OFFLINE"
T = TypeVar("T")
C = TypeVar("C")

_root_override: str | None = None


class HashMismatchError(ValueError):
    """A downloaded file's sha256 is not the one the caller expected."""


class OfflineError(DownloadError):
    """``DATASET_KIT_OFFLINE`` is set and the file is not in the cache."""


def get_dataset_root() -> str:
    """Return the dataset root directory.

    In order: the path given to :func:`set_dataset_root`, the environment
    variable ``DATASET_KIT_DATASET_ROOT``, Chainer's ``CHAINER_DATASET_ROOT``
    (so a Chainer user's existing cache is found), ``$XDG_CACHE_HOME/dataset_kit``,
    ``~/.cache/dataset_kit``. Read at each call, never cached at import.

    Returns:
        The absolute path of the root (it may not exist yet).
    """
    if _root_override is not None:
        return _root_override
    root = os.environ.get(ROOT_ENV) or os.environ.get(CHAINER_ROOT_ENV)
    if not root:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(cache, "dataset_kit")
    return os.path.abspath(os.path.expanduser(root))


def set_dataset_root(path: str | os.PathLike | None) -> None:
    """Set the dataset root for this process; it wins over the environment.

    Args:
        path: the new root, or None to go back to the environment and defaults.

    Raises:
        TypeError: if ``path`` is not a path or None.
        ValueError: if ``path`` is empty.
    """
    global _root_override
    if path is None:
        _root_override = None
        return
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    path = os.fspath(path)
    if not path:
        raise ValueError("path must not be empty")
    _root_override = os.path.abspath(os.path.expanduser(path))


def get_dataset_directory(dataset_name: str, create_directory: bool = True) -> str:
    """Return ``<root>/<dataset_name>``, creating it unless asked not to.

    Args:
        dataset_name: a relative path such as ``"mnist"`` or ``"pfnet/mnist"``.
        create_directory: whether to create the directory.

    Returns:
        The directory's absolute path.

    Raises:
        ValueError: if ``dataset_name`` is empty, absolute or climbs out with ``..``.
    """
    if not dataset_name or os.path.isabs(dataset_name) or ".." in dataset_name.split("/"):
        raise ValueError(
            f"dataset_name must be a non-empty relative path inside the root, got {dataset_name!r}"
        )
    path = os.path.join(get_dataset_root(), dataset_name)
    if create_directory:
        os.makedirs(path, exist_ok=True)
    return path


def cached_download_path(url: str) -> str:
    """Return the path at which :func:`cached_download` keeps the file of ``url``.

    The path is ``<root>/downloads/<first 16 hex digits of the sha256 of the
    URL>-<the URL's basename>`` (the basename with characters other than
    letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``, at most its last
    64 characters, without leading dots; ``download`` if nothing is left). The
    URL is hashed as :func:`cached_download` sees it: a local path or a
    ``file://`` URL becomes the ``file://`` URL of its absolute path. The
    file need not exist; nothing is created.

    To fill the cache on a machine that cannot reach ``url`` (an offline
    cluster), copy the file to this path (beside it a temporary name, then
    ``mv``, so that readers never see half a file); ``cached_download(url)``,
    with ``DATASET_KIT_OFFLINE=1`` or without, then serves it.

    Args:
        url: an http(s) URL, a ``file://`` URL or a local path.

    Returns:
        The absolute path under the current dataset root.

    Raises:
        ValueError: if ``url`` is not a non-empty string, or has another scheme.
    """
    if not isinstance(url, str) or not url:
        raise ValueError(f"url must be a non-empty string, got {url!r}")
    return _cache_path(_normalize_url(url)[0])


def _cache_path(url: str) -> str:
    """The cache path of an already normalized URL (see :func:`cached_download_path`)."""
    name = os.path.basename(urllib.parse.urlsplit(url).path) or "download"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)[-64:].lstrip(".") or "download"
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return os.path.join(get_dataset_root(), "downloads", f"{digest}-{name}")


def _normalize_url(url: str) -> tuple[str, str | None]:
    """Return ``(url, local_path)``; local paths and file:// URLs get a path."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme in ("http", "https"):
        return url, None
    if scheme == "file":
        path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
    elif scheme == "" or len(scheme) == 1:  # a plain path (or a Windows drive)
        path = url
    else:
        raise ValueError(f"url must be http(s), file:// or a local path, got {url!r}")
    path = os.path.abspath(os.path.expanduser(path))
    return "file://" + urllib.request.pathname2url(path), path


def _offline() -> bool:
    return os.environ.get(OFFLINE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _check_hash(expected: str | None, name: str, value: Any) -> str | None:
    if expected is None:
        return None
    if not isinstance(expected, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", expected):
        raise ValueError(f"{name} must be 64 hexadecimal characters, got {value!r}")
    return expected.lower()


def cached_download(
    url: str,
    *,
    sha256: str | None = None,
    timeout: float = 30.0,
    retries: int = 4,
    progress: bool | None = None,
    verify: bool = False,
) -> str:
    """Download ``url`` into the cache once, and return the cached file's path.

    The cached file is ``<root>/downloads/<hash of url>-<basename>``
    (:func:`cached_download_path` gives it), the same in every process. A
    per-file lock makes concurrent callers for one URL cause one transfer;
    callers for other URLs do not wait. The body goes into
    a process-unique temporary file in the same directory, is fsynced and
    verified, then moved into place with ``os.replace``.

    With ``sha256``, a cached file is verified on every call: a stamp beside
    it (``<file>.sha256-stamp``) records the verified hash with the file's
    size, inode and times, so while the file is unchanged the check costs one
    ``stat``; a file that changed is hashed again, and one whose hash differs
    is downloaded again (or, offline, is an :class:`OfflineError`). A
    read-only root (one filled beforehand and shared by a cluster) works:
    where no stamp can be written, the file is verified by hashing it at
    every call, and served.

    A file that Chainer's ``cached_download`` left under the same root
    (``<root>/_dl_cache/<md5 of url>``, e.g. through ``CHAINER_DATASET_ROOT``)
    is copied into the cache instead of downloaded, also offline, if it
    has the ``sha256`` asked for.

    Args:
        url: an http(s) URL, a ``file://`` URL or a local path (copied in).
        sha256: the expected hex digest; checked after the download and on
            every later call (through the stamp while the file is unchanged).
        timeout: socket timeout in seconds for each connection attempt.
        retries: extra attempts for connection errors, timeouts, 5xx and 429.
        progress: show a tqdm bar on stderr; None shows it when stderr is a tty.
        verify: re-hash a cached file even when its stamp vouches for it
            (needs ``sha256``).

    Returns:
        The path of the cached file.

    Raises:
        ValueError: for a malformed argument (naming it and its value).
        HashMismatchError: if the file's sha256 differs from ``sha256``; nothing
            is cached then. Also if a cached file's sha256 differs and the
            file cannot be removed (a read-only root).
        OfflineError: if ``DATASET_KIT_OFFLINE`` is set and the file is not
            cached, or is cached with another sha256 than ``sha256``.
        DownloadError: if the server answers 4xx (but 429) or retries run out.
        FileNotFoundError: if a local source does not exist.
        IsADirectoryError: if a local source is a directory.
    """
    expected = _check_hash(sha256, "sha256", sha256)
    retries = _check_transfer_options(url, timeout, retries)
    if verify and expected is None:
        raise ValueError("verify=True needs sha256= to verify against")
    url, local = _normalize_url(url)
    path = _cache_path(url)
    if os.path.exists(path) and not verify and (
            expected is None or _hash_stamp.vouches(path, expected)):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with _files.lock_for(path):
        if os.path.exists(path):
            if expected is None or (not verify and _hash_stamp.vouches(path, expected)):
                return path
            hashed = os.stat(path)
            digest: str | None = _files.sha256_of(path)
            if digest == expected:
                _hash_stamp.write(path, digest, hashed)
                return path
            if _offline():
                raise OfflineError(
                    f"the cached {path} (from {url}) has sha256 {digest}, expected {expected}, "
                    f"and {OFFLINE_ENV} is set, so it cannot be downloaded again")
            try:
                os.unlink(path)  # corrupt or replaced: download it again
            except OSError as error:  # a read-only root: it cannot be replaced here
                raise HashMismatchError(
                    f"the cached {path} (from {url}) has sha256 {digest}, expected "
                    f"{expected}, and it cannot be replaced: {error}") from error
            _hash_stamp.remove(path)
        if not _adopted_from_chainer(url, path, expected):
            if _offline():
                raise OfflineError(
                    f"{OFFLINE_ENV} is set and {url} is not in the cache (expected at {path})")
            _publish(url, local, path, expected, timeout, retries, progress)
        if expected is not None:  # verified in its temporary file, moved under our lock
            _hash_stamp.write(path, expected, os.stat(path))
    return path


def download_file(url: str, path: str | os.PathLike, *, overwrite: bool = False,
                  timeout: float = 30.0, retries: int = 4,
                  progress: bool | None = None) -> str:
    """Download ``url`` to a file of the caller's choosing, with the cache's guarantees.

    As :func:`cached_download` (one lock per target, a process-unique
    temporary file fsynced and moved into place, retries and resumption),
    but the file is ``path`` rather than the cache's own, and with
    ``overwrite`` an existing file is downloaded again. Without
    ``overwrite`` an existing ``path`` is returned as it is, unchecked.

    Args:
        url: an http(s) URL, a ``file://`` URL or a local path (copied in).
        path: the file to write; its directory is created if needed.
        overwrite: download again even if ``path`` exists.
        timeout: socket timeout in seconds for each connection attempt.
        retries: extra attempts for connection errors, timeouts, 5xx and 429.
        progress: show a tqdm bar on stderr; None shows it when stderr is a tty.

    Returns:
        The absolute path of the file.

    Raises:
        ValueError: for a malformed argument (naming it and its value).
        TypeError: if ``path`` is not a path.
        IsADirectoryError: if ``path`` or a local source is a directory.
        OfflineError: if ``DATASET_KIT_OFFLINE`` is set and the file must be
            downloaded.
        DownloadError: if the server answers 4xx (but 429) or retries run out.
        FileNotFoundError: if a local source does not exist.
    """
    retries = _check_transfer_options(url, timeout, retries)
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(f"path must be a non-empty str or os.PathLike, got {path!r}")
    if not isinstance(overwrite, bool):
        raise ValueError(f"overwrite must be True or False, got {overwrite!r}")
    url, local = _normalize_url(url)
    target = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if os.path.isdir(target):
        raise IsADirectoryError(f"path {target} (to download {url} to) is a directory")
    if os.path.exists(target) and not overwrite:
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with _files.lock_for(target):
        # Another process may have written it while we waited: that is a fresh copy too.
        if os.path.exists(target) and not overwrite:
            return target
        if _offline():
            raise OfflineError(f"{OFFLINE_ENV} is set, so {url} cannot be downloaded to {target}")
        _publish(url, local, target, None, timeout, retries, progress)
        _hash_stamp.remove(target)  # a stamp for the file replaced would vouch for nothing
    return target


def _chainer_download_path(url: str) -> str:
    """Where Chainer's ``cached_download`` kept ``url`` under this root: ``_dl_cache/<md5>``."""
    digest = hashlib.md5(url.encode("utf-8"), usedforsecurity=False).hexdigest()
    return os.path.join(get_dataset_root(), "_dl_cache", digest)


def _adopted_from_chainer(url: str, path: str, expected: str | None) -> bool:
    """Copy Chainer's cached download of ``url`` to ``path`` if it has one that verifies.

    Chainer moved a download into ``_dl_cache`` only once complete, so the
    file is whole; with ``expected`` it must also have that sha256, else it is
    left alone and ``url`` is downloaded. The caller holds the lock of ``path``.
    """
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        return False
    chainers = _chainer_download_path(url)
    if not os.path.isfile(chainers):
        return False
    try:
        _publish(url, chainers, path, expected, 1.0, 0, False)
    except HashMismatchError:
        return False
    return True


def _check_transfer_options(url: Any, timeout: Any, retries: Any) -> int:
    """Check the arguments every download takes; return ``retries`` as an int."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"url must be a non-empty string, got {url!r}")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return non_negative_int("retries", retries)


def _publish(url: str, local: str | None, path: str, expected: str | None, timeout: float,
             retries: int, progress: bool | None) -> None:
    """Transfer ``url`` into a temporary file, check its sha256, move it to ``path``.

    The caller holds the lock of ``path``.
    """
    _files.remove_stale_parts(path)
    with _files.atomic_write(path) as temp:
        _transfer(url, local, temp, timeout, retries, progress)
        digest = None if expected is None else _files.sha256_of(temp)
        if digest != expected:
            raise HashMismatchError(
                f"sha256 of {url} is {digest}, expected {expected}; the file was discarded"
            )


def _transfer(url: str, local: str | None, temp: str, timeout: float, retries: int,
              progress: bool | None) -> None:
    """Write the source into ``temp``, created with umask permissions, and fsync it."""
    show = sys.stderr.isatty() if progress is None else bool(progress)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with os.fdopen(fd, "wb") as out:
        if local is not None:
            if os.path.isdir(local):
                raise IsADirectoryError(f"local source {local} (from {url}) is a directory, "
                                        f"not a file")
            if not os.path.isfile(local):
                raise FileNotFoundError(f"local source {local} (from {url}) does not exist")
            with open(local, "rb") as source:
                shutil.copyfileobj(source, out, 1 << 20)
        else:
            bar = tqdm(unit="B", unit_scale=True, unit_divisor=1024, disable=not show,
                       file=sys.stderr, desc=os.path.basename(temp).split(".")[0][:24],
                       leave=False)
            with bar:
                def start(total: int | None) -> None:
                    bar.reset(total=total)

                with _files.BackgroundFlush(out) as flusher:
                    def written(n: int) -> None:
                        bar.update(n)
                        flusher.wrote(n)

                    _http.fetch(url, out, timeout=timeout, retries=retries, on_start=start,
                                on_bytes=written, on_restart=lambda: bar.reset())
        out.flush()
        os.fsync(out.fileno())


def cache_or_load_file(path: str | os.PathLike, creator: Callable[[str], C],
                       loader: Callable[[str], T]) -> C | T:
    """Create ``path`` with ``creator`` and return its value, or return ``loader(path)``.

    As in Chainer (its code and its documentation): the call that creates
    the file returns what ``creator`` returned; every call that finds the
    file returns what ``loader`` returns. ``creator(temp_path)`` writes a
    file under a temporary directory beside ``path`` (same basename, so
    savers that add extensions behave); the file is then fsynced and moved
    into place atomically under the lock of ``path``. When processes race,
    one creator runs and the others wait and load its file.

    Args:
        path: the cached file.
        creator: writes the file at the path it is given and returns its
            content (what a loader would return).
        loader: reads the file at the path it is given.

    Returns:
        What ``creator`` returned if this call created the file, else what
        ``loader`` returned.

    Raises:
        TypeError: if ``creator`` or ``loader`` is not callable.
        FileNotFoundError: if ``creator`` returned without writing its file.
        Exception: whatever ``creator`` raises; nothing is left behind then.
    """
    if not callable(creator) or not callable(loader):
        raise TypeError(
            f"creator and loader must be callable, got {type(creator).__name__} and "
            f"{type(loader).__name__}"
        )
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path):
        return loader(path)
    with _files.lock_for(path):
        if not os.path.exists(path):
            _files.remove_stale_parts(path)
            with _files.atomic_write(path) as temp:
                content = creator(temp)
                if not os.path.isfile(temp):
                    raise FileNotFoundError(
                        f"creator {creator!r} returned without writing {temp} (for {path})")
            return content
    return loader(path)


def cached_extract(url: str, **download_options: Any) -> str:
    """Download an archive with :func:`cached_download` and extract it once.

    Args:
        url: the archive's URL or local path.
        **download_options: passed to :func:`cached_download`.

    Returns:
        The directory holding the extracted files, ``<root>/extracted/<name>``.

    Raises:
        UnsafeArchiveError: if an entry would land or link outside the directory.
        Exception: anything :func:`cached_download` raises.
    """
    archive = cached_download(url, **download_options)
    dest = os.path.join(get_dataset_root(), "extracted", os.path.basename(archive))
    if os.path.isdir(dest):
        return dest
    with _files.lock_for(dest):
        if not os.path.isdir(dest):
            _files.remove_stale_parts(dest)
            extract_archive(archive, dest)
    return dest
