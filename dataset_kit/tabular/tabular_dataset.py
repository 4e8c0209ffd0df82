"""TabularDataset: Chainer's column-oriented dataset, fetched a batch of columns at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataset_kit.batch import ExampleBatch
from dataset_kit.dataset import DatasetMixin

Mode = Any  # tuple, dict or None: the type an example is returned as


class TabularDataset(DatasetMixin):
    """A dataset of named columns; every example has one value per column.

    An example is a tuple (``mode`` is :class:`tuple`), a dict keyed by
    column name (``mode`` is :class:`dict`), or, for one column, the bare
    value (``mode`` is None). Subclasses implement ``__len__``, :attr:`keys`,
    :attr:`mode` and :meth:`get_examples`, Chainer's protocol: rows and
    columns are asked for together and come back column by column.

    Beyond Chainer, an iterator fetches a batch with a single
    :meth:`get_examples` call, and when every column comes back as an array
    the batch is an :class:`~dataset_kit.ExampleBatch` whose columns
    :func:`~dataset_kit.concat_examples` uses without restacking.

    Attributes:
        array_rows: whether :meth:`get_examples` accepts rows as an int64
            numpy array as well as a list. Iterators then pass the array,
            which saves a conversion per column. False by default (Chainer's
            protocol passes lists); dataset_kit's own tabular datasets set it.
    """

    array_rows = False

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def keys(self) -> tuple[str, ...]:
        """The names of the columns."""
        raise NotImplementedError

    @property
    def mode(self) -> Mode:
        """How an example is returned: :class:`tuple`, :class:`dict` or None."""
        raise NotImplementedError

    def get_examples(self, indices: Any, key_indices: tuple[int, ...] | None) -> tuple:
        """Return some rows of some columns, column by column.

        Args:
            indices: the rows: a list of ints, a slice, or None for all rows.
            key_indices: the columns, as positions in :attr:`keys`, or None
                for all columns.

        Returns:
            A tuple with one list or array per requested column.
        """
        raise NotImplementedError

    # -- views ---------------------------------------------------------------

    @property
    def slice(self) -> Any:
        """A view of some rows and columns: ``ds.slice[rows]`` or ``ds.slice[rows, keys]``.

        Rows are a slice, a list or array of ints (negative ones count from
        the end) or a boolean mask of the dataset's length; keys are a name,
        a position, or a tuple of them.
        """
        from dataset_kit.tabular._slice import SliceHelper

        return SliceHelper(self)

    def astuple(self) -> TabularDataset:
        """Return a view whose examples are tuples."""
        from dataset_kit.tabular._asmode import AsMode

        return AsMode(self, tuple)

    def asdict(self) -> TabularDataset:
        """Return a view whose examples are dicts."""
        from dataset_kit.tabular._asmode import AsMode

        return AsMode(self, dict)

    as_tuple = astuple
    as_dict = asdict

    def concat(self, *datasets: TabularDataset) -> TabularDataset:
        """Return the rows of this dataset followed by those of ``datasets``.

        Raises:
            ValueError: if the datasets' keys differ.
        """
        from dataset_kit.tabular._concat import Concat

        return Concat(self, *datasets)

    def join(self, *datasets: TabularDataset) -> TabularDataset:
        """Return the columns of this dataset followed by those of ``datasets``.

        Raises:
            ValueError: if the lengths differ or a key appears twice.
        """
        from dataset_kit.tabular._join import Join

        return Join(self, *datasets)

    def transform(self, keys: Any, transform: Callable[..., Any] | None = None) -> TabularDataset:
        """Return a view that applies ``transform`` to each example.

        ``transform`` receives an example's values as positional arguments
        (keyword arguments in dict mode) and returns a tuple, a dict or one
        value, which sets the new dataset's mode.

        Args:
            keys: the new column name(s).
            transform: the function.

        Raises:
            TypeError: if ``transform`` is missing (Gluon's one-argument
                ``transform(fn)`` is not a tabular dataset's) or not callable.
        """
        from dataset_kit.tabular._transform import Transform

        if transform is None:
            raise TypeError(
                f"transform(keys, transform) takes the new column name(s) and then the "
                f"function (Chainer's tabular transform), got only "
                f"{'a function' if callable(keys) else repr(keys)}; this dataset's keys are "
                f"{self.keys}")

        return Transform(self, keys, transform)

    def transform_batch(self, keys: Any, transform_batch: Callable[..., Any]) -> TabularDataset:
        """Return a view that applies ``transform_batch`` to the columns of each batch.

        Args:
            keys: the new column name(s).
            transform_batch: receives the columns and returns new columns of
                the same length (a tuple, a dict or one column).
        """
        from dataset_kit.tabular._transform import TransformBatch

        return TransformBatch(self, keys, transform_batch)

    def with_converter(self, converter: Callable[..., Any]) -> TabularDataset:
        """Return a view whose :meth:`convert` calls ``converter`` on the columns."""
        from dataset_kit.tabular._asmode import WithConverter

        return WithConverter(self, converter)

    # -- data ----------------------------------------------------------------

    def fetch(self) -> Any:
        """Return all the data, column-major, in the dataset's mode."""
        return self._in_mode(self.get_examples(None, None))

    def convert(self, data: Any) -> Any:
        """Turn fetched columns into arrays (what :meth:`with_converter` replaces).

        Args:
            data: what :meth:`fetch` returned.

        Returns:
            The same structure with every column as a numpy array.
        """
        if isinstance(data, tuple):
            return tuple(np.asarray(column) for column in data)
        if isinstance(data, dict):
            return {key: np.asarray(column) for key, column in data.items()}
        return np.asarray(data)

    def get_example(self, i: int) -> Any:
        columns = self.get_examples([i], None)
        return self._in_mode(tuple(column[0] for column in columns))

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        """Fetch a batch with one :meth:`get_examples` call.

        Returns:
            An :class:`~dataset_kit.ExampleBatch` of the columns when all are
            arrays, else a list of examples.
        """
        columns = self.get_examples(indices if self.array_rows else indices.tolist(), None)
        stacked = bool(columns)
        for column in columns:
            if not (isinstance(column, np.ndarray) and column.ndim >= 1):
                stacked = False
                break
        if stacked:
            return ExampleBatch.from_checked(self._in_mode(tuple(columns)), len(indices))
        if not columns:
            return [self._in_mode(()) for _ in range(len(indices))]
        return [self._in_mode(values) for values in zip(*columns)]

    def __iter__(self) -> Any:
        return (self.get_example(i) for i in range(len(self)))

    def _in_mode(self, values: tuple) -> Any:
        mode = self.mode
        if mode is tuple:
            return values
        if mode is dict:
            return dict(zip(self.keys, values))
        return values[0]
