"""PyTorch's DataLoader: a constructor over the engine, one epoch per ``iter()``.

=======================================  =============================================
PyTorch                                  engine
=======================================  =============================================
``sampler`` / ``batch_sampler`` /        asked once per epoch, on the same generators
``shuffle`` / ``batch_size`` /           (:class:`~._orders.SamplerOrder`): the engine's
``drop_last`` / ``generator``            order and batch ends
``collate_fn=None``                      ``default_collate`` as numpy in the workers
                                         (shared memory), tensors by ``from_numpy``
``collate_fn``                           the converter, run where batches are built
``num_workers=0`` / ``> 0``              serial / process executor
``prefetch_factor``                      the executor's depth (``* num_workers``)
``timeout`` (0: none)                    the executor's batch timeout (None)
``multiprocessing_context``              the executor's start method
``worker_init_fn``, seeds                the executor's ``worker_init``
                                         (:class:`~._worker.WorkerStart`)
``state_dict()``                         the engine's state + generator states (door
                                         ``"torch"``, field ``torch``)
one ``iter()``                           batches up to the one that ends an epoch
an ``IterableDataset``                   :class:`~._stream.Streams`: one stream per
                                         worker, batch ``k`` from stream ``k % n``
                                         (one engine epoch per ``iter()``)
``state_dict()`` of an iterable          each stream's position (torchdata's
                                         ``Stateful`` states, or batches to replay)
=======================================  =============================================
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import multiprocessing
import multiprocessing.context
import signal
import tempfile
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar, cast

import torch
from torch.utils.data import (
    BatchSampler,
    IterableDataset,
    IterDataPipe,
    RandomSampler,
    SequentialSampler,
)
from torch.utils.data import DataLoader as _TorchDataLoader
from torch.utils.data import default_collate as _torch_default_collate
from torch.utils.data._utils.pin_memory import pin_memory as _pin
from torch.utils.data.dataloader import _InfiniteConstantSampler

from dataset_kit._phases import phase
from dataset_kit.engine import (
    AutoWorkers,
    BatchTimeoutError,
    Engine,
    ExecutorSpec,
    Ledger,
    WorkerDiedError,
    WorkerError,
    states,
)
from dataset_kit.torch import _collate
from dataset_kit.torch._fetch import Collate, Failed, Fetch
from dataset_kit.torch._orders import SamplerOrder
from dataset_kit.torch._stream import Resume, StreamCollate, Streams
from dataset_kit.torch._worker import WorkerStart


def _old_state(state: dict) -> tuple[Any, dict] | None:
    """This door's state before the envelope (version 2): ``{"engine", "torch"}``."""
    if set(state) == {"engine", "torch"}:
        return state["engine"], {"torch": state["torch"]}
    return None


states.register_upgrade("torch", _old_state)
_SEED_MASK = (1 << 63) - 1


def _start_method(context: Any, num_workers: int) -> str | None:
    """PyTorch's checks of ``multiprocessing_context``, with its messages; the start method."""
    if context is None:
        return None
    if num_workers <= 0:
        raise ValueError("multiprocessing_context can only be used with multi-process loading "
                         f"(num_workers > 0), but got num_workers={num_workers}")
    if isinstance(context, str):
        methods = multiprocessing.get_all_start_methods()
        if context not in methods:
            raise ValueError(f"multiprocessing_context option should specify a valid start "
                             f"method in {methods!r}, but got multiprocessing_context="
                             f"{context!r}")
        return context
    if not isinstance(context, multiprocessing.context.BaseContext):
        raise TypeError("multiprocessing_context option should be a valid context object or a "
                        f"string specifying the start method, but got multiprocessing_context="
                        f"{context}")
    return context.get_start_method()


_T_co = TypeVar("_T_co", covariant=True)
_FIXED = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class DataLoader(Generic[_T_co]):
    """Loads a dataset in batches, one epoch per ``iter()`` (PyTorch's ``DataLoader``).

    The arguments, their defaults and the errors for conflicting ones are
    PyTorch 2's; the batches (order, collated types, dtypes and nesting) are
    those ``torch.utils.data.DataLoader`` yields for the same samplers and
    generator seed. Beyond PyTorch: ``state_dict()`` / ``load_state_dict()``
    (torchdata's names) resume mid-epoch with the exact batches, for any
    ``num_workers``; augmentation drawn from :func:`~dataset_kit.example_rng`
    is the same for any ``num_workers`` and after a resume; a worker that dies
    is an error naming it. See "Porting from PyTorch" for every deviation.

    Args:
        dataset: any object with ``__getitem__`` and ``__len__`` (and
            optionally ``__getitems__``), or an ``IterableDataset`` (not a
            DataPipe): each worker iterates its own copy, batches come
            round robin, as in PyTorch.
        batch_size: examples per batch; None disables auto-batching.
        shuffle: reshuffle every epoch (a ``RandomSampler``).
        sampler: a torch ``Sampler`` or any iterable of indices with ``len``.
        batch_sampler: a torch ``BatchSampler`` or any iterable of index lists.
        num_workers: worker processes; 0 loads in the calling thread;
            ``"auto"`` starts with two and lets the engine's controller
            (:class:`~dataset_kit.engine.AutoWorkers`) add and remove workers
            while it runs, without changing a batch (not in PyTorch).
        collate_fn: merges a list of examples into a batch (in the workers).
        pin_memory: pin each batch once, when an accelerator is available.
        drop_last: drop the last incomplete batch.
        timeout: seconds a worker may stay silent while its batch is awaited;
            0 waits as long as the workers live.
        worker_init_fn: ``worker_init_fn(worker_id)`` run once in each worker.
        multiprocessing_context: a start method name or a multiprocessing context.
        generator: the ``torch.Generator`` the sampler and base seed draw from.
        prefetch_factor: batches in flight per worker (2 with workers).
        persistent_workers: accepted; workers always persist across epochs.
        pin_memory_device: deprecated in PyTorch, accepted.
        in_order: accepted; batches always arrive in order.
        executor: not PyTorch's: None (worker processes) or ``"ray"``: the
            ``num_workers`` workers are actors of a Ray cluster (:doc:`/cluster`),
            with the same batches (map-style datasets only).
        ray_address: not PyTorch's: the Ray cluster's address for
            ``executor="ray"`` (None: ``RAY_ADDRESS``, else a local Ray).
        memory_limit: for ``num_workers="auto"``: bytes the workers' RSS may
            reach in all (None: half the memory available now). Not in PyTorch.

    Raises:
        ValueError: for PyTorch's argument conflicts, with its messages.
        TypeError: for a DataPipe, or an object that is neither map-style nor
            an ``IterableDataset``.
    """

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int | str = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], Any] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True,
                 executor: str | None = None, ray_address: str | None = None,
                 memory_limit: int | None = None) -> None:
        iterable = isinstance(dataset, IterableDataset)
        if iterable and executor == "ray":
            raise ValueError("executor='ray' builds planned batches of a map-style dataset; an "
                             "IterableDataset is read by each worker's own copy in sequence, "
                             "which Ray actors cannot resume: use local workers for it")
        if iterable:
            _check_iterable_arguments(dataset, shuffle, sampler, batch_sampler)
            if isinstance(dataset, IterDataPipe):
                raise TypeError(
                    f"dataset_kit.torch.DataLoader takes map-style datasets and "
                    f"IterableDatasets, not DataPipes (deprecated in PyTorch, whose shuffle and "
                    f"sharding graph settings it does not apply); got {type(dataset).__name__}. "
                    f"Use torch.utils.data.DataLoader for it")
        elif not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise TypeError(f"dataset must be map-style (have __getitem__ and __len__) or an "
                            f"IterableDataset, got {type(dataset).__name__}")
        if iterable and num_workers == "auto":
            raise ValueError("num_workers='auto' changes the number of workers while the loader "
                             "runs, and an IterableDataset splits itself by worker: give it a "
                             "fixed num_workers")
        asked_workers = num_workers
        # The controller starts with two workers (see AutoWorkers.start).
        workers, autotune = AutoWorkers.for_argument("num_workers", num_workers, memory_limit)
        num_workers = cast(int, workers)
        auto_workers = autotune is not None
        # PyTorch's checks, in its order and with its words.
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor "
                "to None.")
        elif num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        start_method = _start_method(multiprocessing_context, num_workers)
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            sampler = _InfiniteConstantSampler() if iterable else \
                RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        if collate_fn is _torch_default_collate or collate_fn is _collate.default_collate:
            collate_fn = None  # the zero-copy path computes the same batches
        # PyTorch's attributes, for code that reads them.
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.prefetch_factor = asked_workers, prefetch_factor
        self._workers = num_workers  # the count started with ("auto" starts with two)
        self.pin_memory, self.pin_memory_device = pin_memory, pin_memory_device
        self.timeout, self.worker_init_fn = timeout, worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers, self.in_order = persistent_workers, in_order
        auto = batch_sampler is not None
        self.collate_fn = collate_fn if collate_fn is not None else \
            _collate.default_collate if auto else _collate.default_convert
        self._default_collate = auto and collate_fn is None
        self._index_sampler = batch_sampler if auto else sampler

        self._iterable = iterable
        self._seed = (generator.initial_seed() if generator is not None
                      else torch.initial_seed()) & _SEED_MASK
        depth, worker_start = None, None
        if num_workers > 0:
            assert prefetch_factor is not None  # defaulted to 2 above with workers
            # With "auto" the depth follows the workers (two each).
            depth = None if auto_workers else max(1, prefetch_factor * num_workers)
            worker_start = WorkerStart(dataset, worker_init_fn, 0)
        self._executor = ExecutorSpec(
            "serial" if num_workers == 0 else "process", workers=num_workers,
            depth=depth, start_method=start_method,
            timeout=None if timeout == 0 else timeout,
            converter=Collate(collate_fn, auto), worker_init=worker_start,
        ).placed(executor, ray_address)
        if iterable:
            self._engine = self._stream_engine(None)
            self._IterableDataset_len_called: int | None = None  # PyTorch's name
        else:
            self._order = SamplerOrder(self._index_sampler, auto, generator,
                                       base_seed_every_epoch=not persistent_workers)
            fetched = Fetch(dataset)
            self._engine = Engine(fetched, batch_size=None, order_sampler=self._order,
                                  seed=self._seed, last_batch="keep", executor=self._executor,
                                  identity=dataset, autotune=autotune)
            # The first epoch is drawn: a sampler yielding lists makes each one a
            # key (workers start with the first batch, so they get this as well).
            fetched.key_type = self._order.key_type
        self._worker_start = worker_start  # its base seed is set by iter()
        self._iterations = 0  # iter() calls: an older iterator stops when a newer starts
        self._resuming = False
        self._streams_state: dict | None = None  # an iterable's position, as of the last batch
        self._initialized = True
        # PyTorch's warning for more workers than CPUs (it reads num_workers only).
        # Not a torch DataLoader subclass, which torch's annotation of self asks for.
        if not auto_workers:
            _TorchDataLoader.check_worker_number_rationality(self)  # type: ignore[arg-type]

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr in _FIXED and getattr(self, "_initialized", False):
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(attr, value)

    @property
    def _auto_collation(self) -> bool:
        # PyTorch's name, read by code that checks whether batches are collated.
        return self.batch_sampler is not None

    # -- epochs ----------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        if self._iterable:
            return self._iter_streams()
        engine = self._engine
        p = engine.position
        at_boundary = p.is_new_epoch or p.previous_epoch_detail is None
        if not at_boundary and not self._resuming:
            engine.start_next_epoch()  # PyTorch: every iter() is a fresh epoch
        if self._resuming:
            self._resuming = False  # the saved epoch's order came with the state
        else:
            self._draw_now(engine.position.epoch)
        self._iterations += 1
        return _EpochIterator(self, self._iterations, self._pin_device())

    def _stream_engine(self, resume: Resume | None) -> Engine:
        """The engine over an iterable's streams (one index per batch, identity order)."""
        streams = Streams(self.dataset, max(1, self._workers), self.batch_size,
                          self.drop_last)
        streams.resume = resume
        executor = dataclasses.replace(self._executor,
                                       converter=StreamCollate(self._executor.converter))
        return Engine(streams, batch_size=1, shuffle=False, seed=self._seed, last_batch="keep",
                      executor=executor)

    def _iter_streams(self) -> Iterator[Any]:
        engine = self._engine
        if self._resuming:
            self._resuming = False  # the saved streams' positions came with the state
        elif self._iterations:
            engine.start_next_epoch()  # PyTorch: every iter() starts every stream afresh
            self._streams_state = None
        if self._worker_start is not None and engine.position.epoch == 0 and \
                self._iterations == 0:
            # PyTorch's base seed, drawn when the first iterator starts its workers.
            self._worker_start.base_seed = int(torch.empty((), dtype=torch.int64).random_(
                generator=self.generator).item())
        self._iterations += 1
        return _StreamIterator(self, self._iterations, self._pin_device())

    def _draw_now(self, epoch: int) -> None:
        """Draw the epoch's order at iter(), when PyTorch draws it, unless drawn ahead safely."""
        order = self._order
        if epoch >= order.drawn:
            with order.drawing_in_the_open():
                self._engine.current_order()
        elif order.needs_redraw(epoch):
            self._engine.pin_current_order(order.redraw(epoch))
        if self._worker_start is not None:  # workers start with the first batch
            self._worker_start.base_seed = order.base_seeds[0]

    def _pin_device(self) -> str | None:
        if not self.pin_memory:
            return None
        if not torch.accelerator.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)
            return None
        device = torch.accelerator.current_accelerator()
        assert device is not None  # is_available(): there is a current accelerator
        return device.type

    def __len__(self) -> int:
        """Batches per epoch (examples, without auto-batching), as PyTorch counts them.

        For an ``IterableDataset``, ``len(dataset)`` divided by the batch size,
        as PyTorch estimates it (and warns when more batches come).
        """
        if self._iterable:
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last \
                    else -(-length // self.batch_size)
            return length
        return len(self._index_sampler)

    # -- checkpoints (torchdata's names) ---------------------------------------

    def state_dict(self) -> dict:
        """Return the loader's position: the engine's checkpoint plus generator states.

        JSON-ready; it counts only batches already yielded. Door ``"torch"``;
        its field ``torch`` holds the generator and sampler states. For an
        ``IterableDataset`` the field ``streams`` holds each worker's stream
        position instead: its dataset's (and iterator's) ``state_dict()`` when
        they follow torchdata's ``Stateful`` protocol, else how many batches
        it gave (replayed on resume, as ``StatefulDataLoader`` does).
        """
        if self._iterable:
            return states.wrap_state("torch", None, streams=self._streams_position())
        return states.wrap_state("torch", self._engine.state_dict(),
                                 torch=self._order.state_after(self._engine.position.epoch))

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Resume from :meth:`state_dict`: the next ``iter()`` continues the saved epoch.

        The generators (the loader's and its samplers') and a sampler with
        ``load_state_dict`` are restored to where the saved loader had them.

        Args:
            state: the state.
            strict: refuse a state whose ledger does not fit this iterator's
                data and orders (:class:`~dataset_kit.engine.ResumeMismatchError`,
                naming the cause); False warns instead and loads it.

        Raises:
            ResumeMismatchError: (``strict``) if the state's ledger does not fit.
            ValueError: if the state is not a loader state (or another door's),
                or was saved for another dataset length, batching or sampler;
                the loader is then unchanged.
        """
        if self._iterable:
            self._load_streams(state)
            return
        engine, fields = states.unwrap_state(state, "torch", {"torch": states.anything()})
        decoded = self._order.check_state(fields["torch"])
        self._engine.load_state_dict(engine, strict=strict)

        self._order.load(self._engine.position.epoch, fields["torch"], decoded)
        self._resuming = True

    def _streams_position(self) -> dict:
        n = max(1, self._workers)
        saved = self._streams_state
        if saved is None:  # nothing yielded in this iteration: every stream at its start
            saved = {"first": 0, "positions": [None] * n}
        return {"workers": n, "dataset": type(self.dataset).__qualname__, **saved}

    def _load_streams(self, state: dict) -> None:
        _, fields = states.unwrap_state(state, "torch", {"streams": states.anything()},
                                        with_engine=False)
        saved = fields["streams"]
        if not isinstance(saved, dict) or not {"workers", "first", "positions"} <= set(saved):
            raise ValueError(f"state['door']['streams'] must be an IterableDataset loader's "
                             f"streams (workers, first, positions), got {saved!r:.200}")
        n = max(1, self._workers)
        if saved["workers"] != n:
            raise ValueError(
                f"this state holds the positions of {saved['workers']} worker streams of "
                f"{saved.get('dataset')}, and this loader has num_workers={self.num_workers} "
                f"({n} streams). An IterableDataset splits itself by worker "
                f"(get_worker_info()), so each worker's position belongs to that worker's "
                f"share and cannot be handed to another count of workers; resume with "
                f"num_workers={saved['workers'] if saved['workers'] > 1 else 0}, or use a "
                f"map-style dataset (any num_workers resumes it exactly)")
        first, listed = saved["first"], saved["positions"]
        if not isinstance(listed, list) or len(listed) != n or not (
                isinstance(first, int) and 0 <= first < n):
            raise ValueError(f"state['door']['streams'] must hold one position per worker "
                             f"stream ({n}) and the next stream in range(0, {n}), got "
                             f"{len(listed) if isinstance(listed, list) else listed!r} positions "
                             f"and first={first!r}")
        positions = [p if p is not None else {"batches": 0, "ended": False, "dataset": None,
                                                "iterator": None}
                     for p in saved["positions"]]
        self._engine.close()
        self._engine = self._stream_engine(Resume(0, int(saved["first"]), positions))
        self._streams_state = {"first": int(saved["first"]), "positions": saved["positions"]}
        self._resuming = True

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

    def __enter__(self) -> DataLoader[_T_co]:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class _EpochIterator:
    """One epoch of a :class:`DataLoader`: what ``iter(loader)`` returns.

    An iterator object rather than a generator: after a batch whose dataset or
    collate code raised, the next ``next()`` goes on to the following batch,
    as PyTorch's iterator does. It stops when a newer ``iter()`` of its loader
    has started (the loader has one engine, and the newer epoch owns it).
    """

    def __init__(self, loader: DataLoader, iteration: int, pin: str | None) -> None:
        self._loader = loader
        self._iteration = iteration
        self._pin = pin
        self._batches = loader._engine.epoch()

    def __iter__(self) -> _EpochIterator:
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self) -> Any:
        loader = self._loader
        if loader._iterations != self._iteration:
            raise StopIteration
        batch = _translated(self._batches.__next__, loader.timeout)
        if isinstance(batch, Failed):
            batch.reraise()  # this batch is consumed: the next call goes on
        return _deliver(batch, loader._default_collate, self._pin)


class _StreamIterator:
    """One epoch of a :class:`DataLoader` over an ``IterableDataset``.

    It takes the engine's answers in order (PyTorch's round robin over the
    workers), skips those of streams that have ended, and stops once every
    stream has; it keeps each stream's position as of the last batch yielded.
    """

    def __init__(self, loader: DataLoader, iteration: int, pin: str | None) -> None:
        self._loader = loader
        self._iteration = iteration
        self._pin = pin
        self._n = max(1, loader._workers)
        saved = loader._streams_state
        self._positions: list = list(saved["positions"]) if saved else [None] * self._n
        self._ended = {s for s, p in enumerate(self._positions) if p and p["ended"]}
        self._yielded = 0

    def __iter__(self) -> _StreamIterator:
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self) -> Any:
        loader = self._loader
        while True:
            if loader._iterations != self._iteration or len(self._ended) == self._n:
                raise StopIteration
            s, position, batch = _translated(loader._engine.next, loader.timeout)
            self._positions[s] = position
            loader._streams_state = {"first": (s + 1) % self._n,
                                     "positions": list(self._positions)}
            if batch is None:
                self._ended.add(s)
                continue
            if isinstance(batch, Failed):
                batch.reraise()
            self._yielded += 1
            self._warn_if_longer_than_len()
            return _deliver(batch, loader._default_collate, self._pin)

    def _warn_if_longer_than_len(self) -> None:
        """PyTorch's warning when more batches come than ``len(loader)`` said."""
        loader = self._loader
        said = loader._IterableDataset_len_called
        if said is None or self._yielded <= said:
            return
        words = (f"Length of IterableDataset {loader.dataset} was reported to be {said}"
                 f"(when accessing len(dataloader)), but {self._yielded} samples have been "
                 f"fetched. ")
        if loader._workers > 0:
            words += ("For multiprocessing data-loading, this could be caused by not properly "
                      "configuring the IterableDataset replica at each worker. Please see "
                      "https://pytorch.org/docs/stable/data.html#torch.utils.data."
                      "IterableDataset for examples.")
        warnings.warn(words, stacklevel=3)


def _translated(take: Callable[[], Any], timeout: float) -> Any:
    """``take()``, with the engine's worker errors in PyTorch's words and types."""
    try:
        return take()
    except BatchTimeoutError as error:
        raise BatchTimeoutError(f"DataLoader timed out after {timeout} seconds: "
                                f"{error}") from None
    except WorkerDiedError as error:
        raise _died(error) from error
    except WorkerError as error:
        _refuse_if_out_of_descriptors(error)
        original = error.__cause__
        if not isinstance(original, Exception):
            raise
        # An error outside the dataset and collate code (worker_init_fn): as
        # PyTorch, its own type; the WorkerError naming the worker is its cause.
        error.__cause__ = None
        raise original from error


def _refuse_if_out_of_descriptors(error: WorkerError) -> None:
    """PyTorch's check after a failed receive: at the open-files limit, say so in its words.

    A tensor answered by a worker reaches the main process as a file
    descriptor (torch's sharing strategy ``file_descriptor``); with every
    batch kept alive the process runs out of descriptors, and the answer then
    fails to unpickle with an error that names neither the cause nor the cure.
    As PyTorch does, open a few files: if that fails for lack of descriptors,
    raise PyTorch's ``RuntimeError`` instead (its cause: the engine's error).

    Raises:
        RuntimeError: if the process is at its open-files limit.
    """
    try:
        with contextlib.ExitStack() as probes:
            for _ in range(10):  # PyTorch's margin: one file is not a sufficient test
                probes.enter_context(tempfile.TemporaryFile())
    except OSError as probe_error:
        if probe_error.errno != errno.EMFILE:
            return
        raise RuntimeError(
            "Too many open files. Communication with the workers is no longer possible. "
            "Please increase the limit using `ulimit -n` in the shell or change the sharing "
            "strategy by calling `torch.multiprocessing.set_sharing_strategy('file_system')` "
            "at the beginning of your code") from error


def _died(error: WorkerDiedError) -> WorkerDiedError:
    """The engine's dead-worker error in PyTorch's words (a ``RuntimeError``, as PyTorch's)."""
    pid, code = error.pid, error.exitcode
    if code is not None and code < 0:
        try:
            name = signal.strsignal(-code) or f"signal {-code}"
        except ValueError:
            name = f"signal {-code}"
        words = f"DataLoader worker (pid {pid}) is killed by signal: {name}. "
    else:
        words = f"DataLoader worker (pid(s) {pid}) exited unexpectedly"
    return WorkerDiedError(f"{words} ({error})", pid=pid, exitcode=code)


def _check_iterable_arguments(dataset: Any, shuffle: Any, sampler: Any,
                              batch_sampler: Any) -> None:
    """PyTorch's checks for an ``IterableDataset``, with its messages, before ours refuses it."""
    if not isinstance(dataset, IterDataPipe) and shuffle not in {False, None}:
        raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle option, "
                         f"but got shuffle={shuffle}")
    if sampler is not None:
        raise ValueError("DataLoader with IterableDataset: expected unspecified sampler option, "
                         f"but got sampler={sampler}")
    if batch_sampler is not None:
        raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler "
                         f"option, but got batch_sampler={batch_sampler}")


def _deliver(batch: Any, to_tensors: bool, pin: str | None) -> Any:
    """The main process's last steps: numpy to tensors, then pinning; each a profile phase."""
    if to_tensors:
        with phase("converter"):
            batch = _collate.numpy_to_tensors(batch)
    if pin is None:
        return batch
    with phase("device copy"):
        return _pin(batch, pin)
