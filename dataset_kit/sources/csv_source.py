"""NNabla's CSV dataset format: a header of variable names, cells of numbers or file paths.

The header names each column ``NAME[__INDEX][:LABEL]``:

* ``x`` — variable ``x`` is this one cell: a number (stored as a 1-element
  vector, as NNabla does) or the path of a file;
* ``x__0``, ``x__1``, ... — variable ``x`` is the vector of these cells;
* ``:LABEL`` is a human-readable name and changes nothing;
* a column whose name starts with ``#`` is a comment and is dropped.

A cell that is not a number is a path, relative to the CSV's folder (or
URL), to an image (``.bmp .jpg .jpeg .png .gif .tif .tiff``: a CHW uint8
array, grayscale ``1 x H x W``; with ``normalize`` scaled by 1/255 as
float64, as NNabla's loader does), a ``.csv`` of numbers (a float64 array,
one row per line) or a ``.npy`` array.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

import numpy as np

from dataset_kit import _uri
from dataset_kit._files import files_fingerprint
from dataset_kit.formats.csv import read_csv_rows
from dataset_kit.formats.nnabla_csv import parse_name, refuse_duplicate_columns
from dataset_kit.image.decode import read_image
from dataset_kit.sources.data_source import DataSource

IMAGE_EXTENSIONS = (".bmp", ".jpg", ".jpeg", ".png", ".gif", ".tif", ".tiff")


class CsvDataSource(DataSource):
    """The examples of a CSV dataset file (NNabla's ``CsvDataSource``).

    Args:
        filename: a local path, a ``file://`` URL or an http(s) URL (fetched
            through :func:`~dataset_kit.cached_download`, as are the files
            its cells name).
        shuffle: whether iterators shuffle each epoch.
        rng: see :class:`~dataset_kit.sources.DataSource`.
        normalize: scale images to [0, 1].

    Raises:
        ValueError: if the file has no header, is not UTF-8, has a cell over
            the csv module's field size limit, or a row has another number
            of cells than the header (naming the file and line).
        FileNotFoundError: if ``filename`` does not exist.
    """

    def __init__(self, filename: str, shuffle: bool = False, rng: Any = None,
                 normalize: bool = False) -> None:
        super().__init__(shuffle=shuffle, rng=rng)
        self._filename = os.fspath(filename)
        self._normalize = bool(normalize)
        local = _uri.local_path(self._filename)
        rows = read_csv_rows(local, self._filename)
        self._stamp = None if _uri.is_remote(self._filename) else files_fingerprint(local)
        if not rows:
            raise ValueError(f"{self._filename}: the CSV dataset has no header row")
        header, rows = rows[0], rows[1:]
        kept = [k for k, name in enumerate(header) if not name.startswith("#")]
        self._header = [header[k] for k in kept]
        self._rows: list[list[str]] = []
        for line, row in enumerate(rows, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{self._filename} line {line}: {len(row)} cells, but the "
                                 f"header has {len(header)}")
            self._rows.append([row[k] for k in kept])
        self._lines = [line for line, row in enumerate(rows, start=2) if row]
        self._columns = [parse_name(name) for name in self._header]
        refuse_duplicate_columns(header, self._filename)
        self._variables = tuple(OrderedDict.fromkeys(v for v, _ in self._columns))
        self._size = len(self._rows)
        self.reset()

    def fingerprint(self) -> str | None:
        """The CSV file's size and mtime when it was read (None for an http(s) file)."""
        return self._stamp

    def reset(self) -> None:
        """Go back to position 0; with ``shuffle``, draw a new order (NNabla's)."""
        if self._shuffle:
            self._order = self._draw_order()
        super().reset()

    def _get_data(self, position: int) -> tuple:
        values: OrderedDict[str, Any] = OrderedDict()
        for (variable, indexed), cell, name in zip(self._columns, self._rows[position],
                                                   self._header):
            where = f"{self._filename} line {self._lines[position]}, column {name!r}"
            if indexed:
                values.setdefault(variable, []).append(self._value(cell, where, vector=False))
            else:
                values[variable] = self._value(cell, where, vector=True)
        # As NNabla's: numbers stay Python lists (the file cache stores them as
        # float32, a batch stacks them as float64); files load as arrays.
        return tuple(values.values())

    def _value(self, cell: str, where: str, vector: bool) -> Any:
        try:
            number = float(cell)
        except ValueError:
            return self._load(cell, where)
        return [number] if vector else number

    def _load(self, cell: str, where: str) -> np.ndarray:
        ext = os.path.splitext(cell)[1].lower()
        if ext not in IMAGE_EXTENSIONS + (".csv", ".npy"):
            raise ValueError(f"{where}: {cell!r} is neither a number nor a file of a known kind "
                             f"(images {', '.join(IMAGE_EXTENSIONS)}, .csv, .npy)")
        try:
            path = _uri.local_path(_uri.join(self._filename, cell))
            if ext == ".csv":
                return np.array([[float(v) for v in row] for row in read_csv_rows(path, path)
                                 if row])
            if ext == ".npy":
                return np.load(path, allow_pickle=False)
            image = read_image(path, np.uint8, where)
        except (OSError, ValueError) as error:
            raise type(error)(f"{where}: cannot load {cell!r}: {error}") from error
        if self._normalize:
            return image * (1.0 / 255.0)
        return image
