"""NNabla's DataIterator and its factories, on dataset_kit's engine.

========================  ===================================================
NNabla                    here
========================  ===================================================
``DataIterator``          an :class:`~dataset_kit.engine.Engine` over
                          the source, batches stacked by
                          :func:`~dataset_kit.concat_examples`
``size``                  the source's size: every example is served each
                          epoch
repeating (the default)   the engine's repeating stream (``last_batch=None``):
                          a batch that reaches the end of an epoch runs on into
                          the next epoch's order; ``batch_size > size`` wraps
                          as often as it needs
``stop_exhausted=True``   one epoch of full batches (``repeat=False``,
                          ``last_batch='discard'``), then ``StopIteration``;
                          the epoch never ends, so :attr:`~DataIterator.epoch`
                          stays 0 and no epoch callback runs
``use_thread=True``       a thread builds the next batch ahead
``n_processes=N``         (beyond NNabla) N worker processes build batches;
                          ``"auto"``: as many as help, the same batches
``rng``                   the source's ``RandomState`` seeds the shuffle
========================  ===================================================

Epoch callbacks, exactly as NNabla's code calls them: when :meth:`DataIterator.next`
produces a batch that ends epoch ``e``, it calls every epoch-end callback with
``e``, then every epoch-begin callback with ``e + 1``, and then returns the
batch; :attr:`DataIterator.epoch` reads ``e`` inside the end callbacks and
``e + 1`` inside the begin callbacks. A batch that spans several epochs
(``batch_size > size``) does this once per epoch it ends. No callback runs
at construction or for epoch 0's beginning.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataset_kit._checks import positive_int
from dataset_kit.convert import concat_examples
from dataset_kit.engine import (
    DEFAULT_BATCH_TIMEOUT,
    AutoWorkers,
    Engine,
    ExecutorSpec,
    Ledger,
    states,
)
from dataset_kit.sources.cache_reader import CacheDataSource
from dataset_kit.sources.csv_source import CsvDataSource
from dataset_kit.sources.data_source import (
    ConcatDataSource,
    DataSource,
    DataSourceWithMemoryCache,
    SimpleDataSource,
    SlicedDataSource,
)
from dataset_kit.sources.file_cache import DataSourceWithFileCache

# Before the envelope (versions 1 and 2) this door saved the bare engine state.
states.register_upgrade("nnabla", bare_engine_states=True)

Callback = Callable[[int], Any]


def _seed_of(rng: Any) -> int:
    """A seed drawn from a RandomState (NNabla's rng), so the same rng gives the same orders."""
    return int(rng.randint(0, 2**63 - 1, dtype=np.int64))


class DataIterator:
    """Batches of a data source: tuples of stacked arrays in ``variables`` order.

    Args:
        data_source: a :class:`~dataset_kit.sources.DataSource`.
        batch_size: examples per batch.
        rng: a RandomState for the shuffle's seed; the source's when None.
        use_thread: build the next batch ahead on a thread.
        epoch_begin_callbacks: called with the new epoch's index (see the module).
        epoch_end_callbacks: called with the finished epoch's index.
        stop_exhausted: serve the full batches of one epoch, then raise
            ``StopIteration`` (NNabla's); otherwise repeat forever.
        n_processes: build batches in this many worker processes instead;
            ``"auto"`` (not NNabla's) starts with two and lets the engine's
            controller (:class:`~dataset_kit.engine.AutoWorkers`) add and
            remove workers while it runs, with the same batches.
        memory_limit: for ``n_processes="auto"``: bytes the workers' RSS may
            reach in all (None: half the available memory).
        executor: not NNabla's: None (this machine's workers) or ``"ray"``:
            the ``n_processes`` workers (one with ``use_thread``) are actors of
            a Ray cluster (:doc:`/cluster`), with the same batches.
        ray_address: the Ray cluster's address for ``executor="ray"``.
        start_method: the worker processes' start method (not in NNabla);
            None for the platform's default.
        timeout: seconds a worker thread or process may stay silent while
            its batch is awaited before a
            :class:`~dataset_kit.iterators.BatchTimeoutError` (not in NNabla;
            None: wait).

    Raises:
        TypeError: if ``data_source`` is not a DataSource, or a callback is not callable.
        ValueError: if ``batch_size`` is not positive, or the source is empty
            and ``stop_exhausted`` is False (the iterator could never yield).
    """

    def __init__(self, data_source: DataSource, batch_size: int, rng: Any = None,
                 use_thread: bool = True, epoch_begin_callbacks: Sequence[Callback] = (),
                 epoch_end_callbacks: Sequence[Callback] = (), stop_exhausted: bool = False,
                 n_processes: int | str | None = None, start_method: str | None = None,
                 timeout: float | None = DEFAULT_BATCH_TIMEOUT, executor: str | None = None,
                 ray_address: str | None = None, memory_limit: int | None = None) -> None:
        if not isinstance(data_source, DataSource):
            raise TypeError(f"data_source must be a DataSource, got {type(data_source).__name__}")
        self._batch_size = positive_int("batch_size", batch_size)
        self._data_source = data_source
        self._stop_exhausted = bool(stop_exhausted)
        if data_source.size == 0 and not self._stop_exhausted:
            raise ValueError("data_source has 0 examples: an iterator that repeats (stop_exhausted="
                             "False) needs at least one")
        self._begin: list[Callback] = []
        self._end: list[Callback] = []
        for fn in epoch_begin_callbacks:
            self.register_epoch_begin_callback(fn)
        for fn in epoch_end_callbacks:
            self.register_epoch_end_callback(fn)
        self._epoch_in_callback: int | None = None
        self._use_thread = bool(use_thread)
        workers, autotune = AutoWorkers.for_argument("n_processes", n_processes, memory_limit)
        workers = None if workers is None else positive_int("n_processes", workers)
        self._n_processes: int | str | None = "auto" if autotune else workers
        self._memory_limit = memory_limit
        self._placement = (executor, ray_address)
        if workers is not None:
            # With "auto" the depth follows the workers (the engine's default).
            spec = ExecutorSpec("process", workers=workers, start_method=start_method,
                                timeout=timeout, converter=concat_examples)
        else:
            spec = ExecutorSpec("thread" if self._use_thread else "serial", workers=1,
                                depth=2, timeout=timeout, converter=concat_examples)
        spec = spec.placed(executor, ray_address)
        self._engine = Engine(data_source, batch_size=self._batch_size,
                              repeat=not self._stop_exhausted, shuffle=data_source.shuffle,
                              seed=_seed_of(data_source._rng if rng is None else rng),
                              last_batch="discard" if self._stop_exhausted else None,
                              executor=spec, autotune=autotune)

    # -- NNabla's attributes -------------------------------------------------

    @property
    def epoch(self) -> int:
        """Completed epochs (always 0 with ``stop_exhausted``, whose one epoch never ends)."""
        if self._epoch_in_callback is not None:
            return self._epoch_in_callback
        return 0 if self._stop_exhausted else self._engine.position.epoch

    @property
    def position(self) -> int:
        """Examples of the current epoch already returned."""
        position = self._engine.position
        if self._stop_exhausted and position.epoch > 0:
            return self.size // self._batch_size * self._batch_size
        return position.current_position

    @property
    def size(self) -> int:
        """Examples per epoch: the source's size."""
        return self._data_source.size

    @property
    def variables(self) -> tuple[str, ...]:
        """The names of the arrays :meth:`next` returns, in order."""
        return self._data_source.variables

    @property
    def batch_size(self) -> int:
        """Examples per batch."""
        return self._batch_size

    def register_epoch_begin_callback(self, callback: Callback) -> None:
        """Call ``callback(epoch)`` when an epoch begins (after the previous one's last batch).

        Raises:
            TypeError: if ``callback`` is not callable.
        """
        self._begin.append(_callable("callback", callback))

    def register_epoch_end_callback(self, callback: Callback) -> None:
        """Call ``callback(epoch)`` when an epoch's last batch has been produced.

        Raises:
            TypeError: if ``callback`` is not callable.
        """
        self._end.append(_callable("callback", callback))

    # -- batches -------------------------------------------------------------

    def next(self) -> tuple:
        """Return the next batch: one stacked array per variable.

        Raises:
            StopIteration: with ``stop_exhausted``, once the epoch's full
                batches have been returned.
        """
        before = self._engine.position.epoch
        batch = self._engine.next()
        if not self._stop_exhausted:
            self._call_epoch_callbacks(before, self._engine.position.epoch)
        return tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)

    def _call_epoch_callbacks(self, before: int, after: int) -> None:
        try:
            for finished in range(before, after):
                self._epoch_in_callback = finished
                for fn in self._end:
                    fn(finished)
                self._epoch_in_callback = finished + 1
                for fn in self._begin:
                    fn(finished + 1)
        finally:
            self._epoch_in_callback = None

    def __next__(self) -> tuple:
        return self.next()

    def __iter__(self) -> DataIterator:
        return self

    # -- beyond NNabla: checkpoints -------------------------------------------

    def state_dict(self) -> dict:
        """Return the iterator's state (the engine's, JSON-ready; door ``"nnabla"``)."""
        return states.wrap_state("nnabla", self._engine.state_dict())

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Continue from a state of :meth:`state_dict`; no callback runs.

        Args:
            state: the state.
            strict: refuse a state whose ledger does not fit this iterator's
                data and orders (:class:`~dataset_kit.engine.ResumeMismatchError`,
                naming the cause); False warns instead and loads it.

        Raises:
            ResumeMismatchError: (``strict``) if the state's ledger does not fit.
            ValueError: if the state comes from another door or does not fit
                this iterator.
        """
        engine, _ = states.unwrap_state(state, "nnabla")
        self._engine.load_state_dict(engine, strict=strict)

    def ledger(self) -> Ledger:
        """Return what has been consumed: counts, the chain of the ids, the data's identity.

        Log it beside the model's step; two runs that logged the same ledger
        consumed the same examples in the same order
        (:meth:`dataset_kit.engine.Engine.ledger`).
        """
        return self._engine.ledger()

    # -- slices --------------------------------------------------------------

    def slice(self, rng: Any, num_of_slices: int | None = None, slice_pos: int | None = None,
              slice_start: int | None = None, slice_end: int | None = None,
              cache_dir: str | None = None, use_cache: bool = False,
              drop_last: bool = False) -> DataIterator:
        """Return an iterator over one slice of this one's examples (NNabla's bounds).

        Either ``num_of_slices`` and ``slice_pos`` (slice ``slice_pos`` of
        ``num_of_slices``, over :attr:`size` examples in the source's index
        order) or ``slice_start`` and ``slice_end``. NNabla's bounds: each
        slice has ``ceil(size / num_of_slices)`` examples and the last one is
        moved back to end at ``size`` (so when ``num_of_slices`` does not
        divide ``size``, neighbouring slices share a few examples); with
        ``drop_last``, ``size // num_of_slices`` examples each. When it
        divides, the slices partition the examples exactly.

        ``use_cache`` wraps the slice in a memory cache, and in a file cache
        when ``cache_dir`` is given or a file cache is under this iterator
        (in a sub-folder ``cache_sliced_<start>_<end>`` of its directory, so
        each cache directory stays one complete cache).

        Raises:
            ValueError: for any other combination of the four arguments, or
                bounds outside ``[0, size]`` (naming the arguments and values).
        """
        by_position = num_of_slices is not None and slice_pos is not None
        by_range = slice_start is not None and slice_end is not None
        if by_position == by_range or (by_position and (slice_start, slice_end) != (None, None)) \
                or (by_range and (num_of_slices, slice_pos) != (None, None)):
            raise ValueError(
                "pass num_of_slices with slice_pos, or slice_start with slice_end; got "
                f"num_of_slices={num_of_slices!r}, slice_pos={slice_pos!r}, "
                f"slice_start={slice_start!r}, slice_end={slice_end!r}")
        if by_position:
            num_of_slices = positive_int("num_of_slices", num_of_slices)
            if not (isinstance(slice_pos, int) and 0 <= slice_pos < num_of_slices):
                raise ValueError(f"slice_pos must be in [0, {num_of_slices}), got {slice_pos!r}")
            slice_start, slice_end = slice_bounds(self.size, num_of_slices, slice_pos, drop_last)
        # Given as a pair (checked above) or computed from the slice's position.
        assert slice_start is not None and slice_end is not None
        source: DataSource = SlicedDataSource(self._data_source, self._data_source.shuffle,
                                              slice_start=slice_start, slice_end=slice_end)
        if use_cache:
            cache_dir = cache_dir if cache_dir is not None else _file_cache_dir(self._data_source)
            if cache_dir is not None:
                source = DataSourceWithFileCache(
                    source, os.path.join(cache_dir, f"cache_sliced_{slice_start:08d}_"
                                                    f"{slice_end:08d}"),
                    cache_file_name_prefix=f"cache_sliced_{slice_start:08d}_{slice_end:08d}",
                    shuffle=self._data_source.shuffle, rng=rng)
            source = DataSourceWithMemoryCache(source, shuffle=self._data_source.shuffle, rng=rng)
        executor, ray_address = self._placement
        return DataIterator(source, self._batch_size, rng=rng, use_thread=self._use_thread,
                            n_processes=self._n_processes, executor=executor,
                            ray_address=ray_address, memory_limit=self._memory_limit)

    # -- lifetime ------------------------------------------------------------

    def close(self) -> None:
        """Stop threads and processes, and close the source (removing a temporary cache)."""
        self._engine.close()
        self._data_source.close()

    def __enter__(self) -> DataIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def slice_bounds(size: int, num_of_slices: int, slice_pos: int,
                 drop_last: bool = False) -> tuple[int, int]:
    """Return NNabla's ``(slice_start, slice_end)`` of slice ``slice_pos`` of ``num_of_slices``."""
    if drop_last:
        length = size // num_of_slices
        start = length * slice_pos
        return start, start + length
    length = -(-size // num_of_slices)
    start = (length * slice_pos) % size if size else 0
    end = start + length
    if end > size:
        start, end = start - (end - size), size
    return start, end


def _file_cache_dir(source: Any) -> str | None:
    """The directory of a file cache somewhere under ``source``, if there is one."""
    while source is not None:
        if isinstance(source, DataSourceWithFileCache):
            return source.cache_dir
        source = getattr(source, "_data_source", None)
    return None


def _callable(name: str, fn: Any) -> Any:
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    return fn


# -- the factories (the seed documentation's positional order, NNabla 1.39's defaults) --
#
# NNabla's code puts use_thread after rng; the documentation dataset_kit was written
# from has rng followed by with_memory_cache, so positional calls keep that order and
# use_thread and stop_exhausted (NNabla's later arguments) are keywords.

def data_iterator(data_source: DataSource, batch_size: int, rng: Any = None,
                  with_memory_cache: bool = True, with_file_cache: bool = False,
                  cache_dir: str | None = None, epoch_begin_callbacks: Sequence[Callback] = (),
                  epoch_end_callbacks: Sequence[Callback] = (), *, use_thread: bool = True,
                  stop_exhausted: bool = False, n_processes: int | str | None = None,
                  memory_limit: int | None = None) -> DataIterator:
    """Wrap ``data_source`` in the caches asked for and return its :class:`DataIterator`.

    The file cache (in ``cache_dir``, or a temporary directory removed when
    the iterator is closed) comes first, the memory cache over it. Defaults
    as in NNabla: the memory cache only.

    Args:
        data_source: the source.
        batch_size: examples per batch.
        rng: a RandomState: seeds the shuffle (the source's rng when None)
            and is given to the caches.
        with_memory_cache: keep examples in memory (when they fit in 1 GiB).
        with_file_cache: write the examples to a file cache first.
        cache_dir: the file cache's directory; a temporary one when None.
        epoch_begin_callbacks: see :class:`DataIterator`.
        epoch_end_callbacks: see :class:`DataIterator`.
        use_thread: build the next batch ahead on a thread.
        stop_exhausted: one epoch of full batches, then ``StopIteration``.
        n_processes: (beyond NNabla) build batches in worker processes;
            ``"auto"``: as many as help (see :class:`DataIterator`).
        memory_limit: for ``n_processes="auto"``; see :class:`DataIterator`.

    Returns:
        The iterator; closing it closes the source and removes a temporary cache.
    """
    source = data_source
    if with_file_cache:
        source = DataSourceWithFileCache(source, cache_dir, shuffle=data_source.shuffle, rng=rng)
    if with_memory_cache:
        source = DataSourceWithMemoryCache(source, shuffle=data_source.shuffle, rng=rng)
    return DataIterator(source, batch_size, rng=rng, use_thread=use_thread,
                        epoch_begin_callbacks=epoch_begin_callbacks,
                        epoch_end_callbacks=epoch_end_callbacks, stop_exhausted=stop_exhausted,
                        n_processes=n_processes, memory_limit=memory_limit)


def data_iterator_simple(load_func: Callable[[int], Sequence[Any]], num_examples: int,
                         batch_size: int, shuffle: bool = False, rng: Any = None,
                         with_memory_cache: bool = False, with_file_cache: bool = False,
                         cache_dir: str | None = None,
                         epoch_begin_callbacks: Sequence[Callback] = (),
                         epoch_end_callbacks: Sequence[Callback] = (), *,
                         use_thread: bool = True, stop_exhausted: bool = False,
                         n_processes: int | str | None = None) -> DataIterator:
    """Batches of ``load_func(i)`` for ``i`` in ``range(num_examples)`` (NNabla's).

    No cache by default, as in NNabla's code (its docstring's "Default value
    is False"): ``load_func`` runs for every example of every epoch, so
    random augmentation in it stays random. The other arguments are those of
    :func:`data_iterator`.
    """
    return data_iterator(SimpleDataSource(load_func, num_examples, shuffle=shuffle, rng=rng),
                         batch_size, rng, with_memory_cache, with_file_cache, cache_dir,
                         epoch_begin_callbacks, epoch_end_callbacks, use_thread=use_thread,
                         stop_exhausted=stop_exhausted, n_processes=n_processes)


def data_iterator_csv_dataset(uri: str, batch_size: int, shuffle: bool = False, rng: Any = None,
                              normalize: bool = True, with_memory_cache: bool = True,
                              with_file_cache: bool = True, cache_dir: str | None = None,
                              epoch_begin_callbacks: Sequence[Callback] = (),
                              epoch_end_callbacks: Sequence[Callback] = (), *,
                              use_thread: bool = True, stop_exhausted: bool = False,
                              n_processes: int | str | None = None) -> DataIterator:
    """Batches of a CSV dataset file (see :mod:`dataset_kit.sources.csv_source`).

    Both caches by default, as in NNabla (the only factory where that is so).
    ``normalize`` scales images to [0, 1]; the other arguments are those of
    :func:`data_iterator`.
    """
    source = CsvDataSource(uri, shuffle=shuffle, rng=rng, normalize=normalize)
    return data_iterator(source, batch_size, rng, with_memory_cache, with_file_cache, cache_dir,
                         epoch_begin_callbacks, epoch_end_callbacks, use_thread=use_thread,
                         stop_exhausted=stop_exhausted, n_processes=n_processes)


def data_iterator_cache(uri: str, batch_size: int, shuffle: bool = False, rng: Any = None,
                        normalize: bool = True, with_memory_cache: bool = True,
                        epoch_begin_callbacks: Sequence[Callback] = (),
                        epoch_end_callbacks: Sequence[Callback] = (), *,
                        use_thread: bool = True, stop_exhausted: bool = False,
                        n_processes: int | str | None = None) -> DataIterator:
    """Batches of a cache directory (see :mod:`dataset_kit.formats.nnabla_cache.writer`).

    ``normalize`` scales uint8 (and uint16) parts to float32 in [0, 1];
    without it the stored dtypes come back unchanged. The memory cache is on
    by default, as in NNabla; the other arguments are those of
    :func:`data_iterator`.
    """
    source = CacheDataSource(uri, shuffle=shuffle, rng=rng, normalize=normalize)
    return data_iterator(source, batch_size, rng, with_memory_cache, False, None,
                         epoch_begin_callbacks, epoch_end_callbacks, use_thread=use_thread,
                         stop_exhausted=stop_exhausted, n_processes=n_processes)


def data_iterator_concat_datasets(data_source_list: Sequence[DataSource], batch_size: int,
                                  shuffle: bool = False, rng: Any = None,
                                  with_memory_cache: bool = True, with_file_cache: bool = False,
                                  cache_dir: str | None = None,
                                  epoch_begin_callbacks: Sequence[Callback] = (),
                                  epoch_end_callbacks: Sequence[Callback] = (), *,
                                  use_thread: bool = True, stop_exhausted: bool = False,
                                  n_processes: int | str | None = None) -> DataIterator:
    """Batches of several sources one after another (NNabla's ``ConcatDataSource``).

    The memory cache only, by default, as in NNabla; the other arguments are
    those of :func:`data_iterator`.
    """
    source = ConcatDataSource(data_source_list, shuffle=shuffle, rng=rng)
    return data_iterator(source, batch_size, rng, with_memory_cache, with_file_cache, cache_dir,
                         epoch_begin_callbacks, epoch_end_callbacks, use_thread=use_thread,
                         stop_exhausted=stop_exhausted, n_processes=n_processes)
