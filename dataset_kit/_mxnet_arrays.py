"""Arrays as ported MXNet code expects them from MXNet's front doors.

MXNet code calls ``asnumpy()``, ``asscalar()``, ``context``,
``as_in_context()``, ``copyto()`` and ``wait_to_read()`` on what its iterators,
``mx.image`` and Gluon's DataLoader return. The MXNet doors (:mod:`dataset_kit.io`,
:mod:`dataset_kit.image`, :mod:`dataset_kit.loader`) therefore give:

* ``mx.nd.NDArray`` (``mx.np.ndarray`` in MXNet's numpy mode) when the program
  uses MXNet (:func:`mxnet_in_use`), so that ``Module.fit`` and ``net(data)``
  work unchanged;
* otherwise an :class:`MXArray`: a numpy array (a zero-copy view of the batch)
  that adds those methods, so ``.asnumpy()`` keeps its meaning without MXNet.

dtypes MXNet has no NDArray for (``int16``, strings, ...) and 0-d arrays stay
:class:`MXArray` views.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

# dtypes mx.nd.array takes (MXNet 1.9.1's _DTYPE_NP_TO_MX).
_MXNET_DTYPES = frozenset(np.dtype(t) for t in (
    np.float16, np.float32, np.float64, np.uint8, np.int8, np.int32, np.int64, np.bool_))
# dtypes mx.nd.from_numpy takes over without a copy (DLPack's numeric types).
_ZERO_COPY_DTYPES = _MXNET_DTYPES - {np.dtype(np.bool_)}


def mxnet_in_use() -> Any:
    """MXNet, if this program has imported it (every Gluon program has), else None.

    Gluon's datasets and MXNet's doors give NDArrays; dataset_kit's give them
    when MXNet is in use, and never import MXNet itself (MXNet 1.9.1 does not
    import under numpy >= 1.24 without a shim, and costs seconds to import).
    """
    mx = sys.modules.get("mxnet")
    return mx if mx is not None and hasattr(mx, "nd") else None


class CPUContext:
    """MXNet's ``mx.cpu(0)`` for an :class:`MXArray` (host memory, the only place it lives)."""

    device_type = "cpu"
    device_id = 0

    def __repr__(self) -> str:
        return "cpu(0)"

    def __eq__(self, other: object) -> bool:
        return (getattr(other, "device_type", None) == "cpu"
                and getattr(other, "device_id", None) == 0)

    def __hash__(self) -> int:
        return hash(("cpu", 0))


CPU = CPUContext()


def _check_cpu(ctx: Any, method: str) -> None:
    if getattr(ctx, "device_type", None) != "cpu":
        raise ValueError(f"{method}: an MXArray lives in host memory (MXNet is not in use), "
                         f"so ctx must be a CPU context, got {ctx!r}")


class MXArray(np.ndarray):
    """A numpy array with MXNet ``NDArray``'s conveniences, for programs without MXNet.

    What dataset_kit's MXNet doors return when MXNet is not in use: a view of
    the batch (no copy) that is a numpy array in every respect, plus
    ``asnumpy()``, ``asscalar()``, ``context`` / ``ctx``, ``as_in_context()``,
    ``copyto()``, ``wait_to_read()``, ``wait_to_write()`` and ``stype``.
    """

    stype = "default"

    def __array_wrap__(self, array: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        # A reduction gives a numpy scalar, as on a plain array (not a 0-d MXArray).
        if array.ndim == 0:
            return array[()]
        return super().__array_wrap__(array, *args, **kwargs)

    def asnumpy(self) -> np.ndarray:
        """A plain numpy copy (MXNet's ``asnumpy`` copies too)."""
        return np.array(self.view(np.ndarray))

    def asscalar(self) -> Any:
        """The one value of a one-element array, as a numpy scalar.

        Raises:
            ValueError: if the array has more than one element (MXNet's message).
        """
        if self.size != 1:
            raise ValueError("The current array is not a scalar")
        return self.view(np.ndarray).reshape(-1)[0]

    @property
    def context(self) -> CPUContext:
        """``cpu(0)``: the array is in host memory."""
        return CPU

    ctx = context

    def as_in_context(self, context: Any) -> MXArray:
        """The array itself (it is on the CPU already, as MXNet returns self there).

        Raises:
            ValueError: if ``context`` is not a CPU context.
        """
        _check_cpu(context, "as_in_context")
        return self

    def copyto(self, other: Any) -> Any:
        """Copy into the array ``other`` and return it, or to a context: a new copy.

        Raises:
            ValueError: if ``other`` is a context other than the CPU, or an
                array of another shape.
        """
        if isinstance(other, np.ndarray):
            if other.shape != self.shape:
                raise ValueError(f"copyto: the target's shape {other.shape} differs from the "
                                 f"array's {self.shape}")
            other[...] = self
            return other
        if hasattr(other, "device_type"):
            _check_cpu(other, "copyto")
            return self.copy()
        if callable(getattr(other, "__setitem__", None)) and hasattr(other, "shape"):
            other[:] = self.view(np.ndarray)  # an MXNet NDArray, say
            return other
        raise TypeError(f"copyto: other must be an array or a context, got "
                        f"{type(other).__name__}")

    def wait_to_read(self) -> None:
        """Nothing to wait for: the values are computed already."""

    def wait_to_write(self) -> None:
        """Nothing to wait for: the values are computed already."""


def ndarray_from(mx: Any, array: np.ndarray) -> Any:
    """``array`` as an MXNet array of its dtype (``mx.np`` in numpy mode, else ``mx.nd``).

    An array that owns its memory (a batch just built) is handed over without
    a copy (``mx.nd.from_numpy(zero_copy=True)``, which makes the numpy array
    read-only): ten times faster than ``mx.nd.array``'s copy for small
    batches. A view of other memory (a user's array, a shared-memory block)
    is copied, so nothing outside the batch becomes read-only.
    """
    if mx.util.is_np_array():
        return mx.np.array(array, dtype=array.dtype)
    flags = array.flags
    if flags.owndata and flags.c_contiguous and flags.writeable and array.size \
            and array.dtype in _ZERO_COPY_DTYPES:
        return mx.nd.from_numpy(array, zero_copy=True)
    return mx.nd.array(array, dtype=array.dtype)


def mxnet_output(value: Any) -> Any:
    """One array as MXNet's doors return it (see the module); anything else unchanged.

    A CSR matrix (scipy's, or :class:`~dataset_kit.io.CSRMatrix`) becomes a
    ``CSRNDArray`` when MXNet is in use, and stays as it is otherwise.
    """
    mx = mxnet_in_use()
    if not isinstance(value, np.ndarray):
        if mx is not None and hasattr(value, "indptr") and not isinstance(value, mx.nd.NDArray):
            return mx.nd.sparse.csr_matrix((value.data, value.indices, value.indptr),
                                           shape=value.shape, dtype=value.dtype)
        return value
    if mx is None or value.ndim == 0 or value.dtype not in _MXNET_DTYPES:
        return value.view(MXArray)
    return ndarray_from(mx, value)


def mxnet_outputs(value: Any, pin_device_id: int | None = None) -> Any:
    """:func:`mxnet_output` over the arrays of a list, tuple or dict (a batch's structure).

    Args:
        value: the batch.
        pin_device_id: with MXNet in use, move the NDArrays to
            ``mx.cpu_pinned(pin_device_id)`` (Gluon's ``pin_memory``); None
            leaves them where they are.
    """
    if isinstance(value, list):
        return [mxnet_outputs(v, pin_device_id) for v in value]
    if isinstance(value, tuple):
        converted = [mxnet_outputs(v, pin_device_id) for v in value]
        return type(value)(*converted) if hasattr(value, "_fields") else tuple(converted)
    if isinstance(value, dict):
        return {k: mxnet_outputs(v, pin_device_id) for k, v in value.items()}
    out = mxnet_output(value)
    mx = mxnet_in_use() if pin_device_id is not None else None
    if mx is not None and isinstance(out, mx.nd.NDArray):
        return out.as_in_context(mx.cpu_pinned(pin_device_id))
    return out
