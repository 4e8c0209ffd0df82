"""The shared base of iterators that build batches ahead of the caller.

Batches are planned by the same state machine as the serial iterator and
submitted to some executor (threads, processes); they are handed out strictly
in plan order. Only handing a batch to the caller advances the checkpointed
position, so prefetched batches are never "consumed" by a checkpoint: after a
load they are discarded and planned again.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from dataset_kit.iterators._statemachine import BatchPlan
from dataset_kit.iterators._stream import BatchStream


class PrefetchingStream(BatchStream):
    """A :class:`BatchStream` that keeps up to ``_depth`` batches in flight.

    Subclasses implement :meth:`_submit`, :meth:`_collect` and :meth:`_cancel`.
    """

    _depth = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: deque = deque()
        self._closed = False

    def _submit(self, plan: BatchPlan) -> Any:
        """Start building ``plan``'s batch; return a handle for :meth:`_collect`."""
        raise NotImplementedError

    def _collect(self, handle: Any) -> Any:
        """Wait for the batch behind ``handle`` and return it."""
        raise NotImplementedError

    def _cancel(self, handles: list) -> None:
        """Forget batches whose results are no longer wanted."""
        raise NotImplementedError

    def _fill(self) -> None:
        while len(self._pending) < self._depth:
            step = self._plan_next()
            if step is None:
                return
            position, plan = step
            self._pending.append((position, self._submit(plan)))

    def __next__(self) -> Any:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} was finalized; create a new iterator")
        self._fill()
        if not self._pending:
            raise StopIteration
        position, handle = self._pending.popleft()
        try:
            batch = self._collect(handle)
        except BaseException:
            # The failed batch was not consumed: drop what was planned after
            # it, so the next call asks for the same batch again.
            self._discard_planned()
            raise
        self._consume(position)
        self._fill()
        return batch

    def _discard_planned(self) -> None:
        handles = [handle for _, handle in self._pending]
        self._pending.clear()
        if handles:
            self._cancel(handles)
        super()._discard_planned()
