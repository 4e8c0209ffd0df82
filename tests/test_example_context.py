import numpy as np

from dataset_kit.iterators import SerialIterator, example_rng
from tests.iterators.helpers import Augmented


def test_outside_an_iterator_a_fresh_unseeded_generator():
    a, b = example_rng(), example_rng()
    assert isinstance(a, np.random.Generator)
    assert a.integers(2**62) != b.integers(2**62)


def noise_by_epoch_and_index(it, batches):
    seen = {}
    for _ in range(batches):
        epoch_before = it.epoch
        for x, i in next(it):
            seen[(epoch_before, int(i))] = x - int(i)
    return seen


def test_noise_is_a_function_of_seed_epoch_and_index():
    # batch == dataset size, so every batch is exactly one epoch
    first = noise_by_epoch_and_index(SerialIterator(Augmented(6), 6, seed=11), 3)
    again = noise_by_epoch_and_index(SerialIterator(Augmented(6), 6, seed=11, shuffle=False), 3)
    assert first.keys() == again.keys()
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])  # order does not matter
    assert not np.array_equal(first[(0, 2)], first[(1, 2)])  # epochs differ
    assert not np.array_equal(first[(0, 2)], first[(0, 3)])  # indices differ
    other = noise_by_epoch_and_index(SerialIterator(Augmented(6), 6, seed=12), 1)
    assert not np.array_equal(first[(0, 2)], other[(0, 2)])  # seeds differ


def test_batches_spanning_epochs_use_each_examples_own_epoch():
    spanning = SerialIterator(Augmented(4), 6, seed=3, shuffle=False)
    single = SerialIterator(Augmented(4), 4, seed=3, shuffle=False)
    span = [x for x, _ in next(spanning)]
    whole = [x for x, _ in next(single)] + [x for x, _ in next(single)]
    for a, b in zip(span, whole[:6]):
        np.testing.assert_array_equal(a, b)
