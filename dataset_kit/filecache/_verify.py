"""How a download is verified: a manifest's sha256, or the size and ETag the store listed.

Shards carry a sha256 in their manifest. Parquet files carry nothing of the
kind, so a file is pinned by what the store listed when the dataset was
opened (:func:`listed_stamp`): its size, its ETag (or, without one, its
modification time). Where the ETag is a plain MD5 (S3's for any object not
uploaded in parts) the bytes are checked against it as they arrive; where it
is not, the store is asked again after the download, and the file must still
be the one listed. A file that changed in the store since the dataset was
opened is refused at once (downloading it again cannot help); bytes that do
not match an ETag still listed are downloaded once more.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from dataset_kit.filecache._cache import IntegrityError

_MD5 = re.compile(r"^[0-9a-f]{32}$")


def listed_stamp(info: dict) -> tuple[int, str, str | None]:
    """``(size, modification time, ETag)`` of a file from fsspec's ``info()`` of it.

    The keys differ by store (S3's ``LastModified`` and ``ETag``, HTTP's
    ``Last-Modified``, a local ``mtime``); a missing one is "" (time) or None
    (ETag).
    """
    mtime = info.get("LastModified") or info.get("mtime") or info.get("last_modified") \
        or info.get("Last-Modified") or ""
    etag = info.get("ETag") or info.get("etag")
    return int(info.get("size") or 0), str(mtime), None if etag is None else str(etag)


class Sha256:
    """Verify a download against the sha256 a manifest gives.

    Args:
        expected: the hex sha256.
        kind: what the file is, in errors ("shard").
    """

    def __init__(self, expected: str, kind: str = "file") -> None:
        self.expected: str = expected
        self.kind: str = kind

    def digest(self) -> Any:
        """A new sha256."""
        return hashlib.sha256()

    def check(self, digest: Any, fs: Any, path: str) -> str | None:
        """None if the bytes hashed to the manifest's sha256, else what they hashed to."""
        found = digest.hexdigest()
        return None if found == self.expected else found

    def refuse(self, name: str, url: str, found: list[str]) -> BaseException:
        """The error after two downloads hashed to ``found``."""
        return IntegrityError(
            f"{self.kind} {name} from {url} failed its sha256 twice: the manifest says "
            f"{self.expected}, the downloads hashed to {found[0]} and {found[1]}; it was "
            f"not cached")


class _NoDigest:
    """Takes the bytes and keeps nothing (the check asks the store instead)."""

    def update(self, data: bytes) -> None:
        pass


class SizeAndStamp:
    """Verify a download against the size, ETag and modification time listed at open.

    Args:
        name: the file's URL, for errors.
        size: the size listed, in bytes (the download reads exactly this many,
            and fails if the file ends before).
        mtime: the modification time listed ("" if none).
        etag: the ETag listed, or None.
        changed: the exception class raised when the file changed in the store
            (a ``ValueError`` subclass; the Parquet reader's ``FileChangedError``).
    """

    def __init__(self, name: str, size: int, mtime: str, etag: str | None,
                 changed: type[Exception] = IntegrityError) -> None:
        self.name, self.size, self.mtime = name, size, mtime
        self.etag: str | None = etag
        self.changed: type[Exception] = changed
        plain = (etag or "").strip('"').lower()
        self.md5 = plain if _MD5.match(plain) else None

    def digest(self) -> Any:
        """An MD5 where the ETag is one, else nothing (the check asks the store)."""
        return hashlib.md5(usedforsecurity=False) if self.md5 else _NoDigest()

    def check(self, digest: Any, fs: Any, path: str) -> str | None:
        """None if the bytes match the MD5 ETag, or the store still lists the file as at open.

        Raises:
            ``changed``: if the store lists another size, ETag or (without an
                ETag) modification time now.
        """
        if self.md5 is not None and digest.hexdigest() == self.md5:
            return None  # the bytes are the ones the ETag names
        with_cache = getattr(fs, "invalidate_cache", None)
        if with_cache is not None:
            with_cache(path)  # a listing fsspec kept from the open would hide a change
        size, mtime, etag = listed_stamp(fs.info(path))
        listed = [f"{what} {a!r} -> {b!r}" for what, a, b in
                  (("size", self.size, size), ("ETag", self.etag, etag),
                   ("modification time", self.mtime, mtime))
                  if a != b and (what != "modification time" or self.etag is None)]
        if listed:
            raise self.changed(f"file {self.name} changed in its store since the dataset was "
                               f"opened ({'; '.join(listed)}); it was not cached: open the "
                               f"dataset again to read the new file")
        return None if self.md5 is None else digest.hexdigest()

    def refuse(self, name: str, url: str, found: list[str]) -> BaseException:
        """The error after two downloads whose MD5s ``found`` missed an ETag still listed."""
        return IntegrityError(
            f"file {name} failed its check twice: the store lists ETag {self.etag}, the MD5 "
            f"of its bytes, but the downloads hashed to {found[0]} and {found[1]}; it was "
            f"not cached")
