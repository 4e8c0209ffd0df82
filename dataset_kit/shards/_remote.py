"""Where shards live: a local folder, or any URL fsspec opens (``s3://``, ``gs://``, ...)."""

from __future__ import annotations

import os
from typing import Any


def is_local(url: str) -> bool:
    """True for a plain path (no ``scheme://``); ``file://`` URLs go through fsspec."""
    return "://" not in url


def filesystem(url: str, storage_options: dict | None) -> tuple[Any, str]:
    """Return ``(fsspec filesystem, path inside it)`` for ``url``.

    Raises:
        ImportError: if fsspec (the ``stream`` extra) is not installed.
    """
    try:
        import fsspec.core
    except ImportError:
        raise ImportError(f"reading or writing shards at {url} needs fsspec: "
                          f"pip install 'dataset_kit[stream]'") from None
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    return fs, path


def join(url: str, name: str) -> str:
    """``url`` joined with a file name (a path or a URL)."""
    return os.path.join(url, name) if is_local(url) else url.rstrip("/") + "/" + name
