"""``phase``: a named span of work a profile shows apart (a user's transform, a converter).

A span costs two clock reads and a check for listeners, so marking a
transform that runs for every example is cheap enough to leave in. Who
listens:

* in a worker process, the worker collects the spans of the batch it builds
  (:func:`collect`) and sends their sums with the batch;
* in the main process, :func:`dataset_kit.profile` listens while it records
  (:func:`add_listener`) and draws each span where it ran.

This module is part of the base (the converters mark themselves with it), so
it imports nothing of the engine.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

#: ``listener(name, start, end, thread_ident)``, times from :func:`time.perf_counter`.
Listener = Callable[[str, float, float, int], None]

_listeners: list[Listener] = []
# In a worker process, while it builds a batch: {name: [seconds, spans]}.
_collected: dict[str, list[float]] | None = None

F = TypeVar("F", bound=Callable[..., Any])


def add_listener(listener: Listener) -> None:
    """Have ``listener`` told of every span this process marks from now on."""
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    """Stop telling ``listener`` (no error if it was not added)."""
    if listener in _listeners:
        _listeners.remove(listener)


def forget_listeners() -> None:
    """Drop every listener (a forked worker process: its parent's are not its own)."""
    _listeners.clear()


def collect() -> None:
    """Start summing spans by name (a worker process, before each batch)."""
    global _collected
    _collected = {}


def collected() -> tuple[tuple[str, float, int], ...]:
    """Return ``(name, seconds, spans)`` summed since :func:`collect`, and stop summing."""
    global _collected
    sums, _collected = _collected, None
    return tuple((name, s[0], int(s[1])) for name, s in sums.items()) if sums else ()


def _note(name: str, start: float, end: float) -> None:
    sums = _collected
    if sums is not None:
        s = sums.get(name)
        if s is None:
            sums[name] = [end - start, 1.0]
        else:
            s[0] += end - start
            s[1] += 1.0
    if _listeners:
        ident = threading.get_ident()
        for listener in _listeners:
            listener(name, start, end, ident)


class phase:  # noqa: N801 - used like a function: ``with phase("transform"):``
    """Mark a span of work as its own phase in :func:`dataset_kit.profile`'s output.

    Use it around a block, or as a decorator of a function (every call is a
    span)::

        @dataset_kit.phase("transform")
        def augment(image): ...

        with dataset_kit.phase("decode"):
            image = decode(data)

    In a worker process the spans of a batch are summed by name and shown
    inside the worker's fetch; in the main process each span is shown where
    it ran, apart from the loop's wait. Nothing is recorded while no profile
    listens, beyond the two clock reads.

    Args:
        name: the phase's name, as the report, the trace and the picture show it.

    Raises:
        TypeError: if ``name`` is not a string.
        ValueError: if ``name`` is empty.
    """

    __slots__ = ("name", "_starts")

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a string, got {type(name).__name__}")
        if not name:
            raise ValueError("name must be a non-empty string, got ''")
        self.name = name
        # One object may be entered again before it exits (recursion, threads).
        self._starts: list[float] = []

    def __enter__(self) -> phase:
        self._starts.append(time.perf_counter())
        return self

    def __exit__(self, *exc: object) -> None:
        _note(self.name, self._starts.pop(), time.perf_counter())

    def __call__(self, fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"phase({self.name!r}) decorates a callable, got "
                            f"{type(fn).__name__}")
        name = self.name

        @functools.wraps(fn)
        def marked(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                _note(name, start, time.perf_counter())
        return marked  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"phase({self.name!r})"
