"""NNabla's data sources as datasets: DataSource and the sources built from others.

An NNabla ``DataSource`` answers ``_get_data(position)`` with a tuple (one
value per name in ``variables``) and keeps its own order and position. In
dataset_kit the iterator owns the order, the position and the epochs (so it
can resume exactly): a data source is a :class:`~dataset_kit.DatasetMixin`
whose example ``i`` is ``tuple(_get_data(i))``, and its ``shuffle`` flag
asks the iterator to shuffle.

Code that reads a source directly gets NNabla's behaviour: :meth:`DataSource.next`
walks the source's *own* order (``order``), which a shuffling source draws
from its ``rng`` when NNabla's class does (:class:`SimpleDataSource` at
construction and in ``apply_order()``; :class:`ConcatDataSource` and
:class:`~dataset_kit.sources.CsvDataSource` in ``reset()``, which their
constructors call). Iterators never read or change that order, nor ``position``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int
from dataset_kit.dataset import DatasetMixin

# NNabla's default for DataSourceWithMemoryCache (data_source_buffer_max_size).
MEMORY_CACHE_MAX_BYTES = 1 << 30


class DataSource(DatasetMixin):
    """The base of data sources (NNabla's ``DataSource``).

    Subclasses set ``_size`` and ``_variables`` and implement
    ``_get_data(position)``, returning one value per variable for the example
    at ``position`` (``0 <= position < size``).

    Args:
        shuffle: whether iterators over this source shuffle each epoch.
        rng: a :class:`numpy.random.RandomState` (or None); iterators draw
            their seed from it, as NNabla's iterators draw their orders.
    """

    def __init__(self, shuffle: bool = False, rng: Any = None) -> None:
        self._shuffle = bool(shuffle)
        self._rng = np.random.RandomState(313) if rng is None else rng  # NNabla's default
        self._size = 0
        self._variables: tuple[str, ...] | None = None
        self._position = 0
        # The order next() walks (NNabla's name); None: the index order.
        self._order: np.ndarray | None = None

    def _get_data(self, position: int) -> Sequence[Any]:
        raise NotImplementedError

    # -- NNabla's attributes -------------------------------------------------

    @property
    def size(self) -> int:
        """How many examples the source has."""
        return self._size

    @property
    def variables(self) -> tuple[str, ...]:
        """The names of an example's parts, in order."""
        return tuple(self._variables or ())

    def fingerprint(self) -> Any:
        """The identity of the source's files, for a checkpoint's ledger; None (no files).

        File-backed sources (:class:`~dataset_kit.sources.CsvDataSource`,
        :class:`~dataset_kit.sources.CacheDataSource`) return their files'
        stamps, taken when opened; a source over others returns theirs. A
        :class:`~dataset_kit.sources.DataIterator` resumed over files that
        changed since its state was saved is then refused (cause ``"files"``).
        """
        return None

    @property
    def position(self) -> int:
        """The position of the next :meth:`next` call (NNabla's sequential reading)."""
        return self._position

    @property
    def shuffle(self) -> bool:
        """Whether iterators over this source shuffle each epoch."""
        return self._shuffle

    @shuffle.setter
    def shuffle(self, value: bool) -> None:
        self._shuffle = bool(value)

    @property
    def order(self) -> np.ndarray:
        """The order :meth:`next` walks (``0 .. size-1`` unless the source drew its own)."""
        return np.arange(self._size) if self._order is None else self._order

    def _draw_order(self) -> np.ndarray | None:
        """A new order for :meth:`next`: a permutation from ``rng`` with ``shuffle``."""
        return self._rng.permutation(self._size) if self._shuffle else None

    def next(self) -> tuple:
        """Return the example at :attr:`position` of :attr:`order` and move past it.

        Raises:
            IndexError: if the whole order has been read (call :meth:`reset`).
        """
        position = self._position
        if self._order is not None:
            if not 0 <= position < len(self._order):
                raise IndexError(f"position {position} is past the end of the source's order "
                                 f"of {len(self._order)} examples; call reset() to read it again")
            position = int(self._order[position])
        data = tuple(self._get_data(position))
        self._position += 1
        return data

    def __next__(self) -> tuple:
        return self.next()

    def reset(self) -> None:
        """Go back to position 0 (sources that shuffle themselves also draw a new order)."""
        self._position = 0

    def apply_order(self) -> None:
        """NNabla's hook for "an epoch and its batch are done": nothing for this class."""

    def close(self) -> None:
        """Release what the source holds (files, temporary directories). Idempotent."""

    def __enter__(self) -> DataSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the dataset view ----------------------------------------------------

    def __len__(self) -> int:
        return self._size

    def get_example(self, i: int) -> tuple:
        return tuple(self._get_data(i))


class SimpleDataSource(DataSource):
    """Examples from ``load_func(index)`` (NNabla's ``SimpleDataSource``).

    Its own order (what :meth:`~DataSource.next` walks) is drawn at
    construction and by :meth:`apply_order`; :meth:`reset` keeps it, as in
    NNabla.

    Args:
        load_func: returns the tuple of arrays of example ``index``; every
            example must have the same number of parts. Called once at
            construction (index 0) to name the variables ``x0``, ``x1``, ...
        num_examples: how many examples there are.
        shuffle: whether iterators shuffle each epoch.
        rng: see :class:`DataSource`.

    Raises:
        TypeError: if ``load_func`` is not callable or ``num_examples`` not an integer.
        ValueError: if ``num_examples`` is negative.
    """

    def __init__(self, load_func: Callable[[int], Sequence[Any]], num_examples: int,
                 shuffle: bool = False, rng: Any = None) -> None:
        if not callable(load_func):
            raise TypeError(f"load_func must be callable, got {type(load_func).__name__}")
        super().__init__(shuffle=shuffle, rng=rng)
        self._load_func = load_func
        self._size = non_negative_int("num_examples", num_examples)
        self._variables = tuple(f"x{k}" for k in range(len(load_func(0)))) \
            if self._size else ()
        self._order = self._draw_order()

    def _get_data(self, position: int) -> Sequence[Any]:
        return self._load_func(position)

    def apply_order(self) -> None:
        """Draw the next order (a new permutation with ``shuffle``), as NNabla's does."""
        self._order = self._draw_order()


class SlicedDataSource(DataSource):
    """Examples ``slice_start .. slice_end - 1`` of another source (in its index order).

    Raises:
        ValueError: if the bounds are not ``0 <= slice_start <= slice_end <= size``.
    """

    def __init__(self, data_source: DataSource, shuffle: bool = False, rng: Any = None,
                 slice_start: int = 0, slice_end: int | None = None) -> None:
        super().__init__(shuffle=shuffle, rng=rng)
        end = data_source.size if slice_end is None else slice_end
        if not (isinstance(slice_start, int) and isinstance(end, int)
                and 0 <= slice_start <= end <= data_source.size):
            raise ValueError(
                f"slice_start and slice_end must satisfy 0 <= slice_start <= slice_end <= "
                f"{data_source.size} (the source's size), got slice_start={slice_start!r} and "
                f"slice_end={slice_end!r}")
        self._data_source = data_source
        self._variables = data_source.variables
        self._slice_start = slice_start
        self._size = end - slice_start

    def _get_data(self, position: int) -> Sequence[Any]:
        return self._data_source._get_data(self._slice_start + position)

    def fingerprint(self) -> Any:
        """The sliced source's fingerprint and the slice, or None if it has none."""
        inner = self._data_source.fingerprint()
        return None if inner is None else {"slice": [self._slice_start,
                                                     self._slice_start + self._size],
                                           "of": inner}

    def close(self) -> None:
        self._data_source.close()
        super().close()


class ConcatDataSource(DataSource):
    """The examples of several sources, one after another (NNabla's ``ConcatDataSource``).

    Raises:
        ValueError: if the list is empty or the sources' variables differ.
    """

    def __init__(self, data_source_list: Sequence[DataSource], shuffle: bool = True,
                 rng: Any = None) -> None:
        super().__init__(shuffle=shuffle, rng=rng)
        sources = list(data_source_list)
        if not sources:
            raise ValueError("data_source_list must hold at least one data source, got none")
        for k, source in enumerate(sources[1:], start=1):
            if source.variables != sources[0].variables:
                raise ValueError(
                    f"data sources must have the same variables: source 0 has "
                    f"{sources[0].variables}, source {k} has {source.variables}")
        self._data_sources = sources
        self._ends = np.cumsum([s.size for s in sources])
        self._size = int(self._ends[-1])
        self._variables = sources[0].variables
        self.reset()

    def _get_data(self, position: int) -> Sequence[Any]:
        k = int(np.searchsorted(self._ends, position, side="right"))
        start = int(self._ends[k - 1]) if k else 0
        return self._data_sources[k]._get_data(position - start)

    def fingerprint(self) -> Any:
        """The sources' fingerprints, in order, or None if none has one."""
        found = [source.fingerprint() for source in self._data_sources]
        return None if all(f is None for f in found) else found

    def reset(self) -> None:
        """Go back to position 0; with ``shuffle``, draw a new order (NNabla's)."""
        if self._shuffle:
            self._order = self._draw_order()
        super().reset()

    def close(self) -> None:
        for source in self._data_sources:
            source.close()
        super().close()


class DataSourceWithMemoryCache(DataSource):
    """Another source's examples, kept in memory after their first load.

    As in NNabla's code, examples are kept as the source returned them
    (arrays keep their dtype), and only when the whole source fits in 1 GiB
    (measured on example 0, counting a list as float32, as NNabla does);
    otherwise examples pass through uncached. Each process keeps its own
    cache (worker processes fill theirs as they go).

    Args:
        data_source: the source to cache.
        shuffle: whether iterators shuffle each epoch.
        rng: see :class:`DataSource`.
    """

    def __init__(self, data_source: DataSource, shuffle: bool = False, rng: Any = None) -> None:
        super().__init__(shuffle=shuffle, rng=rng)
        self._data_source = data_source
        self._size = data_source.size
        self._variables = data_source.variables
        self._cache: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self._on_memory = False
        if self._size:
            first = tuple(data_source._get_data(0))
            self._on_memory = _nbytes(first) * self._size < MEMORY_CACHE_MAX_BYTES
            if self._on_memory:
                self._cache[0] = first

    def fingerprint(self) -> Any:
        """The cached source's fingerprint."""
        return self._data_source.fingerprint()

    def _get_data(self, position: int) -> Sequence[Any]:
        if not self._on_memory:
            return self._data_source._get_data(position)
        data = self._cache.get(position)
        if data is None:
            data = tuple(self._data_source._get_data(position))
            with self._lock:
                self._cache.setdefault(position, data)
        return data

    def __getstate__(self) -> dict:
        # A worker process starts with an empty cache of its own.
        state = self.__dict__.copy()
        state.update(_cache={}, _lock=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._cache.clear()
        self._data_source.close()
        super().close()


def _nbytes(example: Sequence[Any]) -> int:
    """An example's size as NNabla's memory cache measures it (a list as float32)."""
    total = 0
    for part in example:
        if isinstance(part, list):
            part = np.array(part, dtype=np.float32)
        total += int(np.asarray(part).nbytes)
    return total
