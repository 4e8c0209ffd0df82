"""ImageIter: MXNet's Python image iterator (``mx.image.ImageIter``), a constructor over the engine.

=================================  ==============================================
MXNet 1.9                          dataset_kit
=================================  ==============================================
``path_imgrec`` (+ ``path_imgidx``)  the records, in file order, or in the
                                   ``.idx``'s order when it is given; labels from
                                   the record headers, or from ``path_imglist``
                                   by record key when an index is given
``path_imglist`` + ``path_root``   images read from ``path_root``/path, labels
                                   from the ``.lst`` (index, labels..., path)
``imglist``                        ``[[label(s)..., path], ...]`` in memory
``aug_list`` or ``**kwargs``       the augmenters (``CreateAugmenter(data_shape,
                                   **kwargs)`` by default), applied per image
``last_batch_handle``              ``'pad'`` (wraps to the epoch's start, ``pad``
                                   counts those), ``'discard'``, ``'roll_over'``
                                   (``pad`` counts the next epoch's images)
``shuffle``                        the engine's seeded shuffle, each epoch
``part_index``/``num_parts``       MXNet's cut: ``N // num_parts`` images each,
                                   the remainder dropped
``dtype``                          the labels' dtype; data is float32
errors MXNet asserts               ``ValueError`` naming the arguments
(beyond MXNet) ``num_workers``,    worker processes that decode and augment;
``seed``, ``state_dict()``         the seed of shuffle and augmentation; resume
=================================  ==============================================

Every random draw comes from one generator per example derived from (seed,
epoch, index), so batches are the same for any number of workers and after a
resume (MXNet's draw from Python's global ``random``).
"""

from __future__ import annotations

import contextlib
import os
from numbers import Number
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit._example_context import map_examples
from dataset_kit.convert import concat_examples
from dataset_kit.dataset import DatasetMixin
from dataset_kit.engine import DEFAULT_BATCH_TIMEOUT, AutoWorkers, Engine, ExecutorSpec
from dataset_kit.formats.recordio.header import unpack
from dataset_kit.formats.recordio.record_file import IndexedRecordReader
from dataset_kit.image import _resize
from dataset_kit.image._draws import one_generator
from dataset_kit.image.augmenters import CreateAugmenter
from dataset_kit.image.decode import load_decoders
from dataset_kit.image.functional import decode_hwc
from dataset_kit.io._engine_iter import LAST_BATCH_HANDLE, EngineDataIter
from dataset_kit.io.data_iter import DataDesc

_LABEL_DTYPES = ("int32", "float32", "int64", "float64")
# How this class counts DataBatch.pad under each policy (MXNet's ImageIter).
_PAD_RULES = {"pad": "padding", "discard": "padding", "roll_over": "wrapped"}


def _read_lst(path: str, dtype: str) -> list[tuple]:
    """``[(key, labels, image path, where)]`` from an ``.lst`` (index, labels..., path)."""
    items = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.strip().split("\t")
            if not line.strip():
                continue
            where = f"{path}, line {number}"
            if len(fields) < 2:
                raise ValueError(f"{where}: expected an index, labels and a path, got "
                                 f"{line.strip()!r}")
            try:
                key = int(fields[0])
                labels = np.asarray(fields[1:-1], np.float64).astype(dtype)
            except ValueError:
                raise ValueError(f"{where}: expected an integer index and numeric labels, got "
                                 f"{line.strip()!r}") from None
            items.append((key, labels, fields[-1], where))
    return items


def _imglist_items(imglist: list, dtype: str) -> list[tuple]:
    """``[(key, labels, image path, where)]`` from ``[[label(s)..., path], ...]``.

    The keys are '1', '2', ..., as MXNet's.
    """
    items = []
    for k, entry in enumerate(imglist):
        if len(entry) > 2:
            labels = np.asarray(entry[:-1], dtype)
        elif isinstance(entry[0], Number):
            labels = np.asarray([entry[0]], dtype)
        else:
            labels = np.asarray(entry[0], dtype)
        items.append((str(k + 1), labels, entry[-1], f"imglist[{k}]"))
    return items


class _ImageExamples(DatasetMixin):
    """Example ``i``: ``(augmented CHW float32 image, labels)`` of the ``i``-th image."""

    def __init__(self, records: IndexedRecordReader | None, keys: list, items: dict | None,
                 path_root: str | None, auglist: list, data_shape: tuple, label_width: int,
                 dtype: str) -> None:
        self._records, self._keys, self._items = records, keys, items
        self._root, self._auglist = path_root, auglist
        self._data_shape, self._label_width, self._dtype = data_shape, label_width, dtype

    def __len__(self) -> int:
        return len(self._keys)

    def _load(self, i: int) -> tuple:
        """``(encoded bytes, labels, where)`` of example ``i``."""
        key = self._keys[i]
        if self._records is not None:
            where = f"{self._records.path}, record key {key!r} (index {i})"
            try:
                header, data = unpack(self._records.read_idx(key, copy=False))
            except ValueError as error:  # its own type (RecordIOError, ...), with the key
                raise type(error)(f"{where}: {error}") from None
            labels = header.label if self._items is None else self._items[key][1]
            return bytes(data), labels, where
        assert self._items is not None  # without a record file, a list gives the images
        _, labels, name, origin = self._items[key]
        path = os.path.join(self._root, name) if self._root else name
        where = f"{path} ({origin}, index {i})"
        try:
            with open(path, "rb") as f:
                return f.read(), labels, where
        except FileNotFoundError:
            raise FileNotFoundError(f"image {path} not found ({origin}, index {i})") from None

    def _labels(self, labels: Any, where: str) -> np.ndarray:
        labels = np.asarray(labels, np.float64).astype(self._dtype).reshape(-1)
        if labels.size != self._label_width:
            raise ValueError(f"{where}: {labels.size} labels, but label_width is "
                             f"{self._label_width}")
        return labels if self._label_width > 1 else labels[0]

    def _one(self, i: int) -> tuple:
        data, labels, where = self._load(i)
        image = decode_hwc(data, 1, True, where)
        with one_generator():
            for aug in self._auglist:
                image = aug(image)
        image = np.asarray(image)
        expected = (self._data_shape[1], self._data_shape[2], self._data_shape[0])
        if image.shape != expected:
            raise ValueError(f"{where}: the augmenters gave an image of shape {image.shape} "
                             f"(HWC), data_shape {self._data_shape} needs {expected}")
        # A CHW view, copied once: by the converter, into the batch (its block, in a worker).
        return image.transpose(2, 0, 1).astype(np.float32, copy=False), \
            self._labels(labels, where)

    def get_example(self, i: int) -> tuple:
        return self._one(i)

    def get_batch(self, indices: np.ndarray) -> list:
        return map_examples(self._one, indices)


def _check(batch_size: Any, data_shape: Any, path_imgrec: Any, path_imglist: Any,
           imglist: Any, dtype: str, last_batch_handle: str) -> tuple:
    if not (path_imgrec or path_imglist or isinstance(imglist, list)):
        raise ValueError("ImageIter needs path_imgrec, path_imglist or an imglist (a list), "
                         "got none of them")
    if dtype not in _LABEL_DTYPES:
        raise ValueError(f"dtype (of the labels) must be one of {list(_LABEL_DTYPES)}, got "
                         f"{dtype!r}")
    if last_batch_handle not in LAST_BATCH_HANDLE:
        raise ValueError(f"last_batch_handle must be one of {list(LAST_BATCH_HANDLE)}, got "
                         f"{last_batch_handle!r}")
    data_shape = tuple(data_shape)
    if len(data_shape) != 3:
        raise ValueError(f"data_shape should have length 3, with dimensions CxHxW, got "
                         f"{data_shape}")
    if data_shape[0] != 3:
        raise ValueError(f"This iterator expects inputs to have 3 channels, got data_shape "
                         f"{data_shape}")
    return positive_int("batch_size", batch_size), data_shape


class ImageIter(EngineDataIter):
    """Batches of augmented images and labels, MXNet 1.9's ``mx.image.ImageIter``, resumable.

    Args:
        batch_size: images per batch.
        data_shape: ``(3, height, width)`` of each image after augmentation.
        label_width: labels per image.
        path_imgrec: a record file of images (``pack_img``).
        path_imglist: an ``.lst`` (index, labels..., path; tab-separated).
        path_root: the folder the ``.lst``/``imglist`` paths are relative to.
        path_imgidx: the record file's index (needed for ``shuffle`` and parts).
        shuffle: shuffle every epoch.
        part_index: which part to read.
        num_parts: how many parts the images are cut into.
        aug_list: the augmenters; by default ``CreateAugmenter(data_shape, **kwargs)``.
        imglist: ``[[label(s)..., path], ...]``.
        data_name: the data's name in ``provide_data``.
        label_name: the label's name in ``provide_label``.
        dtype: the labels' dtype (int32, float32, int64 or float64).
        last_batch_handle: ``'pad'``, ``'discard'`` or ``'roll_over'``.
        num_workers: worker processes that decode and augment (0: in this process);
            ``"auto"`` starts with two and lets the engine's controller
            (:class:`~dataset_kit.engine.AutoWorkers`) add and remove workers
            while it runs, with the same batches.
        memory_limit: for ``num_workers="auto"``: bytes the workers' RSS may
            reach in all (None: half the available memory).
        seed: seeds shuffling and augmentation; drawn from the OS when None
            (and kept in :meth:`state_dict`).
        start_method: the workers' multiprocessing start method.
        timeout: seconds to wait for a batch from the workers.
        **kwargs: passed to :func:`~dataset_kit.image.CreateAugmenter` when
            ``aug_list`` is None.
        executor: not MXNet's: None (worker processes) or ``"ray"``: the
            workers are actors of a Ray cluster (:doc:`/cluster`), with the same
            batches.
        ray_address: the Ray cluster's address for ``executor="ray"``.

    Raises:
        ValueError: no input, a ``data_shape`` that is not ``(3, h, w)``, an
            unknown label ``dtype`` or ``last_batch_handle``, ``shuffle`` or
            ``num_parts > 1`` with a record file but no ``path_imgidx``, or
            ``part_index`` outside ``[0, num_parts)``.
        FileNotFoundError: if a record or list file does not exist (a missing
            image is reported when it is read, naming the ``.lst`` line).
    """

    def __init__(self, batch_size: int, data_shape: tuple, label_width: int = 1,
                 path_imgrec: str | None = None, path_imglist: str | None = None,
                 path_root: str | None = None, path_imgidx: str | None = None,
                 shuffle: bool = False, part_index: int = 0, num_parts: int = 1,
                 aug_list: list | None = None, imglist: list | None = None,
                 data_name: str = "data", label_name: str = "softmax_label",
                 dtype: str = "float32", last_batch_handle: str = "pad", *,
                 num_workers: int | str = 0, seed: int | None = None,
                 start_method: str | None = None,
                 timeout: float | None = DEFAULT_BATCH_TIMEOUT, executor: str | None = None,
                 ray_address: str | None = None, memory_limit: int | None = None,
                 **kwargs: Any) -> None:
        batch_size, data_shape = _check(batch_size, data_shape, path_imgrec, path_imglist,
                                        imglist, dtype, last_batch_handle)
        label_width = positive_int("label_width", label_width)
        num_parts = positive_int("num_parts", num_parts)
        if not 0 <= int(part_index) < num_parts:
            raise ValueError(f"part_index must be in [0, num_parts={num_parts}), got "
                             f"{part_index!r}")
        if path_imgrec and not path_imgidx and (shuffle or num_parts > 1):
            raise ValueError(f"shuffle={shuffle!r} and num_parts={num_parts} with a record "
                             f"file need its index: pass path_imgidx")
        records, items = None, None
        if path_imglist:
            items = {item[0]: item for item in _read_lst(os.fspath(path_imglist), dtype)}
        elif isinstance(imglist, list) and not path_imgrec:
            items = {item[0]: item for item in _imglist_items(imglist, dtype)}
        if path_imgrec:
            records = IndexedRecordReader(path_imgidx, path_imgrec)
            keys = list(records.keys)
            if not path_imgidx:
                items = None  # MXNet reads a record file without index sequentially: header labels
        else:
            assert items is not None  # _check: without path_imgrec, a list was given
            keys = list(items)
        if num_parts > 1:
            size = len(keys) // num_parts
            keys = keys[int(part_index) * size:(int(part_index) + 1) * size]
        self.auglist = CreateAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        self.data_shape, self.label_width = data_shape, label_width
        self.shuffle, self.last_batch_handle = bool(shuffle), last_batch_handle
        self.num_image = len(keys)
        dataset = _ImageExamples(records, keys, items, path_root, self.auglist, data_shape,
                                 label_width, dtype)
        workers, autotune = AutoWorkers.for_argument("num_workers", num_workers, memory_limit)
        workers = non_negative_int("num_workers", workers)
        spec = ExecutorSpec("process" if workers else "serial", workers=workers,
                            start_method=start_method, timeout=timeout,
                            converter=concat_examples).placed(executor, ray_address)
        policy, pad_rule = LAST_BATCH_HANDLE[last_batch_handle], _PAD_RULES[last_batch_handle]
        # Imported before the workers fork, so that they inherit them (see load_decoders).
        with contextlib.suppress(ImportError):  # then the first decode says so
            load_decoders()
        _resize.opencv()
        engine = Engine(dataset, batch_size=batch_size, shuffle=self.shuffle, seed=seed,
                        last_batch=policy, executor=spec, autotune=autotune)
        label_shape = (label_width,) if label_width > 1 else ()
        super().__init__(engine, [DataDesc(data_name, data_shape, np.float32)],
                         [DataDesc(label_name, label_shape, np.dtype(dtype))], pad_rule,
                         with_index=False)
