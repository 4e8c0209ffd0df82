"""Gluon's DataLoader: a constructor over the engine, one epoch per ``iter()``.

=====================================  ===============================================
Gluon                                  engine
=====================================  ===============================================
``shuffle=True``                       the seeded shuffle (``seed``)
``sampler=``                           the order sampler (ours, or any iterable)
``batch_sampler=BatchSampler(...)``    its sampler, batch size and last-batch policy
``last_batch='keep'|'discard'|...``    the same last-batch policy
``batchify_fn``                        the converter, run where batches are built
``num_workers=0`` / ``> 0``            serial / process executor
``thread_pool=True``                   thread executor
``prefetch``                           the executor's depth (``prefetch + 1``)
``timeout``                            the executor's batch timeout (raises)
``start_method`` (not in Gluon)        the worker processes' start method
``auto_reload=True``                   ``Engine.prefetch()`` now and across epoch ends
``auto_reload=False`` (the default)    ``hold_between_epochs``: built when ``iter()`` asks
``try_nopython``                       accepted, no effect (no C++ pipeline here)
batches of numpy data                  ``mx.nd.NDArray`` when MXNet is in use, else
                                       :class:`~dataset_kit.io.MXArray` views (on delivery)
``pin_memory`` (MXNet in use)          NDArrays in ``mx.cpu_pinned(pin_device_id)``
``device`` (not in Gluon)              :func:`~dataset_kit.to_device` on delivery
one ``iter()``                         batches up to the one that ends an epoch
an epoch without a full batch          ``skip_empty_epoch()``: nothing
=====================================  ===============================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int
from dataset_kit._mxnet_arrays import mxnet_outputs
from dataset_kit._phases import phase
from dataset_kit.convert import to_device
from dataset_kit.engine import AutoWorkers, Engine, ExecutorSpec, Ledger, states
from dataset_kit.loader.batchify import default_batchify_fn
from dataset_kit.loader.samplers import (
    LAST_BATCH,
    BatchListOrder,
    BatchSampler,
    as_order_sampler,
)

# Before the envelope (versions 1 and 2) this door saved the bare engine state.
states.register_upgrade("gluon", bare_engine_states=True)


class DataLoader:
    """Loads a dataset in batches, one epoch per ``iter(loader)`` (Gluon's ``DataLoader``).

    Beyond Gluon: ``state_dict()`` / ``load_state_dict()`` resume mid-epoch
    with the same batches, ``seed`` makes shuffling reproducible, the batches
    are the same for any ``num_workers`` and for threads or processes, and a
    worker that dies is an error naming it. The next ``iter()`` continues the
    epoch in progress (after a ``break`` or a load), so that resuming works;
    Gluon would start a fresh epoch.

    Args:
        dataset: any sized, indexable dataset.
        batch_size: examples per batch (required unless ``batch_sampler``).
        shuffle: shuffle every epoch (not with ``sampler``).
        sampler: the indices of each epoch: a sampler of
            :mod:`dataset_kit.loader` or any iterable of indices.
        last_batch: ``'keep'`` (default), ``'discard'`` or ``'rollover'``.
        batch_sampler: a :class:`~dataset_kit.loader.BatchSampler`, or any
            iterable of index lists (a bucketing sampler, say: its batches are
            used as they are, and a checkpoint carries the epoch's batches).
            Excludes ``batch_size``, ``shuffle``, ``sampler`` and ``last_batch``.
        batchify_fn: turns a list of examples into a batch, in the workers;
            :func:`~dataset_kit.loader.default_batchify_fn` when None.
        num_workers: worker processes (threads with ``thread_pool``); 0 builds
            batches in the calling thread. Negative counts as 0, as in Gluon.
            ``"auto"``: start with two and let the engine's controller
            (:class:`~dataset_kit.engine.AutoWorkers`) add and remove workers
            while it runs, without changing a batch. Not in Gluon.
        pin_memory: with MXNet in use, batches in ``mx.cpu_pinned(pin_device_id)``
            (Gluon's); with a CUDA ``device``, pin host memory before the copy.
        pin_device_id: the pinned memory's device id (Gluon's).
        prefetch: batches requested ahead; ``2 * num_workers`` when None;
            ``"auto"``: two per worker, as the number of workers changes.
        thread_pool: use threads instead of processes.
        timeout: seconds a worker may stay silent while its batch is awaited
            before a :class:`~dataset_kit.iterators.BatchTimeoutError`
            (workers only; Gluon's default, 120).
        seed: seeds the shuffle and :func:`~dataset_kit.example_rng`.
        device: None for Gluon's batches (``mx.nd.NDArray`` when MXNet is in
            use, else :class:`~dataset_kit.io.MXArray`: numpy arrays with
            NDArray's ``asnumpy()``, ``context``...); ``'@numpy'`` for plain
            numpy arrays; or a PyTorch device for tensors.
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"`` for the
            worker processes; None for the platform's default (fork where
            available). Not in Gluon.
        memory_limit: for ``num_workers="auto"``: bytes the workers' RSS may
            reach in all (None: half the memory available now). Not in Gluon.
        auto_reload: with workers, start building batches at construction
            and the next epoch's as soon as an epoch ends; False (Gluon 1.9.1's
            default in its code, though its docstring says True) builds
            nothing until ``iter()`` asks for an epoch.
        try_nopython: None, True or False, accepted for Gluon (2.0's
            signature) and without effect: Gluon tries to compile the
            pipeline into its C++ loader with it; dataset_kit has no such
            loader and always runs the Python dataset and batchify function
            (Gluon's fallback), so True is not an error here either.
        executor: not Gluon's: None (this machine's workers) or ``"ray"``: the
            ``num_workers`` workers are actors of a Ray cluster (:doc:`/cluster`),
            with the same batches.
        ray_address: the Ray cluster's address for ``executor="ray"``.

    With ``last_batch='discard'`` or ``'rollover'`` an epoch may hold no full
    batch (``batch_size`` larger than the dataset): ``iter()`` then yields
    nothing, and ``'rollover'`` keeps the epoch's examples for a later batch,
    as Gluon's ``BatchSampler`` does.

    Raises:
        ValueError: for Gluon's argument conflicts or a bad ``last_batch``.
        TypeError: for arguments of the wrong type.
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, shuffle: bool = False,
                 sampler: Any = None, last_batch: str | None = None, batch_sampler: Any = None,
                 batchify_fn: Callable[[Any], Any] | None = None, num_workers: int | str = 0,
                 pin_memory: bool = False, pin_device_id: int = 0,
                 prefetch: int | str | None = None,
                 thread_pool: bool = False, timeout: float = 120, seed: int | None = None,
                 device: Any = None, auto_reload: bool = False,
                 start_method: str | None = None, try_nopython: bool | None = None,
                 memory_limit: int | None = None, executor: str | None = None,
                 ray_address: str | None = None) -> None:
        if batch_sampler is None:
            if batch_size is None:
                raise ValueError("batch_size must be specified unless batch_sampler is specified")
            if sampler is not None and shuffle:
                raise ValueError("shuffle must not be specified if sampler is specified")
            last_batch = "keep" if last_batch is None else last_batch
        elif batch_size is not None or shuffle or sampler is not None or last_batch is not None:
            raise ValueError("batch_size, shuffle, sampler and last_batch must not be specified "
                             "if batch_sampler is specified")
        elif isinstance(batch_sampler, BatchSampler):
            sampler, batch_size = batch_sampler.sampler, batch_sampler.batch_size
            last_batch = batch_sampler.last_batch
        elif hasattr(batch_sampler, "__iter__"):
            sampler, last_batch = BatchListOrder(batch_sampler), "keep"  # its own batches
        else:
            raise TypeError(f"batch_sampler must be an iterable of index lists, got "
                            f"{type(batch_sampler).__name__}")
        if last_batch not in LAST_BATCH:
            raise ValueError(f"last_batch must be one of {list(LAST_BATCH)}, got {last_batch!r}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if batchify_fn is not None and not callable(batchify_fn):
            raise TypeError(f"batchify_fn must be callable, got {type(batchify_fn).__name__}")
        workers, autotune = AutoWorkers.for_argument("num_workers", num_workers, memory_limit)
        auto = autotune is not None
        workers = max(0, int(workers))
        # With "auto" (or prefetch="auto") the depth follows the workers: two each.
        depth = None if auto or prefetch == "auto" else 1 + (
            2 * workers if prefetch is None else non_negative_int("prefetch", prefetch))
        batchify = default_batchify_fn if batchify_fn is None else batchify_fn
        spec = ExecutorSpec(
            "serial" if workers == 0 else "thread" if thread_pool else "process",
            workers=workers, depth=depth, start_method=start_method, timeout=timeout,
            converter=batchify).placed(executor, ray_address)
        order = None if sampler is None else \
            sampler if isinstance(sampler, BatchListOrder) else as_order_sampler(sampler)
        self._own_batches = order if isinstance(order, BatchListOrder) else None
        if try_nopython is not None and not isinstance(try_nopython, (bool, np.bool_)):
            raise TypeError(f"try_nopython must be None, True or False, got {try_nopython!r}")
        if not isinstance(auto_reload, (bool, np.bool_)):
            raise TypeError(f"auto_reload must be True or False, got {auto_reload!r}")
        self._engine = Engine(dataset, batch_size=batch_size, shuffle=None if order else shuffle,
                              order_sampler=order, seed=seed, last_batch=LAST_BATCH[last_batch],
                              executor=spec, hold_between_epochs=not auto_reload,
                              autotune=autotune)
        self._device, self._pin_memory = device, bool(pin_memory)
        self._pin_device_id = non_negative_int("pin_device_id", pin_device_id)
        to_device(device, None)  # a bad or unavailable device fails here, not mid-epoch
        self.auto_reload = bool(auto_reload)
        if self.auto_reload:
            self.refresh()

    def refresh(self) -> None:
        """Start building the next batches now (Gluon's ``refresh``; workers only)."""
        self._engine.prefetch()

    def __iter__(self) -> Iterator[Any]:
        engine = self._engine
        for batch in engine.epoch():  # an epoch without a (full) batch yields nothing, as in Gluon
            if self._device is None:  # Gluon's arrays: converted here, in the main process
                with phase("converter"):  # a profile shows it apart from the wait
                    batch = mxnet_outputs(batch, self._pin_device_id if self._pin_memory
                                          else None)
                yield batch
            else:
                yield to_device(self._device, batch, self._pin_memory)

    def __len__(self) -> int:
        """Batches in the current epoch (rolled-over examples included)."""
        if self._own_batches is not None:
            return len(self._own_batches.batch_sampler)
        return self._engine.batches_in_epoch()

    def state_dict(self) -> dict:
        """Return the loader's position: a small JSON-ready dict (door ``"gluon"``)."""
        return states.wrap_state("gluon", self._engine.state_dict())

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Resume from :meth:`state_dict`: the next batches are the ones the saved loader had next.

        Args:
            state: the state.
            strict: refuse a state whose ledger does not fit this iterator's
                data and orders (:class:`~dataset_kit.engine.ResumeMismatchError`,
                naming the cause); False warns instead and loads it.

        Raises:
            ResumeMismatchError: (``strict``) if the state's ledger does not fit.
            ValueError: if the state comes from another door, or was saved for
                another dataset, batch size, last-batch policy or sampler.
        """
        engine, _ = states.unwrap_state(state, "gluon")
        self._engine.load_state_dict(engine, strict=strict)

    def ledger(self) -> Ledger:
        """Return what has been consumed: counts, the chain of the ids, the data's identity.

        Log it beside the model's step; two runs that logged the same ledger
        consumed the same examples in the same order
        (:meth:`dataset_kit.engine.Engine.ledger`).
        """
        return self._engine.ledger()

    def close(self) -> None:
        """Stop the workers and free their shared memory. Idempotent."""
        self._engine.close()

    def __enter__(self) -> DataLoader:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
