"""Argument checks shared by public functions: one clear sentence per failure."""

from __future__ import annotations

import operator
from typing import Any


def _integer(name: str, value: Any, allowed: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be {allowed}, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be {allowed}, got {value!r}") from None


def positive_int(name: str, value: Any) -> int:
    """Return ``value`` as an int > 0, or raise naming ``name`` and the value.

    Raises:
        TypeError: if ``value`` is not an integer (bools included).
        ValueError: if it is not positive.
    """
    value = _integer(name, value, "a positive integer")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def non_negative_int(name: str, value: Any) -> int:
    """Return ``value`` as an int >= 0, or raise naming ``name`` and the value.

    Raises:
        TypeError: if ``value`` is not an integer (bools included).
        ValueError: if it is negative.
    """
    value = _integer(name, value, "a non-negative integer")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}")
    return value
