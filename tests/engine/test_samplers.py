import numpy as np
import pytest

from dataset_kit.engine import ShuffleOrderSampler


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
