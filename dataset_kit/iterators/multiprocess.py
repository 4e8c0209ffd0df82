"""MultiprocessIterator: whole batches built by worker processes, delivered zero-copy."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from dataset_kit._checks import positive_int
from dataset_kit.engine import DEFAULT_BATCH_TIMEOUT, AutoWorkers, Engine, ExecutorSpec
from dataset_kit.engine.errors import TimeoutWarning
from dataset_kit.iterators._chainer_api import ChainerIterator


class MultiprocessIterator(ChainerIterator):
    """Yields batches built ahead of time by worker processes.

    The main process owns the order: it plans every batch with the same state
    machine as :class:`~dataset_kit.iterators.SerialIterator` and hands each
    worker the indices of whole batches, which come back in order. For the same
    seed the batches (augmentation included, through
    :func:`~dataset_kit.iterators.example_rng`) are identical to the serial
    iterator's for any ``n_processes`` and start method.

    Arrays travel through reusable shared-memory blocks: the caller receives
    numpy views, and a block is reused only once nothing references its
    arrays. Non-array parts of examples are pickled. Workers start on the first
    ``next()`` and live until :meth:`finalize` (or the ``with`` block's end,
    garbage collection, or interpreter exit), which also unlinks every block.

    Args:
        dataset: any sized, indexable dataset.
        batch_size: examples per batch.
        repeat: whether to loop over the dataset forever.
        shuffle: whether to shuffle; None means shuffle unless
            ``order_sampler`` is given.
        n_processes: worker processes; None means ``os.cpu_count()``;
            ``"auto"`` starts with two and lets the engine's controller
            (:class:`~dataset_kit.engine.AutoWorkers`) add and remove workers
            while it runs, without changing a batch.
        n_prefetch: batches each worker keeps queued beyond the one it builds.
        shared_mem: accepted for Chainer compatibility and ignored; blocks size
            themselves.
        order_sampler: a Chainer-style order sampler.
        dataset_timeout: seconds after which a batch still being built is
            warned about (None: never), as in Chainer.
        maxtasksperchild: batches a worker builds before it is replaced
            (None: never).
        seed: seeds the shuffle and ``example_rng``.
        last_batch: how each epoch ends, as for ``SerialIterator``.
        converter: if given (e.g. ``concat_examples``), workers apply it and the
            iterator yields converted batches.
        start_method: ``"fork"`` (the default where available), ``"forkserver"``
            or ``"spawn"``.
        worker_init: ``worker_init(worker_index, n_workers)`` runs once in each
            worker before its first batch.
        timeout: seconds a worker may stay silent while its batch is awaited
            before :class:`~dataset_kit.iterators.BatchTimeoutError` is raised
            and the workers are stopped (default 300; None: wait as long as
            the workers live). Not in Chainer, whose iterator only warns.
        executor: None (worker processes on this machine) or ``"ray"``: the
            ``n_processes`` workers are actors of a Ray cluster instead (the
            ``ray`` extra; :doc:`/cluster`), with the same batches.
        ray_address: the Ray cluster's address for ``executor="ray"`` (None:
            ``RAY_ADDRESS``, else a local Ray).
        memory_limit: for ``n_processes="auto"``: bytes the workers' RSS may
            reach in all (None: half the memory available at construction).

    Raises:
        TypeError: for arguments of the wrong type, or (on the first ``next()``)
            a dataset that cannot be pickled for ``spawn``/``forkserver``.
        ValueError: for out-of-range arguments or an unknown start method.
        WorkerError: (from ``next()``) when a worker dies, raises or stays
            silent past ``timeout``.
    """

    #: The category of the warning about a batch slower than ``dataset_timeout``.
    TimeoutWarning = TimeoutWarning

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        repeat: bool = True,
        shuffle: bool | None = None,
        n_processes: int | str | None = None,
        n_prefetch: int = 1,
        shared_mem: int | None = None,
        order_sampler: Any = None,
        dataset_timeout: float | None = 30.0,
        maxtasksperchild: int | None = None,
        seed: int | None = None,
        converter: Callable[[Any], Any] | None = None,
        start_method: str | None = None,
        worker_init: Callable[[int, int], Any] | None = None,
        last_batch: str | None = None,
        timeout: float | None = DEFAULT_BATCH_TIMEOUT,
        executor: str | None = None,
        ray_address: str | None = None,
        memory_limit: int | None = None,
    ) -> None:
        workers, autotune = AutoWorkers.for_argument("n_processes", n_processes, memory_limit)
        workers = positive_int("n_processes", (os.cpu_count() or 1) if workers is None else workers)
        self.n_processes: int | str = "auto" if autotune else workers
        self.n_prefetch = positive_int("n_prefetch", n_prefetch)
        if shared_mem is not None:
            positive_int("shared_mem", shared_mem)
        if dataset_timeout is not None and not (
                isinstance(dataset_timeout, (int, float)) and dataset_timeout > 0):
            raise ValueError(
                f"dataset_timeout must be a positive number of seconds or None, "
                f"got {dataset_timeout!r}")
        if maxtasksperchild is not None:
            positive_int("maxtasksperchild", maxtasksperchild)
        spec = ExecutorSpec(
            "process", workers=workers,
            # With "auto" the depth follows the workers (two each).
            depth=None if autotune else workers * (self.n_prefetch + 1),
            start_method=start_method,
            timeout=timeout, converter=converter, worker_init=worker_init,
            max_tasks=maxtasksperchild, warn_after=dataset_timeout).placed(executor, ray_address)
        self.converter = converter
        self.start_method = spec.start_method
        self.dataset_timeout = dataset_timeout
        self.timeout = spec.timeout
        self.maxtasksperchild = maxtasksperchild
        self.worker_init = worker_init
        self.shared_mem = shared_mem
        super().__init__(Engine(dataset, batch_size=batch_size, repeat=repeat, shuffle=shuffle,
                                order_sampler=order_sampler, seed=seed, last_batch=last_batch,
                                executor=spec, autotune=autotune))
