"""CSRMatrix: the sparse batches of LibSVMIter (MXNet gives a ``CSRNDArray``).

With scipy installed a batch is a :class:`scipy.sparse.csr_matrix` (a subclass
that adds MXNet's ``asnumpy()``); without it, a minimal CSR container with the
same attributes (``data``, ``indices``, ``indptr``, ``shape``) and the methods
MXNet users call (``asnumpy()``, ``toarray()``, ``check_format()``).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np


class CSRMatrix:
    """A CSR matrix without scipy: ``data``, ``indices``, ``indptr``, ``shape``.

    Args:
        data: the stored values.
        indices: their column indices, row by row.
        indptr: row ``i`` holds ``data[indptr[i]:indptr[i + 1]]``.
        shape: ``(rows, columns)``.
    """

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                 shape: tuple) -> None:
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = tuple(int(d) for d in shape)
        self.dtype = data.dtype

    @property
    def nnz(self) -> int:
        """How many values are stored."""
        return int(self.indptr[-1])

    def check_format(self, full_check: bool = True) -> None:
        """Check the structure (and with ``full_check`` the index ranges).

        Raises:
            ValueError: naming what is inconsistent.
        """
        rows, columns = self.shape
        if len(self.indptr) != rows + 1 or self.indptr[0] != 0 or \
                len(self.indices) != len(self.data) or self.indptr[-1] != len(self.data):
            raise ValueError(f"inconsistent CSR structure for shape {self.shape}")
        if full_check and (np.any(np.diff(self.indptr) < 0) or (
                len(self.indices) and not 0 <= self.indices.min() <= self.indices.max() < columns)):
            raise ValueError(f"CSR indices out of range for shape {self.shape}")

    def toarray(self) -> np.ndarray:
        """The dense array."""
        out = np.zeros(self.shape, self.data.dtype)
        rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
        out[rows, self.indices] = self.data
        return out

    asnumpy = toarray

    def __repr__(self) -> str:
        return f"<CSRMatrix {self.shape[0]}x{self.shape[1]}, {self.nnz} stored values>"


@functools.lru_cache(maxsize=1)
def _scipy_csr() -> Any:
    try:
        from scipy.sparse import csr_matrix
    except ImportError:
        return None

    class CSRBatch(csr_matrix):
        """A scipy CSR matrix with MXNet's ``asnumpy()``."""

        def asnumpy(self) -> np.ndarray:
            return self.toarray()

    return CSRBatch


def make_csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple) -> Any:
    """A CSR matrix: scipy's (with ``asnumpy()``) when installed, else :class:`CSRMatrix`."""
    cls = _scipy_csr()
    if cls is None:
        return CSRMatrix(data, indices, indptr, shape)
    return cls((data, indices, indptr), shape=shape)
