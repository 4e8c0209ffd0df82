"""Blocks a pool left in /dev/shm when it died with its workers are removed by the next pool."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from dataset_kit.engine._process import shm as _shm
from dataset_kit.iterators import MultiprocessIterator

pytestmark = pytest.mark.skipif(not _shm.available(), reason="needs /dev/shm")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _blocks_of(pid: int) -> list[str]:
    return [name for name in os.listdir(_shm.SHM_DIR) if name.startswith(f"dsk-{pid}-")]


def test_only_blocks_of_processes_that_no_longer_exist_are_unlinked():
    dead = _dead_pid()
    here = _shm.pool_prefix().split("-")[2]  # "n<this pid namespace>"
    names = [f"dsk-{dead}-{here}-0badcafe-m0",      # a dead process of this namespace
             f"dsk-{os.getpid()}-{here}-0badcafe-m0",  # a live one
             f"dsk-{dead}-n1-0badcafe-m0",           # another namespace's: not ours to judge
             f"dsk-{dead}-0badcafe-m0",              # an older release's name
             "dsk-test-0badcafe"]
    for name in names:
        _shm.Block(name, 4096, create=True).close()
    try:
        removed = _shm.unlink_orphans()
        assert names[0] in removed
        assert set(names[1:]).isdisjoint(removed)
        left = set(os.listdir(_shm.SHM_DIR))
        assert names[0] not in left
        assert set(names[1:]) <= left
    finally:
        for name in names:
            _shm.unlink(name)


def test_a_block_the_sweep_may_not_unlink_does_not_stop_a_pool(monkeypatch):
    dead = _dead_pid()
    here = _shm.pool_prefix().split("-")[2]
    name = f"dsk-{dead}-{here}-0badcafe-m0"
    _shm.Block(name, 4096, create=True).close()
    real_unlink = os.unlink

    def refuse(path, *args, **kwargs):
        if os.path.basename(path) == name:  # another user's file in the sticky /dev/shm
            raise PermissionError(1, "Operation not permitted", path)
        return real_unlink(path, *args, **kwargs)

    try:
        monkeypatch.setattr(os, "unlink", refuse)
        assert name not in _shm.unlink_orphans()
        it = MultiprocessIterator(np.arange(10, dtype=np.float32), 2, n_processes=1,
                                  shuffle=False)
        try:
            assert next(it) == [0.0, 1.0]
        finally:
            it.finalize()
    finally:
        monkeypatch.undo()
        _shm.unlink(name)


_KILLED_PROGRAM = textwrap.dedent("""
    import sys, time
    import numpy as np
    from dataset_kit.iterators import MultiprocessIterator

    class Images:
        def __len__(self):
            return 1000

        def __getitem__(self, i):
            return np.full((128, 128), i, np.float32)

    it = MultiprocessIterator(Images(), 16, n_processes=2, shuffle=False)
    batches = [next(it) for _ in range(4)]  # keep them, so their blocks stay lent out
    print("ready", flush=True)
    time.sleep(60)
""")


def test_a_pool_killed_with_its_workers_leaves_blocks_the_next_pool_removes():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", _KILLED_PROGRAM], stdout=subprocess.PIPE,
                             env=env, start_new_session=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ready"
        # The whole group at once, as a shell's job control, a container stop or
        # the OOM killer would: no worker lives to see the lifeline cut.
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_process_group_alive(child.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _blocks_of(child.pid)
        assert left, "the killed pool left no blocks; nothing to sweep in this test"
        it = MultiprocessIterator(np.arange(10, dtype=np.float32), 2, n_processes=1,
                                  shuffle=False)
        try:
            next(it)
        finally:
            it.finalize()
        assert _blocks_of(child.pid) == []
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        _shm.unlink_prefix(f"dsk-{child.pid}-")


def _process_group_alive(pgid: int) -> list[int]:
    alive = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive.append(int(entry))
    return alive
