"""Fetching an upstream file from a list of mirrors, checked against its pinned checksum.

A user's mirrors come first: the ``mirrors`` argument of a loader, then
``DATASET_KIT_MIRRORS`` (base URLs separated by spaces or commas); each base
URL is tried with the file's name appended. A file that arrives with another
checksum is not kept, and the next mirror is tried.

A checksum is a sha256 (64 hex digits), or ``"md5:<32 hex digits>"`` for the
few upstream files whose only published checksum is an MD5: such a file is
downloaded, hashed, and removed from the cache again if it does not match.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence

from dataset_kit.download import DownloadError, HashMismatchError, cached_download

MIRRORS_ENV = "DATASET_KIT_MIRRORS"


def candidates(name: str, upstream: Sequence[str], mirrors: Sequence[str] | None) -> list[str]:
    """The URLs to try for file ``name``: the user's mirrors, then the upstream ones."""
    own = list(mirrors or []) + [u for u in re.split(r"[\s,]+", os.environ.get(MIRRORS_ENV, ""))
                                 if u]
    return [base.rstrip("/") + "/" + name for base in own] + list(upstream)


def fetch(name: str, checksum: str, upstream: Sequence[str],
          mirrors: Sequence[str] | None = None) -> str:
    """Return the cached path of ``name``, downloaded from the first mirror that has it right.

    Args:
        name: the file's name (appended to each mirror's base URL).
        checksum: its sha256, or ``"md5:<hex>"``.
        upstream: the upstream URLs, tried after the user's mirrors.
        mirrors: the user's base URLs, tried first.

    Raises:
        HashMismatchError: if every mirror failed and one served the wrong bytes
            (the message names the file, the expected and the actual hash).
        DownloadError: if no mirror could be reached.
    """
    errors = []
    for url in candidates(name, upstream, mirrors):
        try:
            if checksum.startswith("md5:"):
                return _fetch_md5(url, checksum[4:].lower())
            return cached_download(url, sha256=checksum, retries=1)
        except (HashMismatchError, DownloadError, OSError) as error:
            errors.append(error)  # try the next mirror; report after the last
    mismatches = [e for e in errors if isinstance(e, HashMismatchError)]
    if mismatches:
        raise HashMismatchError(f"{name}: {mismatches[0]}")
    raise DownloadError(f"{name} could not be downloaded from any mirror: "
                        + "; ".join(str(e) for e in errors))


def _fetch_md5(url: str, md5: str) -> str:
    path = cached_download(url, retries=1)
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != md5:
        os.remove(path)
        raise HashMismatchError(f"{url}: expected md5 {md5}, got {digest.hexdigest()}; the "
                                f"file was not kept")
    return path
