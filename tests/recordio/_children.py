"""Programs the record-file tests run as real processes (``python -m tests.recordio._children``).

Each record written for generation ``g`` under key ``k`` is ``payload(g, k)``, so a
reader can tell whether every key returns its own record from one generation.
"""

import os
import signal
import sys
import time


def payload(generation: int, key: int) -> bytes:
    return f"{generation}:{key}:".encode() + b"x" * ((generation * 7 + key) % 23)


def count(generation: int) -> int:
    return 20 + (generation * 13) % 50


def write_pair(rec: str, generation: int) -> None:
    from dataset_kit.recordio import IndexedRecordWriter

    with IndexedRecordWriter(rec[:-4] + ".idx", rec) as writer:
        for key in range(count(generation)):
            writer.write_idx(key, payload(generation, key))


def check_pair(rec: str) -> int | None:
    """The generation of the pair at ``rec`` (None if absent); raise if it is mixed."""
    from dataset_kit.recordio import IndexedRecordReader

    if not os.path.exists(rec):
        return None
    reader = IndexedRecordReader(rec[:-4] + ".idx", rec)
    try:
        first = reader.read_idx(0).split(b":")
        generation = int(first[0])
        assert list(reader.keys) == list(range(count(generation))), (generation, reader.keys)
        for key in reader.keys:
            assert reader.read_idx(key) == payload(generation, key), (generation, key)
        return generation
    finally:
        reader.close()


def kill_at_replace(rec: str, generation: int, stop_at: int) -> None:
    """Write a pair, and SIGKILL this process as it makes its ``stop_at``-th os.replace call."""
    calls = [0]

    def profile(frame, event, arg):
        if event == "c_call" and arg is os.replace:
            calls[0] += 1
            if calls[0] == stop_at:
                os.kill(os.getpid(), signal.SIGKILL)

    sys.setprofile(profile)
    write_pair(rec, generation)
    sys.setprofile(None)


def write_forever(rec: str, first: int) -> None:
    generation = first
    while True:
        write_pair(rec, generation)
        generation += 1


def write_rounds(rec: str, writer: int, rounds: int) -> None:
    for r in range(rounds):
        write_pair(rec, 1000 * writer + r)


def read_until(rec: str, stop_file: str) -> None:
    checked = 0
    while not os.path.exists(stop_file):
        if check_pair(rec) is not None:
            checked += 1
    print(checked)


def open_then_wait(rec: str, record: str) -> None:
    """Open the pair, read one record, say so, wait for a line on stdin, then read all."""
    from dataset_kit.recordio import IndexedRecordReader, RecordIOError, RecordReader

    indexed = IndexedRecordReader(rec[:-4] + ".idx", rec)
    sequential = RecordReader(rec)
    indexed.read_idx(0)
    sequential.read()
    print("ready", flush=True)
    sys.stdin.readline()
    for reader in ("indexed", "sequential"):
        try:
            if reader == "indexed":
                for key in indexed.keys:
                    indexed.read_idx(key)
            else:
                list(sequential)
        except RecordIOError as error:
            print(f"{reader} error: {error}", flush=True)
        else:
            print(f"{reader} read everything", flush=True)


def leave_open(rec: str, how: str) -> None:
    """Write records and leave the writer open; end by ``how``."""
    from dataset_kit.recordio import IndexedRecordWriter

    writer = IndexedRecordWriter(rec[:-4] + ".idx", rec)
    for key in range(count(1)):
        writer.write_idx(key, payload(1, key))
    if how == "exception":
        raise RuntimeError("the program fails with the writer open")
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "sleep":
        print("ready", flush=True)
        time.sleep(60)
    # "exit": the program just ends


def fork_and_drop(rec: str) -> None:
    """Fork with a writer open; the child drops its copy and exits normally; the parent goes on."""
    from dataset_kit.recordio import RecordWriter

    writer = RecordWriter(rec)
    writer.write(b"first")
    pid = os.fork()
    if pid == 0:
        del writer
        sys.exit(0)  # a normal exit: atexit hooks and finalizers run in the child
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not os.path.exists(rec), "the child published the parent's file"
    writer.write(b"second")
    writer.close()


if __name__ == "__main__":
    name, *args = sys.argv[1:]
    result = globals()[name](*(int(a) if a.lstrip("-").isdigit() else a for a in args))
