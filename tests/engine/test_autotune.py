"""num_workers="auto": the controller's rule, and batches equal to any fixed worker count."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataset_kit
from dataset_kit.engine import AutoWorkers
from dataset_kit.iterators import MultiprocessIterator, SerialIterator


def test_adds_while_the_loop_waits_and_stops_when_the_wait_stops_falling() -> None:
    auto = AutoWorkers(max_workers=8, memory_limit=1 << 40)
    assert auto.decide(16, 1, 0.6, 10).new_workers == 2
    assert auto.decide(32, 2, 0.3, 20).new_workers == 3  # the wait fell: add again
    kept = auto.decide(48, 3, 0.29, 30)  # it did not fall: stop adding
    assert kept.new_workers == 3 and "did not lower the wait" in kept.reason
    assert auto.decide(64, 3, 0.5, 30).new_workers == 3


def test_removes_idle_workers_and_respects_max_and_memory() -> None:
    assert AutoWorkers(max_workers=4, memory_limit=1 << 40).decide(16, 3, 0.0, 3).new_workers == 2
    assert AutoWorkers(max_workers=2, memory_limit=1 << 40).decide(16, 2, 0.9, 2).new_workers == 2
    blocked = AutoWorkers(max_workers=8, memory_limit=250).decide(16, 2, 0.9, 200)
    assert blocked.new_workers == 2 and "memory_limit=250" in blocked.reason


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
    auto = AutoWorkers(max_workers=max_workers, memory_limit=1 << 40)
    workers = 1
    for batch, (wait, rss) in enumerate(steps):
        new = auto.decide(batch, workers, wait, rss).new_workers
        assert 1 <= new <= max_workers and abs(new - workers) <= 1
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
    n = 70  # several decisions (every 16 batches) and epochs, with a last short batch
    expected = _batches(SerialIterator(_Slow(), 4, seed=5), n)
    assert _batches(MultiprocessIterator(_Slow(), 4, seed=5, n_processes=3), n) == expected
    with dataset_kit.profile() as p:
        auto = _batches(MultiprocessIterator(_Slow(), 4, seed=5, n_processes="auto"), n)
    assert auto == expected
    decisions = p.to_json()["decisions"]
    assert [d["batch"] for d in decisions] == [16, 32, 48, 64]
    assert all(d["reason"] for d in decisions)
    assert decisions[0]["new_workers"] == 2  # the loop waited: a worker was added


def test_an_addition_is_judged_on_the_wait_per_batch() -> None:
    auto = AutoWorkers(max_workers=8, memory_limit=1 << 40)
    auto.decide(16, 1, 0.99, 10, mean_wait=0.010)
    # A loop with no work of its own waits all the time; the batches came faster.
    assert auto.decide(32, 2, 0.99, 20, mean_wait=0.005).new_workers == 3


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
                out[r] = _batches(it, 40)  # over three epochs: decisions at 16 and 32
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
    # Each rank's own controller decided every 16 of its batches.
    assert sorted(d["batch"] for d in p.to_json()["decisions"]) == [16, 16, 32, 32]
    with pytest.raises(ValueError, match="memory_limit is for n_processes='auto'"):
        ShardedIterator(_Slow(), 4, n_threads=2, memory_limit=1 << 30)


@pytest.mark.parametrize("kill_at", [15, 16, 17, 20])
def test_a_worker_killed_while_auto_changes_the_count_is_loud_or_replaced_never_a_hang(
        kill_at: int) -> None:
    # At batch 16 the controller adds a worker: the engine drops the batches in
    # flight and builds a new pool. SIGKILL every worker just before (15, 16),
    # just after (17) and a little after (20) that change.
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
        with dataset_kit.profile() as p:
            for _ in range(n):
                got.append(np.stack(next(it)).tolist())
    except WorkerDiedError as error:
        assert "SIGKILL" in str(error)
        # Every batch before the error is exact, and the error came with the
        # first batch a killed worker of the pool in use was building.
        assert got == expected[:len(got)] and kill_at <= len(got) <= kill_at + 8
    else:
        # The documented recovery: the workers were killed in the batch before
        # the change, whose new pool re-planned their batches; none is lost.
        assert kill_at == 16 and got == expected
    finally:
        it.finalize()
    if kill_at >= 16:  # the change did happen, from one worker to two
        assert p.to_json()["decisions"][0]["new_workers"] == 2
