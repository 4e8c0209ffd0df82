"""ShardWriter: samples in, shard files and (last, atomically) their manifest out."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from dataset_kit import _files
from dataset_kit._checks import positive_int
from dataset_kit.formats.shards import _layout
from dataset_kit.formats.shards._columns import ENCODE, check_columns
from dataset_kit.formats.shards._parquet import ParquetRows
from dataset_kit.formats.shards.manifest import (
    MANIFEST_NAME,
    SHARD_FORMATS,
    Manifest,
    ShardInfo,
)
from dataset_kit.shards import _remote

DEFAULT_SHARD_SIZE = 64 << 20


class ShardWriter:
    """Write samples into shards of about ``shard_size`` bytes, then the manifest.

    Each shard is built in memory, then published whole (locally with an
    atomic rename, remotely as one object). The manifest is written only by
    :meth:`close` after every shard, so a writer that dies (even by SIGKILL)
    leaves no manifest and nothing that looks complete.

    A shard is our layout (``format='shards'``: an offset table, then each
    sample's bytes) or a Parquet file (``format='parquet'``: one Parquet
    column per column, zstd pages, row groups of about 1 MiB; see
    ``formats/shards/_parquet.py`` for how each encoding is kept). Both read
    back through :class:`StreamingDataset` as the same samples; which to
    choose when is in ``docs/streaming.rst``. In a Parquet shard an
    ``ndarray`` column holds one dtype (its first sample's): bool, integers
    or floats.

    Args:
        out: a local folder, or a URL fsspec opens (``s3://bucket/prefix``).
        columns: ``{name: encoding}``: ``'ndarray'``, ``'bytes'``, ``'str'``,
            ``'int'``, ``'float'``, ``'json'``, ``'jpeg'`` or ``'png'``.
        shard_size: bytes of samples after which a shard is closed.
        compression: None or ``'zstd'`` (each sample compressed on its own,
            so random access stays one read). Our layout only: Parquet shards
            always compress their pages with zstd.
        storage_options: passed to fsspec for a remote ``out``.
        overwrite: replace an existing dataset at ``out`` (its manifest is
            removed first, so a crash meanwhile leaves no manifest).
        format: ``'shards'`` (our layout) or ``'parquet'``.

    Raises:
        ValueError: for a bad ``columns``, ``shard_size``, ``compression`` or ``format``.
        ImportError: for ``format='parquet'`` without pyarrow (the ``parquet`` extra).
        FileExistsError: if ``out`` already holds a manifest and not ``overwrite``.
    """

    manifest: Manifest  # set by close()

    def __init__(self, out: str | os.PathLike, columns: dict, shard_size: int =
                 DEFAULT_SHARD_SIZE, compression: str | None = None, *,
                 storage_options: dict | None = None, overwrite: bool = False,
                 format: str = "shards") -> None:  # noqa: A002 - the name users expect
        self.out = os.fspath(out)
        self.columns = check_columns(columns)
        self.shard_size = positive_int("shard_size", shard_size)
        if format not in SHARD_FORMATS:
            raise ValueError(f"format must be one of {list(SHARD_FORMATS)}, got {format!r}")
        self.format = format
        if compression not in (None, "zstd"):
            raise ValueError(f"compression must be None or 'zstd', got {compression!r}")
        self._rows: ParquetRows | None = None
        self._compressor = None
        if format == "parquet":
            if compression is not None:
                raise ValueError(f"compression {compression!r} is for format='shards' (each "
                                 f"sample on its own); Parquet shards always compress their "
                                 f"pages with zstd: pass compression=None")
            self._rows = ParquetRows(self.columns)
            compression = "zstd"
        elif compression:
            self._compressor = _layout.zstd().ZstdCompressor()
        self.compression = compression
        self._fs = None
        if not _remote.is_local(self.out):
            self._fs, self._root = _remote.filesystem(self.out, storage_options)
        manifest = _remote.join(self.out, MANIFEST_NAME)
        if self._exists(manifest):
            if not overwrite:
                raise FileExistsError(f"{manifest} exists; pass overwrite=True to replace the "
                                      f"dataset at {self.out}")
            self._remove(manifest)
        if self._fs is None:
            os.makedirs(self.out, exist_ok=True)
        self._pending: list[Any] = []  # samples' bytes, or (Parquet) their cells
        self._pending_bytes = 0
        self._shards: list[ShardInfo] = []
        self.samples = 0
        self._closed = False

    def _exists(self, url: str) -> bool:
        return os.path.exists(url) if self._fs is None else self._fs.exists(url)

    def _remove(self, url: str) -> None:
        if self._fs is None:
            os.unlink(url)
        else:
            self._fs.rm(url)

    def _publish(self, url: str, data: bytes) -> None:
        if self._fs is None:
            _files.remove_stale_parts(url, under_lock=False)
            with _files.atomic_write(url) as temp, open(temp, "wb") as f:
                f.write(data)
        else:
            self._fs.pipe_file(url, data)

    def write(self, sample: dict) -> None:
        """Add one sample: a dict with a value for every column.

        Raises:
            ValueError: if the writer is closed, or a column is missing or extra.
            TypeError: if a value does not fit its column's encoding (naming it).
        """
        if self._closed:
            raise ValueError(f"ShardWriter for {self.out} is closed")
        if not isinstance(sample, dict) or sample.keys() != self.columns.keys():
            got = sorted(sample) if isinstance(sample, dict) else type(sample).__name__
            raise ValueError(f"sample {self.samples} must be a dict with the columns "
                             f"{sorted(self.columns)}, got {got}")
        fields, size = [], 0
        for name, encoding in self.columns.items():
            try:
                if self._rows is None:
                    fields.append(ENCODE[encoding](sample[name]))
                else:
                    cell, cell_size = self._rows.cell(name, encoding, sample[name])
                    fields.append(cell)
                    size += cell_size
            except (TypeError, ValueError) as error:
                raise type(error)(f"sample {self.samples}, column {name!r} ({encoding}): "
                                  f"{error}") from None
        if self._rows is None:
            blob = _layout.sample_bytes(fields, self._compressor)
            self._pending.append(blob)
            self._pending_bytes += len(blob)
        else:
            self._pending.append(fields)
            self._pending_bytes += size
        self.samples += 1
        if self._pending_bytes >= self.shard_size:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._rows is None:
            data = _layout.shard_bytes(self._pending)
            name = f"shard.{len(self._shards):05d}.dks"
        else:
            data = self._rows.file_bytes(self._pending, self._pending_bytes)
            name = f"shard.{len(self._shards):05d}.parquet"
        self._publish(_remote.join(self.out, name), data)
        self._shards.append(ShardInfo(name, len(self._pending), len(data),
                                      hashlib.sha256(data).hexdigest()))
        self._pending, self._pending_bytes = [], 0

    def close(self) -> Manifest:
        """Write the last shard, then the manifest; return the manifest.

        Raises:
            ValueError: if no sample was written (an empty dataset has no manifest).
        """
        if self._closed:
            return self.manifest
        self._flush()
        if not self._shards:
            raise ValueError(f"no sample was written to {self.out}; an empty dataset gets no "
                             f"manifest")
        self.manifest = Manifest(self.columns, self.compression, tuple(self._shards),
                                 self.format)
        self._publish(_remote.join(self.out, MANIFEST_NAME), self.manifest.to_json().encode())
        self._closed = True
        return self.manifest

    def abort(self) -> None:
        """Stop without a manifest (shards already written stay, unreferenced)."""
        self._closed = True
        self._pending = []

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
