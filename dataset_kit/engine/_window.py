"""The prefetch window: batches planned ahead of the consumed position and in flight.

An engine plans up to its executor's ``depth`` batches ahead of what the
caller consumed and keeps each as ``(position after, plan, handle)`` in plan
order. The window owns those batches and how far they reach (``planned``);
the engine owns the consumed position and hands it in. Discarding the window
cancels what is in flight and plans again from the consumed position.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from dataset_kit.engine._executors import Executor, Hinted
from dataset_kit.engine._orders import Orders
from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import BatchPlan, Position
from dataset_kit.engine._stats import EngineStatistics


class PrefetchWindow:
    """The batches planned ahead of a consumed position, each submitted to an executor.

    Args:
        executor: where the planned batches are built.
        spec: how batches are cut.
        hold: plan no batch of an epoch the caller has not started
            (Gluon's ``auto_reload=False``).
    """

    def __init__(self, executor: Executor, spec: BatchSpec, hold: bool) -> None:
        self._executor = executor
        self._spec = spec
        self._hold = hold
        self._pending: deque[tuple[Position, BatchPlan, Any]] = deque()
        self._planned = Position()
        self._most_in_flight = 0
        # The scout: plans past the window, told to a Hinted executor once each
        # (its lookahead, in examples); the sizes of those not yet submitted.
        self._hinted = executor if isinstance(executor, Hinted) else None
        self._scouted = Position()
        self._scout_sizes: deque[int] = deque()
        self._scout_examples = 0

    @property
    def planned(self) -> Position:
        """How far batches were planned: the position after the last planned one."""
        return self._planned

    def __len__(self) -> int:
        """The steps planned and not yet taken (empty steps included)."""
        return len(self._pending)

    def fill(self, consumed: Position, orders: Orders, seed: int) -> None:
        """Plan and submit batches until the window is full or nothing is left to plan.

        Args:
            consumed: the caller's position (for ``hold``: no batch of a later epoch).
            orders: the engine's orders.
            seed: the engine's seed, for the batches' example rngs.

        Raises:
            Exception: whatever planning or submitting raised (the caller
                discards the window).
        """
        executor, pending, spec = self._executor, self._pending, self._spec
        while len(pending) < executor.depth:
            planned = self._planned
            if self._hold and planned.epoch > consumed.epoch:
                return  # the caller has not started that epoch yet
            if not orders.recomputable:
                orders.note_start(planned.epoch, planned.current_position)
            step = spec.advance(planned, orders.order_of, orders.stops_of)
            if step is None:
                return
            position, plan = step
            self._planned = position
            # An empty step (an epoch without a batch) is not built anywhere.
            handle = executor.submit(plan, seed) if len(plan.indices) else None
            pending.append((position, plan, handle))
            self._most_in_flight = max(self._most_in_flight, len(pending))
            if self._scout_sizes:
                self._scout_examples -= self._scout_sizes.popleft()  # that plan was scouted
            else:
                self._scouted = position
        if self._hinted is not None and orders.recomputable:
            self._scout(consumed, orders, seed)

    def _scout(self, consumed: Position, orders: Orders, seed: int) -> None:
        """Plan up to the executor's lookahead past the window; hint each plan once."""
        executor = self._hinted
        assert executor is not None  # fill() checked
        lookahead = executor.lookahead
        while self._scout_examples < lookahead:
            if self._hold and self._scouted.epoch > consumed.epoch:
                return
            step = self._spec.advance(self._scouted, orders.order_of, orders.stops_of)
            if step is None:
                return
            self._scouted, plan = step
            self._scout_sizes.append(len(plan.indices))
            self._scout_examples += len(plan.indices)
            if len(plan.indices):
                executor.hint(plan, seed)

    def holds_at(self, consumed: Position) -> bool:
        """Whether the window plans nothing now: it holds, and ``consumed`` just ended an epoch."""
        return self._hold and consumed.is_new_epoch

    def pop(self) -> tuple[Position, BatchPlan, Any]:
        """Take the next planned step: ``(position after, plan, handle)``.

        The handle is None for an empty step (an epoch without a batch).

        Raises:
            IndexError: if nothing is planned.
        """
        return self._pending.popleft()

    def discard(self, consumed: Position) -> None:
        """Cancel the batches in flight and plan again from ``consumed``."""
        handles = [handle for _, _, handle in self._pending if handle is not None]
        self._pending.clear()
        if handles:
            self._executor.cancel(handles)
        self._planned = self._scouted = consumed
        self._scout_sizes.clear()
        self._scout_examples = 0

    def statistics(self) -> EngineStatistics:
        """Return what is in flight now, and the most that ever was."""
        return EngineStatistics(self._executor.depth, len(self._pending), self._most_in_flight)

    def copy_for(self, executor: Executor, consumed: Position) -> PrefetchWindow:
        """Return an empty window over ``executor`` that plans from ``consumed`` (for a copy)."""
        other = PrefetchWindow(executor, self._spec, self._hold)
        other._planned = other._scouted = consumed
        other._most_in_flight = self._most_in_flight
        return other
