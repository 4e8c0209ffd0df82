"""Streaming datasets: shards in object storage, a bounded local cache, exact resume.

Write samples into shards with :class:`ShardWriter`; read them from any
fsspec URL with :class:`StreamingDataset`, a random-access dataset over a
local shard cache; iterate with the ordinary iterators and a
:class:`ShardOrderSampler`, which shuffles shards, then samples within blocks
of shards. The local cache is :mod:`dataset_kit.filecache`'s, whose errors keep
their shard names here (``ShardDownloadError`` is ``filecache.CacheDownloadError``,
``ShardTimeoutError`` is ``CacheDownloadTimeoutError``, ``ShardIntegrityError`` is
``IntegrityError``).
"""

from dataset_kit.filecache import CacheDownloadError as ShardDownloadError
from dataset_kit.filecache import CacheDownloadTimeoutError as ShardTimeoutError
from dataset_kit.filecache import CacheFullError
from dataset_kit.filecache import IntegrityError as ShardIntegrityError
from dataset_kit.formats.shards import (
    Manifest,
    ManifestChangedError,
    ManifestError,
    ShardFormatError,
    ShardInfo,
)
from dataset_kit.shards.dataset import StreamingDataset
from dataset_kit.shards.sampler import ShardOrderSampler
from dataset_kit.shards.writer import ShardWriter

__all__ = [
    "CacheFullError",
    "Manifest",
    "ManifestChangedError",
    "ManifestError",
    "ShardDownloadError",
    "ShardFormatError",
    "ShardInfo",
    "ShardIntegrityError",
    "ShardOrderSampler",
    "ShardTimeoutError",
    "ShardWriter",
    "StreamingDataset",
]
