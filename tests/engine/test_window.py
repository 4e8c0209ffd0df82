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


class HintedExecutor(RecordingExecutor):
    """A RecordingExecutor that is also told the plans past its window (``Hinted``)."""

    def __init__(self, depth: int, lookahead: int) -> None:
        super().__init__(depth)
        self.lookahead = lookahead
        self.hinted: list[BatchPlan] = []
        self.events: list[tuple[str, list[int]]] = []

    def submit(self, plan: BatchPlan, seed: int) -> int:
        self.events.append(("submit", plan.indices.tolist()))
        return super().submit(plan, seed)

    def hint(self, plan: BatchPlan, seed: int) -> None:
        self.hinted.append(plan)
        self.events.append(("hint", plan.indices.tolist()))


def _consume_all(window: PrefetchWindow, orders: Orders, limit: int = 200) -> None:
    """Take every step the window plans, filling it again after each (as the engine does)."""
    while len(window) and limit:
        consumed, limit = window.pop()[0], limit - 1
        window.fill(consumed, orders, seed=0)


@given(size=st.integers(1, 30), batch=st.integers(1, 8), depth=st.integers(1, 4),
       lookahead=st.integers(0, 40), policy=st.sampled_from([None, "discard", "pad"]))
def test_each_plan_after_the_first_window_is_hinted_once_before_it_is_submitted(
        size, batch, depth, lookahead, policy):
    spec = BatchSpec(batch, size, False, policy)
    orders = Orders(ShuffleOrderSampler(3), size)
    executor = HintedExecutor(depth, lookahead)
    window = PrefetchWindow(executor, spec, hold=False)
    window.fill(Position(), orders, seed=0)
    first = len(executor.submitted)
    hinted_at_first = [plan.indices.tolist() for plan in executor.hinted]
    _consume_all(window, orders)
    submitted = [plan.indices.tolist() for plan in executor.submitted]
    hinted = [plan.indices.tolist() for plan in executor.hinted]
    if lookahead == 0:
        assert hinted == []
        return
    assert hinted == submitted[first:]  # each once, in order
    events = executor.events
    for plan in hinted:
        assert events.index(("hint", plan)) < events.index(("submit", plan))
    # The first fill already looked lookahead examples past the window (or to the end).
    assert sum(map(len, hinted_at_first)) >= min(lookahead, sum(map(len, hinted)))


def test_the_scout_stops_at_the_lookahead_and_restarts_from_the_consumed_position():
    spec = BatchSpec(2, 20)
    orders = Orders(None, 20)
    executor = HintedExecutor(2, lookahead=5)
    window = PrefetchWindow(executor, spec, hold=False)
    window.fill(Position(), orders, seed=0)
    # The window holds [0, 1], [2, 3]; the scout three plans past it (6 >= 5 examples).
    assert [p.indices.tolist() for p in executor.hinted] == [[4, 5], [6, 7], [8, 9]]
    consumed = window.pop()[0]
    window.fill(consumed, orders, seed=0)  # submits [4, 5]; the scout adds [10, 11]
    assert [p.indices.tolist() for p in executor.hinted][3:] == [[10, 11]]
    window.discard(consumed)
    window.fill(consumed, orders, seed=0)  # plans [2, 3], [4, 5] again; hints anew
    assert [p.indices.tolist() for p in executor.hinted][4:] == [[6, 7], [8, 9], [10, 11]]


def test_a_holding_window_hints_no_plan_of_an_epoch_the_caller_has_not_started():
    executor = HintedExecutor(1, lookahead=100)
    window = PrefetchWindow(executor, BatchSpec(2, 4), hold=True)
    window.fill(Position(), Orders(None, 4), seed=0)
    assert [p.indices.tolist() for p in executor.hinted] == [[2, 3]]


def test_an_order_that_cannot_be_asked_again_is_not_scouted():
    def stateful(order, current_position):  # a Chainer-style order sampler: not recomputable
        return np.arange(len(order))[::-1]

    orders = Orders(stateful, 8)
    assert not orders.recomputable
    executor = HintedExecutor(1, lookahead=100)
    window = PrefetchWindow(executor, BatchSpec(2, 8, False), hold=False)
    window.fill(Position(), orders, seed=0)
    _consume_all(window, orders)
    assert len(executor.submitted) == 4 and executor.hinted == []
