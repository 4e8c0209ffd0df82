"""Array arguments as MXNet's iterators take them: numpy, MXNet NDArrays, h5py datasets."""

from __future__ import annotations

from typing import Any

import numpy as np


def is_sparse(value: Any) -> bool:
    """Whether ``value`` is a sparse matrix (MXNet's CSR/row-sparse NDArray or scipy.sparse)."""
    stype = getattr(value, "stype", "default")
    return stype != "default" or (hasattr(value, "tocsr") and hasattr(value, "nnz"))


def to_numpy(value: Any, name: str) -> np.ndarray:
    """``value`` as a numpy array; an MXNet NDArray through its ``asnumpy()``.

    MXNet is not imported: any object with ``asnumpy()`` is taken as an NDArray.

    Args:
        value: an array-like.
        name: how to name the argument in an error.

    Raises:
        NotImplementedError: for sparse input (MXNet's NDArrayIter takes it only
            with ``last_batch_handle='discard'``; dataset_kit not at all).
    """
    if is_sparse(value):
        raise NotImplementedError(
            f"{name} is a sparse array ({type(value).__name__}); dataset_kit's MXNet iterators "
            f"take dense arrays only: pass {name}.asnumpy() or {name}.toarray()")
    if callable(getattr(value, "asnumpy", None)):
        return value.asnumpy()
    return np.asarray(value)
