import numpy as np
import pytest

from dataset_kit.datasets import TupleDataset
from dataset_kit.iterators import MultithreadIterator, SerialIterator
from tests.iterators.helpers import Augmented, Misbehaving, batch_key


def take(it, k):
    return [batch_key(next(it)) for _ in range(k)]


@pytest.mark.parametrize("n_threads", [1, 2, 4])
def test_same_batches_as_serial_including_augmentation(n_threads):
    expected = take(SerialIterator(Augmented(23), 5, seed=7), 15)
    with MultithreadIterator(Augmented(23), 5, seed=7, n_threads=n_threads) as it:
        assert take(it, 15) == expected


def test_resume_discards_prefetched_batches():
    expected = take(SerialIterator(Augmented(10), 3, seed=1), 12)
    with MultithreadIterator(Augmented(10), 3, seed=1, n_threads=2) as it:
        take(it, 5)
        state = it.state_dict()
        take(it, 3)  # run ahead, then go back
        it.load_state_dict(state)
        assert take(it, 7) == expected[5:]


def test_non_repeating_iteration_stops():
    ds = TupleDataset(np.arange(7))
    with MultithreadIterator(ds, 3, repeat=False, shuffle=False, n_threads=2) as it:
        sizes = [len(b) for b in it]
    assert sizes == [3, 3, 1]


def test_exception_in_dataset_reaches_the_caller():
    with MultithreadIterator(Misbehaving(6, 2, "raise"), 3, shuffle=False) as it:
        with pytest.raises(ValueError, match="boom at index 2"):
            next(it)


def test_finalized_iterator_refuses_to_continue():
    it = MultithreadIterator(Augmented(4), 2)
    next(it)
    it.finalize()
    it.finalize()
    with pytest.raises(RuntimeError, match="finalized"):
        next(it)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (1.5, TypeError)])
def test_bad_thread_count_is_named(bad, error):
    with pytest.raises(error, match="n_threads"):
        MultithreadIterator([1], 1, n_threads=bad)
