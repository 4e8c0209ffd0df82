"""The prefetch window alone: what it plans, submits, cancels and reports."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.engine._orders import Orders
from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import BatchPlan, Position
from dataset_kit.engine._window import EngineStatistics, PrefetchWindow
from dataset_kit.engine.samplers import ShuffleOrderSampler


class RecordingExecutor:
    """An executor that builds nothing: it records what was submitted and cancelled."""

    prefetches = True

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.submitted: list[BatchPlan] = []
        self.cancelled: list[Any] = []

    def submit(self, plan: BatchPlan, seed: int) -> int:
        self.submitted.append(plan)
        return len(self.submitted) - 1

    def cancel(self, handles: list) -> None:
        self.cancelled.extend(handles)


def _steps(spec: BatchSpec, orders: Orders, count: int) -> list[tuple[Position, BatchPlan]]:
    position, steps = Position(), []
    for _ in range(count):
        step = spec.advance(position, orders.order_of, orders.stops_of)
        if step is None:
            break
        steps.append(step)
        position = step[0]
    return steps


@given(size=st.integers(1, 30), batch=st.integers(1, 8), depth=st.integers(1, 6),
       policy=st.sampled_from([None, "keep", "discard", "rollover", "pad"]),
       repeat=st.booleans())
def test_a_full_window_holds_the_next_steps_of_the_state_machine_in_order(
        size, batch, depth, policy, repeat):
    spec = BatchSpec(batch, size, repeat, policy)
    orders = Orders(ShuffleOrderSampler(3), size)
    executor = RecordingExecutor(depth)
    window = PrefetchWindow(executor, spec, hold=False)
    window.fill(Position(), orders, seed=0)
    expected = _steps(spec, orders, depth)
    taken = [window.pop() for _ in range(len(window))]
    assert [(p, plan.indices.tolist()) for p, plan, _ in taken] == \
        [(p, plan.indices.tolist()) for p, plan in expected]
    # Only steps with indices are built; an empty epoch's step has no handle.
    assert [h is None for _, plan, h in taken] == [not len(plan.indices) for _, plan, _ in taken]
    assert window.planned == (expected[-1][0] if expected else Position())


def test_discarding_cancels_what_is_in_flight_and_plans_from_the_consumed_position():
    spec = BatchSpec(2, 10)
    orders = Orders(None, 10)
    executor = RecordingExecutor(3)
    window = PrefetchWindow(executor, spec, hold=False)
    window.fill(Position(), orders, seed=0)
    assert window.statistics() == EngineStatistics(3, 3, 3)
    consumed, _, _ = window.pop()
    window.discard(consumed)
    assert executor.cancelled == [1, 2]
    assert window.planned == consumed and len(window) == 0
    window.fill(consumed, orders, seed=0)
    assert window.pop()[1].indices.tolist() == [2, 3]
    assert window.statistics().most_in_flight == 3


def test_a_holding_window_plans_no_batch_of_an_epoch_the_caller_has_not_started():
    spec = BatchSpec(2, 4)
    window = PrefetchWindow(RecordingExecutor(8), spec, hold=True)
    window.fill(Position(), Orders(None, 4), seed=0)
    # Both batches of epoch 0, and the step into epoch 1 only once the caller is there.
    positions = [window.pop()[0] for _ in range(len(window))]
    assert [p.epoch for p in positions] == [0, 1]
    assert window.holds_at(positions[-1])
    assert not window.holds_at(positions[0])


def test_a_copy_for_another_executor_is_empty_and_plans_from_the_consumed_position():
    window = PrefetchWindow(RecordingExecutor(2), BatchSpec(2, 6), hold=False)
    window.fill(Position(), Orders(None, 6), seed=0)
    consumed = window.pop()[0]
    other_executor = RecordingExecutor(2)
    other = window.copy_for(other_executor, consumed)
    assert len(other) == 0 and other.planned == consumed
    other.fill(consumed, Orders(None, 6), seed=0)
    assert [plan.indices.tolist() for plan in other_executor.submitted] == [[2, 3], [4, 5]]
    assert np.array_equal(window.pop()[1].indices, [2, 3])  # the original keeps its own
