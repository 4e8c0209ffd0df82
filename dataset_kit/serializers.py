"""Chainer's serializer protocol, and npz save/load of anything serializable.

An object that supports checkpoints has ``serialize(serializer)``: it calls
``value = serializer(key, value)`` for each piece of state. A serializer
records the value and returns it; a deserializer ignores it and returns the
stored one. Objects tell them apart with ``isinstance(serializer, Deserializer)``.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

import numpy as np

from dataset_kit._files import atomic_write


class Serializable(Protocol):
    """Anything with Chainer's ``serialize(serializer)`` method."""

    def serialize(self, serializer: Any) -> None: ...


class Serializer:
    """Base class of serializers (they write)."""

    def __call__(self, key: str, value: Any) -> Any:
        raise NotImplementedError


class Deserializer:
    """Base class of deserializers (they read)."""

    def __call__(self, key: str, value: Any) -> Any:
        raise NotImplementedError


class DictionarySerializer(Serializer):
    """Collects values into a flat dict of numpy arrays.

    Args:
        target: the dict to fill (a new one by default).
        path: a prefix for every key.
    """

    def __init__(self, target: dict | None = None, path: str = "") -> None:
        self.target = {} if target is None else target
        self.path = path

    def __call__(self, key: str, value: Any) -> Any:
        if value is None:
            # npz cannot hold None; an absent key reads back as "no value".
            return value
        self.target[self.path + key] = np.asarray(value)
        return value


class NpzDeserializer(Deserializer):
    """Reads values from an npz file (or any mapping of arrays).

    Args:
        npz: the mapping, as returned by :func:`numpy.load`.
        path: a prefix for every key.

    Raises:
        KeyError: (on call) if a key is missing.
    """

    def __init__(self, npz: Any, path: str = "") -> None:
        self.npz = npz
        self.path = path

    def __call__(self, key: str, value: Any) -> Any:
        stored = self.npz[self.path + key]
        if value is None:
            return stored
        if isinstance(value, np.ndarray):
            np.copyto(value, stored)
            return value
        if isinstance(value, str):
            return str(stored)
        return type(value)(np.asarray(stored).item())


def save_npz(path: str | os.PathLike, obj: Serializable, compression: bool = True) -> None:
    """Save ``obj.serialize`` output to an npz file, atomically.

    The file is written beside ``path`` under a temporary name, fsynced and
    moved into place, so a crash never leaves a truncated checkpoint.

    Args:
        path: the destination file.
        obj: an object with ``serialize(serializer)``.
        compression: whether to compress the npz.

    Raises:
        TypeError: if ``obj`` has no ``serialize`` method.
    """
    if not callable(getattr(obj, "serialize", None)):
        raise TypeError(f"obj must have a serialize(serializer) method, got {type(obj).__name__}")
    serializer = DictionarySerializer()
    obj.serialize(serializer)
    with atomic_write(path) as temp, open(temp, "wb") as f:
        (np.savez_compressed if compression else np.savez)(f, **serializer.target)


def load_npz(path: str | os.PathLike, obj: Serializable) -> None:
    """Load state saved by :func:`save_npz` into ``obj``.

    Args:
        path: the npz file.
        obj: an object with ``serialize(serializer)``.

    Raises:
        TypeError: if ``obj`` has no ``serialize`` method.
        FileNotFoundError: if ``path`` does not exist.
    """
    if not callable(getattr(obj, "serialize", None)):
        raise TypeError(f"obj must have a serialize(serializer) method, got {type(obj).__name__}")
    with np.load(os.fspath(path), allow_pickle=False) as npz:
        obj.serialize(NpzDeserializer(npz))
