"""MNISTIter: MXNet's iterator over MNIST's IDX files, on the engine.

======================  ==========================================================
MXNet 1.9 (C++)         dataset_kit
======================  ==========================================================
``image`` / ``label``   IDX files (plain or gzipped), read into memory as uint8
pixels                  float32 ``pixel / 256`` (MXNet divides by 256, not 255)
``flat``                data ``(batch, 784)``; else ``(batch, 1, 28, 28)``
labels                  float32 ``(batch,)``
``shuffle``, ``seed``   one seeded permutation made at construction and kept for
                        every epoch (MXNet shuffles once, in ``Init``)
the tail                dropped: every batch is full (the engine's 'discard')
``num_parts``           part ``part_index`` of ``num_parts`` contiguous parts
``getdata()``           the data array itself (MXNet's C++ iterators)
other keywords          ignored with a warning (MXNet ignores them silently)
======================  ==========================================================
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.datasets import TupleDataset
from dataset_kit.engine import Engine
from dataset_kit.formats import idx
from dataset_kit.io._engine_iter import NativeDataIter
from dataset_kit.io._options import ignore_unknown
from dataset_kit.io.data_iter import DataDesc
from dataset_kit.io.errors import mxnet_error

_logger = logging.getLogger(__name__)


def read_idx(path: str | os.PathLike, ndim: int) -> np.ndarray:
    """Read an IDX file of uint8 values with ``ndim`` dimensions (plain or gzipped).

    Raises:
        FileNotFoundError: if the file does not exist.
        MXNetError: if it is not such an IDX file (magic, or size against the header).
    """
    try:
        return idx.read_idx(path, ndim)
    except idx.IdxFormatError as error:
        raise mxnet_error(f"invalid mnist format: {error}") from None


def _part(count: int, num_parts: int, part_index: int) -> slice:
    """MXNet's ``GetPart``: the ``part_index``-th of ``num_parts`` contiguous parts."""
    if num_parts <= 0 or not 0 <= part_index < num_parts:
        raise mxnet_error(f"part_index must be in [0, num_parts), got part_index={part_index} "
                          f"and num_parts={num_parts}")
    return slice(int(count / num_parts * part_index), int(count / num_parts * (part_index + 1)))


class MNISTIter(NativeDataIter):
    """Batches of MNIST images and labels, MXNet 1.9's ``MNISTIter``, resumable.

    Args:
        image: the images' IDX file.
        label: the labels' IDX file.
        batch_size: images per batch.
        shuffle: shuffle once, at construction, with ``seed``.
        flat: give each image as 784 values instead of ``1 x 28 x 28``.
        seed: the shuffle's seed.
        silent: do not log what was loaded.
        num_parts: split the data into this many contiguous parts...
        part_index: ...and read this one.
        prefetch_buffer: accepted (the engine prefetches where its executor does).
        ctx: accepted; batches are host arrays.
        dtype: the data's dtype (float32 when None).
        data_name: the data's name in ``provide_data``.
        label_name: the label's name in ``provide_label``.
        **unknown: ignored with a warning, as MXNet ignores them (``data_shape``
            and ``input_shape`` are ignored silently: MXNet's examples pass them).

    Raises:
        FileNotFoundError: if a file does not exist.
        MXNetError: for a malformed file, a bad part, or files of different lengths.
    """

    def __init__(self, image: str | os.PathLike = "./train-images-idx3-ubyte",
                 label: str | os.PathLike = "./train-labels-idx1-ubyte", batch_size: int = 128,
                 shuffle: bool = True, flat: bool = False, seed: int = 0, silent: bool = False,
                 num_parts: int = 1, part_index: int = 0, prefetch_buffer: int = 4,
                 ctx: str = "gpu", dtype: Any = None, data_name: str = "data",
                 label_name: str = "softmax_label", **unknown: Any) -> None:
        batch_size = positive_int("batch_size", batch_size)
        images, labels = read_idx(image, 3), read_idx(label, 1)
        if len(images) != len(labels):
            raise mxnet_error(f"{os.fspath(image)} has {len(images)} images but "
                              f"{os.fspath(label)} has {len(labels)} labels")
        part = _part(len(images), int(num_parts), int(part_index))
        images, labels = images[part], labels[part]
        if shuffle:
            order = np.random.default_rng(non_negative_int("seed", seed)).permutation(len(images))
            images, labels = images[order], labels[order]
        for name in ("data_shape", "input_shape"):
            unknown.pop(name, None)
        ignore_unknown("MNISTIter", unknown)
        self._flat, self._dtype = bool(flat), np.dtype(dtype or np.float32)
        shape = (images.shape[1] * images.shape[2],) if flat else (1, *images.shape[1:])
        engine = Engine(TupleDataset(images, labels), batch_size=batch_size, shuffle=False,
                        seed=0, last_batch="discard")
        super().__init__(engine, [DataDesc(data_name, shape, self._dtype)],
                         [DataDesc(label_name, (), np.float32)], "padding", with_index=True)
        if not silent:
            _logger.info("MNISTIter: load %d images, shuffle=%d, shape=%s", len(images),
                         bool(shuffle), (batch_size, *shape))

    def _finish(self, columns: tuple) -> tuple:
        pixels, labels = columns
        shape = (len(pixels), -1) if self._flat else (len(pixels), 1, *pixels.shape[1:])
        # MXNet scales by 1/256 in float32, then casts to dtype.
        data = (pixels.reshape(shape).astype(np.float32) * np.float32(1 / 256)).astype(
            self._dtype, copy=False)
        return data, labels.astype(np.float32)
