"""Local paths and fsspec URLs: which is which, and the filesystem of a URL."""

from __future__ import annotations

from typing import Any


def is_local(url: str) -> bool:
    """True for a plain path (no ``scheme://``); ``file://`` URLs go through fsspec."""
    return "://" not in url


def filesystem(url: str, storage_options: dict | None, what: str) -> tuple[Any, str]:
    """Return ``(fsspec filesystem, path inside it)`` for ``url``.

    Args:
        url: the URL.
        storage_options: fsspec's options for it.
        what: what needs it, for the ImportError (e.g. ``"reading s3://b/x"``).

    Raises:
        ImportError: if fsspec (the ``stream`` extra) is not installed.
    """
    try:
        import fsspec.core
    except ImportError:
        raise ImportError(f"{what} needs fsspec: pip install 'dataset_kit[stream]'") from None
    return fsspec.core.url_to_fs(url, **(storage_options or {}))
