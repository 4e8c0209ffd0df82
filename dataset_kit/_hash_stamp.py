"""A stamp beside a cached file that vouches for its sha256 until the file changes.

Re-hashing a multi-gigabyte download on every use is too slow, trusting it
without a check lets a corrupt or replaced file through (CIFAR then unpickles
it). The stamp ``<file>.sha256-stamp`` records the verified hash with the
file's size, inode, device, ``mtime_ns`` and ``ctime_ns``; while all of them
match an ``os.stat`` of the file, the hash is taken as verified, so a use
costs one ``stat`` and one small read. Writing a file in place changes its
``ctime``, which no user call can set back.

Timestamps are coarse (a kernel tick), so a file written in the same tick as
its stamp could change without its times changing. As git does for its index
("racily clean" entries), a stamp written less than :data:`RACY_NS` after the
file's ``mtime`` does not vouch: the file is hashed again until it is older.
A stamp that vouches saw an ``mtime`` older than that, and any later write
moves ``mtime`` to the present, so it cannot go unnoticed.
"""

from __future__ import annotations

import json
import os
import time

from dataset_kit import _files

SUFFIX = ".sha256-stamp"
RACY_NS = 2_000_000_000


def _identity(st: os.stat_result) -> dict:
    return {"size": st.st_size, "ino": st.st_ino, "dev": st.st_dev, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns}


def vouches(path: str, sha256: str) -> bool:
    """Whether the stamp of ``path`` vouches that the file's sha256 is ``sha256``."""
    try:
        st = os.stat(path)
        with open(path + SUFFIX, "rb") as f:
            stamp = json.loads(f.read(4096))
    except (OSError, ValueError):
        return False
    if not isinstance(stamp, dict) or stamp.get("sha256") != sha256:
        return False
    if stamp.get("file") != _identity(st):
        return False
    stamped_at = stamp.get("stamped_at_ns")
    return isinstance(stamped_at, int) and stamped_at - st.st_mtime_ns >= RACY_NS


def write(path: str, sha256: str, hashed: os.stat_result) -> bool:
    """Record that ``path`` has ``sha256``, unless it changed since it was hashed.

    A stamp only saves work, so a directory where it cannot be written (a
    read-only dataset root shared by a cluster, a full disk) is not an error:
    the file stays verified, and it is hashed again at its next use.

    Args:
        path: the file.
        sha256: its hex digest.
        hashed: ``os.stat(path)`` taken before the file was hashed.

    Returns:
        Whether a stamp now vouches for the file.
    """
    identity = _identity(os.stat(path))
    if identity != _identity(hashed):  # changed while being hashed: vouch for nothing
        return False
    stamp = {"sha256": sha256, "file": identity, "stamped_at_ns": time.time_ns()}
    try:
        with _files.atomic_write(path + SUFFIX) as temp, open(temp, "w") as f:
            json.dump(stamp, f)
    except OSError:  # EROFS, EACCES, ENOSPC ...: go on without a stamp
        return False
    return True


def remove(path: str) -> None:
    """Remove the stamp of ``path``, if any."""
    try:
        os.unlink(path + SUFFIX)
    except FileNotFoundError:
        pass
