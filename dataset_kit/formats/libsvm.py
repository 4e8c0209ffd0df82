"""LibSVM text files: ``label idx:value ...`` per line, read into CSR arrays.

Indices are taken as written (zero-based, MXNet's rule); ``qid:`` fields and
``#`` comments are skipped; a label written as ``label:weight`` keeps its label.
"""

from __future__ import annotations

import os

import numpy as np


class LibSVMFormatError(ValueError):
    """A line that is not a LibSVM row, or an index outside the row's width."""


def read_libsvm(path: str | os.PathLike, columns: int) -> tuple[np.ndarray, tuple]:
    """Read a LibSVM file: the leading numbers, and the rows as CSR arrays.

    Args:
        path: the file.
        columns: the rows' width; every index must be in ``[0, columns)``.

    Returns:
        ``(labels, (data, indices, indptr))``: float32 labels and values, int64
        indices and row pointers.

    Raises:
        FileNotFoundError: if the file does not exist.
        LibSVMFormatError: for a malformed line or an index outside ``[0, columns)``,
            naming the file and line.
    """
    path = os.fspath(path)
    labels, data, indices, indptr = [], [], [], [0]
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            try:
                labels.append(float(fields[0].split(":", 1)[0]))
                for field in fields[1:]:
                    if field.startswith("qid:"):
                        continue
                    key, value = field.split(":", 1)
                    index = int(key)
                    if not 0 <= index < columns:
                        raise ValueError(f"index {index} is outside [0, {columns}) (data_shape)")
                    indices.append(index)
                    data.append(float(value))
            except ValueError as error:
                raise LibSVMFormatError(
                    f"{path}, line {number}: not a LibSVM row: {error}") from None
            indptr.append(len(indices))
    return (np.asarray(labels, np.float32),
            (np.asarray(data, np.float32), np.asarray(indices, np.int64),
             np.asarray(indptr, np.int64)))
