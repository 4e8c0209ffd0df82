"""Streaming datasets: shards in object storage, a bounded local cache, exact resume.

Write samples into shards with :class:`ShardWriter`; read them from any
fsspec URL with :class:`StreamingDataset`, a random-access dataset over a
local shard cache; iterate with the ordinary iterators and a
:class:`ShardOrderSampler`, which shuffles shards, then samples within blocks
of shards.
"""

from dataset_kit.formats.shards import (
    Manifest,
    ManifestChangedError,
    ManifestError,
    ShardFormatError,
    ShardInfo,
)
from dataset_kit.shards._cache import CacheFullError, ShardIntegrityError
from dataset_kit.shards._download import ShardDownloadError, ShardTimeoutError
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
