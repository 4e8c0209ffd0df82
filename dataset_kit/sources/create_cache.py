"""NNabla's ``create_cache``: write a CSV dataset's file cache ahead of training.

========================================  ===========================================
NNabla                                    here
========================================  ===========================================
``CreateCache(csv, rng, shuffle, n)``     a :class:`~dataset_kit.sources.CsvDataSource`
                                          whose own order (a permutation from
                                          ``rng`` with ``shuffle``) is the cache's
``create(dir, normalize, prefix)``        the chunks in that order, written by the
                                          file cache's writer (atomic chunks, index
                                          last, under the directory's lock), plus
                                          ``original.csv`` (the CSV) and
                                          ``order.csv`` (``position,row`` per example)
========================================  ===========================================
"""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
from collections.abc import Sequence
from typing import Any

from dataset_kit import _uri
from dataset_kit._checks import non_negative_int
from dataset_kit._files import atomic_write, lock_for
from dataset_kit.formats.nnabla_cache.reader import INDEX_FILE
from dataset_kit.sources.csv_source import CsvDataSource
from dataset_kit.sources.data_source import DataSource
from dataset_kit.sources.file_cache import write_cache

ORIGINAL_FILE, ORDER_FILE = "original.csv", "order.csv"


class CreateCache(CsvDataSource):
    """A CSV dataset that writes itself to a cache directory (NNabla's ``CreateCache``).

    Args:
        input_csv_filename: the CSV dataset (a path, ``file://`` or http(s) URL).
        rng: a RandomState for the order; ``RandomState(313)`` when None.
        shuffle: write the examples in a random order (recorded in ``order.csv``).
        num_of_threads: accepted for NNabla's signature; the cache writer
            loads with its own pool of threads.

    Raises:
        TypeError: if ``num_of_threads`` is not an integer or None.
        ValueError: as :class:`~dataset_kit.sources.CsvDataSource`, or if
            ``num_of_threads`` is negative.
    """

    def __init__(self, input_csv_filename: str, rng: Any = None, shuffle: bool = False,
                 num_of_threads: int | None = None) -> None:
        if num_of_threads is not None:
            non_negative_int("num_of_threads", num_of_threads)
        super().__init__(input_csv_filename, shuffle=shuffle, rng=rng)

    def create(self, output_cache_dirname: str, normalize: bool = True,
               cache_file_name_prefix: str = "cache") -> None:
        """Write the cache to ``output_cache_dirname``, replacing a cache there.

        Args:
            output_cache_dirname: the directory (made if missing).
            normalize: scale images to [0, 1] before they are stored.
            cache_file_name_prefix: the beginning of the chunk file names.
        """
        directory = os.path.abspath(os.fspath(output_cache_dirname))
        os.makedirs(directory, exist_ok=True)
        self._normalize = bool(normalize)
        with lock_for(directory):
            # Unpublish the old cache first: the writer would keep one of the same size.
            for name in (INDEX_FILE, ORIGINAL_FILE, ORDER_FILE):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(directory, name))
        order = [int(i) for i in self.order]
        with atomic_write(os.path.join(directory, ORIGINAL_FILE)) as temp:
            shutil.copyfile(_uri.local_path(self._filename), temp)
        with atomic_write(os.path.join(directory, ORDER_FILE)) as temp:
            with open(temp, "w", newline="") as f:
                csv.writer(f, lineterminator="\n").writerows(enumerate(order))
        write_cache(directory, _Reordered(self, order), cache_file_name_prefix)


class _Reordered(DataSource):
    """Another source's examples in a given order: example ``i`` is its ``order[i]``."""

    def __init__(self, data_source: DataSource, order: Sequence[int]) -> None:
        super().__init__()
        self._data_source = data_source
        self._order_of_rows = order
        self._size = len(order)
        self._variables = data_source.variables

    def _get_data(self, position: int) -> Sequence[Any]:
        return self._data_source._get_data(self._order_of_rows[position])

