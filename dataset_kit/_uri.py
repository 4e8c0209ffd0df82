"""Where a source's files are: local paths, file:// URLs, or http(s) URLs fetched once."""

from __future__ import annotations

import os
import urllib.parse
import urllib.request

from dataset_kit.download import cached_download


def is_remote(uri: str) -> bool:
    """Whether ``uri`` is an http(s) URL."""
    return urllib.parse.urlsplit(uri).scheme in ("http", "https")


def local_path(uri: str | os.PathLike) -> str:
    """Return a local path for ``uri``: http(s) URLs through :func:`~dataset_kit.cached_download`.

    Raises:
        DownloadError: if a download fails.
    """
    uri = os.fspath(uri)
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme in ("http", "https"):
        return cached_download(uri)
    if parts.scheme == "file":
        return urllib.request.url2pathname(parts.path)
    return uri


def join(base: str, relative: str) -> str:
    """Resolve ``relative`` against the folder of ``base`` (a path or an http(s) URL)."""
    if is_remote(base):
        return urllib.parse.urljoin(base, relative)
    if os.path.isabs(relative) or is_remote(relative):
        return relative
    return os.path.join(os.path.dirname(local_path(base)), relative)
