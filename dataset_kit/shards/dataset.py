"""StreamingDataset: random access by global index over shards fetched into a local cache."""

from __future__ import annotations

import bisect
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataset_kit import _example_context
from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.dataset import DatasetMixin
from dataset_kit.download import get_dataset_directory
from dataset_kit.formats.shards._columns import DECODE, IMAGES
from dataset_kit.formats.shards.manifest import MANIFEST_NAME, Manifest
from dataset_kit.shards import _remote
from dataset_kit.shards._cache import ShardCache
from dataset_kit.shards._open_shards import OpenShards
from dataset_kit.shards._prefetch import OrderPlan, Prefetcher


class StreamingDataset(DatasetMixin):
    """The samples of a shard set written by :class:`ShardWriter`, fetched on demand.

    Either shard format (our layout or Parquet, as the manifest says) gives
    the same samples.

    ``ds[i]`` maps the global index ``i`` to a shard and an offset (from the
    manifest), makes sure the shard is in the local cache (downloading it
    through fsspec, once per node, sha256-checked) and returns the sample as
    a dict ``{column: value}``. The dataset itself holds no state to
    checkpoint: iterators and :class:`ShardOrderSampler` do.

    Args:
        remote: the folder or URL the shards were written to (``s3://``,
            ``gs://``, ``az://``, ``http(s)://``, ``file://`` or a local path).
        local: the cache folder; default ``<dataset root>/streaming/<hash of remote>``.
            Processes that share it share the downloads.
        cache_limit: bytes the cache may hold (least-recently-used shards not
            in use are evicted), or None for no limit.
        storage_options: passed to fsspec (credentials, endpoint, ...).
        timeout: seconds one ranged read (at most ``chunk_size`` bytes) may
            take before :class:`ShardTimeoutError`.
        retries: consecutive failed ranged reads retried (resuming at the
            byte reached) before :class:`ShardDownloadError`.
        chunk_size: the most bytes per ranged read; a larger shard is cut into
            equal ranges (the next one is asked for while the last is
            hashed). The default reads a shard of the writer's default size
            in one request, as each request costs a round trip; lower it (or
            raise ``timeout``) for links slower than ``chunk_size / timeout``,
            or so that a cut connection costs less to read again.
        open_shards: shards this process keeps open between calls. Threads
            may share the dataset (the thread executor): a shard that leaves
            this table while another thread reads it is closed when that
            read ends.
        download_threads: shards of one batch downloaded at once (when they
            all fit the cache).
        prefetch_shards: shards downloaded in the background ahead of the
            order a :class:`ShardOrderSampler` plans (0: none); fewer when
            ``cache_limit`` cannot hold them beside the batch's own.
        decode_images: decode ``jpeg``/``png``/``image`` columns to CHW uint8 arrays
            (False: return the encoded bytes).

    Raises:
        ManifestError: if the manifest is malformed.
        ValueError: if ``cache_limit`` is smaller than the largest shard.
        ImportError: if fsspec (the ``stream`` extra) is missing.
    """

    def __init__(self, remote: str | os.PathLike, local: str | os.PathLike | None = None,
                 cache_limit: int | None = None, storage_options: dict | None = None, *,
                 timeout: float = 60.0, retries: int = 5, chunk_size: int = 64 << 20,
                 open_shards: int = 2, download_threads: int = 4, prefetch_shards: int = 2,
                 decode_images: bool = True) -> None:
        remote = os.fspath(remote)
        if _remote.is_local(remote):
            remote = os.path.abspath(remote)
        self.remote = remote
        self.storage_options = storage_options
        fs, root = _remote.filesystem(remote, storage_options)
        where = _remote.join(remote, MANIFEST_NAME)
        self.manifest = Manifest.from_json(fs.cat_file(f"{root.rstrip('/')}/{MANIFEST_NAME}"),
                                           where)
        if cache_limit is not None:
            cache_limit = non_negative_int("cache_limit", cache_limit)
            largest = max(self.manifest.shards, key=lambda s: s.bytes)
            if cache_limit < largest.bytes:
                raise ValueError(f"cache_limit {cache_limit} bytes is smaller than shard "
                                 f"{largest.name} ({largest.bytes} bytes) of {remote}; the "
                                 f"cache must hold at least one shard")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if local is None:
            key = hashlib.sha256(remote.encode()).hexdigest()[:16]
            local = get_dataset_directory(os.path.join("streaming", key))
        self.local = os.path.abspath(os.fspath(local))
        self._cache = ShardCache(self.local, remote, storage_options, self.manifest, cache_limit,
                                 float(timeout), non_negative_int("retries", retries),
                                 positive_int("chunk_size", chunk_size))
        self._columns = list(self.manifest.columns.items())
        parquet = self.manifest.shard_format == "parquet"
        self._decoders = [_decoder(enc, parquet, decode_images) for _, enc in self._columns]
        self._rows = _row_builder([name for name, _ in self._columns])
        self._starts = self.manifest.starts.tolist()
        self._starts_array = np.asarray(self.manifest.starts, dtype=np.int64)
        # Shared by the threads that read this dataset (the thread executor).
        self._shards = OpenShards(open_shards, self._cache.open_shard,
                                  self._cache.open_cached_shard)
        self._threads = positive_int("download_threads", download_threads)
        #: The order a ShardOrderSampler in use plans (it records itself here).
        self.prefetch_plan = OrderPlan()
        self._ahead = non_negative_int("prefetch_shards", prefetch_shards)
        self._fit: int | None = None  # shards the cache holds at once; None: no limit
        if cache_limit is not None:
            self._fit = cache_limit // max(s.bytes for s in self.manifest.shards)
        self._prefetcher = Prefetcher(self._cache)
        self._last_prefetch: tuple | None = None

    def fingerprint(self) -> str:
        """The identity of the shards: their manifest's hash (which pins every shard's sha256)."""
        return "manifest:" + self.manifest.sha256

    def __len__(self) -> int:
        return self._starts[-1]

    def locate(self, index: int) -> tuple[int, int]:
        """Return ``(shard number, offset in the shard)`` of global index ``index``."""
        shard = bisect.bisect_right(self._starts, index) - 1
        return shard, index - self._starts[shard]

    def get_example(self, i: int) -> dict:
        shard, offset = self.locate(i)
        with self._shards.hold(shard) as opened:
            fields = opened.fields(offset)
        return {name: data if decode is None else decode(data)
                for (name, _), decode, data in zip(self._columns, self._decoders, fields)}

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        """Return the examples at ``indices``, a shard at a time.

        The shards the batch needs are downloaded first (in parallel); once
        the batch is read, the shards the planned order reaches next start
        downloading in the background (not before: they would compete with
        the batch's own, and starting their threads would delay it).
        """
        shard_of = np.searchsorted(self._starts_array, indices, side="right") - 1
        shards = np.unique(shard_of).tolist()
        self._download(shards)
        if type(self).get_example is not StreamingDataset.get_example:
            # A subclass decides what one example is: ask it for each.
            examples = _example_context.map_examples(self.get_example, indices.tolist())
        elif len(shards) == 1:  # the common case: a batch inside one shard
            offsets = indices - self._starts_array[shards[0]]
            with self._shards.hold(shards[0]) as opened:
                columns = opened.columns_of(offsets)
            examples = self._rows(self._decoded(columns))
        else:
            offsets = indices - self._starts_array[shard_of]
            examples = [None] * len(indices)
            for shard in shards:
                where = np.flatnonzero(shard_of == shard)
                with self._shards.hold(shard) as opened:
                    columns = opened.columns_of(offsets[where])
                rows = self._rows(self._decoded(columns))
                for position, row in zip(where.tolist(), rows):
                    examples[position] = row
        self._prefetch_after(indices, shards)
        return examples

    def _decoded(self, columns: list[list[bytes]]) -> list[list]:
        """Each column's values, decoded (those without a decoder are already)."""
        return [column if decode is None else list(map(decode, column))
                for decode, column in zip(self._decoders, columns)]

    def _download(self, shards: list[int]) -> None:
        """Start downloading the missing ``shards`` on ``download_threads`` threads, if they fit.

        The reads then take each shard as soon as its bytes are verified. When
        they do not fit the cache together they are left to the reads, one at
        a time, so eviction can follow the reads.
        """
        if len(shards) < 2 or self._threads < 2:
            return  # the read downloads it
        missing = [s for s in shards if not os.path.exists(self._cache.path(s))]
        if len(missing) < 2:
            return
        need = sum(self.manifest.shards[s].bytes for s in missing)
        limit = self._cache.cache_limit
        if limit is not None and self._cache.usage() + need > limit:
            return

        def work(part: list[int]) -> None:
            for shard in part:
                self._cache.fetch_quietly(shard)

        for i in range(min(self._threads, len(missing))):
            threading.Thread(target=work, args=(missing[i::self._threads],), daemon=True,
                             name="shard-download").start()

    def _prefetch_after(self, indices: np.ndarray, shards: list[int]) -> None:
        """Have the shards the planned order needs after this batch downloaded."""
        context = _example_context.current()
        if context is None or not self._ahead or not shards:
            return  # not inside an iterator: no planned order to follow
        epochs, batch = context.epochs, shards
        if not isinstance(epochs, np.ndarray) or epochs.ndim == 0:
            epoch = int(epochs)
        else:  # a batch that crosses into the next epoch: plan from its last part
            epoch = int(epochs[-1])
            tail = indices[np.asarray(epochs) == epoch]
            shards = np.unique(np.searchsorted(self._starts_array, tail, side="right")
                               - 1).tolist()
        # The shards needed next change only when a batch reaches a shard the
        # one before did not touch: wake the prefetch threads then.
        key = (epoch, tuple(shards))
        if key != self._last_prefetch:
            self._last_prefetch = key
            self._prefetcher.request(self.prefetch_plan, epoch, set(shards), set(batch),
                                     self._ahead, self._fit)

    def prefetch(self, shards: Any) -> None:
        """Download the given shard numbers into the cache now (without keeping them open)."""
        for shard in shards:
            self._cache.ensure(int(shard))

    def cache_usage(self) -> int:
        """Bytes in the local cache now."""
        return self._cache.usage()

    def close(self) -> None:
        """Close this process's open shards (they become evictable) and stop prefetching.

        Returns once the downloads this process started have ended, so the
        shards it read are then published in the cache.
        """
        self._shards.close()
        self._prefetcher.cancel()
        self._last_prefetch = None
        self._cache.downloads.wait_all()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_shards"] = self._shards.limit  # a new table where it is loaded
        del state["_rows"]  # made again: a generated function does not pickle
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._rows = _row_builder([name for name, _ in self._columns])
        self._shards = OpenShards(state["_shards"], self._cache.open_shard,
                                  self._cache.open_cached_shard)


def _decoder(encoding: str, parquet: bool, decode_images: bool) -> Callable[[Any], Any] | None:
    """What turns a column's values, as its shard file returns them, into the sample's
    (None: nothing). A Parquet shard returns every value but images decoded; our
    layout returns bytes."""
    if encoding in IMAGES:
        return DECODE[encoding] if decode_images else None
    return None if parquet or encoding == "bytes" else DECODE[encoding]


def _row_builder(names: list[str]) -> Callable[[list[list]], list[dict]]:
    """Return a function that turns columns of values into one dict per row.

    Generated, as :mod:`dataclasses` generates ``__init__``: a dict display
    with one key per column builds a row about three times faster than
    ``dict(zip(names, row))``, which was a tenth of a warm epoch of small
    records. The names are never part of the source, only their positions.
    """
    values = ", ".join(f"v{i}" for i in range(len(names)))
    keys = ", ".join(f"k{i}: v{i}" for i in range(len(names)))
    namespace: dict[str, Any] = {f"k{i}": name for i, name in enumerate(names)}
    exec(f"def rows(columns):\n    return [{{{keys}}} for {values}, in zip(*columns)]\n",
         namespace)  # noqa: S102 - the source holds positions only
    return namespace["rows"]
