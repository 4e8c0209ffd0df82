"""Keyword arguments MXNet's C++ iterators accept and dataset_kit has no use for.

MXNet's C++ iterators parse their keywords with dmlc's ``InitAllowUnknown``:
an unknown keyword (a typo such as ``and_mirror``, or another iterator's
parameter) is silently ignored. dataset_kit accepts them too, so MXNet code
runs unchanged, but warns once per call naming them, because a silent typo
is a bug the user would want to hear about.
"""

from __future__ import annotations

import warnings


def ignore_unknown(iterator: str, unknown: dict) -> None:
    """Warn that ``unknown`` keywords were ignored, as MXNet ignores them silently."""
    if unknown:
        warnings.warn(f"{iterator} ignores the unknown arguments {sorted(unknown)} (as MXNet's "
                      f"C++ iterators do); check them for typos", UserWarning, stacklevel=3)
