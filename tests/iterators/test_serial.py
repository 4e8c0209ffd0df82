import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit import concat_examples
from dataset_kit.datasets import TupleDataset
from dataset_kit.iterators import OrderSampler, SerialIterator, ShuffleOrderSampler
from dataset_kit.serializers import load_npz, save_npz


def dataset(n):
    return TupleDataset(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.float32) * 2)


def ids(batch):
    return concat_examples(batch)[0].tolist()


def take(it, k):
    out = []
    for _ in range(k):
        try:
            out.append(ids(next(it)))
        except StopIteration:
            break
    return out


def test_no_shuffle_without_repeat_matches_chainer():
    it = SerialIterator(list(range(5)), 2, repeat=False, shuffle=False)
    assert it.previous_epoch_detail is None
    assert next(it) == [0, 1] and it.epoch == 0 and not it.is_new_epoch
    assert it.epoch_detail == pytest.approx(0.4)
    assert next(it) == [2, 3]
    assert it.previous_epoch_detail == pytest.approx(0.4)
    assert next(it) == [4]
    assert it.epoch == 1 and it.is_new_epoch and it.epoch_detail == 1.0
    with pytest.raises(StopIteration):
        next(it)


def test_repeat_fills_crossing_batch_from_next_epoch_and_flags_it():
    it = SerialIterator(list(range(5)), 3, shuffle=False)
    assert next(it) == [0, 1, 2] and not it.is_new_epoch
    assert next(it) == [3, 4, 0] and it.is_new_epoch and it.epoch == 1
    assert it.current_position == 1
    assert next(it) == [1, 2, 3] and not it.is_new_epoch


def test_batch_larger_than_dataset_spans_epochs():
    it = SerialIterator(list(range(3)), 7, shuffle=False)
    assert next(it) == [0, 1, 2, 0, 1, 2, 0]
    assert it.epoch == 2 and it.current_position == 1 and it.is_new_epoch
    once = SerialIterator(list(range(3)), 7, shuffle=False, repeat=False)
    assert next(once) == [0, 1, 2]
    with pytest.raises(StopIteration):
        next(once)


def test_shuffle_none_means_shuffle():
    it = SerialIterator(list(range(50)), 50, seed=1)
    batch = next(it)
    assert sorted(batch) == list(range(50)) and batch != list(range(50))


def test_shuffle_and_order_sampler_together_are_an_error():
    with pytest.raises(ValueError, match="either shuffle or order_sampler"):
        SerialIterator([1], 1, shuffle=True, order_sampler=ShuffleOrderSampler())


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError),
                                        (True, TypeError)])
def test_bad_batch_size_is_named(bad, error):
    with pytest.raises(error, match="batch_size"):
        SerialIterator([1], bad)


def test_bad_seed_is_named():
    with pytest.raises(ValueError, match="seed"):
        SerialIterator([1], 1, seed=-1)


def test_empty_dataset_repeating_is_an_error_and_non_repeating_stops():
    with pytest.raises(ValueError, match="non-empty"):
        next(SerialIterator([], 1))
    with pytest.raises(StopIteration):
        next(SerialIterator([], 1, repeat=False))


def test_reset_starts_over_with_the_same_orders():
    it = SerialIterator(dataset(7), 3, seed=2)
    first = take(it, 4)
    it.reset()
    assert it.epoch == 0 and it.previous_epoch_detail is None
    assert take(it, 4) == first


def test_iteration_protocol_and_context_manager():
    with SerialIterator(list(range(4)), 2, repeat=False, shuffle=False) as it:
        assert list(it) == [[0, 1], [2, 3]]


@given(n=st.integers(1, 30), b=st.integers(1, 40), seed=st.integers(0, 2**32))
def test_every_epoch_visits_each_index_exactly_once(n, b, seed):
    it = SerialIterator(dataset(n), b, seed=seed)
    stream = sum(take(it, (3 * n) // b + 1), [])
    for e in range(len(stream) // n):
        assert sorted(stream[e * n:(e + 1) * n]) == list(range(n))


@given(n=st.integers(1, 30), b=st.integers(1, 40))
def test_epoch_detail_and_previous_epoch_detail_are_consistent(n, b):
    it = SerialIterator(dataset(n), b, seed=0)
    consumed = 0
    for _ in range(10):
        before = it.epoch_detail
        batch = next(it)
        consumed += len(batch)
        assert it.previous_epoch_detail == pytest.approx(before)
        assert it.epoch_detail == pytest.approx(consumed / n)
        assert it.epoch == consumed // n


@given(
    n=st.integers(1, 25), b=st.integers(1, 40), seed=st.integers(0, 2**32),
    repeat=st.booleans(), shuffle=st.booleans(), data=st.data(),
)
def test_resume_after_any_step_repeats_the_same_batches(n, b, seed, repeat, shuffle, data):
    steps_per_epoch = -(-n // b)
    k = data.draw(st.integers(0, 3 * steps_per_epoch))
    later = 4 * steps_per_epoch
    reference = SerialIterator(dataset(n), b, repeat=repeat, shuffle=shuffle, seed=seed)
    expected = take(reference, k + later)
    it = SerialIterator(dataset(n), b, repeat=repeat, shuffle=shuffle, seed=seed)
    take(it, k)
    state = json.loads(json.dumps(it.state_dict()))
    fresh = SerialIterator(dataset(n), b, repeat=repeat, shuffle=shuffle)  # unseeded
    fresh.load_state_dict(state)
    assert fresh.epoch_detail == it.epoch_detail
    assert fresh.previous_epoch_detail == it.previous_epoch_detail
    assert fresh.is_new_epoch == it.is_new_epoch
    assert take(fresh, later) == expected[k:]


def test_state_size_does_not_grow_with_the_dataset():
    small = json.dumps(SerialIterator(dataset(10), 2, seed=1).state_dict())
    large = json.dumps(SerialIterator(dataset(100_000), 2, seed=1).state_dict())
    # The length's digits appear three times (the spec and the ledger): 12 more.
    assert len(large) - len(small) < 15


class ReverseEachEpoch(OrderSampler):
    """A stateful sampler: each call reverses the previous order."""

    def __call__(self, current_order, current_position):
        return np.asarray(current_order)[::-1].copy()


def test_stateful_sampler_state_carries_the_order_and_resumes():
    it = SerialIterator(dataset(5), 2, order_sampler=ReverseEachEpoch())
    expected = take(SerialIterator(dataset(5), 2, order_sampler=ReverseEachEpoch()), 12)
    take(it, 4)
    state = it.state_dict()
    # epoch 1: epoch 0 reversed
    assert state["engine"]["order_sampler"]["order"] == [0, 1, 2, 3, 4]
    fresh = SerialIterator(dataset(5), 2, order_sampler=ReverseEachEpoch())
    fresh.load_state_dict(state)
    assert take(fresh, 8) == expected[4:]


def test_bad_sampler_orders_are_rejected():
    # Chainer's rule: the first order's length is the epoch size; a later order of
    # another length, or indices outside the dataset, are errors.
    lengths = iter([4, 3])
    sampler = lambda order, pos: np.arange(next(lengths))  # noqa: E731
    it = SerialIterator(list(range(4)), 2, order_sampler=sampler)
    assert next(it) == [0, 1]
    # Like Chainer, the sampler is asked for epoch 1 by the batch that ends epoch 0.
    with pytest.raises(ValueError, match="length 3 for epoch 1.*first order had length 4"):
        next(it)
    with pytest.raises(ValueError, match=r"outside \[0, 4\)"):
        SerialIterator(list(range(4)), 2, order_sampler=lambda order, pos: np.arange(5))


@pytest.mark.parametrize("change, message", [
    ({"dataset_length": 11}, "dataset_length=11"),
    ({"batch_size": 3}, "batch_size=3"),
    ({"repeat": False}, "repeat=False"),
    ({"version": 99}, "version 99"),
    ({"format": "x"}, "not a dataset_kit iterator state"),
    ({"current_position": 10}, "invalid position"),
    ({"order_sampler": {"kind": "none"}}, "order sampler 'none'"),
])
def test_incompatible_states_are_rejected_saying_what_differs(change, message):
    state = SerialIterator(dataset(10), 2, seed=0).state_dict()
    # The envelope's fields, or the engine's.
    (state if set(change) <= {"version", "format"} else state["engine"]).update(change)
    it = SerialIterator(dataset(10), 2)
    with pytest.raises(ValueError, match=message):
        it.load_state_dict(state)


def test_state_from_shuffled_iterator_does_not_load_into_ordered_one():
    state = SerialIterator(dataset(10), 2).state_dict()
    with pytest.raises(ValueError, match="order sampler"):
        SerialIterator(dataset(10), 2, shuffle=False).load_state_dict(state)


def test_serialize_round_trip_through_npz_with_chainer_keys(tmp_path):
    it = SerialIterator(dataset(9), 4, seed=3)
    expected = take(SerialIterator(dataset(9), 4, seed=3), 10)
    take(it, 5)
    save_npz(tmp_path / "it.npz", it)
    with np.load(tmp_path / "it.npz") as npz:
        keys = set(npz.files)
    assert {"current_position", "epoch", "is_new_epoch", "order",
            "previous_epoch_detail"} <= keys
    fresh = SerialIterator(dataset(9), 4)
    load_npz(tmp_path / "it.npz", fresh)
    assert fresh.epoch == it.epoch and fresh.current_position == it.current_position
    assert take(fresh, 5) == expected[5:]
