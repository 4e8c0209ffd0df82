import numpy as np
import pytest

from dataset_kit.engine import (
    BatchListOrder,
    Engine,
    IterableOrder,
    OrderSampler,
    ShuffleOrderSampler,
)
from dataset_kit.engine.samplers import sampler_kind


def test_epoch_order_is_a_pure_function_of_seed_and_epoch():
    a, b = ShuffleOrderSampler(5), ShuffleOrderSampler(5)
    for epoch in range(3):
        np.testing.assert_array_equal(a.epoch_order(epoch, 50), b.epoch_order(epoch, 50))
        assert sorted(a.epoch_order(epoch, 50)) == list(range(50))
    assert not np.array_equal(a.epoch_order(0, 50), a.epoch_order(1, 50))


def test_chainer_protocol_returns_a_new_permutation_each_call():
    sampler = ShuffleOrderSampler(np.random.RandomState(0))
    first = sampler(np.arange(10), 0)
    second = sampler(first, 10)
    assert sorted(first) == list(range(10)) and sorted(second) == list(range(10))
    assert not np.array_equal(first, second)


def test_random_states_and_generators_are_accepted():
    assert ShuffleOrderSampler(np.random.default_rng(1)).seed == \
        ShuffleOrderSampler(np.random.default_rng(1)).seed
    assert ShuffleOrderSampler().seed != ShuffleOrderSampler().seed


@pytest.mark.parametrize("bad, error", [(-1, ValueError), ("x", TypeError), (1.5, TypeError)])
def test_bad_random_state_is_named(bad, error):
    with pytest.raises(error, match="random_state"):
        ShuffleOrderSampler(bad)


def test_the_state_is_the_seed_and_a_bad_one_is_refused_naming_it():
    sampler = ShuffleOrderSampler(3)
    assert sampler.state_dict() == {"seed": 3}
    sampler.load_state_dict({"seed": 8})
    assert np.array_equal(sampler.epoch_order(2, 9), ShuffleOrderSampler(8).epoch_order(2, 9))
    with pytest.raises(ValueError, match="needs a 'seed'"):
        sampler.load_state_dict({})
    with pytest.raises(ValueError, match=r"state\['seed'\]"):
        sampler.load_state_dict({"seed": -1})
    assert sampler.seed == 8


def test_a_checkpoints_sampler_kind_is_stable_or_the_class_name():
    class Mine(OrderSampler):
        pass

    assert sampler_kind(ShuffleOrderSampler(0)) == "shuffle"
    assert sampler_kind(Mine()).endswith("Mine")
    assert sampler_kind(IterableOrder([0])) == "iterable:list"
    assert sampler_kind(BatchListOrder([[0]])) == "batches:list"


class Epochs:
    """An iterable of indices that gives another order each time it is iterated."""

    def __init__(self, n):
        self.n, self.iterations = n, 0

    def __iter__(self):
        self.iterations += 1
        return iter(np.roll(np.arange(self.n), self.iterations))


def test_an_iterable_is_iterated_once_per_epoch_when_the_epoch_begins():
    source = Epochs(4)
    engine = Engine(list(range(4)), batch_size=2, order_sampler=IterableOrder(source),
                    last_batch="keep")
    assert source.iterations == 1
    batches = [list(engine.next()) for _ in range(4)]
    assert batches == [[3, 0], [1, 2], [2, 3], [0, 1]]
    assert source.iterations == 3  # epochs 0 and 1, and epoch 2's as epoch 1 ended


def test_a_batch_list_cuts_the_epoch_at_its_own_batches():
    engine = Engine(list(range(5)), batch_size=None,
                    order_sampler=BatchListOrder([[4], [0, 1, 2], [3]]))
    assert engine.batch_size == 3
    assert [list(b) for b in engine.epoch()] == [[4], [0, 1, 2], [3]]
    assert engine.state_dict()["order_sampler"]["stops"] == [1, 4, 5]


def test_an_empty_batch_from_a_batch_sampler_is_refused_naming_it():
    class Sampler(list):
        pass

    with pytest.raises(ValueError, match="batch sampler Sampler yielded an empty batch"):
        BatchListOrder(Sampler([[0], []]))(np.arange(2), 0)
