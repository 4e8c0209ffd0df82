"""ImageRecordIter: MXNet's record-file image iterator as a table over the engine.

==================================  =============================================
MXNet 1.9                           dataset_kit
==================================  =============================================
``path_imgrec``/``path_imgidx``     the records (an ``.idx`` beside the ``.rec``
                                    is used, else built by a scan)
``path_imglist``, ``label_width``   labels by image id from the ``.lst``;
                                    else the record's own
augmentation and normalisation      :mod:`dataset_kit.io._record_augment`
                                    (MXNet's ``aug_default``; every argument)
``mean_img``                        loaded (MXNet's NDArray format), or computed
                                    over the records and saved when missing
``seed_aug``                        augmentation seeded by ``(seed_aug, epoch,
                                    index)``; else by ``(seed, epoch, index)``
``shuffle``, ``seed``               the engine's seeded shuffle (seed 0 default)
``round_batch=True``                the last batch wraps to the start, ``pad``
                                    counts the wrapped images, the next epoch
                                    starts after them (MXNet's batch loader)
``round_batch=False``               ``last_batch='pad'``
``last_batch_handle``               (dataset_kit's) overrides ``round_batch``
``num_parts``/``part_index``        contiguous parts of the records
``preprocess_threads``              worker processes that decode and augment
                                    (``"auto"``: as many as help, same batches)
``prefetch_buffer``, ``ctx``,       accepted; the executor prefetches, batches
``device_id``, ``verbose``,         are host arrays, records are read by index
``shuffle_chunk_*``
``dtype``                           float32 (default), uint8 (raw pixels) or int8
``getdata()``                       the data array itself (MXNet's C++ iterators)
a bad ``data_shape``, other         :class:`~dataset_kit.io.MXNetError` (MXNet's
arguments MXNet refuses             error and message)
other keywords                      ignored with a warning (MXNet ignores them)
==================================  =============================================

Randomness comes from ``example_rng()``, so batches are the same for any
number of workers, and ``state_dict()`` resumes mid-epoch (MXNet's could not).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit._example_context import map_examples
from dataset_kit.convert import concat_examples
from dataset_kit.dataset import DatasetMixin
from dataset_kit.datasets.record_dataset import RecordFileDataset
from dataset_kit.engine import DEFAULT_BATCH_TIMEOUT, AutoWorkers, Engine, ExecutorSpec
from dataset_kit.formats.recordio.header import unpack_img
from dataset_kit.image import _resize
from dataset_kit.image.affine import INTERPOLATIONS
from dataset_kit.image.decode import load_decoders
from dataset_kit.io import _mean_image
from dataset_kit.io._engine_iter import LAST_BATCH_HANDLE, NativeDataIter
from dataset_kit.io._options import ignore_unknown
from dataset_kit.io._record_augment import AugmentParams, RecordAugment
from dataset_kit.io.data_iter import DataDesc
from dataset_kit.io.errors import mxnet_error
from dataset_kit.io.mnist_iter import _part

_AUGMENT_FIELDS = {f.name for f in dataclasses.fields(AugmentParams)} - {
    "data_shape", "mean", "std", "rotate_list", "dtype", "seed_aug"}
_IGNORED = ("prefetch_buffer", "ctx", "device_id", "verbose", "shuffle_chunk_size",
            "shuffle_chunk_seed", "preprocess_threads")
_DTYPES = ("float32", "uint8", "int8")
# How DataBatch.pad is counted under each last_batch_handle (as NDArrayIter counts it).
_PAD_RULES = {"pad": "padding", "discard": "padding", "roll_over": "rolled"}


def _read_imglist(path: str | os.PathLike, label_width: int) -> dict:
    """``{image id: float32 labels}`` from an ``.lst`` (index, labels..., path; tab-separated).

    Raises:
        MXNetError: for a line with too few labels, naming the file and line.
    """
    labels = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            if not line.strip():
                continue
            if len(fields) < label_width + 2:
                raise mxnet_error(f"{os.fspath(path)}, line {number}: expected an index, "
                                  f"{label_width} labels and a path, got {line.strip()!r}")
            labels[int(float(fields[0]))] = np.asarray(fields[1:1 + label_width], np.float32)
    return labels


class _Augmented(DatasetMixin):
    """``(augment(image), float32 label)`` for each image record."""

    def __init__(self, records: RecordFileDataset, part: slice, augment: Any, iscolor: int,
                 label_width: int, imglist: dict | None) -> None:
        self._records, self._part, self._augment = records, part, augment
        self._iscolor, self._label_width, self._imglist = iscolor, label_width, imglist

    def __len__(self) -> int:
        return self._part.stop - self._part.start

    def _label(self, header: Any) -> np.ndarray:
        if self._imglist is not None:
            return self._imglist[int(header.id)]
        if header.flag > 0:
            if header.flag != self._label_width:
                raise mxnet_error(f"rec file provide {header.flag}-dimensional label but "
                                  f"label_width is set to {self._label_width}")
            return np.asarray(header.label, np.float32)
        if self._label_width != 1:
            raise mxnet_error("label_width must be 1 unless an imglist is provided or the rec "
                              "file is packed with multi dimensional label")
        return np.float32(header.label)

    def _one(self, i: int) -> tuple:
        header, image = unpack_img(self._records.record_view(self._part.start + i),
                                   self._iscolor)
        if self._iscolor == -1 and (image.ndim != 3 or image.shape[2] != 4):
            raise mxnet_error(f"Invalid image with index {header.id}. Expected 4 channels, got "
                              f"{1 if image.ndim == 2 else image.shape[2]}")
        return self._augment(image), self._label(header)

    def get_example(self, i: int) -> tuple:
        return self._one(i)

    def get_batch(self, indices: np.ndarray) -> list:
        return map_examples(self._one, indices)


def _data_shape(data_shape: Any) -> tuple:
    try:
        shape = tuple(int(d) for d in data_shape)
    except (TypeError, ValueError):
        shape = ()
    if len(shape) != 3 or min(shape) <= 0:
        raise mxnet_error(f"Invalid Parameter format for data_shape expect a 3-D shape of "
                          f"non-zero (channels, height, width) but value='{data_shape}'")
    if shape[0] not in (1, 3, 4):
        raise mxnet_error(f"Invalid output shape ({','.join(map(str, shape))}): "
                          f"data_shape's channels must be 1, 3 or 4")
    return shape


def _augment_params(shape: tuple, options: dict, dtype: str, seed_aug: Any) -> AugmentParams:
    rotate_list = options.pop("rotate_list", ())
    if isinstance(rotate_list, str):
        rotate_list = tuple(int(a) for a in rotate_list.split(",") if a.strip())
    means = tuple(float(options.pop(f"mean_{c}", 0.0)) for c in "rgba")
    stds = tuple(float(options.pop(f"std_{c}", 1.0)) for c in "rgba")
    known = {k: options.pop(k) for k in list(options) if k in _AUGMENT_FIELDS}
    params = AugmentParams(shape, rotate_list=tuple(rotate_list), mean=means, std=stds,
                           dtype=dtype, seed_aug=None if seed_aug is None else int(seed_aug),
                           **known)
    if params.inter_method not in INTERPOLATIONS or (params.warps and params.inter_method == 0):
        raise mxnet_error(f"invalid inter_method: valid value 0,1,2,3,9,10 (1-4, 9, 10 with an "
                          f"affine augmentation), got {params.inter_method}")
    if params.random_resized_crop and (params.min_random_scale != 1 or params.max_random_scale
                                       != 1 or params.min_crop_size != -1
                                       or params.max_crop_size != -1 or params.rand_crop):
        raise mxnet_error("Setting random_resized_crop to true conflicts with min_random_scale, "
                          "max_random_scale, min_crop_size, max_crop_size, and rand_crop.")
    if params.max_crop_size < params.min_crop_size:
        raise mxnet_error(f"max_crop_size ({params.max_crop_size}) must be >= min_crop_size "
                          f"({params.min_crop_size})")
    colour = (params.brightness, params.contrast, params.saturation, params.pca_noise,
              params.random_h, params.random_s, params.random_l)
    if shape[0] == 1 and any(colour):
        raise mxnet_error("brightness, contrast, saturation, pca_noise and random_h/s/l need "
                          "colour images; data_shape has 1 channel")
    if any(s == 0 for s in stds[:shape[0]]):
        raise mxnet_error(f"std_r/g/b/a must not be zero, got {stds[:shape[0]]}")
    return params


class ImageRecordIter(NativeDataIter):
    """Batches of augmented images from a record file: NCHW data and float32 labels.

    Every argument of MXNet 1.9's ``ImageRecordIter`` is accepted, with its
    default (see the module's table and MXNet's documentation of each);
    the ones below are dataset_kit's or differ.

    Args:
        path_imgrec: the ``.rec`` file.
        data_shape: ``(channels, height, width)``; channels 1, 3 or 4 (RGBA).
        batch_size: images per batch.
        path_imgidx: its ``.idx`` (found beside the ``.rec``, or built by a
            scan, when None or ``''``).
        path_imglist: an ``.lst`` giving ``label_width`` labels per image id.
        label_width: labels per image.
        shuffle: visit records in a seeded random order each epoch.
        seed: seeds the shuffle (and the augmentation without ``seed_aug``).
        seed_aug: seeds the augmentation.
        mean_img: the mean image file (computed and saved when missing).
        round_batch: wrap the last batch to the start (else pad it).
        last_batch_handle: ``'pad'``, ``'discard'`` or ``'roll_over'``,
            overriding ``round_batch`` (dataset_kit's addition).
        preprocess_threads: worker processes (0: decode in the calling thread);
            ``"auto"`` (not MXNet's) starts with two and lets the engine's
            controller (:class:`~dataset_kit.engine.AutoWorkers`) add and
            remove workers while it runs, with the same batches.
        num_parts: split the records into this many contiguous parts...
        part_index: ...and read this one.
        aug_seq: ``'aug_default'`` (MXNet's only augmenter for this iterator).
        dtype: ``'float32'``, ``'uint8'`` (raw pixels) or ``'int8'``.
        start_method: the worker processes' start method (not in MXNet);
            None for the platform's default.
        timeout: seconds a worker may stay silent while its batch is awaited
            before a :class:`~dataset_kit.iterators.BatchTimeoutError` (not in
            MXNet; None: wait as long as the workers live).
        data_name: the data's name in ``provide_data``.
        label_name: the label's name in ``provide_label``.
        **options: MXNet's augmentation and normalisation arguments
            (``resize``, ``rand_crop``, ``rand_mirror``, ``max_rotate_angle``,
            ``inter_method``, ``mean_r``, ``std_r``, ``max_random_illumination``,
            ...); anything else is ignored with a warning, as MXNet ignores it.
        executor: not MXNet's: None (worker processes) or ``"ray"``: the
            workers are actors of a Ray cluster (:doc:`/cluster`), with the same
            batches.
        ray_address: the Ray cluster's address for ``executor="ray"``.
        memory_limit: for ``preprocess_threads="auto"``: bytes the workers'
            RSS may reach in all (None: half the available memory).

    Raises:
        MXNetError: for a bad ``data_shape`` or any argument MXNet refuses
            (also a ``ValueError``; and MXNet's own class when MXNet is loaded).
        ValueError: for a bad ``batch_size``, ``seed`` or ``last_batch_handle``.
        FileNotFoundError: if the record file does not exist.
    """

    def __init__(self, path_imgrec: str | os.PathLike, data_shape: tuple, batch_size: int,
                 path_imgidx: str | os.PathLike | None = None, path_imglist: Any = None,
                 label_width: int = 1, shuffle: bool = False, seed: int = 0,
                 seed_aug: int | None = None, mean_img: str | os.PathLike | None = None,
                 round_batch: bool = True, last_batch_handle: str | None = None,
                 preprocess_threads: int | str = 4, num_parts: int = 1, part_index: int = 0,
                 aug_seq: str = "aug_default", dtype: str | None = None,
                 start_method: str | None = None,
                 timeout: float | None = DEFAULT_BATCH_TIMEOUT, data_name: str = "data",
                 label_name: str = "softmax_label", executor: str | None = None,
                 ray_address: str | None = None, memory_limit: int | None = None,
                 **options: Any) -> None:
        shape = _data_shape(data_shape)
        batch_size = positive_int("batch_size", batch_size)
        workers, autotune = AutoWorkers.for_argument("preprocess_threads", preprocess_threads,
                                                     memory_limit)
        workers = non_negative_int("preprocess_threads", workers)
        label_width = positive_int("label_width", label_width)
        if last_batch_handle is not None and last_batch_handle not in LAST_BATCH_HANDLE:
            raise ValueError(f"last_batch_handle must be one of {list(LAST_BATCH_HANDLE)}, got "
                             f"{last_batch_handle!r}")
        if aug_seq != "aug_default":
            raise mxnet_error(f"ImageRecordIter has only the augmenter 'aug_default', got "
                              f"aug_seq={aug_seq!r}")
        dtype = "float32" if dtype is None else str(np.dtype(dtype))
        if dtype not in _DTYPES:
            raise mxnet_error(f"unknown dtype for ImageRecordIter2: {dtype} (one of {_DTYPES})")
        params = _augment_params(shape, options, dtype, seed_aug)
        for name in _IGNORED:
            options.pop(name, None)
        ignore_unknown("ImageRecordIter", options)
        imglist = None if not path_imglist else _read_imglist(path_imglist, label_width)
        # MXNet reads an empty path_imgidx as "no index" (its scripts pass '').
        records = RecordFileDataset(path_imgrec, path_imgidx or None)
        # Imported here, before the workers fork, so that they inherit them: each
        # worker importing them itself cost ~180 ms of CPU per iterator.
        with contextlib.suppress(ImportError):  # then the first decode says so
            load_decoders()
        _resize.opencv()
        part = _part(len(records), int(num_parts), int(part_index))
        iscolor = {1: 0, 3: 1, 4: -1}[shape[0]]

        def make(augment_params: AugmentParams) -> _Augmented:
            return _Augmented(records, part, RecordAugment(augment_params), iscolor, label_width,
                              imglist)

        seed = non_negative_int("seed", seed)
        if mean_img and dtype == "float32":
            params = dataclasses.replace(params, mean=self._mean_image(
                mean_img, make(params), shape, seed))
        dataset = make(params)
        spec = ExecutorSpec("process" if workers else "serial", workers=workers,
                            start_method=start_method, timeout=timeout,
                            converter=concat_examples).placed(executor, ray_address)
        policy, pad_rule = (
            (LAST_BATCH_HANDLE[last_batch_handle], _PAD_RULES[last_batch_handle])
            if last_batch_handle else (None, "wrapped") if round_batch else ("pad", "padding"))
        engine = Engine(dataset, batch_size=batch_size, shuffle=shuffle, seed=seed,
                        last_batch=policy, executor=spec, autotune=autotune)
        label_shape = () if label_width == 1 else (label_width,)
        super().__init__(engine, [DataDesc(data_name, shape, np.dtype(dtype))],
                         [DataDesc(label_name, label_shape, np.float32)], pad_rule,
                         with_index=True)

    @staticmethod
    def _mean_image(path: str | os.PathLike, dataset: _Augmented, shape: tuple,
                    seed: int) -> np.ndarray:
        """Load the mean image, or compute it over the records (augmented, unshuffled) and save."""
        if os.path.exists(path):
            mean = _mean_image.load_mean_image(path)
            if mean.shape != shape:
                raise mxnet_error(f"the mean image {os.fspath(path)} has shape {mean.shape}, "
                                  f"data_shape is {shape}")
            return mean
        engine = Engine(dataset, batch_size=256, repeat=False, shuffle=False, seed=seed,
                        last_batch="keep", executor=ExecutorSpec(converter=concat_examples))
        mean = _mean_image.mean_of(columns[0] for columns in engine.epoch())
        _mean_image.save_mean_image(path, mean)
        return mean
