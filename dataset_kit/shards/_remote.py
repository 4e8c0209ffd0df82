"""Where shards live: a local folder, or any URL fsspec opens (``s3://``, ``gs://``, ...)."""

from __future__ import annotations

import os
from typing import Any

from dataset_kit import _fsspec
from dataset_kit._fsspec import is_local


def filesystem(url: str, storage_options: dict | None) -> tuple[Any, str]:
    """Return ``(fsspec filesystem, path inside it)`` for ``url``.

    Raises:
        ImportError: if fsspec (the ``stream`` extra) is not installed.
    """
    return _fsspec.filesystem(url, storage_options, f"reading or writing shards at {url}")


def join(url: str, name: str) -> str:
    """``url`` joined with a file name (a path or a URL)."""
    return os.path.join(url, name) if is_local(url) else url.rstrip("/") + "/" + name
