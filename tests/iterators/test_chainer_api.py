"""Chainer's vocabulary: next(), serializers by duck typing, Chainer-keyed states, copies."""

import copy
import pickle
import warnings

import numpy as np
import pytest

from dataset_kit.iterators import (
    MultiprocessIterator,
    MultithreadIterator,
    SerialIterator,
    ShuffleOrderSampler,
)
from tests.iterators.helpers import Misbehaving

KINDS = {
    "serial": SerialIterator,
    "thread": lambda *a, **k: MultithreadIterator(*a, n_threads=2, **k),
    "process": lambda *a, **k: MultiprocessIterator(*a, n_processes=2, **k),
}


class Writer:
    """A user's serializer: no dataset_kit base class, Chainer's protocol only."""

    def __init__(self):
        self.target = {}

    def __call__(self, key, value):
        self.target[key] = np.asarray(value).copy()
        return value


class Reader:
    """A user's deserializer: returns the stored value, KeyError when absent."""

    def __init__(self, target):
        self.target = target

    def __call__(self, key, value):
        stored = self.target[key]
        if isinstance(value, np.ndarray):
            np.copyto(value, stored)
            return value
        return type(value)(stored.item() if stored.ndim == 0 else stored)


def take(it, k):
    return [list(map(int, next(it))) for _ in range(k)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_users_serializer_pair_round_trips_mid_epoch(kind):
    it = KINDS[kind](np.arange(11), 3, seed=4)
    expected = take(KINDS[kind](np.arange(11), 3, seed=4), 9)
    take(it, 4)
    writer = Writer()
    it.serialize(writer)
    order = "_order" if kind == "thread" else "order"  # the key Chainer's same kind uses
    assert {"current_position", "epoch", "is_new_epoch", order,
            "previous_epoch_detail", "dataset_kit_state"} <= set(writer.target)
    fresh = KINDS[kind](np.arange(11), 3)
    fresh.serialize(Reader(writer.target))
    assert take(fresh, 5) == expected[4:]
    it.finalize()
    fresh.finalize()


def chainer_style_state(it):
    """What Chainer's own iterator writes: its keys, no dataset_kit_state."""
    writer = Writer()
    it.serialize(writer)
    del writer.target["dataset_kit_state"]
    return writer.target


def test_a_chainer_state_resumes_the_epoch_in_its_own_order_then_the_own_sampler():
    source = SerialIterator(np.arange(10), 4, seed=1)
    take(source, 1)
    state = chainer_style_state(source)
    order = state["order"].tolist()
    target = SerialIterator(np.arange(10), 4, seed=99)  # another shuffle
    target.serialize(Reader(state))
    assert target.epoch == 0 and target.current_position == 4
    assert target.previous_epoch_detail == pytest.approx(0.0)
    saved = target.state_dict()
    first, second = take(target, 2)
    assert first == order[4:8]
    epoch_1 = ShuffleOrderSampler(99).epoch_order(1, 10).tolist()
    assert second == order[8:10] + epoch_1[:2]
    # The saved order of the epoch in progress is part of the checkpoint.
    again = SerialIterator(np.arange(10), 4, seed=5)
    again.load_state_dict(saved)
    assert take(again, 2) == [first, second]


def test_older_chainer_snapshots_with_underscore_order_and_no_previous_detail_load():
    source = SerialIterator(np.arange(6), 2, seed=3)
    take(source, 2)
    state = chainer_style_state(source)
    state["_order"] = state.pop("order")
    del state["previous_epoch_detail"]
    target = SerialIterator(np.arange(6), 2, seed=8)
    target.serialize(Reader(state))
    assert target.epoch_detail == pytest.approx(4 / 6)
    assert target.previous_epoch_detail == pytest.approx(2 / 6)  # Chainer's guess
    assert take(target, 1) == [state["_order"][4:6].tolist()]
    assert target.is_new_epoch


@pytest.mark.parametrize("missing", ["current_position", "epoch", "is_new_epoch", "order"])
def test_a_state_missing_a_needed_key_names_it_and_changes_nothing(missing):
    source = SerialIterator(np.arange(6), 2, seed=3)
    take(source, 1)
    state = chainer_style_state(source)
    del state[missing]
    target = SerialIterator(np.arange(6), 2, seed=3)
    with pytest.raises(KeyError, match=missing if missing != "order" else "_order"):
        target.serialize(Reader(state))
    assert target.epoch_detail == 0.0


def test_epoch_size_follows_the_samplers_order_length():
    def twice(order, position):
        return np.repeat(np.arange(3), 2)

    it = SerialIterator([10, 20, 30], 2, order_sampler=twice)
    batches = [next(it) for _ in range(3)]
    assert sorted(sum(batches, [])) == [10, 10, 20, 20, 30, 30]
    assert it.epoch == 1 and it.is_new_epoch and it.epoch_detail == 1.0


def test_a_stateful_sampler_is_called_as_chainer_calls_it():
    calls = []

    def sampler(order, position):
        calls.append((list(order), position))
        return np.asarray(order)[::-1].copy()

    it = SerialIterator(list(range(5)), 2, order_sampler=sampler)
    assert calls == [([0, 1, 2, 3, 4], 0)]  # at construction
    for _ in range(3):
        next(it)  # the third batch crosses: its last chunk of epoch 0 began at 4
    assert calls[1] == ([4, 3, 2, 1, 0], 4)


def test_next_is_chainers_spelling():
    it = SerialIterator([1, 2, 3], 2, shuffle=False)
    assert it.next() == [1, 2]


@pytest.mark.parametrize("after", [0, 2])
def test_a_multiprocess_iterator_pickles_and_the_copy_yields_the_same_batches(after):
    it = MultiprocessIterator(np.arange(13), 3, seed=2, n_processes=2)
    take(it, after)
    clone = pickle.loads(pickle.dumps(it))
    try:
        assert take(clone, 6) == take(it, 6)
    finally:
        it.finalize()
        clone.finalize()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_copy_gives_an_independent_iterator_at_the_same_position(kind):
    it = KINDS[kind](np.arange(9), 2, seed=0, repeat=False)
    take(it, 1)
    other = copy.copy(it)
    rest = take(it, 4)
    with pytest.raises(StopIteration):
        next(it)
    assert take(other, 4) == rest
    it.finalize()
    other.finalize()


def test_slow_batches_warn_with_chainers_timeout_warning_category():
    assert issubclass(MultiprocessIterator.TimeoutWarning, RuntimeWarning)
    with MultiprocessIterator(Misbehaving(6, 0, "sleep"), 2, shuffle=False, n_processes=1,
                              dataset_timeout=0.3) as it:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            next(it)
    assert any(w.category is MultiprocessIterator.TimeoutWarning for w in caught)
