"""A .rec and its .idx are one unit: real SIGKILLs, a real full filesystem, real concurrency."""

import contextlib
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from dataset_kit.recordio import IndexedRecordReader, IndexedRecordWriter, RecordIOError
from tests.recordio._children import check_pair, count, payload, write_pair

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child(*args, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-m", "tests.recordio._children",
                             *map(str, args)], cwd=ROOT, env=env, **kwargs)


@contextlib.contextmanager
def running(*processes):
    try:
        yield processes
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
            p.wait()


def wait_for_generation(rec: str, at_least: int, writer: subprocess.Popen) -> None:
    """Return once ``rec`` holds a generation >= ``at_least`` (the writer is alive until then)."""
    deadline = time.monotonic() + 120  # a liveness bound, not a speed limit
    while time.monotonic() < deadline:
        if writer.poll() is not None:
            raise AssertionError(f"the writer exited with {writer.returncode} before publishing")
        generation = check_pair(rec) if os.path.exists(rec) else None
        if generation is not None and generation >= at_least:
            return
        time.sleep(0.01)
    raise AssertionError(f"no generation >= {at_least} was published within 120 s")


def names(directory) -> list:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("stop_at, survivor", [(1, "old"), (2, "new"), (3, "new"), (4, "new")])
def test_a_writer_killed_at_any_rename_leaves_the_old_pair_or_the_new_one(tmp_path, stop_at,
                                                                          survivor):
    # The publish renames the journal (1), the .rec (2), then the .idx (3); 4 is never reached.
    rec = str(tmp_path / "r.rec")
    write_pair(rec, 1)
    with running(child("kill_at_replace", rec, 2, stop_at)) as (p,):
        assert p.wait(timeout=60) == (-signal.SIGKILL if stop_at < 4 else 0)
    assert check_pair(rec) == (1 if survivor == "old" else 2)
    # The open finished the publish (or dropped the staged files): nothing else is left.
    assert names(tmp_path) == ["r.idx", "r.rec"]


def test_writers_killed_at_random_moments_never_leave_a_mixed_pair(tmp_path):
    rng = random.Random(0)
    rec = str(tmp_path / "r.rec")
    seen = set()
    for round_ in range(12):
        with running(child("write_forever", rec, 100 * round_)) as (p,):
            if round_ % 3:
                # Kill at a random moment after this writer's first publish, whatever the
                # machine's load (a fixed sleep may end before a loaded child has started).
                wait_for_generation(rec, 100 * round_, p)
                time.sleep(rng.uniform(0.0, 0.2))
            else:
                time.sleep(rng.uniform(0.0, 1.0))  # perhaps before its first publish
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=60)
        generation = check_pair(rec)  # raises if a key returns another generation's record
        seen.add(generation)
        if generation is None:  # killed before its first publish: nothing complete-looking
            assert [n for n in names(tmp_path) if not n.endswith(".part")] == []
        else:
            assert names(tmp_path) == ["r.idx", "r.rec"]
    assert len(seen - {None}) >= 2


def test_eight_concurrent_writers_never_show_a_reader_a_mixed_pair(tmp_path):
    rec, stop = str(tmp_path / "r.rec"), str(tmp_path / "stop")
    writers = [child("write_rounds", rec, w, 30) for w in range(8)]
    readers = [child("read_until", rec, stop, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True) for _ in range(2)]
    with running(*writers, *readers):
        for w in writers:
            assert w.wait(timeout=600) == 0
        open(stop, "w").close()
        for r in readers:
            out, err = r.communicate(timeout=120)
            assert r.returncode == 0, err
            assert int(out) > 0
    generation = check_pair(rec)
    assert generation % 1000 == 29
    assert names(tmp_path) == ["r.idx", "r.rec", "stop"]


@contextlib.contextmanager
def tiny_filesystem(directory, size="2m"):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    os.makedirs(directory)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(directory)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def fill(path, leave: int) -> None:
    """Fill the filesystem of ``path``, then free ``leave`` bytes."""
    with open(path, "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(max(0, size - leave))


@pytest.mark.parametrize("leave", range(0, 36865, 4096))
def test_a_full_filesystem_keeps_the_old_pair_whole(tmp_path, leave):
    with tiny_filesystem(tmp_path / "fs") as fs:
        rec = str(fs / "r.rec")
        write_pair(rec, 1)
        writer = IndexedRecordWriter(fs / "r.idx", rec)
        for key in range(1200):  # about 700 KB of records and a 10 KB index
            writer.write_idx(key, bytes(560))
        # Fill the rest but "leave" bytes: the last of the .rec, its .idx or the journal fails.
        fill(fs / "filler", leave)
        try:
            writer.close()
        except OSError as error:
            assert error.errno == 28, error  # ENOSPC
            assert check_pair(rec) == 1
        else:
            reader = IndexedRecordReader(fs / "r.idx", rec)
            assert len(reader) == 1200 and reader.read_idx(1199) == bytes(560)
        os.unlink(fs / "filler")
        assert names(fs) == ["r.idx", "r.rec"]


def test_an_index_from_another_write_is_refused_on_open_naming_both_files(tmp_path):
    write_pair(str(tmp_path / "a.rec"), 1)
    write_pair(str(tmp_path / "b.rec"), 2)
    with pytest.raises(RecordIOError, match="a.idx does not belong to .*b.rec"):
        IndexedRecordReader(tmp_path / "a.idx", tmp_path / "b.rec")
    # The ENOSPC case of the issue: a long .rec with a one-line .idx.
    (tmp_path / "one.idx").write_text("0\t0\n")
    with pytest.raises(RecordIOError, match="one.idx does not belong to .*b.rec: the last "
                                            "indexed record .* ends at"):
        IndexedRecordReader(tmp_path / "one.idx", tmp_path / "b.rec")
    (tmp_path / "two.idx").write_text("0\t0\n1\t0\n")
    with pytest.raises(RecordIOError, match="keys 0 and 1 both point at offset 0"):
        IndexedRecordReader(tmp_path / "two.idx", tmp_path / "b.rec")


def test_the_debris_of_killed_writers_goes_with_the_next_write_or_open(tmp_path):
    rec = str(tmp_path / "r.rec")
    write_pair(rec, 1)
    for _ in range(2):
        with running(child("leave_open", rec, "sigkill")) as (p,):
            assert p.wait(timeout=60) == -signal.SIGKILL
    assert len(names(tmp_path)) == 4  # two staging folders beside the pair
    check_pair(rec)  # an open
    assert names(tmp_path) == ["r.idx", "r.rec"]
    with running(child("leave_open", rec, "sigkill")) as (p,):
        p.wait(timeout=60)
    write_pair(str(tmp_path / "r.rec"), 3)  # a write
    assert names(tmp_path) == ["r.idx", "r.rec"]
    # A writer that is still alive keeps its staging folder.
    with running(child("leave_open", rec, "sleep", stdout=subprocess.PIPE, text=True)) as (p,):
        assert p.stdout.readline() == "ready\n"
        check_pair(rec)
        assert len(names(tmp_path)) == 3
    check_pair(rec)
    assert names(tmp_path) == ["r.idx", "r.rec"]
    assert count(3) == len(IndexedRecordReader(tmp_path / "r.idx", rec))
    assert payload(3, 0) == IndexedRecordReader(tmp_path / "r.idx", rec).read_idx(0)
