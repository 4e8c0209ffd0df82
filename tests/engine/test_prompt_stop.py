"""Stopping workers at once: the lifeline's stop, and what a stopped worker leaves."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from dataset_kit import DatasetMixin
from dataset_kit.engine._process import lifeline as _lifeline
from dataset_kit.engine._process import reaper as _reaper
from dataset_kit.engine._process.worker import SWITCH_SECONDS
from dataset_kit.iterators import MultiprocessIterator
from tests.iterators.helpers import Augmented, PidRecorder, alive, recorded_pids, shm_blocks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def pids(tmp_path):
    directory = tmp_path / "pids"
    directory.mkdir()
    return str(directory)


def wait_for(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def exit_within_a_second(pids) -> bool:
    """Whether every recorded worker has exited within a second.

    finalize() returns once each worker has said it stopped (it builds,
    prints and creates nothing more); the kernel then finishes the exit,
    which for a worker of a large process takes milliseconds.
    """
    return wait_for(lambda: not [p for p in recorded_pids(pids) if alive(p)], 1.0)


def test_a_stop_reaches_every_watcher_once_and_is_not_a_death():
    lifeline = _lifeline.Lifeline(multiprocessing.get_context("fork"))
    calls: list[str] = []
    lock = threading.Lock()

    def record(what):
        def call():
            with lock:
                calls.append(what)
        return call

    threads = [_lifeline.watch_parent(lifeline.child_end, record("death"), record("stop"))
               for _ in range(3)]
    try:
        time.sleep(0.2)
        assert calls == []
        lifeline.stop(3)
        assert wait_for(lambda: len(calls) == 3)
        for thread in threads:
            thread.join(5)
        assert calls == ["stop"] * 3
    finally:
        lifeline.cut()


class _Marked(DatasetMixin):
    """Slow examples that leave ``started-i`` and ``done-i`` files behind."""

    def __init__(self, folder) -> None:
        self.folder = folder

    def __len__(self) -> int:
        return 40

    def get_example(self, i: int):
        (self.folder / f"started-{i}").touch()
        time.sleep(0.15)
        (self.folder / f"done-{i}").touch()
        return np.int64(i)


def test_finalize_ends_a_worker_in_the_middle_of_a_batch_nobody_wants(tmp_path, pids):
    # The worker builds batch 1 (examples 4-7, 0.6 s) right after batch 0; finalizing
    # then must not wait for it: nobody will ever see it.
    it = MultiprocessIterator(_Marked(tmp_path), 4, shuffle=False, n_processes=1,
                              worker_init=PidRecorder(pids))
    try:
        assert [int(v) for v in next(it)] == [0, 1, 2, 3]
        assert wait_for(lambda: (tmp_path / "started-4").exists())
    finally:
        it.finalize()
    finalized = {p.name for p in tmp_path.iterdir()}
    assert not {"done-5", "done-6", "done-7"} & finalized, sorted(finalized)
    assert shm_blocks() == []
    assert exit_within_a_second(pids)
    time.sleep(0.5)  # a worker left running would go on marking examples
    assert {p.name for p in tmp_path.iterdir()} == finalized


@pytest.mark.parametrize("batches", [0, 1, 2, 5])
def test_workers_stopped_at_any_moment_leave_no_process_and_no_block(batches, pids):
    # Large examples: the workers create, fill and lend blocks while they are stopped.
    it = MultiprocessIterator(Augmented(64, 1 << 16), 8, n_processes=2,
                              worker_init=PidRecorder(pids))
    try:
        for _ in range(batches):
            next(it)
    finally:
        it.finalize()
    assert shm_blocks() == []  # at once: a stopped worker creates no block
    assert exit_within_a_second(pids)


SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from dataset_kit import DatasetMixin
    from dataset_kit.iterators import MultiprocessIterator

    class Chatty(DatasetMixin):
        def __len__(self):
            return 40
        def get_example(self, i):
            print(f"building {{i}}")  # stdout is a pipe: block-buffered, not flushed
            time.sleep(0.2)
            return i

    it = MultiprocessIterator(Chatty(), 4, shuffle=False, n_processes=1)
    next(it)
    time.sleep(0.3)  # the worker is in the middle of batch 1
    it.finalize()
    print("finalized", flush=True)
""")


def test_a_worker_stopped_in_the_middle_of_a_batch_flushes_what_it_printed():
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(root=ROOT)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "building 4" in out and out.rstrip().endswith("finalized"), out


def test_a_stopped_worker_ends_its_pipe_before_it_exits():
    # finalize() waits for this end-of-file, not for the exit: a worker of a large
    # process spends milliseconds in the kernel's teardown of its memory.
    context = multiprocessing.get_context("fork")
    parent_end, child_end = context.Pipe(duplex=True)
    child = context.Process(target=_say_then_linger, args=(child_end,), daemon=True)
    child.start()
    try:
        child_end.close()
        assert parent_end.poll(10), "the worker never ended its pipe"
        with pytest.raises(EOFError):
            parent_end.recv()
        assert child.is_alive()  # ended by the worker's word, not by its exit
    finally:
        child.kill()
        child.join(5)
        parent_end.close()


def _say_then_linger(conn) -> None:
    from dataset_kit.engine._process.worker import _say_stopped

    _say_stopped(conn)
    time.sleep(30)


def test_finalized_workers_are_joined_not_left_as_zombies(pids):
    it = MultiprocessIterator(Augmented(64, 1 << 12), 8, n_processes=2,
                              worker_init=PidRecorder(pids))
    try:
        next(it)
        assert wait_for(lambda: len(recorded_pids(pids)) == 2)  # both workers running
    finally:
        it.finalize()
    _reaper.reaper.drain()
    workers = recorded_pids(pids)
    # Joined: gone from the process table (a zombie still has its /proc entry).
    assert [p for p in workers if os.path.exists(f"/proc/{p}")] == []


class _SwitchRecorder:
    """worker_init writing the worker's GIL switch interval to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, index: int, n_workers: int) -> None:
        with open(f"{self.path}-{index}", "w") as f:
            f.write(repr(sys.getswitchinterval()))


def test_workers_hand_the_gil_to_a_stop_sooner_than_the_default(tmp_path):
    # The lifeline's watcher needs the GIL to stop a worker busy in Python code.
    record = str(tmp_path / "switch")
    with MultiprocessIterator(Augmented(16), 4, n_processes=1,
                              worker_init=_SwitchRecorder(record)) as it:
        next(it)
    with open(f"{record}-0") as f:
        assert float(f.read()) == SWITCH_SECONDS < sys.getswitchinterval()
