"""Engine.seek: a typed move to any position, checked as a loaded state is."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.engine import Engine, ShuffleOrderSampler


def _batches(engine, count):
    return [np.asarray(engine.next()).tolist() for _ in range(count)]


@given(size=st.integers(1, 25), batch=st.integers(1, 6), steps=st.integers(0, 12),
       policy=st.sampled_from([None, "keep", "pad"]))
def test_seeking_to_a_consumed_position_continues_as_the_original_does(size, batch, steps,
                                                                      policy):
    original = Engine(np.arange(size), batch_size=batch, seed=5, last_batch=policy)
    for _ in range(steps):
        original.next()
    p = original.position
    if p.carry:
        return  # seek never carries examples over
    other = Engine(np.arange(size), batch_size=batch, seed=5, last_batch=policy)
    other.seek(epoch=p.epoch, position=p.current_position, is_new_epoch=p.is_new_epoch,
               previous_epoch_detail=p.previous_epoch_detail)
    assert other.position == p
    assert _batches(other, 5) == _batches(original, 5)


def test_seeking_with_an_order_uses_it_for_the_rest_of_the_epoch_only():
    engine = Engine(np.arange(6), batch_size=2, seed=1)
    order = [5, 4, 3, 2, 1, 0]
    engine.seek(epoch=2, position=2, is_new_epoch=False, previous_epoch_detail=2.0, order=order)
    assert _batches(engine, 2) == [[3, 2], [1, 0]]
    reference = Engine(np.arange(6), batch_size=2, seed=1)
    assert engine.current_order(3).tolist() == reference.current_order(3).tolist()


def test_seeking_at_an_order_offset_begins_the_epoch_at_the_rest_of_the_order():
    engine = Engine(np.arange(8), batch_size=2, order_sampler=ShuffleOrderSampler(4))
    full = engine.current_order(0).tolist()
    engine.seek(epoch=0, position=4, order_offset=4)
    assert (engine.order_offset(), engine.order_head()) == (4, 4)
    assert sum(_batches(engine, 2), []) == full[4:]


@pytest.mark.parametrize("where, message", [
    ({"epoch": -1}, "epoch"),
    ({"epoch": 0, "position": 9}, "current_position"),
    ({"epoch": 0, "order": [0, 0, 1, 2, 3, 4]}, "permutation"),
    ({"epoch": 0, "order": [0, 1]}, "length"),
    ({"epoch": 0, "previous_epoch_detail": float("nan")}, "previous_epoch_detail"),
])
def test_a_refused_seek_names_what_does_not_fit_and_changes_nothing(where, message):
    engine = Engine(np.arange(6), batch_size=2, seed=1)
    engine.next()
    before = engine.state_dict()
    with pytest.raises(ValueError, match=message):
        engine.seek(**where)
    assert engine.state_dict() == before
