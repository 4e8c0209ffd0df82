"""Chainer's serializer protocol, and npz save/load of anything serializable.

An object that supports checkpoints has ``serialize(serializer)``: it calls
``value = serializer(key, value)`` for each piece of state. A serializer
records the value and returns it; a deserializer ignores it and returns the
stored one. Objects tell them apart with ``isinstance(serializer, Deserializer)``.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Protocol

import numpy as np

from dataset_kit._files import atomic_write, remove_stale_parts
from dataset_kit._npz import read_npz


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

    Each stored value must fit the value it restores: an array of the same
    shape and a dtype that casts to it, or one element for a Python scalar
    (a string for a string). Nothing is broadcast or cut.

    Args:
        npz: the mapping, as returned by :func:`numpy.load`.
        path: a prefix for every key.
        source: how to name the mapping in errors (the file), if anything.

    Raises:
        KeyError: (on call) if a key is missing.
        ValueError: (on call) if a stored value does not fit, naming the key,
            what was expected and what is stored.
    """

    def __init__(self, npz: Any, path: str = "", source: str | None = None) -> None:
        self.npz = npz
        self.path = path
        self.source = source

    def __call__(self, key: str, value: Any) -> Any:
        full = self.path + key
        stored = self.npz[full]
        if value is None:
            return stored
        stored = np.asarray(stored)
        if isinstance(value, np.ndarray):
            if stored.shape != value.shape or not np.can_cast(stored.dtype, value.dtype,
                                                              "same_kind"):
                raise self._misfit(full, f"an array of shape {value.shape} and dtype "
                                         f"{value.dtype}", stored)
            np.copyto(value, stored)
            return value
        # Which stored kinds may become which Python type (Chainer: safe casts only).
        kinds = "U" if isinstance(value, str) else "b" if isinstance(value, bool) else \
            "biu" if isinstance(value, int) else "biuf" if isinstance(value, float) else None
        if stored.size != 1 or (kinds is not None and stored.dtype.kind not in kinds):
            raise self._misfit(full, f"one {type(value).__name__}", stored)
        return type(value)(stored.reshape(()).item())

    def _misfit(self, key: str, expected: str, stored: np.ndarray) -> ValueError:
        where = f"{self.source}: " if self.source else ""
        return ValueError(f"{where}key {key!r} holds an array of shape {stored.shape} and dtype "
                          f"{stored.dtype}; expected {expected}")


def save_npz(path: str | os.PathLike, obj: Serializable, compression: bool = True) -> None:
    """Save ``obj.serialize`` output to an npz file, atomically.

    The file is written beside ``path`` under a temporary name, fsynced and
    moved into place, so a crash never leaves a truncated checkpoint. After
    it is in place, the temporaries of earlier saves of ``path`` whose
    process is dead (killed mid-save) are removed.

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
    _remove_debris(path)


def load_npz(path: str | os.PathLike, obj: Serializable) -> None:
    """Load state saved by :func:`save_npz` (or Chainer's ``save_npz``) into ``obj``.

    The whole file is read and checked before ``obj`` sees any of it (the
    zip structure, each member's CRC, each array's header against its size;
    no Python objects), so a truncated or corrupted checkpoint changes
    nothing and cannot make the reader allocate more than its arrays hold.
    dataset_kit's iterators also check the state itself before taking any
    of it. After a successful load, temporaries of saves of
    ``path`` whose process is dead are removed.

    Args:
        path: the npz file.
        obj: an object with ``serialize(serializer)``.

    Raises:
        TypeError: if ``obj`` has no ``serialize`` method.
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is not a sound npz file, or a value in it
            does not fit ``obj`` (naming the file and the key).
        KeyError: if ``obj`` asks for a key the file lacks.
    """
    if not callable(getattr(obj, "serialize", None)):
        raise TypeError(f"obj must have a serialize(serializer) method, got {type(obj).__name__}")
    arrays = read_npz(path)
    obj.serialize(NpzDeserializer(arrays, source=os.fspath(path)))
    _remove_debris(path)


def _remove_debris(path: str | os.PathLike) -> None:
    # Saves take no lock, so only temporaries of dead writers go. A failure
    # to clean up must not fail the save or load that succeeded.
    with contextlib.suppress(OSError):
        remove_stale_parts(path, under_lock=False)
