"""DataLoader: Gluon's rules and epochs, for every worker kind, resumable."""

import json
import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.iterators import BatchTimeoutError
from dataset_kit.loader import (
    ArrayDataset,
    BatchSampler,
    DataLoader,
    RandomSampler,
    SequentialSampler,
)

WORKERS = [dict(num_workers=0), dict(num_workers=2, thread_pool=True), dict(num_workers=2)]


def ids(batch):
    return [int(i) for i in (batch[0] if isinstance(batch, list) else batch)]


def epochs(loader, count):
    return [[ids(b) for b in loader] for _ in range(count)]


def test_rollover_epochs_and_lengths_are_gluons():
    # Gluon 1.9: BatchSampler(SequentialSampler(10), 3, 'rollover') gives these.
    loader = DataLoader(ArrayDataset(np.arange(10)), 3, last_batch="rollover")
    lengths, seen = [], []
    for _ in range(3):
        lengths.append(len(loader))
        seen.append([ids(b) for b in loader])
    assert lengths == [3, 3, 4]
    assert seen == [[[0, 1, 2], [3, 4, 5], [6, 7, 8]],
                    [[9, 0, 1], [2, 3, 4], [5, 6, 7]],
                    [[8, 9, 0], [1, 2, 3], [4, 5, 6], [7, 8, 9]]]


class GluonBatchSampler:
    """Gluon 1.9.1's BatchSampler.__iter__ over SequentialSampler(n), line for line."""

    def __init__(self, n, batch_size, last_batch):
        self._n, self._batch_size, self._last_batch, self._prev = n, batch_size, last_batch, []

    def __iter__(self):
        batch, self._prev = self._prev, []
        for i in range(self._n):
            batch.append(i)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self):
        if self._last_batch == "keep":
            return (self._n + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return self._n // self._batch_size
        return (len(self._prev) + self._n) // self._batch_size


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), b=st.integers(1, 40),
       last=st.sampled_from(["keep", "discard", "rollover"]))
def test_epochs_and_lengths_are_gluons_even_when_an_epoch_has_no_full_batch(n, b, last):
    gluon = GluonBatchSampler(n, b, last)
    loader = DataLoader(ArrayDataset(np.arange(n)), b, last_batch=last)
    for _ in range(6):
        assert len(loader) == len(gluon)
        assert [ids(x) for x in loader] == list(gluon)


@pytest.mark.parametrize("workers", WORKERS, ids=["serial", "threads", "processes"])
def test_an_epoch_without_a_full_batch_is_empty_and_rolls_its_examples_over(workers):
    # Gluon: 4 examples in batches of 10 with 'rollover' yield nothing for two
    # epochs, then one batch of epochs 0, 1 and 2's examples; 'discard' yields nothing.
    with DataLoader(ArrayDataset(np.arange(4)), 10, last_batch="rollover", **workers) as loader:
        assert [len(loader) for _ in range(1)] == [0]
        assert epochs(loader, 4) == [[], [], [[0, 1, 2, 3, 0, 1, 2, 3, 0, 1]], []]
        state = json.loads(json.dumps(loader.state_dict()))
        assert state["engine"]["carry"] == 6
        rest = epochs(loader, 2)
    with DataLoader(ArrayDataset(np.arange(4)), 10, last_batch="rollover", **workers) as again:
        again.load_state_dict(state)
        assert epochs(again, 2) == rest == [[[2, 3, 0, 1, 2, 3, 0, 1, 2, 3]], []]
    with DataLoader(ArrayDataset(np.arange(4)), 10, last_batch="discard", **workers) as loader:
        assert len(loader) == 0 and epochs(loader, 3) == [[], [], []]


@settings(max_examples=20)
@given(n=st.integers(1, 17), b=st.integers(1, 6), seed=st.integers(0, 2**31),
       last=st.sampled_from(["keep", "discard", "rollover"]),
       workers=st.sampled_from(WORKERS))
def test_each_epoch_has_len_batches_and_visits_examples_as_its_policy_says(n, b, seed, last,
                                                                          workers):
    with DataLoader(ArrayDataset(np.arange(n)), b, shuffle=True, last_batch=last, seed=seed,
                    **workers) as loader:
        stream = []
        for _ in range(3):
            expected = len(loader)
            batches = [ids(x) for x in loader]
            assert len(batches) == expected
            stream += [i for x in batches for i in x]
            if last == "keep":
                assert sorted(i for x in batches for i in x) == list(range(n))
            else:
                assert all(len(x) == b for x in batches)
    if last == "rollover":
        for e in range(len(stream) // n):
            assert sorted(stream[e * n:(e + 1) * n]) == list(range(n))
    serial = DataLoader(ArrayDataset(np.arange(n)), b, shuffle=True, last_batch=last, seed=seed)
    assert [i for _ in range(3) for x in serial for i in ids(x)] == stream


@pytest.mark.parametrize("workers", WORKERS, ids=["serial", "threads", "processes"])
def test_a_state_saved_mid_epoch_resumes_with_the_same_batches(workers):
    data = ArrayDataset(np.arange(23), np.arange(23) * 2.0)
    expected = epochs(DataLoader(data, 4, shuffle=True, seed=5, last_batch="rollover"), 3)
    with DataLoader(data, 4, shuffle=True, seed=5, last_batch="rollover", **workers) as first:
        it = iter(first)
        head = [ids(next(it)) for _ in range(3)]
        state = json.loads(json.dumps(first.state_dict()))
    with DataLoader(data, 4, shuffle=True, last_batch="rollover", **workers) as second:
        second.load_state_dict(state)
        rest = epochs(second, 3)
    assert head + rest[0] == expected[0] and rest[1:] == expected[1:]


def _pid_batchify(examples):
    return os.getpid(), np.asarray(examples)


def test_batchify_runs_where_the_batch_is_built():
    with DataLoader(ArrayDataset(np.arange(8)), 4, batchify_fn=_pid_batchify,
                    num_workers=2) as loader:
        pids = {pid for pid, _ in loader}
    assert os.getpid() not in pids and len(pids) >= 1


class Slow:
    def __len__(self):
        return 8

    def __getitem__(self, i):
        time.sleep(2.0)
        return i


@pytest.mark.parametrize("thread_pool", [False, True])
def test_a_batch_slower_than_timeout_raises(thread_pool):
    loader = DataLoader(Slow(), 2, num_workers=1, thread_pool=thread_pool, timeout=0.3)
    with pytest.raises(BatchTimeoutError, match="timeout=0.3"):
        next(iter(loader))
    loader.close()


@pytest.mark.parametrize("kwargs, message", [
    ({}, "batch_size must be specified"),
    ({"batch_size": 2, "shuffle": True, "sampler": SequentialSampler(4)}, "shuffle must not"),
    ({"batch_sampler": BatchSampler(SequentialSampler(4), 2), "batch_size": 2},
     "must not be specified if batch_sampler"),
    ({"batch_sampler": BatchSampler(SequentialSampler(4), 2), "last_batch": "keep"},
     "must not be specified if batch_sampler"),
    ({"batch_size": 2, "last_batch": "drop"}, "last_batch must be one of"),
    ({"batch_size": 2, "timeout": 0}, "timeout must be a positive"),
    ({"batch_size": 2, "device": "gpu0"}, "'gpu0' is not supported"),
])
def test_gluons_argument_rules(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(ArrayDataset(np.arange(4)), **kwargs)


def test_samplers_and_batch_samplers_drive_the_engine():
    data = ArrayDataset(np.arange(10))
    assert epochs(DataLoader(data, 4, sampler=SequentialSampler(6, start=2)), 1) == \
        [[[2, 3, 4, 5], [6, 7]]]
    via_batch_sampler = DataLoader(data, batch_sampler=BatchSampler(RandomSampler(10, seed=3),
                                                                    4, "discard"))
    direct = DataLoader(data, 4, sampler=RandomSampler(10, seed=3), last_batch="discard")
    assert epochs(via_batch_sampler, 2) == epochs(direct, 2)
    assert [len(e) for e in epochs(direct, 2)] == [2, 2]
    user_iterable = [9, 8, 7, 6, 5]
    assert epochs(DataLoader(data, 2, sampler=user_iterable), 2) == \
        [[[9, 8], [7, 6], [5]]] * 2
    with pytest.raises(TypeError, match="batch_sampler must be an iterable of index lists"):
        DataLoader(data, batch_sampler=3)


class Buckets:
    """A bucketing batch sampler: batches of varying size, reshuffled every epoch."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        order = self.rng.permutation(12)
        return iter([order[:5].tolist(), order[5:7].tolist(), order[7:].tolist()])

    def __len__(self):
        return 3


@pytest.mark.parametrize("workers", WORKERS, ids=["serial", "threads", "processes"])
def test_a_custom_batch_sampler_gives_its_own_batches_and_resumes(workers):
    data = ArrayDataset(np.arange(12))
    expected = epochs(DataLoader(data, batch_sampler=Buckets(7)), 3)
    assert [[len(b) for b in e] for e in expected] == [[5, 2, 5]] * 3
    assert all(sorted(i for b in e for i in b) == list(range(12)) for e in expected)
    with DataLoader(data, batch_sampler=Buckets(7), **workers) as loader:
        assert len(loader) == 3
        it = iter(loader)
        head = [ids(next(it)) for _ in range(2)]
        state = json.loads(json.dumps(loader.state_dict()))
    resumed = DataLoader(data, batch_sampler=Buckets(7))
    resumed.load_state_dict(state)
    rest = [ids(b) for b in resumed]
    assert head + rest == expected[0]
    with pytest.raises(ValueError, match="empty batch"):
        DataLoader(data, batch_sampler=[[0, 1], []])


class FetchLog:
    """Records every example fetched (threads share the list)."""

    def __init__(self, n):
        self.n, self.log = n, []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.log.append(i)
        return i


def wait_for(condition, seconds=20.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_auto_reload_starts_building_at_construction_and_after_each_epoch():
    data = FetchLog(6)
    with DataLoader(data, 2, num_workers=1, thread_pool=True, prefetch=2,
                    auto_reload=True) as loader:
        assert loader.auto_reload is True
        assert wait_for(lambda: len(data.log) >= 2)  # before any iter(), as in Gluon
        assert [ids(b) for b in loader] == [[0, 1], [2, 3], [4, 5]]
        assert wait_for(lambda: len(data.log) > 6)  # the next epoch is on its way


def test_without_auto_reload_nothing_is_built_before_iter_asks_for_an_epoch():
    # Gluon 1.9.1's code defaults to auto_reload=False (its docstring says True).
    data = FetchLog(6)
    with DataLoader(data, 2, num_workers=1, thread_pool=True, prefetch=2) as loader:
        assert loader.auto_reload is False
        time.sleep(0.3)
        assert data.log == []
        assert [ids(b) for b in loader] == [[0, 1], [2, 3], [4, 5]]
        time.sleep(0.3)
        assert sorted(data.log) == list(range(6))  # nothing of the next epoch yet
        assert [ids(b) for b in loader] == [[0, 1], [2, 3], [4, 5]]


def test_auto_reload_must_be_a_bool():
    with pytest.raises(TypeError, match="auto_reload must be True or False, got 'yes'"):
        DataLoader(ArrayDataset(np.arange(4)), 2, auto_reload="yes")


@pytest.mark.parametrize("try_nopython", [None, True, False])
def test_try_nopython_is_accepted_and_changes_nothing(try_nopython):
    loader = DataLoader(ArrayDataset(np.arange(4)), 2, try_nopython=try_nopython)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    with pytest.raises(TypeError, match="try_nopython must be None, True or False, got 'x'"):
        DataLoader(ArrayDataset(np.arange(4)), 2, try_nopython="x")


def test_a_rolled_over_tail_longer_than_an_epoch_of_a_stateful_sampler_is_not_checkpointed():
    class Reversed:  # a user's sampler: an iterable, asked once per epoch
        def __iter__(self):
            return iter(range(3, -1, -1))

        def __len__(self):
            return 4

    loader = DataLoader(ArrayDataset(np.arange(4)), 10, sampler=Reversed(), last_batch="rollover")
    assert epochs(loader, 1) == [[]]
    loader.state_dict()  # a tail of one epoch: its order is kept in the state
    assert epochs(loader, 1) == [[]]
    with pytest.raises(ValueError, match="spans several epochs"):
        loader.state_dict()
    assert epochs(loader, 1) == [[[3, 2, 1, 0, 3, 2, 1, 0, 3, 2]]]


def test_the_conversion_to_gluons_arrays_is_a_profile_phase_of_the_main_process():
    import dataset_kit

    loader = DataLoader(np.arange(12, dtype=np.float32), batch_size=4, num_workers=2)
    try:
        with dataset_kit.profile(loader) as p:
            assert len(list(loader)) == 3
    finally:
        loader.close()
    assert p.summary()["marked"]["main"]["converter"]["spans"] == 3
