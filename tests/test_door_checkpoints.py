"""Every front door's load_state_dict is all or nothing (issue 19, points 3-4).

For each door (io/, loader/, sources/, distributed/), a corrupted state is
refused with a ValueError and the door then yields the batches of a twin that
never saw it; a state that loads is loaded by the twin too and both go on alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.datasets import TupleDataset
from dataset_kit.distributed import ShardedIterator
from dataset_kit.io import NDArrayIter, PrefetchingIter, ResizeIter
from dataset_kit.loader import ArrayDataset, BatchSampler, DataLoader, RandomSampler
from dataset_kit.sources import data_iterator_simple
from tests.iterators.state_mutations import corrupted, load_or_reject


def _mx(batch: Any) -> Any:
    return [np.asarray(d).tolist() for d in batch.data], batch.pad


class Stepper:
    """One door and how to take its next batch in a comparable form (None: epoch end)."""

    def __init__(self, door: Any, step: Callable[[Any], Any]) -> None:
        self.door, self._step = door, step

    def take(self, k: int) -> list:
        return [self._step(self) for _ in range(k)]


def mx_step(stepper: Stepper) -> Any:
    try:
        return _mx(stepper.door.next())
    except StopIteration:
        stepper.door.reset()
        return None


def loader_step(stepper: Stepper) -> Any:
    epoch = getattr(stepper, "epoch", None)
    try:
        return np.asarray(next(epoch)).tolist()
    except (StopIteration, TypeError):
        stepper.epoch = iter(stepper.door)
        return None


def sources_step(stepper: Stepper) -> Any:
    return [np.asarray(v).tolist() for v in stepper.door.next()]


def sharded_step(stepper: Stepper) -> Any:
    try:
        return [np.asarray(x).tolist() for x in next(stepper.door)]
    except StopIteration:
        stepper.door.reset()
        return None


DOORS: dict[str, Callable[[], Stepper]] = {
    "io.NDArrayIter": lambda: Stepper(NDArrayIter(
        np.arange(11.0), np.arange(11), batch_size=3, shuffle=True, seed=2,
        last_batch_handle="roll_over"), mx_step),
    "io.ResizeIter": lambda: Stepper(ResizeIter(
        NDArrayIter(np.arange(7.0), batch_size=2, shuffle=True, seed=1), size=5), mx_step),
    "io.PrefetchingIter": lambda: Stepper(PrefetchingIter([
        NDArrayIter(np.arange(8.0), batch_size=2, shuffle=True, seed=3),
        NDArrayIter(np.arange(8.0) * 10, batch_size=2, data_name="x")]), mx_step),
    "loader.DataLoader": lambda: Stepper(DataLoader(
        ArrayDataset(np.arange(10)), 3, sampler=RandomSampler(10, seed=4),
        last_batch="rollover"), loader_step),
    "loader.DataLoader-batches": lambda: Stepper(DataLoader(
        ArrayDataset(np.arange(10)),
        batch_sampler=BatchSampler(RandomSampler(10, seed=1), 4, "keep")), loader_step),
    "sources.DataIterator": lambda: Stepper(data_iterator_simple(
        lambda i: (np.float32(i), np.int64(i)), 9, 2, shuffle=True,
        rng=np.random.RandomState(5), with_file_cache=False), sources_step),
    "distributed.ShardedIterator": lambda: Stepper(ShardedIterator(
        TupleDataset(np.arange(13)), 2, seed=6), sharded_step),
}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_a_corrupted_door_state_is_refused_leaving_the_door_as_its_twin(door):
    it, twin = DOORS[door](), DOORS[door]()
    start = it.door.state_dict()

    @settings(max_examples=60, deadline=None)
    @given(steps=st.integers(0, 8), data=st.data())
    def check(steps, data):
        for stepper in (it, twin):
            stepper.door.load_state_dict(start)
            stepper.epoch = None
        assert it.take(steps) == twin.take(steps)
        state = data.draw(corrupted(it.door.state_dict()))
        if load_or_reject(it.door, state):
            twin.door.load_state_dict(state)
        assert it.take(5) == twin.take(5)

    check()


def test_a_prefetching_iter_whose_second_state_is_refused_keeps_the_first_as_it_was():
    make = DOORS["io.PrefetchingIter"]
    it, twin, other = make(), make(), make()
    other.take(3)
    state = other.door.state_dict()
    state["door"]["inner"][1]["engine"]["epoch"] = -1
    with pytest.raises(ValueError, match="invalid position"):
        it.door.load_state_dict(state)
    assert it.take(6) == twin.take(6)


@pytest.mark.parametrize("key, value, message", [
    ("exhausted", "no", r"state\['door'\]\['exhausted'\] must be True or False, got 'no'"),
    ("epoch_open", 1, r"state\['door'\]\['epoch_open'\] must be True or False, got 1"),
])
def test_a_data_iter_flag_of_another_type_is_refused_naming_it(key, value, message):
    it = DOORS["io.NDArrayIter"]().door
    state = it.state_dict()
    state["door"][key] = value
    with pytest.raises(ValueError, match=message):
        it.load_state_dict(state)


def test_a_resize_iter_count_out_of_range_is_refused_before_the_inner_state_loads():
    it, twin, other = DOORS["io.ResizeIter"](), DOORS["io.ResizeIter"](), DOORS["io.ResizeIter"]()
    other.take(2)
    state = other.door.state_dict()
    state["door"]["cur"] = 6
    with pytest.raises(ValueError, match=r"state\['door'\]\['cur'\] must be an integer in "
                                         r"\[0, 6\), got 6"):
        it.door.load_state_dict(state)
    assert it.take(6) == twin.take(6)


def test_a_prefetching_iter_refuses_inner_states_that_stand_at_different_places():
    # Each inner state is valid alone; together they would disagree mid-epoch.
    make = DOORS["io.PrefetchingIter"]
    it, twin, other = make(), make(), make()
    other.take(1)
    state = other.door.state_dict()
    state["door"]["inner"][1] = make().door.state_dict()["door"]["inner"][1]
    with pytest.raises(ValueError, match=r"state\['door'\]\['inner'\]\[1\] stands at"):
        it.door.load_state_dict(state)
    assert it.take(6) == twin.take(6)
