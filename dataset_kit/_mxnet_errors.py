"""MXNetError: the error MXNet's C++ iterators raise for bad parameters and bad data.

MXNet users catch ``mxnet.base.MXNetError`` (a ``RuntimeError``). dataset_kit
raises :class:`MXNetError`, which is also a ``ValueError`` (dataset_kit's
type for bad input) and, when MXNet is loaded in the process, also MXNet's
own ``MXNetError``, so ``except mx.base.MXNetError`` works unchanged. MXNet
is never imported here: a process that has not imported it cannot be
catching its class.
"""

from __future__ import annotations

import functools
import sys


class MXNetError(RuntimeError, ValueError):
    """A bad parameter or bad data, where MXNet raises its ``MXNetError``."""


@functools.cache
def _with_mxnets(mxnet_error: type) -> type:
    return type("MXNetError", (MXNetError, mxnet_error), {"__module__": __name__})


def mxnet_error(message: str) -> MXNetError:
    """Return an :class:`MXNetError` (also MXNet's own class when MXNet is loaded)."""
    base = sys.modules.get("mxnet.base")
    theirs = getattr(base, "MXNetError", None)
    if isinstance(theirs, type) and issubclass(theirs, Exception) and \
            not issubclass(MXNetError, theirs):
        return _with_mxnets(theirs)(message)  # type: ignore[arg-type]  # a class is hashable
    return MXNetError(message)
