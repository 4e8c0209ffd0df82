"""The lifeline: forked children hold none of the main process's parent-only descriptors."""

from __future__ import annotations

import multiprocessing
import os
import time

from dataset_kit.engine._process import lifeline as _lifeline


def test_a_forked_child_points_parent_only_fds_at_dev_null():
    reader, writer = os.pipe()
    _lifeline.keep_from_children(writer)
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if the descriptor points at /dev/null
            try:
                os._exit(0 if os.readlink(f"/proc/self/fd/{writer}") == os.devnull else 1)
            finally:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert os.readlink(f"/proc/self/fd/{writer}").startswith("pipe:")  # ours is intact
    finally:
        _lifeline.release(writer)
        os.close(reader)
        os.close(writer)


def test_the_watcher_fires_when_the_lifeline_is_cut_and_not_before():
    lifeline = _lifeline.Lifeline(multiprocessing.get_context("fork"))
    fired = []
    _lifeline.watch_parent(lifeline.child_end, lambda: fired.append(time.monotonic()),
                           lambda: fired.append("stop"))
    time.sleep(0.3)
    assert fired == []
    cut = time.monotonic()
    lifeline.cut()  # closes the main process's end, as the kernel does when it dies
    deadline = time.monotonic() + 5
    while not fired and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fired and fired[0] >= cut
