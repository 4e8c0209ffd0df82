"""Checkpoints: states written by dataset_kit 0.1 load, and sampler state is kept apart."""

import json
import os

import numpy as np
import pytest

from dataset_kit import concat_examples
from dataset_kit.datasets import TupleDataset
from dataset_kit.iterators import (
    MultiprocessIterator,
    MultithreadIterator,
    SerialIterator,
    ShuffleOrderSampler,
)
from dataset_kit.serializers import load_npz
from tests.iterators.helpers import Curriculum, Reversing

DATA = os.path.join(os.path.dirname(__file__), "data")
KINDS = {
    "serial": SerialIterator,
    "thread": lambda *a, **k: MultithreadIterator(*a, n_threads=2, **k),
    "process": lambda *a, **k: MultiprocessIterator(*a, n_processes=2, **k),
}


def dataset(n):
    return TupleDataset(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.float32))


def ids(batch):
    return concat_examples(batch)[0].tolist()


def released_cases():
    with open(os.path.join(DATA, "released_v1_states.json")) as f:
        return json.load(f)


def sampler_for(case):
    if case["sampler"] is None:
        return {}
    if case["sampler"] == "Reversing":
        return {"order_sampler": Reversing()}
    return {"order_sampler": ShuffleOrderSampler(0)}  # the state brings the seed back


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("case", released_cases(), ids=lambda c: c["name"])
def test_states_saved_by_release_0_1_resume_with_the_same_batches(case, kind):
    kwargs = {k: v for k, v in case["kwargs"].items() if k not in ("seed", "n_processes")}
    it = KINDS[kind](dataset(case["n"]), case["batch_size"], **kwargs, **sampler_for(case))
    try:
        it.load_state_dict(case["state"])
        got = [ids(b) for _, b in zip(range(len(case["next_batches"])), it)]
    finally:
        it.finalize()
    assert got == case["next_batches"]
    assert it.state_dict()["version"] == 3


def test_npz_checkpoint_saved_by_release_0_1_resumes():
    with open(os.path.join(DATA, "released_v1_serial.json")) as f:
        expected = json.load(f)
    it = SerialIterator(dataset(expected["n"]), expected["batch_size"])
    load_npz(os.path.join(DATA, "released_v1_serial.npz"), it)
    assert [ids(next(it)) for _ in expected["next_batches"]] == expected["next_batches"]


def test_a_user_sampler_with_its_own_state_resumes_exactly():
    sampler = Curriculum(shift=3)
    it = SerialIterator(dataset(7), 3, order_sampler=sampler, seed=0)
    expected = [ids(next(SerialIterator(dataset(7), 3, order_sampler=Curriculum(3), seed=0)))]
    assert ids(next(it)) == expected[0]
    for _ in range(4):
        next(it)
    state = json.loads(json.dumps(it.state_dict()))
    assert state["engine"]["order_sampler"] == {"kind": "test-curriculum", "state": {"shift": 3}}
    reference = [ids(next(it)) for _ in range(6)]
    fresh = SerialIterator(dataset(7), 3, order_sampler=Curriculum(shift=0), seed=0)
    fresh.load_state_dict(state)
    assert [ids(next(fresh)) for _ in range(6)] == reference


def test_loading_a_state_never_changes_the_sampler_object_passed_in():
    shared = ShuffleOrderSampler(1)
    first = SerialIterator(dataset(10), 2, order_sampler=shared, seed=0)
    second = SerialIterator(dataset(10), 2, order_sampler=shared, seed=0)
    other = SerialIterator(dataset(10), 2, order_sampler=ShuffleOrderSampler(99), seed=0)
    first.load_state_dict(other.state_dict())
    assert shared.seed == 1 and first.order_sampler is shared
    assert [ids(next(first)) for _ in range(5)] == [ids(next(other)) for _ in range(5)]
    untouched = SerialIterator(dataset(10), 2, order_sampler=ShuffleOrderSampler(1), seed=0)
    assert [ids(next(second)) for _ in range(5)] == [ids(next(untouched)) for _ in range(5)]


def test_sampler_kind_is_stable_and_a_different_kind_is_refused():
    state = SerialIterator(dataset(7), 3, order_sampler=Curriculum()).state_dict()
    with pytest.raises(ValueError, match="'test-curriculum'.*'Reversing'"):
        SerialIterator(dataset(7), 3, order_sampler=Reversing()).load_state_dict(state)
    state = SerialIterator(dataset(7), 3, seed=1).state_dict()
    assert state["engine"]["order_sampler"]["kind"] == "shuffle"


@pytest.mark.parametrize("change, message", [
    ({"last_batch": "pad"}, "last_batch='pad'"),
    ({"epoch_size": 3}, "epoch_size=3"),
    ({"carry": 2}, "invalid position"),
])
def test_states_of_another_spec_are_refused_naming_the_difference(change, message):
    state = SerialIterator(dataset(10), 2, seed=0).state_dict()
    state["engine"].update(change)
    with pytest.raises(ValueError, match=message):
        SerialIterator(dataset(10), 2).load_state_dict(state)
