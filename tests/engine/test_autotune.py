"""num_workers="auto": the controller's rule, and batches equal to any fixed worker count."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataset_kit
from dataset_kit.engine import AutoWorkers
from dataset_kit.engine.autotune import WAIT_TO_ADD, WAIT_TO_REMOVE
from dataset_kit.iterators import MultiprocessIterator, SerialIterator


def test_adds_while_the_loop_waits_and_stops_when_the_wait_stops_falling() -> None:
    auto = AutoWorkers(max_workers=8, memory_limit=1 << 40)
    assert auto.decide(4, 1, 0.6, 10).new_workers == 2  # 1 / 0.4 -> 3 wanted, at most doubled
    assert auto.decide(12, 2, 0.3, 20).new_workers == 3  # the wait fell: 2 / 0.7 -> 3
    kept = auto.decide(28, 3, 0.29, 30)  # it did not fall: stop adding
    assert kept.new_workers == 3 and "did not lower the wait" in kept.reason
    assert auto.decide(44, 3, 0.5, 30).new_workers == 3


def test_adds_again_once_the_wait_doubles_after_adding_stopped_helping() -> None:
    # Examples that grow dearer mid-run: the workers that were enough no longer are.
    auto = AutoWorkers(max_workers=16, memory_limit=1 << 40)
    auto.decide(4, 2, 0.5, 20, mean_wait=0.010)
    auto.decide(12, 4, 0.5, 40, mean_wait=0.010)  # did not lower the wait: stop
    stays = auto.decide(28, 4, 0.6, 40, mean_wait=0.019)
    assert stays.new_workers == 4 and "did not lower the wait" in stays.reason
    again = auto.decide(44, 4, 0.8, 40, mean_wait=0.050)
    assert again.new_workers == 8 and again.reason.startswith("the wait grew 5.0x")


def test_adds_as_many_workers_as_the_wait_says_are_missing_at_most_doubling() -> None:
    auto = AutoWorkers(max_workers=16, memory_limit=1 << 40)
    added = auto.decide(4, 2, 0.75, 20)  # fed at a quarter of its pace: 8 wanted
    assert added.new_workers == 4 and "about 8 workers" in added.reason
    assert auto.decide(12, 4, 0.2, 40).new_workers == 5  # 4 / 0.8 -> 5: one more
    capped = AutoWorkers(max_workers=3, memory_limit=1 << 40).decide(4, 2, 0.9, 20)
    assert capped.new_workers == 3  # max_workers
    fits = AutoWorkers(max_workers=16, memory_limit=350).decide(4, 2, 0.9, 200)
    assert fits.new_workers == 3  # 100 bytes each: a fourth would pass memory_limit


def test_the_first_decisions_come_quickly_then_every_period() -> None:
    auto = AutoWorkers(max_workers=8, memory_limit=1 << 40, period=16)
    periods = [auto.next_period]
    for batch in range(5):
        auto.decide(batch, 2, 0.05, 20)
        periods.append(auto.next_period)
    assert periods == [4, 8, 16, 16, 16, 16]
    assert AutoWorkers(period=1).next_period == 1


def test_removes_idle_workers_and_respects_max_and_memory() -> None:
    assert AutoWorkers(max_workers=4, memory_limit=1 << 40).decide(16, 3, 0.0, 3).new_workers == 2
    assert AutoWorkers(max_workers=2, memory_limit=1 << 40).decide(16, 2, 0.9, 2).new_workers == 2
    blocked = AutoWorkers(max_workers=8, memory_limit=250).decide(16, 2, 0.9, 200)
    assert blocked.new_workers == 2 and "memory_limit=250" in blocked.reason
    assert AutoWorkers(max_workers=4, memory_limit=1 << 40).decide(16, 1, 0.0, 3).new_workers \
        == 1  # never below one worker


def test_by_default_one_more_worker_than_cores_may_be_added() -> None:
    import os

    auto = AutoWorkers(memory_limit=1 << 40)
    assert auto.max_workers == (os.cpu_count() or 1) + 1
    cores = auto.max_workers - 1
    assert auto.decide(4, cores, 0.5, 10).new_workers == cores + 1


def test_a_memory_limit_below_one_worker_names_both_figures() -> None:
    with pytest.raises(ValueError, match=r"needs 500 bytes, more than memory_limit=100"):
        AutoWorkers(memory_limit=100).decide(16, 1, 0.5, 500)


@pytest.mark.parametrize("kwargs", [{"max_workers": 0}, {"period": 0}, {"start": 3,
                                                                          "max_workers": 2}])
def test_rejects_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        AutoWorkers(**kwargs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 1 << 20)), max_size=30),
       st.integers(1, 6))
def test_the_worker_count_stays_within_one_and_max(steps: list, max_workers: int) -> None:
    # An addition at most doubles the workers and adds no more than the wait
    # asks for (n / (1 - w), at least one); a removal takes one away.
    auto = AutoWorkers(max_workers=max_workers, memory_limit=1 << 40)
    workers = 1
    for batch, (wait, rss) in enumerate(steps):
        new = auto.decide(batch, workers, wait, rss).new_workers
        assert 1 <= new <= max_workers
        if new > workers:
            asked = math.ceil(workers / max(1 - wait, 0.01) - 1e-9)
            assert wait >= WAIT_TO_ADD and new <= min(2 * workers, max(asked, workers + 1))
        elif new < workers:
            assert wait < WAIT_TO_REMOVE and new == workers - 1
        workers = new


class _Slow:
    """Examples that cost a little, so the loop waits and the controller adds workers."""

    def __len__(self) -> int:
        return 97

    def __getitem__(self, i: int) -> np.ndarray:
        rng = dataset_kit.example_rng()
        a = np.full(20_000, float(i))
        for _ in range(5):
            a = np.sin(a)
        return a[:4] + rng.random()


def _batches(it, n: int) -> list:
    try:
        return [np.stack(next(it)).tolist() for _ in range(n)]
    finally:
        if hasattr(it, "finalize"):
            it.finalize()


def test_auto_gives_the_batches_of_0_and_3_workers() -> None:
    n = 70  # several decisions (at 4, 12, then every 16 batches) and epochs, a last short batch
    expected = _batches(SerialIterator(_Slow(), 4, seed=5), n)
    assert _batches(MultiprocessIterator(_Slow(), 4, seed=5, n_processes=3), n) == expected
    with dataset_kit.profile() as p:
        auto = _batches(MultiprocessIterator(_Slow(), 4, seed=5, n_processes="auto"), n)
    assert auto == expected
    decisions = p.to_json()["decisions"]
    assert [d["batch"] for d in decisions] == [4, 12, 28, 44, 60]
    assert all(d["reason"] for d in decisions)
    assert decisions[0]["workers"] == 2  # it starts at two
    assert decisions[0]["new_workers"] > 2  # the loop waited: workers were added


class _Counted(_Slow):
    """``_Slow``, counting how often each example is built (in any process)."""

    def __init__(self) -> None:
        import multiprocessing

        self.built = multiprocessing.get_context("fork").Array("i", len(self))

    def __getitem__(self, i: int) -> np.ndarray:
        with self.built.get_lock():
            self.built[i] += 1
        return super().__getitem__(i)


def test_auto_changes_the_count_in_place_building_each_batch_once() -> None:
    # Before, a change dropped the batches in flight and built them again.
    dataset = _Counted()
    with dataset_kit.profile() as p:
        it = MultiprocessIterator(dataset, 4, seed=5, n_processes="auto", repeat=False,
                                  start_method="fork")
        try:
            got = [np.stack(batch).tolist() for batch in it]
        finally:
            it.finalize()
    assert got == [np.stack(b).tolist() for b in SerialIterator(_Slow(), 4, seed=5,
                                                                  repeat=False)]
    first = p.to_json()["decisions"][0]
    assert first["workers"] == 2 and first["new_workers"] > 2  # workers were added
    assert list(dataset.built) == [1] * len(dataset)


def test_an_addition_is_judged_on_the_wait_per_batch() -> None:
    auto = AutoWorkers(max_workers=8, memory_limit=1 << 40)
    auto.decide(16, 1, 0.99, 10, mean_wait=0.010)
    # A loop with no work of its own waits all the time; the batches came faster.
    assert auto.decide(32, 2, 0.99, 20, mean_wait=0.005).new_workers == 4  # doubled


def test_memory_limit_needs_auto() -> None:
    with pytest.raises(ValueError, match="memory_limit"):
        MultiprocessIterator(np.arange(4), 2, n_processes=2, memory_limit=1 << 30)


def test_gluon_loader_auto_gives_the_batches_of_0_and_3_workers() -> None:
    from dataset_kit.loader import DataLoader

    def batches(**kwargs) -> list:
        loader = DataLoader(_Slow(), batch_size=4, shuffle=True, seed=3, **kwargs)
        try:
            return [np.asarray(b).tolist() for _ in range(2) for b in loader]
        finally:
            loader.close()

    expected = batches(num_workers=0)
    assert batches(num_workers=3) == expected
    assert batches(num_workers="auto", prefetch="auto") == expected
    with pytest.raises(ValueError, match="memory_limit"):
        DataLoader(_Slow(), batch_size=4, num_workers=2, memory_limit=1 << 30)


def test_torch_loader_auto_gives_the_batches_of_0_and_3_workers() -> None:
    torch = pytest.importorskip("torch", reason="dataset_kit.torch needs torch")
    from dataset_kit.torch import DataLoader

    def batches(workers: int | str) -> list:
        torch.manual_seed(0)
        loader = DataLoader(_Slow(), batch_size=4, shuffle=True, num_workers=workers)
        return [b.tolist() for _ in range(2) for b in loader]

    expected = batches(0)
    assert batches(3) == expected
    assert batches("auto") == expected


def test_sharded_iterator_auto_gives_each_rank_the_batches_of_0_and_3_workers() -> None:
    from dataset_kit.distributed import ShardedIterator, ThreadRanks

    def batches(**kwargs) -> list:
        group = ThreadRanks(2)
        out: list = [None, None]

        def rank(r: int) -> None:
            it = ShardedIterator(_Slow(), 4, group.communicator(r), seed=7, **kwargs)
            try:
                out[r] = _batches(it, 40)  # over three epochs: decisions at 4, 12 and 28
            except BaseException:
                group.abort()  # the other rank's collective fails instead of waiting
                raise

        threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert None not in out, "a rank failed or hung"
        return out

    expected = batches()
    assert batches(n_processes=3) == expected
    with dataset_kit.profile() as p:
        assert batches(n_processes="auto") == expected
    # Each rank's own controller decided at 4, 12 and 28 of its batches.
    assert sorted(d["batch"] for d in p.to_json()["decisions"]) == [4, 4, 12, 12, 28, 28]
    with pytest.raises(ValueError, match="memory_limit is for n_processes='auto'"):
        ShardedIterator(_Slow(), 4, n_threads=2, memory_limit=1 << 30)


@pytest.mark.parametrize("kill_at", [3, 4, 5, 8])
def test_a_worker_killed_while_auto_changes_the_count_is_loud_never_a_hang(
        kill_at: int) -> None:
    # At batch 4 the controller adds a worker, forked into the running pool
    # (the batches in flight stay). SIGKILL every worker just before (3), in
    # the batch of the change (4: the old worker dies, the new one is forked
    # after), just after (5) and a little after (8) it.
    import multiprocessing
    import os
    import signal

    from dataset_kit.engine import WorkerDiedError

    n = 40
    expected = _batches(SerialIterator(_Slow(), 4, seed=5), n)

    def kill(stats) -> None:
        if stats.batches == kill_at:
            for child in multiprocessing.active_children():
                os.kill(child.pid, signal.SIGKILL)

    # The timeout turns a hang into a BatchTimeoutError, which would fail the test.
    it = MultiprocessIterator(_Slow(), 4, seed=5, n_processes="auto", timeout=60)
    it.add_statistics_hook(kill, every=1)
    got: list = []
    try:
        with dataset_kit.profile() as p, pytest.raises(WorkerDiedError, match="SIGKILL"):
            for _ in range(n):
                got.append(np.stack(next(it)).tolist())
    finally:
        it.finalize()
    # Every batch before the error is exact, and the error came at the latest
    # with the first batch a killed worker was building (two in flight each).
    assert got == expected[:len(got)] and kill_at <= len(got) <= kill_at + 4
    decisions = p.to_json()["decisions"]
    if kill_at >= 4:  # the change did happen, in place, from two workers to more
        assert decisions[0]["batch"] == 4 and decisions[0]["workers"] == 2
        assert decisions[0]["new_workers"] > 2
    else:  # killed before it; batch 4 may still have been built before the kill
        assert [d["batch"] for d in decisions] in ([], [4])


def test_auto_starts_at_two_workers_or_fewer_if_capped() -> None:
    assert AutoWorkers(max_workers=8, memory_limit=1 << 40).start == 2
    assert AutoWorkers(max_workers=1, memory_limit=1 << 40).start == 1
    assert AutoWorkers(max_workers=8, memory_limit=1 << 40, start=5).start == 5


def test_workers_past_the_memory_limit_are_removed_even_while_the_loop_waits() -> None:
    auto = AutoWorkers(max_workers=8, memory_limit=1000)
    decision = auto.decide(4, 3, 0.9, 1200)  # 400 a worker fits alone, 3 do not
    assert decision.new_workers == 2
    assert "passed memory_limit=1000" in decision.reason
    with pytest.raises(ValueError, match="one worker needs 1001 bytes"):
        auto.decide(8, 1, 0.9, 1001)  # one worker alone past the limit: an error, as before
