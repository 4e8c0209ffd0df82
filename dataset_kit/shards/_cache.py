"""The shard cache: the node-wide file cache (:mod:`dataset_kit.filecache`) over a manifest.

Each shard is a cached file verified by the manifest's sha256 and opened as a
:class:`~dataset_kit.formats.shards._layout.ShardFile` (or, for Parquet shards,
a :class:`~dataset_kit.formats.shards._parquet.ParquetShardFile`); everything else (one
download per shard per node, the bound, eviction, the hand-over of verified
bytes to the readers of the downloading process) is the file cache's.
"""

from __future__ import annotations

from dataset_kit.filecache import CachedFile, FileCache, Sha256
from dataset_kit.filecache import cached_name as _cached_name
from dataset_kit.formats.shards import _layout
from dataset_kit.formats.shards._parquet import ParquetShardFile
from dataset_kit.formats.shards.manifest import Manifest, ShardInfo
from dataset_kit.shards import _remote


class ShardCache(FileCache):
    """Shards of one manifest, fetched on demand into ``directory``.

    Args:
        directory: the cache folder (shared by every process of the node).
        url: the remote folder's URL.
        storage_options: fsspec's options for it.
        manifest: the shards' manifest.
        cache_limit: bytes the folder may hold, or None for no limit.
        timeout, retries, chunk_size: see :func:`dataset_kit.filecache._download.download`.
    """

    def __init__(self, directory: str, url: str, storage_options: dict | None,
                 manifest: Manifest, cache_limit: int | None, timeout: float, retries: int,
                 chunk_size: int) -> None:
        self.url, self.manifest = url, manifest
        files = [CachedFile(cached_name(info), _remote.join(url, info.name), info.bytes,
                            Sha256(info.sha256, "shard"), info.name)
                 for info in manifest.shards]
        super().__init__(directory, files, storage_options, cache_limit, timeout, retries,
                         chunk_size, kind="shard")

    def _shard_file(self, shard: int, path: str, data: bytes | None) -> _layout.OpenedShard:
        info = self.manifest.shards[shard]
        if self.manifest.shard_format == "parquet":
            return ParquetShardFile(path, info.samples, self.manifest.columns, data=data)
        return _layout.ShardFile(path, info.samples, len(self.manifest.columns),
                                 self.manifest.compression is not None, data=data)

    def open_shard(self, shard: int) -> _layout.OpenedShard:
        """Return shard ``shard`` ready to read, downloading it if needed (see
        :meth:`FileCache.open`)."""
        return self.open(shard, lambda path, data: self._shard_file(shard, path, data))

    def open_cached_shard(self, shard: int) -> _layout.OpenedShard | None:
        """Return shard ``shard`` mapped from the cache and marked in use, or None if not cached."""
        return self.open_cached(shard, lambda path, data: self._shard_file(shard, path, data))


def cached_name(info: ShardInfo) -> str:
    """The cache's file name of a shard: its name, prefixed by its sha256.

    A shard rewritten at the same URL (a dataset written again with
    ``overwrite=True``) then never matches what an older manifest cached.
    """
    return _cached_name(info.sha256, info.name)
