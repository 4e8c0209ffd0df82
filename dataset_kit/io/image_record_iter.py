"""ImageRecordIter: MXNet's record-file image iterator as a table over the engine.

=============================  ==============================================
MXNet 1.9                      dataset_kit
=============================  ==============================================
``path_imgrec``/``path_imgidx``  :class:`~dataset_kit.datasets.ImageRecordDataset`
``resize``                     :func:`~dataset_kit.image.transforms.resize_short`
``rand_crop`` / not            ``random_crop`` / ``center_crop`` to ``data_shape``
``rand_mirror``                ``random_flip``
``mean_*`` / ``std_*``         ``normalize``; then ``to_chw``
``preprocess_threads``         worker processes that decode, augment and stack
``shuffle``, ``seed``          the engine's seeded shuffle
``last_batch_handle``          the engine's policy, as for NDArrayIter
=============================  ==============================================

Randomness comes from ``example_rng()``, so batches are the same for any
number of workers, and ``state_dict()`` resumes mid-epoch (MXNet's could not).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.convert import concat_examples
from dataset_kit.datasets.record_dataset import ImageRecordDataset
from dataset_kit.dataset import DatasetMixin, fetch_examples
from dataset_kit._example_context import map_examples
from dataset_kit.image import transforms as T
from dataset_kit.io._engine_iter import EngineDataIter
from dataset_kit.io.data_iter import DataDesc
from dataset_kit.io.ndarray_iter import _POLICIES
from dataset_kit.iterators._engine import Engine
from dataset_kit.iterators._executor_spec import DEFAULT_BATCH_TIMEOUT, ExecutorSpec


class _Augmented(DatasetMixin):
    """``(augment(image), float32 label)`` for each image record."""

    def __init__(self, records: ImageRecordDataset, augment: Any) -> None:
        self._records, self._augment = records, augment

    def __len__(self) -> int:
        return len(self._records)

    def _apply(self, example: tuple) -> tuple:
        image, label = example
        return self._augment(image), np.asarray(label, dtype=np.float32)

    def get_example(self, i: int) -> tuple:
        return self._apply(self._records[i])

    def get_examples(self, indices: np.ndarray) -> list:
        return map_examples(self._apply, fetch_examples(self._records, indices))


class ImageRecordIter(EngineDataIter):
    """Batches of augmented images from a record file: NCHW float32 data and float32 labels.

    Args:
        path_imgrec: the ``.rec`` file.
        data_shape: ``(channels, height, width)`` of each image (channels 3 or 1).
        batch_size: images per batch.
        path_imgidx: its ``.idx`` (found beside the ``.rec``, or built by a scan).
        shuffle: visit records in a seeded random order each epoch.
        rand_crop: crop at a random position (else the centre).
        rand_mirror: mirror left-right with probability 0.5.
        mean_r, mean_g, mean_b, std_r, std_g, std_b: per-channel normalisation.
        resize: resize the shorter side to this before cropping (-1: do not).
        preprocess_threads: worker processes (0: decode in the calling thread).
        seed: seeds the shuffle and the augmentation.
        last_batch_handle: ``'pad'``, ``'discard'`` or ``'roll_over'``.
        start_method: the worker processes' start method (not in MXNet);
            None for the platform's default.
        timeout: seconds a worker may stay silent while its batch is awaited
            before a :class:`~dataset_kit.iterators.BatchTimeoutError` (not in
            MXNet; None: wait as long as the workers live).

    Raises:
        ValueError: for a bad ``data_shape``, ``last_batch_handle`` or ``std``.
        FileNotFoundError: if the record file does not exist.
    """

    def __init__(self, path_imgrec: str | os.PathLike, data_shape: tuple, batch_size: int,
                 path_imgidx: str | os.PathLike | None = None, shuffle: bool = False,
                 rand_crop: bool = False, rand_mirror: bool = False, mean_r: float = 0.0,
                 mean_g: float = 0.0, mean_b: float = 0.0, std_r: float = 1.0,
                 std_g: float = 1.0, std_b: float = 1.0, resize: int = -1,
                 preprocess_threads: int = 4, seed: int | None = None,
                 last_batch_handle: str = "pad", start_method: str | None = None,
                 timeout: float | None = DEFAULT_BATCH_TIMEOUT) -> None:
        data_shape = tuple(int(d) for d in data_shape)
        if len(data_shape) != 3 or data_shape[0] not in (1, 3) or min(data_shape) <= 0:
            raise ValueError(f"data_shape must be (3 or 1, height, width), got {data_shape!r}")
        if last_batch_handle not in _POLICIES:
            raise ValueError(f"last_batch_handle must be one of {list(_POLICIES)}, got "
                             f"{last_batch_handle!r}")
        batch_size = positive_int("batch_size", batch_size)
        workers = non_negative_int("preprocess_threads", preprocess_threads)
        channels, height, width = data_shape
        steps = [T.resize_short(resize)] if resize > 0 else []
        steps.append((T.random_crop if rand_crop else T.center_crop)((width, height)))
        if rand_mirror:
            steps.append(T.random_flip())
        means, stds = (mean_r, mean_g, mean_b), (std_r, std_g, std_b)
        steps += [T.normalize(means[:channels], stds[:channels]), T.to_chw()]
        records = ImageRecordDataset(path_imgrec, flag=1 if channels == 3 else 0,
                                     idx_path=path_imgidx)
        dataset = _Augmented(records, T.compose(*steps))
        executor = ExecutorSpec("process" if workers else "serial", workers=workers,
                                start_method=start_method, timeout=timeout,
                                converter=concat_examples)
        policy, pad_rule = _POLICIES[last_batch_handle]
        engine = Engine(dataset, batch_size=batch_size, shuffle=shuffle, seed=seed,
                        last_batch=policy, executor=executor)
        super().__init__(engine, [DataDesc("data", data_shape, np.float32)],
                         [DataDesc("softmax_label", (), np.float32)], pad_rule, with_index=True)
