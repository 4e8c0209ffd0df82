"""The first batch of a fresh pool: claimed chunk by chunk by forked workers."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit import DatasetMixin, example_rng
from dataset_kit.engine._fetch import fetch_batch
from dataset_kit.engine._process import first_batch as _first_batch
from dataset_kit.engine._statemachine import BatchPlan
from dataset_kit.iterators import BatchTimeoutError, MultiprocessIterator, SerialIterator
from tests.iterators.helpers import batch_key

SEED = 3


class Noisy(DatasetMixin):
    """Examples with augmentation: a worker that builds one must draw what serial draws."""

    def __len__(self) -> int:
        return 500

    def get_example(self, i):
        return np.full(4, i, np.float32) + example_rng().random(4, dtype=np.float32), np.int64(i)


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 300), workers=st.integers(1, 80), claimers=st.integers(1, 4),
       epochs=st.sampled_from(["int", "array"]))
def test_claimers_build_each_example_once_and_the_join_equals_one_fetch(size, workers, claimers,
                                                                        epochs):
    dataset = Noisy()
    indices = np.random.default_rng(size).permutation(len(dataset))[:size]
    plan = BatchPlan(indices, 2 if epochs == "int" else np.arange(size) % 3)
    claims = _first_batch.Claims(size, workers)
    # Claimers take turns on one pipe, as forked workers do with their inherited copies.
    fds = [os.dup(claims.fd) for _ in range(claimers)]
    claims.close()
    parts = []
    lock = threading.Lock()

    def claim(fd):
        part = _first_batch.build_claimed(dataset, plan, SEED, fd, claims.chunk)
        with lock:
            parts.append(part)

    threads = [threading.Thread(target=claim, args=(fd,)) for fd in fds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(p for positions, _ in parts for p in positions) == list(range(size))
    assert claims.chunk * min(_first_batch._MOST_TOKENS, 16 * workers) >= size
    joined = _first_batch.join_claimed(parts, size)
    assert batch_key(joined) == batch_key(fetch_batch(dataset, plan, SEED, stack=True))


def test_a_join_missing_a_position_is_refused():
    dataset = Noisy()
    plan = BatchPlan(np.arange(4), 0)
    part = ([0, 1, 3], list(fetch_batch(dataset, plan, SEED))[:3])
    with pytest.raises(RuntimeError, match="built 3 examples of a first batch of 4"):
        _first_batch.join_claimed([part], 4)
    with pytest.raises(RuntimeError, match="two workers built example 1"):
        _first_batch.join_claimed([part, ([1], part[1][1:2])], 4)


@pytest.mark.parametrize("size, workers", [(0, 2), (3, 0)])
def test_claims_of_nothing_are_refused_naming_both_numbers(size, workers):
    with pytest.raises(ValueError, match=f"size={size}, workers={workers}"):
        _first_batch.Claims(size, workers)


class Slow(Noisy):
    def get_example(self, i):
        time.sleep(0.005)
        return super().get_example(i)


class HoldBack:
    """worker_init that keeps worker 1 out until ``flag`` exists (at most a minute)."""

    def __init__(self, flag: str) -> None:
        self.flag = flag

    def __call__(self, index: int, n_workers: int) -> None:
        deadline = time.monotonic() + 60
        while index == 1 and not os.path.exists(self.flag) and time.monotonic() < deadline:
            time.sleep(0.01)


def test_a_worker_that_starts_late_leaves_the_first_batch_to_the_others(tmp_path):
    # Equal parts would make the first batch wait for worker 1, held back until the
    # batch is here: a timeout. Claimed, worker 0 builds it all.
    flag = str(tmp_path / "go")
    expected = [batch_key(b) for b in _take(SerialIterator(Slow(), 16, seed=SEED), 3)]
    with MultiprocessIterator(Slow(), 16, seed=SEED, n_processes=2, worker_init=HoldBack(flag),
                              timeout=20) as it:
        first = batch_key(next(it))
        with open(flag, "w"):
            pass
        rest = [batch_key(b) for b in _take(it, 2)]
    assert [first] + rest == expected


def test_spawned_workers_take_equal_parts_and_wait_for_each_other(tmp_path):
    # Without fork nothing is inherited: the first batch is cut in equal parts, so a
    # held-back worker holds it back (here until the timeout). The timeout leaves a spawned
    # worker 0 time to start on a loaded machine, so only the held-back worker is silent.
    flag = str(tmp_path / "never")
    with MultiprocessIterator(Slow(), 16, seed=SEED, n_processes=2, worker_init=HoldBack(flag),
                              timeout=20, start_method="spawn") as it:
        with pytest.raises(BatchTimeoutError, match="worker 1 "):
            next(it)


def _take(it, k):
    return [next(it) for _ in range(k)]
