import numpy as np
import pytest

from dataset_kit.datasets import ConcatenatedDataset, SubDataset, TransformDataset, TupleDataset
from dataset_kit.iterators import MultiprocessIterator, SerialIterator, example_rng
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


class PlainSequence:
    """What Gluon and PyTorch users write: __len__ and __getitem__, no DatasetMixin."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.float64(i) + example_rng().random()


def _noise(example):
    value = example[0] if isinstance(example, tuple) else example
    return float(value) % 1.0


DATASET_KINDS = {
    "DatasetMixin": lambda n: TransformDataset(Augmented(n, 1), lambda ex: ex[0][0]),
    "plain sequence": PlainSequence,
    "TransformDataset over a plain sequence": lambda n: TransformDataset(PlainSequence(n),
                                                                         lambda x: x),
    "SubDataset over a plain sequence": lambda n: SubDataset(PlainSequence(n + 2), 2, n + 2),
    "ConcatenatedDataset": lambda n: ConcatenatedDataset(PlainSequence(n // 2),
                                                         PlainSequence(n - n // 2)),
    "TupleDataset with a plain-sequence column": lambda n: TupleDataset(PlainSequence(n),
                                                                        np.arange(n)),
}


@pytest.mark.parametrize("kind", sorted(DATASET_KINDS))
def test_every_dataset_kind_gives_each_example_its_own_draws(kind):
    n = 12
    whole = next(SerialIterator(DATASET_KINDS[kind](n), n, seed=5, shuffle=False))
    noise = [_noise(ex) for ex in whole]
    assert len(set(noise)) == n  # not the same draw for every example of the batch
    one_by_one = SerialIterator(DATASET_KINDS[kind](n), 1, seed=5, shuffle=False)
    assert [_noise(next(one_by_one)[0]) for _ in range(n)] == noise  # a function of the index
    with MultiprocessIterator(DATASET_KINDS[kind](n), 5, seed=5, shuffle=False,
                              n_processes=2) as it:
        got = [_noise(ex) for _ in range(3) for ex in next(it)][:n]
    assert got == noise


def test_example_rng_is_exported_at_the_top_level():
    import dataset_kit

    assert dataset_kit.example_rng is example_rng


def test_a_batch_context_is_installed_only_while_its_batch_is_fetched_even_when_it_raises():
    from dataset_kit import _example_context

    seen = []

    def fetch(dataset, indices):
        seen.append(example_rng().integers(1 << 30))
        if dataset == "broken":
            raise OSError("unreadable")
        return list(indices)

    indices = np.array([4, 2])
    assert _example_context.fetch_within(fetch, "ok", indices, 7, 3) == [4, 2]
    outer = _example_context.BatchContext(7, indices, 3)
    previous = _example_context.install(outer)
    try:
        with pytest.raises(OSError, match="unreadable"):
            _example_context.fetch_within(fetch, "broken", indices, 7, 3)
        assert _example_context.current() is outer  # an enclosing batch's context is back
    finally:
        _example_context.install(previous)
    assert _example_context.current() is previous
    # The draws inside are those of (seed 7, epoch 3, index 4): the same each time.
    assert seen[0] == seen[1]
