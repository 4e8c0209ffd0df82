"""Fetching an upstream file from a list of mirrors, checked against its pinned sha256.

A user's mirrors come first: the ``mirrors`` argument of a loader, then
``DATASET_KIT_MIRRORS`` (base URLs separated by spaces or commas); each base
URL is tried with the file's name appended. A file that arrives with another
sha256 is never cached, and the next mirror is tried.
"""

from __future__ import annotations

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


def fetch(name: str, sha256: str, upstream: Sequence[str],
          mirrors: Sequence[str] | None = None) -> str:
    """Return the cached path of ``name``, downloaded from the first mirror that has it right.

    Raises:
        HashMismatchError: if every mirror failed and one served the wrong bytes
            (the message names the file, the expected and the actual hash).
        DownloadError: if no mirror could be reached.
    """
    errors = []
    for url in candidates(name, upstream, mirrors):
        try:
            return cached_download(url, sha256=sha256, retries=1)
        except (HashMismatchError, DownloadError, OSError) as error:
            errors.append(error)  # try the next mirror; report after the last
    mismatches = [e for e in errors if isinstance(e, HashMismatchError)]
    if mismatches:
        raise HashMismatchError(f"{name}: {mismatches[0]}")
    raise DownloadError(f"{name} could not be downloaded from any mirror: "
                        + "; ".join(str(e) for e in errors))
