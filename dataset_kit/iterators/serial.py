"""SerialIterator: batches built in the calling thread."""

from __future__ import annotations

from typing import Any

from dataset_kit.engine import Engine
from dataset_kit.iterators._chainer_api import ChainerIterator


class SerialIterator(ChainerIterator):
    """Yields batches of a dataset, built one at a time in the calling thread.

    Each batch is fetched with one ``dataset[index_array]``-style call
    (:meth:`~dataset_kit.DatasetMixin.get_batch`). With ``repeat=True`` the
    iterator never stops and a batch that crosses an epoch end is completed
    from the next epoch; with ``repeat=False`` it stops after one epoch, the
    last batch possibly short. ``last_batch`` chooses another end of epoch.

    Args:
        dataset: any sized, indexable dataset.
        batch_size: examples per batch.
        repeat: whether to loop over the dataset forever.
        shuffle: whether to shuffle; None means shuffle unless
            ``order_sampler`` is given.
        order_sampler: a Chainer-style order sampler (``sampler(order, position)``).
        seed: seeds the shuffle and :func:`~dataset_kit.example_rng`;
            drawn from the OS when None and kept in the checkpoint.
        last_batch: None (Chainer's behaviour), ``'keep'``, ``'discard'``,
            ``'rollover'`` or ``'pad'``; see :doc:`/architecture`.

    Raises:
        TypeError: if ``batch_size`` or ``seed`` is not an integer.
        ValueError: if ``batch_size`` is not positive, both ``shuffle`` and
            ``order_sampler`` are given, or ``last_batch`` is unknown.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        repeat: bool = True,
        shuffle: bool | None = None,
        order_sampler: Any = None,
        seed: int | None = None,
        last_batch: str | None = None,
    ) -> None:
        super().__init__(Engine(dataset, batch_size=batch_size, repeat=repeat, shuffle=shuffle,
                                order_sampler=order_sampler, seed=seed, last_batch=last_batch))
