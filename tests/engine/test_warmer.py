"""A worker's warm-ups: the dataset's ``prepare`` on one thread, one at a time, in order."""

from __future__ import annotations

import threading
import time

import numpy as np

from dataset_kit.engine._process.worker import _Warmer


class Prepares:
    """Records each ``prepare`` call: its index, its thread, how many ran at once."""

    def __init__(self, last: int) -> None:
        self.calls: list[int] = []
        self.threads: set[int] = set()
        self.running = 0
        self.most = 0
        self.last = last
        self.done = threading.Event()

    def prepare(self, indices: np.ndarray) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        self.threads.add(threading.get_ident())
        time.sleep(0.01)
        self.calls.append(int(indices[0]))
        self.running -= 1
        if indices[0] == self.last:
            self.done.set()
        if indices[0] == 1:
            raise OSError("a failed read ahead is dropped")


def test_warm_ups_run_one_at_a_time_in_order_on_one_thread_of_their_own():
    dataset = Prepares(last=4)
    warmer = _Warmer(dataset)
    for k in range(5):
        warmer.warm(np.array([k]))  # returns at once: the reads run behind
    assert dataset.done.wait(10)
    assert dataset.calls == [0, 1, 2, 3, 4]  # the failure of 1 stopped nothing
    assert dataset.most == 1
    assert len(dataset.threads) == 1 and threading.get_ident() not in dataset.threads


def test_a_dataset_without_prepare_starts_no_thread():
    before = threading.active_count()
    _Warmer(object()).warm(np.array([0]))
    assert threading.active_count() == before
