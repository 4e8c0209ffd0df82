"""The prefetch window: batches planned ahead of the position and in flight.

An engine plans up to its executor's ``depth`` batches ahead of what the
caller consumed (``_planned`` runs ahead of ``_position``) and keeps each as
``(position after, plan, handle)`` in plan order. Discarding the window
cancels what is in flight and plans again from the consumed position.
"""

from __future__ import annotations

from dataclasses import dataclass

from dataset_kit.engine._parts import EngineParts


@dataclass(frozen=True)
class EngineStatistics:
    """What an engine has in flight, for monitoring and tests.

    Attributes:
        depth: batches the executor may have in flight at once.
        in_flight: batches submitted to the executor and not yet delivered.
        most_in_flight: the largest ``in_flight`` seen since the engine was made.
    """

    depth: int
    in_flight: int
    most_in_flight: int


def fill(engine: EngineParts) -> None:
    """Plan and submit batches until the window is full or nothing is left to plan.

    Raises:
        Exception: whatever planning or submitting raised (the caller discards the window).
    """
    executor, pending, orders = engine._executor, engine._pending, engine._orders
    while len(pending) < executor.depth:
        planned = engine._planned
        if engine._hold and planned.epoch > engine._position.epoch:
            return  # the caller has not started that epoch yet
        if not orders.recomputable:
            orders.note_start(planned.epoch, planned.current_position)
        step = engine._spec.advance(planned, orders.order_of, orders.stops_of)
        if step is None:
            return
        position, plan = step
        engine._planned = position
        # An empty step (an epoch without a batch) is not built anywhere.
        handle = executor.submit(plan, engine._seed) if len(plan.indices) else None
        pending.append((position, plan, handle))
        engine._most_in_flight = max(engine._most_in_flight, len(pending))


def discard(engine: EngineParts) -> None:
    """Cancel the batches in flight and plan again from the consumed position."""
    handles = [handle for _, _, handle in engine._pending if handle is not None]
    engine._pending.clear()
    engine._drop_run()
    if handles:
        engine._executor.cancel(handles)
    engine._planned = engine._position


def prefetch(engine: EngineParts) -> None:
    """Start building the next batches now, before the first ``next()``.

    Raises:
        RuntimeError: if the executor was closed or has failed.
    """
    engine._executor.ensure_open()
    if engine._executor.prefetches:
        try:
            fill(engine)
        except BaseException:
            discard(engine)
            raise


def statistics(engine: EngineParts) -> EngineStatistics:
    """Return what is in flight now, and the most that ever was."""
    return EngineStatistics(engine._executor.depth, len(engine._pending), engine._most_in_flight)
