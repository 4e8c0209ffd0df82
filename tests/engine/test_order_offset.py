"""An epoch begun at an offset of its order (``order_offset``): the engine's elastic resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dataset_kit.engine import Engine, OrderSampler, ShuffleOrderSampler

N, BATCH = 12, 2


class EveryOther(OrderSampler):
    """An OffsetOrder: every second example of a shuffled "global" order, from an offset."""

    state_kind = "test-every-other"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def global_order(self, epoch: int, size: int) -> np.ndarray:
        return ShuffleOrderSampler(self.seed).epoch_order(epoch, size)

    def epoch_order(self, epoch: int, size: int) -> np.ndarray:
        return self.epoch_order_from(epoch, size, 0)

    def epoch_order_from(self, epoch: int, size: int, offset: int) -> np.ndarray:
        return self.global_order(epoch, size)[offset::2]


def batches(engine: Engine, k: int) -> list[list[int]]:
    return [np.asarray(engine.next()).tolist() for _ in range(k)]


def test_an_offset_begins_the_epoch_at_the_samplers_cut_of_the_rest():
    sampler = EveryOther(seed=3)
    engine = Engine(np.arange(N), batch_size=BATCH, order_sampler=sampler, seed=0,
                    last_batch="keep")
    state = engine.state_dict()
    assert state["order_offset"] == 0
    rest = sampler.global_order(0, N)[7::2].tolist()  # 3 examples from global position 7
    head = N // 2 - len(rest)
    state.update(order_offset=7, current_position=head)
    engine.load_state_dict(state)
    assert (engine.order_offset(), engine.order_head()) == (7, head)
    assert batches(engine, 2) == [rest[:2], rest[2:]]
    assert engine.position.is_new_epoch and engine.order_offset() == 0  # the next epoch: none
    assert batches(engine, 3) == np.reshape(sampler.epoch_order(1, N), (3, 2)).tolist()


def test_a_state_saved_inside_an_offset_epoch_keeps_the_offset_not_the_order():
    def make() -> Engine:
        return Engine(np.arange(N), batch_size=BATCH, order_sampler=EveryOther(1), seed=0,
                      last_batch="keep")

    engine = make()
    state = engine.state_dict()
    state.update(order_offset=2, current_position=1)
    engine.load_state_dict(state)
    engine.next()
    saved = json.loads(json.dumps(engine.state_dict()))
    assert saved["order_offset"] == 2 and "order" not in saved["order_sampler"]
    assert saved["current_position"] == 3
    again = make()
    again.load_state_dict(saved)
    assert batches(again, 4) == batches(engine, 4)


def test_a_plain_random_access_order_begins_at_the_offset_itself():
    engine = Engine(np.arange(N), batch_size=5, seed=4, last_batch="keep")
    order = ShuffleOrderSampler(4).epoch_order(0, N).tolist()
    state = dict(engine.state_dict(), order_offset=6, current_position=6)
    engine.load_state_dict(state)
    assert engine.order_head() == 6
    assert batches(engine, 2) == [order[6:11], order[11:]]


@pytest.mark.parametrize("change, message", [
    ({"order_offset": 7, "current_position": 0}, (r"current_position'\] is 0, but epoch 0 "
                                                  r"begun at order_offset 7 starts at position 3")),
    ({"order_offset": 12, "current_position": 5}, (r"order_offset'\] 12 does not fit order "
                                                   r"sampler 'test-every-other'")),
    ({"order_offset": -1}, r"state\['order_offset'\] must be an integer"),
    ({"order_offset": 2, "carry": 1, "epoch": 1, "current_position": 0},
     r"order_offset=2 and carry=1"),
])
def test_an_offset_that_does_not_fit_is_refused_leaving_the_engine_unchanged(change, message):
    engine = Engine(np.arange(N), batch_size=BATCH, order_sampler=EveryOther(), seed=0,
                    last_batch="rollover" if "carry" in change else "keep")
    twin = Engine(np.arange(N), batch_size=BATCH, order_sampler=EveryOther(), seed=0,
                  last_batch="rollover" if "carry" in change else "keep")
    engine.next(), twin.next()
    state = dict(engine.state_dict(), **change)
    with pytest.raises(ValueError, match=message):
        engine.load_state_dict(state)
    assert batches(engine, 6) == batches(twin, 6)


def test_a_stateful_sampler_cannot_begin_an_epoch_at_an_offset():
    engine = Engine(np.arange(N), batch_size=BATCH,
                    order_sampler=lambda order, position: order[::-1].copy(), seed=0)
    state = dict(engine.state_dict(), order_offset=4, current_position=4)
    with pytest.raises(ValueError, match=r"order_offset'\] is 4, but order sampler .* cannot "
                                         r"begin an epoch at an offset"):
        engine.load_state_dict(state)
