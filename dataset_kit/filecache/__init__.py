"""A bounded, verified local cache of remote files, shared by every process of a node.

Storage below the doors: :mod:`dataset_kit.shards` caches its shards here
(verified by the manifest's sha256) and
:class:`~dataset_kit.datasets.ParquetDataset` its remote Parquet files when
given ``cache=`` (verified by the size and ETag the store listed at open).
One download per file per node (a lock per file), least-recently-used
eviction within ``cache_limit`` bytes that never deletes a file in use, and
nothing unverified or partial ever kept or read.
"""

from dataset_kit.filecache._cache import (
    CachedFile,
    CacheFullError,
    FileCache,
    IntegrityError,
    Verifier,
    cached_name,
)
from dataset_kit.filecache._download import CacheDownloadError, CacheDownloadTimeoutError
from dataset_kit.filecache._verify import Sha256, SizeAndStamp, listed_stamp

__all__ = [
    "CacheFullError",
    "CachedFile",
    "CacheDownloadError",
    "CacheDownloadTimeoutError",
    "FileCache",
    "IntegrityError",
    "Sha256",
    "SizeAndStamp",
    "Verifier",
    "cached_name",
    "listed_stamp",
]
