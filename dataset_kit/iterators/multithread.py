"""MultithreadIterator: whole batches built ahead on a thread pool."""

from __future__ import annotations

from typing import Any

from dataset_kit._checks import positive_int
from dataset_kit.engine import DEFAULT_BATCH_TIMEOUT, Engine, ExecutorSpec
from dataset_kit.iterators._chainer_api import ChainerIterator


class MultithreadIterator(ChainerIterator):
    """Yields batches built ahead of time by a pool of threads.

    Each thread builds whole batches (one ``get_batch`` call each), and
    batches are delivered in order. For the same seed the batches are
    identical to :class:`~dataset_kit.iterators.SerialIterator`'s, whatever
    ``n_threads`` is. Useful when examples wait on I/O or on code that
    releases the GIL.

    Args:
        dataset: any sized, indexable dataset (accessed from several threads).
        batch_size: examples per batch.
        repeat: whether to loop over the dataset forever.
        shuffle: whether to shuffle; None means shuffle unless
            ``order_sampler`` is given.
        n_threads: worker threads.
        order_sampler: a Chainer-style order sampler.
        seed: seeds the shuffle and :func:`~dataset_kit.example_rng`.
        last_batch: how each epoch ends, as for ``SerialIterator``.
        timeout: seconds to wait for a batch from the threads before
            :class:`~dataset_kit.iterators.BatchTimeoutError` (default 300;
            None: wait). Not in Chainer.

    Raises:
        TypeError: if ``n_threads`` is not an integer (and as SerialIterator).
        ValueError: if ``n_threads`` is not positive (and as SerialIterator).
    """

    # Chainer's MultithreadIterator reads and writes its order as `_order`,
    # always, where its other iterators write `order` when there is one.
    _ORDER_KEYS = ("_order", "order")
    _ORDER_KEY_WITHOUT_ORDER = True

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        repeat: bool = True,
        shuffle: bool | None = None,
        n_threads: int = 1,
        order_sampler: Any = None,
        seed: int | None = None,
        last_batch: str | None = None,
        timeout: float | None = DEFAULT_BATCH_TIMEOUT,
    ) -> None:
        self.n_threads = positive_int("n_threads", n_threads)
        spec = ExecutorSpec("thread", workers=self.n_threads, timeout=timeout)
        engine = Engine(dataset, batch_size=batch_size, repeat=repeat, shuffle=shuffle,
                        order_sampler=order_sampler, seed=seed, last_batch=last_batch,
                        executor=spec)
        super().__init__(engine)
