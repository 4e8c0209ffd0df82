"""Datasets over record files: raw records, and (image, label) image records."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dataset_kit import _files
from dataset_kit.datasets.gluon_dataset import Dataset
from dataset_kit.formats.recordio.record_file import IndexedRecordReader


class RecordFileDataset(Dataset):
    """Example ``i`` is the ``i``-th record (bytes) of a ``.rec`` file, in index order.

    The index is ``idx_path``, else the ``.idx`` beside the ``.rec``, else
    built by scanning the file once. Records are read with ``pread`` (a file
    truncated under the reader is an error, not a crash); pickling keeps the
    paths and the index, and a process that unpickles the dataset refuses a
    record file replaced since it was opened.

    Args:
        rec_path: the record file.
        idx_path: its index.

    Raises:
        FileNotFoundError: if the record file does not exist.
    """

    def __init__(self, rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None
                 ) -> None:
        rec_path = os.fspath(rec_path)
        if idx_path is None:
            beside = os.path.splitext(rec_path)[0] + ".idx"
            idx_path = beside if os.path.isfile(beside) else None
        self._reader = IndexedRecordReader(idx_path, rec_path)
        self._keys = self._reader.keys
        # Taken when opened: a checkpoint's ledger then tells a rewritten file.
        self._fingerprint = _files.files_fingerprint(rec_path, idx_path)

    def fingerprint(self) -> str:
        """The identity of the record file and its index when they were opened (size, mtime)."""
        return self._fingerprint

    def __len__(self) -> int:
        return len(self._keys)

    def get_example(self, i: int) -> bytes:
        record = self._reader.read_idx(self._keys[i])
        assert isinstance(record, bytes)  # a copy (copy=True) is always bytes
        return record

    def record_view(self, i: int) -> Any:
        """Record ``i`` as a read-only view where it is one part (no second copy)."""
        return self._reader.read_idx(self._keys[i], copy=False)

    def _where(self, i: int) -> str:
        """Name record ``i`` in errors: the file, the example, its key and offset."""
        key = self._keys[i]
        return (f"{self._reader.path}, example {i} (key {key!r}, offset "
                f"{self._reader.idx[key]})")


class ImageRecordDataset(RecordFileDataset):
    """``(image, label)`` from image records: HWC uint8 **RGB**, and a float or float32 array.

    Images decode in whichever process fetches the example (JPEGs with
    simplejpeg where installed).

    Args:
        rec_path: the record file (as written by ``dataset-kit im2rec`` or MXNet's ``im2rec``).
        flag: 1 for colour (3 channels), 0 for grayscale (H x W).
        idx_path: its index (see :class:`RecordFileDataset`).
    """

    def __init__(self, rec_path: str | os.PathLike, flag: int = 1,
                 idx_path: str | os.PathLike | None = None) -> None:
        if flag not in (0, 1):
            raise ValueError(f"flag must be 1 (colour) or 0 (grayscale), got {flag!r}")
        super().__init__(rec_path, idx_path)
        self._flag = flag

    # An image record dataset is a record file dataset whose examples are the
    # decoded records (MXNet's class hierarchy), not the bytes.
    def get_example(self, i: int) -> tuple[np.ndarray, Any]:  # type: ignore[override]
        from dataset_kit.formats.recordio.header import unpack_img

        header, image = unpack_img(self.record_view(i), 1 if self._flag else 0, self._where(i))
        label = header.label if header.flag > 0 else float(header.label)
        return image, label


