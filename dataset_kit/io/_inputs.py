"""Array arguments as MXNet's NDArrayIter takes them: numpy, NDArrays, h5py, CSR matrices."""

from __future__ import annotations

from typing import Any

import numpy as np


def is_sparse(value: Any) -> bool:
    """Whether ``value`` is a sparse matrix (MXNet's CSR/row-sparse NDArray or scipy.sparse)."""
    stype = getattr(value, "stype", "default")
    return stype != "default" or (hasattr(value, "tocsr") and hasattr(value, "nnz"))


def as_column(value: Any, name: str) -> Any:
    """One input as MXNet 1.9.1's ``NDArrayIter`` holds it (its ``_init_data``).

    MXNet makes every input an NDArray with ``mx.nd.array``, whose default
    dtype is float32: numpy arrays and lists become float32; MXNet NDArrays
    (taken through ``asnumpy()``; MXNet is not imported) and h5py datasets keep
    their dtype. A CSR matrix (scipy's, or a ``CSRNDArray`` through
    ``asscipy()``) keeps its dtype and stays sparse: a scipy CSR matrix.

    Args:
        value: an array-like.
        name: how to name the argument in an error.

    Raises:
        NotImplementedError: for a sparse array that is not CSR (row-sparse),
            which MXNet's NDArrayIter does not take either.
    """
    if is_sparse(value):
        matrix = value.asscipy() if callable(getattr(value, "asscipy", None)) else value
        if getattr(value, "stype", "csr") != "csr" or not callable(getattr(matrix, "tocsr", None)):
            raise NotImplementedError(
                f"{name} is a sparse array of storage type {getattr(value, 'stype', '?')!r}; "
                f"NDArrayIter takes CSR matrices and dense arrays only")
        return matrix.tocsr()
    if callable(getattr(value, "asnumpy", None)):
        return value.asnumpy()
    if type(value).__module__.startswith("h5py"):
        return np.asarray(value)
    return np.asarray(value, dtype=np.float32)
