"""The Iterator base class: Python's iteration protocol plus resource handling."""

from __future__ import annotations

from typing import Any


class Iterator:
    """Base class of dataset iterators.

    An iterator yields batches, keeps epoch bookkeeping, and holds resources
    (threads, processes, shared memory) that :meth:`finalize` releases.
    Iterators are context managers: leaving the ``with`` block finalizes.
    """

    def __iter__(self) -> Iterator:
        return self

    def __next__(self) -> Any:
        raise NotImplementedError

    def next(self) -> Any:
        """Return the next batch (Chainer's spelling of ``next(it)``)."""
        return self.__next__()

    def finalize(self) -> None:
        """Release the iterator's resources. Safe to call more than once."""

    def serialize(self, serializer: Any) -> None:
        """Save or load the iterator's state through Chainer's serializer protocol."""

    def __enter__(self) -> Iterator:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.finalize()
