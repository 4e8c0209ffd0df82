import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.engine._statemachine import Position, advance


def identity(epoch):
    return None


@given(n=st.integers(1, 20), b=st.integers(1, 45), steps=st.integers(1, 30))
def test_repeating_stream_is_the_concatenation_of_epochs(n, b, steps):
    def order_of(epoch):
        return np.roll(np.arange(n), epoch)

    position, seen, epochs = Position(), [], []
    for _ in range(steps):
        before = position
        position, plan = advance(position, b, n, True, order_of)
        assert len(plan.indices) == b
        seen += plan.indices.tolist()
        epochs += [plan.epoch_at(k) for k in range(len(plan.indices))]
        total = len(seen)
        assert position.epoch == total // n
        assert position.current_position == total % n
        assert position.is_new_epoch == (position.epoch > before.epoch)
        assert position.previous_epoch_detail == before.epoch + before.current_position / n
    expected = np.concatenate([order_of(e) for e in range(len(seen) // n + 1)])[:len(seen)]
    assert seen == expected.tolist()
    assert epochs == [k // n for k in range(len(seen))]


@given(n=st.integers(1, 20), b=st.integers(1, 45))
def test_single_epoch_ends_with_a_short_batch_then_stops(n, b):
    position, sizes = Position(), []
    while True:
        step = advance(position, b, n, False, identity)
        if step is None:
            break
        position, plan = step
        sizes.append(len(plan.indices))
    assert sum(sizes) == n
    assert all(s == b for s in sizes[:-1]) and 0 < sizes[-1] <= b
    assert position.epoch == 1 and position.is_new_epoch


def test_empty_dataset_without_repeat_yields_nothing():
    assert advance(Position(), 3, 0, False, identity) is None
