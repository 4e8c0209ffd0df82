"""MultithreadIterator: whole batches built ahead on a thread pool."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from dataset_kit._checks import positive_int
from dataset_kit.iterators._prefetch import PrefetchingStream
from dataset_kit.iterators._statemachine import BatchPlan
from dataset_kit.iterators._stream import fetch_batch


class MultithreadIterator(PrefetchingStream):
    """Yields batches built ahead of time by a pool of threads.

    Each thread builds whole batches (one ``get_examples`` call each), and
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
        seed: seeds the shuffle and :func:`~dataset_kit.iterators.example_rng`.

    Raises:
        TypeError: if ``n_threads`` is not an integer (and as SerialIterator).
        ValueError: if ``n_threads`` is not positive (and as SerialIterator).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        repeat: bool = True,
        shuffle: bool | None = None,
        n_threads: int = 1,
        order_sampler: Any = None,
        seed: int | None = None,
    ) -> None:
        n_threads = positive_int("n_threads", n_threads)
        super().__init__(dataset, batch_size, repeat, shuffle, order_sampler, seed)
        self.n_threads = n_threads
        self._depth = 2 * n_threads
        self._executor = ThreadPoolExecutor(n_threads, thread_name_prefix="dataset_kit")

    def _submit(self, plan: BatchPlan) -> Future:
        return self._executor.submit(fetch_batch, self.dataset, plan, self.seed)

    def _collect(self, handle: Future) -> Any:
        return handle.result()

    def _cancel(self, handles: list) -> None:
        for future in handles:
            future.cancel()

    def finalize(self) -> None:
        """Stop the threads (waiting for batches being built). Idempotent."""
        if not self._closed:
            self._closed = True
            self._discard_planned()
            self._executor.shutdown(wait=True, cancel_futures=True)

