"""The reaper: stopped workers joined off the caller's thread."""

from __future__ import annotations

import multiprocessing
import os

from dataset_kit.engine._process.reaper import Reaper


def _exit_now() -> None:
    os._exit(0)


def test_handed_processes_are_joined_and_leave_no_zombie():
    reaper = Reaper()
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_exit_now) for _ in range(3)]
    for process in processes:
        process.start()
    try:
        for process in processes:
            reaper.reap(process)
        reaper.drain()
        assert [p.exitcode for p in processes] == [0, 0, 0]
        assert [p.pid for p in processes if os.path.exists(f"/proc/{p.pid}")] == []
    finally:
        for process in processes:
            process.kill()
            process.join(5)


def test_draining_a_reaper_that_never_reaped_returns_at_once():
    Reaper().drain()


def _drain_in_child(reaper: Reaper) -> None:
    reaper.drain()  # the parent's thread is not in this process: must not wait for it
    os._exit(0)


def test_a_forked_child_does_not_wait_on_its_parents_reaper_thread():
    reaper = Reaper()
    context = multiprocessing.get_context("fork")
    first = context.Process(target=_exit_now)
    first.start()
    reaper.reap(first)  # the parent's reaper thread now runs
    child = context.Process(target=_drain_in_child, args=(reaper,))
    child.start()
    try:
        child.join(30)
        assert child.exitcode == 0
    finally:
        for process in (first, child):
            process.kill()
            process.join(5)
