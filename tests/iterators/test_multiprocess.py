import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit import DatasetMixin, concat_examples
from dataset_kit.datasets import TupleDataset
from dataset_kit.iterators import (
    MultiprocessIterator,
    SerialIterator,
    WorkerDiedError,
    WorkerError,
)
from tests.iterators.helpers import (
    Augmented,
    Misbehaving,
    PidRecorder,
    Unpicklable,
    alive,
    batch_key,
    recorded_pids,
    shm_blocks,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def take(it, k):
    return [batch_key(next(it)) for _ in range(k)]


@pytest.fixture
def pids(tmp_path):
    directory = tmp_path / "pids"
    directory.mkdir()
    return str(directory)


def assert_all_gone(pid_dir):
    deadline = time.monotonic() + 5
    while any(alive(p) for p in recorded_pids(pid_dir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in recorded_pids(pid_dir) if alive(p)]
    assert shm_blocks() == []


# -- the same batches ---------------------------------------------------------------

@settings(max_examples=12)
@given(n=st.integers(1, 40), b=st.integers(1, 12), seed=st.integers(0, 2**31),
       workers=st.integers(1, 3), convert=st.booleans())
def test_same_batches_as_serial_for_any_worker_count(n, b, seed, workers, convert):
    expected = take(SerialIterator(Augmented(n), b, seed=seed), 8)
    with MultiprocessIterator(Augmented(n), b, seed=seed, n_processes=workers,
                              converter=concat_examples if convert else None) as it:
        assert take(it, 8) == expected


@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_every_start_method_gives_the_same_batches(start_method, pids):
    expected = take(SerialIterator(Augmented(17), 4, seed=3), 10)
    with MultiprocessIterator(Augmented(17), 4, seed=3, n_processes=2,
                              start_method=start_method, worker_init=PidRecorder(pids)) as it:
        assert take(it, 10) == expected
        assert len(recorded_pids(pids)) == 2
    assert_all_gone(pids)


def test_array_dataset_batches_arrive_as_example_batches_of_shared_views():
    x = np.random.default_rng(0).random((50, 300)).astype(np.float32)
    ds = TupleDataset(x, np.arange(50))
    expected = [concat_examples(b) for b in _serial_batches(ds, 8, 6)]
    with MultiprocessIterator(ds, 8, seed=0, n_processes=2) as it:
        for want in expected:
            batch = next(it)
            got = concat_examples(batch)
            assert got[0].base is not None  # a view, not a copy
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])


def _serial_batches(ds, b, k):
    it = SerialIterator(ds, b, seed=0)
    return [next(it) for _ in range(k)]


def test_non_repeating_iteration_stops_with_a_short_batch():
    with MultiprocessIterator(TupleDataset(np.arange(7)), 3, repeat=False, shuffle=False,
                              n_processes=2) as it:
        assert [len(b) for b in it] == [3, 3, 1]
        with pytest.raises(StopIteration):
            next(it)  # stays exhausted, and is not mistaken for a failure


def test_worker_init_runs_once_in_each_worker(pids):
    with MultiprocessIterator(Augmented(30), 2, n_processes=3,
                              worker_init=PidRecorder(pids)) as it:
        take(it, 12)
    names = sorted(os.listdir(pids))
    assert len(names) == 3
    assert sorted(open(os.path.join(pids, n)).read().split()[0] for n in names) == ["0", "1", "2"]


def _failing_init(index, n_workers):
    raise RuntimeError(f"worker_init failed in worker {index} of {n_workers}")


def test_a_failing_worker_init_is_each_batch_error_with_its_traceback():
    with MultiprocessIterator(Augmented(8), 2, n_processes=2,
                              worker_init=_failing_init) as it:
        for _ in range(2):  # the iterator stays usable: each request reports it
            with pytest.raises(WorkerError, match="worker_init failed in worker") as raised:
                next(it)
            assert "_failing_init" in str(raised.value)  # the worker's traceback
            assert isinstance(raised.value.__cause__, RuntimeError)


def test_maxtasksperchild_replaces_workers_without_changing_batches(pids):
    expected = take(SerialIterator(Augmented(20), 3, seed=5), 12)
    with MultiprocessIterator(Augmented(20), 3, seed=5, n_processes=2, maxtasksperchild=2,
                              worker_init=PidRecorder(pids)) as it:
        assert take(it, 12) == expected
    assert len(recorded_pids(pids)) >= 5
    assert_all_gone(pids)


# -- checkpoints ----------------------------------------------------------------------

def test_resume_from_every_step_of_two_epochs():
    n, b = 11, 3
    steps = 2 * -(-n // b)
    expected = take(SerialIterator(Augmented(n), b, seed=9), steps + 6)
    with MultiprocessIterator(Augmented(n), b, seed=9, n_processes=2) as it:
        for k in range(steps):
            it.reset()
            take(it, k)
            state = it.state_dict()
            take(it, 2)  # prefetch and consume beyond the checkpoint
            it.load_state_dict(state)
            assert take(it, 6) == expected[k:k + 6], f"resume after {k} batches"


@pytest.mark.parametrize("source, target", [("serial", "process"), ("process", "serial"),
                                            ("process", "thread")])
def test_state_from_any_iterator_loads_into_any_other(source, target):
    from dataset_kit.iterators import MultithreadIterator

    kinds = {"serial": SerialIterator,
             "thread": lambda *a, **k: MultithreadIterator(*a, n_threads=2, **k),
             "process": lambda *a, **k: MultiprocessIterator(*a, n_processes=2, **k)}
    expected = take(SerialIterator(Augmented(13), 4, seed=2), 12)
    first = kinds[source](Augmented(13), 4, seed=2)
    take(first, 5)
    second = kinds[target](Augmented(13), 4)
    second.load_state_dict(first.state_dict())
    try:
        assert take(second, 7) == expected[5:]
    finally:
        first.finalize()
        second.finalize()


# -- zero copy --------------------------------------------------------------------------

def test_held_arrays_keep_their_values_while_later_batches_arrive():
    x = np.random.default_rng(1).random((64, 512))
    ds = TupleDataset(x, np.arange(64))
    with MultiprocessIterator(ds, 16, seed=4, n_processes=2,
                              converter=concat_examples) as it:
        held = [next(it) for _ in range(3)]
        copies = [(a.copy(), b.copy()) for a, b in held]
        for _ in range(30):
            next(it)
        for (a, b), (ca, cb) in zip(held, copies):
            np.testing.assert_array_equal(a, ca)
            np.testing.assert_array_equal(b, cb)


def test_blocks_are_reused_not_created_per_batch():
    x = np.zeros((64, 1024))
    with MultiprocessIterator(TupleDataset(x), 16, n_processes=2,
                              converter=concat_examples) as it:
        for _ in range(100):
            next(it)
        gc.collect()
        statistics = it.statistics()
        assert statistics.most_in_flight == statistics.depth == 4
        assert 0 < len(shm_blocks()) <= 2 * statistics.depth


# -- failures ---------------------------------------------------------------------------

@pytest.mark.parametrize("action, expected", [
    ("sigkill", "SIGKILL"), ("sigsegv", "SIGSEGV"), ("exit", "exited with code 3")])
def test_dead_worker_is_reported_fast_naming_pid_and_cause(action, expected, pids):
    it = MultiprocessIterator(Misbehaving(40, 13, action), 4, shuffle=False, n_processes=2,
                              worker_init=PidRecorder(pids))
    with pytest.raises(WorkerDiedError) as info:
        for _ in range(20):
            next(it)
    message = str(info.value)
    assert expected in message
    assert any(f"pid {p}" in message for p in recorded_pids(pids))
    assert_all_gone(pids)
    with pytest.raises(RuntimeError, match="worker failure"):
        next(it)


def test_worker_exception_carries_message_and_traceback_and_iterator_survives(pids):
    it = MultiprocessIterator(Misbehaving(12, 5, "raise"), 3, shuffle=False, n_processes=2,
                              worker_init=PidRecorder(pids))
    try:
        next(it)
        with pytest.raises(WorkerError) as info:
            next(it)
        assert not isinstance(info.value, WorkerDiedError)
        message = str(info.value)
        assert "boom at index 5" in message and "Traceback" in message
        assert "get_example" in message
        assert isinstance(info.value.__cause__, ValueError)
        assert it.epoch_detail == pytest.approx(3 / 12)  # the failed batch was not consumed
        with pytest.raises(WorkerError):
            next(it)  # the same batch again
    finally:
        it.finalize()
    assert_all_gone(pids)


def test_slow_batch_warns_naming_it():
    with MultiprocessIterator(Misbehaving(6, 0, "sleep"), 2, shuffle=False, n_processes=1,
                              dataset_timeout=0.3) as it:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            next(it)
    assert any("batch 0" in str(w.message) and "dataset_timeout" in str(w.message)
               for w in caught)


def test_finalize_stops_workers_and_unlinks_blocks(pids):
    it = MultiprocessIterator(Augmented(20, 512), 4, n_processes=2, worker_init=PidRecorder(pids))
    batch = next(it)
    assert shm_blocks()
    it.finalize()
    it.finalize()
    assert_all_gone(pids)
    assert len(batch) == 4  # arrays handed out stay readable
    with pytest.raises(RuntimeError, match="finalized"):
        next(it)


def test_garbage_collection_finalizes(pids):
    it = MultiprocessIterator(Augmented(20), 4, n_processes=2, worker_init=PidRecorder(pids))
    next(it)
    del it
    gc.collect()
    assert_all_gone(pids)


def test_unpicklable_dataset_under_spawn_says_so():
    it = MultiprocessIterator(Unpicklable(), 2, start_method="spawn", n_processes=1)
    with pytest.raises(TypeError, match="spawn.*pickling.*Unpicklable"):
        next(it)
    it.finalize()


@pytest.mark.parametrize("kwargs, name", [
    ({"n_processes": 0}, "n_processes"), ({"n_prefetch": 0}, "n_prefetch"),
    ({"dataset_timeout": -1}, "dataset_timeout"), ({"maxtasksperchild": 0}, "maxtasksperchild"),
    ({"start_method": "teleport"}, "start_method"), ({"converter": 3}, "converter"),
    ({"worker_init": "x"}, "worker_init"),
])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises((TypeError, ValueError), match=name):
        MultiprocessIterator([1, 2], 1, **kwargs)


# -- the whole process ----------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    # A runner started with SIGINT ignored passes that on: restore Python's handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, {root!r})
    from dataset_kit.iterators import MultiprocessIterator
    from tests.iterators.helpers import Augmented, PidRecorder
    it = MultiprocessIterator(Augmented(1000, 4096), 8, n_processes=2,
                              worker_init=PidRecorder({pids!r}))
    next(it)
    print("ready", flush=True)
    {then}
""")


def run_script(pids, then):
    code = SCRIPT.format(root=ROOT, pids=pids, then=then)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def prefix_blocks(pid):
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"dsk-{pid}-")]


def test_interpreter_exit_cleans_up(pids):
    proc = run_script(pids, "pass")
    proc.wait(30)
    assert proc.returncode == 0
    assert not [p for p in recorded_pids(pids) if alive(p)]
    assert prefix_blocks(proc.pid) == []


def test_ctrl_c_in_the_main_process_cleans_up(pids):
    proc = run_script(pids, "while True: next(it)")
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(30)
    assert "KeyboardInterrupt" in proc.stderr.read()
    deadline = time.monotonic() + 5
    while [p for p in recorded_pids(pids) if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in recorded_pids(pids) if alive(p)]
    assert prefix_blocks(proc.pid) == []


def test_workers_exit_and_clean_up_when_the_parent_is_killed(pids):
    proc = run_script(pids, "os.kill(os.getpid(), 9)")
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while ([p for p in recorded_pids(pids) if alive(p)] or prefix_blocks(proc.pid)) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in recorded_pids(pids) if alive(p)]
    assert prefix_blocks(proc.pid) == []


def test_without_shared_memory_batches_are_pickled_and_identical(monkeypatch):
    from dataset_kit.engine._process import shm as _shm

    monkeypatch.setattr(_shm, "available", lambda: False)
    x = np.random.default_rng(2).random((30, 400))
    ds = TupleDataset(x, np.arange(30))
    expected = [concat_examples(b) for b in _serial_batches(ds, 4, 8)]
    with MultiprocessIterator(ds, 4, seed=0, n_processes=2, start_method="fork") as it:
        for want in expected:
            got = concat_examples(next(it))
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
        assert shm_blocks() == []


class Transposed(DatasetMixin):
    """CHW views of contiguous HWC arrays, as image decoders give them."""

    def __len__(self):
        return 8

    def get_example(self, i):
        hwc = np.arange(20 * 30 * 3, dtype=np.uint8).reshape(20, 30, 3) + np.uint8(i)
        return hwc.transpose(2, 0, 1), np.asarray(hwc[::2, ::3])  # a permuted and a strided one


def test_permuted_and_strided_arrays_arrive_equal_through_shared_memory():
    expected = next(SerialIterator(Transposed(), 4, shuffle=False))
    with MultiprocessIterator(Transposed(), 4, shuffle=False, n_processes=2) as it:
        got = next(it)
    for (chw, strided), (want_chw, want_strided) in zip(got, expected):
        assert chw.shape == (3, 20, 30) and np.array_equal(chw, want_chw)
        assert np.array_equal(strided, want_strided)
