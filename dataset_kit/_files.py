"""Durable file writing and per-target locks: one place for what makes a file complete.

Every file or directory that dataset_kit publishes (a download, a cached
array file, an extracted archive, a checkpoint, a record file, a cache chunk)
goes through :func:`atomic_write` or :func:`atomic_dir`: it is built under a
temporary name beside its target, flushed to disk, and renamed into place, so
it appears complete or not at all. :func:`lock_for` gives the lock that
writers of one target share.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import filelock

LOCK_DIR_ENV = "DATASET_KIT_LOCK_DIR"
# Temporary names end with this, so a crashed writer's leftovers are recognisable.
PART_SUFFIX = ".part"


def fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (where directories can be fsynced)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    """Flush a file's data to disk."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def sha256_of(path: str | os.PathLike) -> str:
    """Return the hex sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _staging_name(path: str) -> str:
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.{os.getpid()}-{os.urandom(4).hex()}{PART_SUFFIX}")


def lock_dir() -> str:
    """Return the directory that holds dataset_kit's lock files.

    ``$DATASET_KIT_LOCK_DIR`` if set, else ``dataset_kit-locks-<uid>`` in the
    system's temporary directory. It does not depend on the dataset root, so
    processes configured with different roots still exclude each other on a
    shared target.
    """
    configured = os.environ.get(LOCK_DIR_ENV)
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"dataset_kit-locks-{uid}")


def lock_for(path: str | os.PathLike) -> filelock.FileLock:
    """Return the inter-process lock of the file or directory at ``path``.

    The lock is keyed to the target's real absolute path (symlinks resolved),
    so every process that writes that target takes the same lock, whatever
    its dataset root or working directory. Lock files live in :func:`lock_dir`,
    never beside the target, so user directories stay clean.

    Args:
        path: the target the lock protects (it need not exist).

    Returns:
        A :class:`filelock.FileLock`; use it as a context manager.
    """
    target = os.path.realpath(os.path.abspath(os.fspath(path)))
    key = hashlib.sha256(target.encode()).hexdigest()[:32]
    directory = lock_dir()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return filelock.FileLock(os.path.join(directory, key + ".lock"))


def staging_file(path: str | os.PathLike) -> str:
    """Make a private staging directory beside ``path``; return a path inside it to write.

    The directory's name carries this process's pid and ends with
    :data:`PART_SUFFIX`, so :func:`remove_stale_parts` removes it if the
    writer dies. The caller renames the file into place and removes the
    directory (``os.path.dirname`` of the returned path) when done.

    Args:
        path: the file that will be published.

    Returns:
        The temporary file's path (it has ``path``'s basename).
    """
    path = os.path.abspath(os.fspath(path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    staging = _staging_name(path)
    os.mkdir(staging, 0o700)
    return os.path.join(staging, os.path.basename(path))


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path to write ``path``'s content to; publish it on success.

    The temporary file has the target's basename inside a private staging
    directory beside the target (so savers that append an extension, such as
    :func:`numpy.savez`, behave). When the block ends normally the file is
    fsynced, renamed over ``path`` with :func:`os.replace` and the directory
    fsynced; when it raises, the staging directory is removed and ``path`` is
    untouched. Take :func:`lock_for` around it when several processes may
    write the same target.

    Args:
        path: the file to publish.

    Yields:
        The temporary path to write.

    Raises:
        FileNotFoundError: if the block ends without having written the file.
    """
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    temp = staging_file(path)
    staging = os.path.dirname(temp)
    try:
        yield temp
        if not os.path.isfile(temp):
            raise FileNotFoundError(f"nothing was written to {temp} (to publish as {path})")
        fsync_file(temp)
        os.replace(temp, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    fsync_directory(directory)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[str]:
    """Yield a staging directory to fill; rename it to ``path`` on success.

    Args:
        path: the directory to publish; it must not exist yet.

    Yields:
        The staging directory (beside ``path``) to fill.

    Raises:
        FileExistsError: if ``path`` exists already (before or after filling).
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists already")
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    staging = _staging_name(path)
    os.mkdir(staging, 0o700)
    try:
        yield staging
        os.chmod(staging, 0o777 & ~_umask())
        os.rename(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_directory(parent)


class AtomicFile:
    """A binary file written under a temporary name: published by close(), dropped by abort().

    For writers that stay open across calls (record and pickle writers), where
    :func:`atomic_write`'s ``with`` block does not fit.

    Args:
        path: the file to publish.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self._publish = atomic_write(path)
        self._file = open(self._publish.__enter__(), "wb")  # noqa: SIM115 - closed by close()

    @property
    def closed(self) -> bool:
        """Whether close() or abort() was called."""
        return self._file.closed

    def write(self, data: bytes) -> int:
        return self._file.write(data)

    def tell(self) -> int:
        return self._file.tell()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        """Flush, fsync and move the file into place. Idempotent."""
        if not self._file.closed:
            self._file.close()
            self._publish.__exit__(None, None, None)

    def abort(self) -> None:
        """Discard what was written; nothing appears at the path. Idempotent."""
        if not self._file.closed:
            self._file.close()
            self._publish.__exit__(RuntimeError, RuntimeError("aborted"), None)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _writer_pid(part_name: str) -> int | None:
    """The pid encoded in a staging name ``[.]<base>.<pid>-<hex>.part``, or None."""
    stem = part_name[: -len(PART_SUFFIX)]
    tail = stem.rsplit(".", 1)[-1]
    pid, sep, token = tail.partition("-")
    if not sep or not pid.isdigit() or not token:
        return None
    return int(pid)


def pid_is_alive(pid: int) -> bool:
    """Whether a process with this pid exists (on this machine, in this pid namespace)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def remove_stale_parts(path: str | os.PathLike, *, under_lock: bool = True) -> list[str]:
    """Remove temporary files and directories left for ``path`` by dead writers.

    Args:
        path: the published target whose staging leftovers to remove.
        under_lock: True when the caller holds :func:`lock_for` ``(path)`` and
            every writer of ``path`` takes that lock: whatever is found then
            belongs to a process that died. False for targets whose writers
            take no lock: only leftovers whose writer's pid (encoded in the
            staging name) is no longer alive are removed.

    Returns:
        The paths that were removed.
    """
    directory, base = os.path.split(os.path.abspath(os.fspath(path)))
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    removed = []
    for name in names:
        # ".<base>.<pid>-<hex>.part" today; "<base>.<pid>-<hex>.part" from 0.1.
        if not (name.endswith(PART_SUFFIX) and (name.startswith(f".{base}.")
                                                or name.startswith(f"{base}."))):
            continue
        if not under_lock:
            pid = _writer_pid(name)
            # A name without a pid cannot be judged: leave it to a locked cleanup.
            if pid is None or pid == os.getpid() or pid_is_alive(pid):
                continue
        stale = os.path.join(directory, name)
        if os.path.isdir(stale):
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)
        removed.append(stale)
    return removed


class BackgroundFlush:
    """Flush written data to disk in a helper thread while the transfer goes on.

    The file must be on disk before it is renamed into the cache; syncing as we
    go overlaps the disk with the network, so the final fsync has little left.
    """

    EVERY = 32 << 20

    def __init__(self, out: Any) -> None:
        self._out = out
        self._pending = 0
        self._wake = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._run, name="dataset_kit-flush", daemon=True)

    def __enter__(self) -> BackgroundFlush:
        self._thread.start()
        return self

    def wrote(self, n: int) -> None:
        self._pending += n
        if self._pending >= self.EVERY:
            self._pending = 0
            self._out.flush()
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._done:
                return
            try:
                os.fdatasync(self._out.fileno())
            except (OSError, ValueError):
                return  # the final fsync in the caller reports real failures

    def __exit__(self, *exc_info: Any) -> None:
        self._done = True
        self._wake.set()
        self._thread.join()


def files_fingerprint(*paths: str | os.PathLike | None) -> str:
    """The identity of files as they are now: a hash of each one's path, size and ``mtime_ns``.

    Taken when a dataset opens its files (one ``stat`` each, never a read), so
    a checkpoint can tell that the files were rewritten since (see
    :meth:`dataset_kit.engine.Engine.ledger`). ``None`` paths are skipped.

    Raises:
        FileNotFoundError: naming the file, if one does not exist.
    """
    digest = hashlib.sha256()
    for path in paths:
        if path is None:
            continue
        st = os.stat(path)
        digest.update(f"{os.path.basename(os.fspath(path))}\0{st.st_size}\0{st.st_mtime_ns}\n"
                      .encode())
    return "stat:" + digest.hexdigest()[:16]
