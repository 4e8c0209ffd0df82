"""The worker transport, through every front door that has worker processes and every
start method: no hang, no orphan, no worker that kills itself, loud failures.

Scripts that must outlive or be killed by the test run as their own processes;
the test always kills them (and whatever they started) in a ``finally``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from dataset_kit.engine import BatchTimeoutError, WorkerDiedError
from tests.engine.transport_doors import BIG_BATCH, DOORS, START_METHODS, batches, write_records
from tests.iterators.helpers import alive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The bound for noticing a death: a worker's, or the main process's.
DEATH_NOTICED_WITHIN = 2.0

matrix = pytest.mark.parametrize("door", DOORS)
methods = pytest.mark.parametrize("start_method", START_METHODS)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """A record file big enough for two batches of BIG_BATCH images, and some."""
    return write_records(str(tmp_path_factory.mktemp("records") / "r.rec"), 2 * BIG_BATCH + 64)


# -- processes as /proc shows them ---------------------------------------------------------

def _parents() -> dict[int, int]:
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parents[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    return parents


def descendants(pid: int) -> list[int]:
    parents = _parents()
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def workers_of(pid: int) -> list[int]:
    """dataset_kit's worker processes below ``pid`` (they name themselves dsk-worker-N)."""
    return [p for p in descendants(pid) if comm(p).startswith("dsk-worker-") and alive(p)]


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def blocks_of(pid: int) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"dsk-{pid}-")]


def kill_tree(pid: int, also: list[int] = ()) -> None:
    for p in descendants(pid) + [pid] + list(also):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- scripts -------------------------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    # A test runner started with SIGINT ignored (a background job) passes that
    # on to its children: restore Python's own handler, the one users have.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, {root!r})
    from tests.engine.transport_doors import batches

    if __name__ == "__main__":
        it, close = batches({door!r}, {n}, {batch_size}, {start_method!r}, timeout={timeout},
                            records={records!r})
        {body}
""")


def start_script(tmp_path, door, start_method, body, *, n, batch_size, records,
                 timeout=20) -> subprocess.Popen:
    path = tmp_path / "script.py"
    path.write_text(SCRIPT.format(root=ROOT, door=door, n=n, batch_size=batch_size,
                                  start_method=start_method, timeout=timeout,
                                  records=records, body=textwrap.indent(body, " " * 4).strip()))
    return subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


# -- the matrix ------------------------------------------------------------------------------

@matrix
@methods
def test_a_worker_idle_between_batches_keeps_serving(door, start_method, records):
    # Under forkserver the old orphan check (getppid() != main pid) made any
    # worker idle for 0.5 s unlink the live iterator's blocks and exit.
    it, close = batches(door, 64, 8, start_method, timeout=60, records=records)
    try:
        first = [next(it) for _ in range(3)]
        time.sleep(2)
        later = [next(it) for _ in range(3)]
    finally:
        close()
    assert first + later == [list(range(8 * k, 8 * k + 8)) for k in range(6)]


@matrix
@methods
def test_batches_of_16384_ragged_examples_arrive_under_a_deadline(door, start_method,
                                                                  records, tmp_path):
    # Tasks queued for one worker and its pickled reply both exceed the pipe's
    # buffer: with blocking sends on both sides this deadlocked.
    body = f"""
        for k in range(2):
            got = next(it)
            assert got == list(range(k * {BIG_BATCH}, (k + 1) * {BIG_BATCH})), (k, got[:3])
        close()
        print("ok", flush=True)
    """
    proc = start_script(tmp_path, door, start_method, textwrap.dedent(body),
                        n=2 * BIG_BATCH + 64, batch_size=BIG_BATCH, records=records)
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{door} under {start_method} hung on batches of {BIG_BATCH} examples")
    finally:
        kill_tree(proc.pid)
        proc.wait()
    assert out.strip() == "ok", err


@matrix
@methods
def test_a_killed_main_process_takes_its_workers_and_blocks_with_it(door, start_method,
                                                                   records, tmp_path):
    body = """
        next(it)
        print("ready", flush=True)
        while True:
            next(it)
    """
    proc = start_script(tmp_path, door, start_method, textwrap.dedent(body),
                        n=4 * BIG_BATCH, batch_size=BIG_BATCH, records=records)
    workers: list[int] = []
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        workers = workers_of(proc.pid)
        assert workers, "no worker process found"
        # Stopped, the main process reads nothing more: the worker blocks
        # mid-send on its reply (or idles, for doors whose replies are small).
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert wait_until(lambda: not [p for p in workers if alive(p)], DEATH_NOTICED_WITHIN), \
            f"workers {[p for p in workers if alive(p)]} outlived their parent"
        assert wait_until(lambda: not blocks_of(proc.pid), DEATH_NOTICED_WITHIN), \
            blocks_of(proc.pid)
    finally:
        kill_tree(proc.pid, workers)
        proc.wait()


@matrix
@methods
def test_a_worker_killed_mid_batch_is_an_error_naming_its_pid_and_signal(door, start_method,
                                                                       records):
    others = set(workers_of(os.getpid()))  # still exiting, from earlier tests
    it, close = batches(door, BIG_BATCH, 512, start_method, timeout=60, records=records)
    try:
        next(it)
        workers = [p for p in workers_of(os.getpid()) if p not in others]
        assert len(workers) == 1, workers
        os.kill(workers[0], signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(WorkerDiedError) as raised:
            while True:  # batches built before the kill may still arrive
                next(it)
        assert time.monotonic() - start < DEATH_NOTICED_WITHIN
        assert f"pid {workers[0]}" in str(raised.value)
        assert "SIGKILL" in str(raised.value)
    finally:
        close()


@matrix
@methods
def test_a_stopped_worker_is_a_timeout_naming_it_and_its_silence(door, start_method, records):
    others = set(workers_of(os.getpid()))  # still exiting, from earlier tests
    # 3 s, not 1 s: under load a spawn/forkserver sibling can take over a
    # second to answer its first task, and that is not the silence tested here.
    it, close = batches(door, 256, 8, start_method, timeout=3.0, records=records)
    stopped = []
    try:
        next(it)
        stopped = [p for p in workers_of(os.getpid()) if p not in others]
        assert len(stopped) == 1, stopped
        for p in stopped:
            os.kill(p, signal.SIGSTOP)
        with pytest.raises(BatchTimeoutError) as raised:
            for _ in range(100):  # prefetched batches come first
                next(it)
        message = str(raised.value)
        assert f"pid {stopped[0]}" in message and "silent for" in message, message
        assert "timeout=3.0" in message
    finally:
        for p in stopped:
            if alive(p):
                os.kill(p, signal.SIGCONT)
        close()


# -- Ctrl-C ---------------------------------------------------------------------------------

CTRL_C_SCRIPT = textwrap.dedent("""
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # see SCRIPT
    sys.path.insert(0, {root!r})
    from dataset_kit.iterators import MultiprocessIterator
    from tests.iterators.helpers import Augmented
    it = MultiprocessIterator(Augmented(1000, 12288), 8, n_processes=2)
    next(it)
    print("ready", flush=True)
    while True:
        next(it)
""")


@pytest.mark.parametrize("gap", [0.0, 0.02, 0.05])
def test_a_second_ctrl_c_during_cleanup_leaks_nothing(gap):
    # Batches of 8 x 12288 float32 fill blocks of about 400 KB.
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT.format(root=ROOT)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    workers: list[int] = []
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        workers = workers_of(proc.pid)
        assert blocks_of(proc.pid)
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(gap)
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(30)
        assert "KeyboardInterrupt" in proc.stderr.read()
        assert wait_until(lambda: not [p for p in workers if alive(p)], DEATH_NOTICED_WITHIN)
        assert blocks_of(proc.pid) == []
    finally:
        kill_tree(proc.pid, workers)
        proc.wait()
