"""An epoch without a batch ('discard' / 'rollover' with batch_size > the epoch) is empty."""

import numpy as np
import pytest

from dataset_kit.engine._engine import Engine
from dataset_kit.engine._statemachine import Position, advance


def identity(epoch):
    return None


@pytest.mark.parametrize("policy", ["discard", "rollover"])
def test_the_state_machine_closes_an_epoch_without_a_batch(policy):
    position, plan = advance(Position(), 5, 3, True, identity, policy)
    assert plan.indices.size == 0 and plan.epochs == 0
    assert position.epoch == 1 and position.is_new_epoch
    assert position.carry == (3 if policy == "rollover" else 0)


def test_without_repeat_an_epoch_without_a_batch_still_ends_iteration():
    assert advance(Position(), 5, 3, False, identity, "discard") is None


@pytest.mark.parametrize("policy", ["discard", "rollover"])
def test_a_door_skips_an_empty_epoch_once_and_rollover_carries_it_on(policy):
    engine = Engine(np.arange(3), batch_size=5, shuffle=False, last_batch=policy)
    assert engine.skip_empty_epoch()
    assert engine.position.epoch == 1
    if policy == "rollover":  # three rolled over plus two: a full batch in epoch 1
        assert not engine.skip_empty_epoch()
        assert list(engine.next()) == [0, 1, 2, 0, 1]
    else:
        assert engine.skip_empty_epoch()
        assert engine.position.epoch == 2
        with pytest.raises(ValueError):  # no epoch will ever have a batch
            engine.next()


def test_an_empty_epoch_resumes_from_a_state():
    engine = Engine(np.arange(3), batch_size=5, shuffle=False, last_batch="rollover")
    assert engine.skip_empty_epoch()
    other = Engine(np.arange(3), batch_size=5, shuffle=False, last_batch="rollover")
    other.load_state_dict(engine.state_dict())
    assert list(other.next()) == list(engine.next()) == [0, 1, 2, 0, 1]
