"""SerialIterator: batches built in the calling thread."""

from __future__ import annotations

from typing import Any

from dataset_kit.iterators._stream import BatchStream, fetch_batch


class SerialIterator(BatchStream):
    """Yields batches of a dataset, built one at a time in the calling thread.

    Each batch is fetched with one ``dataset[index_array]``-style call
    (:meth:`~dataset_kit.DatasetMixin.get_examples`). With ``repeat=True`` the
    iterator never stops and a batch that crosses an epoch end is completed
    from the next epoch; with ``repeat=False`` it stops after one epoch, the
    last batch possibly short.

    Args:
        dataset: any sized, indexable dataset.
        batch_size: examples per batch.
        repeat: whether to loop over the dataset forever.
        shuffle: whether to shuffle; None means shuffle unless
            ``order_sampler`` is given.
        order_sampler: a Chainer-style order sampler (``sampler(order, position)``).
        seed: seeds the shuffle and :func:`~dataset_kit.iterators.example_rng`;
            drawn from the OS when None and kept in the checkpoint.

    Raises:
        TypeError: if ``batch_size`` or ``seed`` is not an integer.
        ValueError: if ``batch_size`` is not positive, or both ``shuffle`` and
            ``order_sampler`` are given.
    """

    def __next__(self) -> Any:
        step = self._plan_next()
        if step is None:
            raise StopIteration
        position, plan = step
        batch = fetch_batch(self.dataset, plan, self.seed)
        self._consume(position)
        return batch
