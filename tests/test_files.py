import os

import pytest

from dataset_kit import _files, set_dataset_root
from tests.test_download import _race_creator, run_together


def test_atomic_write_publishes_complete_file_and_leaves_nothing_else(tmp_path):
    target = tmp_path / "out" / "data.bin"
    with _files.atomic_write(target) as temp:
        assert os.path.basename(temp) == "data.bin" and not target.exists()
        with open(temp, "wb") as f:
            f.write(b"payload")
    assert target.read_bytes() == b"payload"
    assert os.listdir(target.parent) == ["data.bin"]


def test_atomic_write_that_raises_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="midway"):
        with _files.atomic_write(target) as temp:
            with open(temp, "wb") as f:
                f.write(b"half")
            raise RuntimeError("midway")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["data.bin"]


def test_atomic_write_that_writes_nothing_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing was written"):
        with _files.atomic_write(tmp_path / "x"):
            pass
    assert os.listdir(tmp_path) == []


def test_atomic_dir_appears_whole_or_not_at_all(tmp_path):
    with _files.atomic_dir(tmp_path / "d") as staging:
        (open(os.path.join(staging, "a"), "w")).close()
        assert not (tmp_path / "d").exists()
    assert os.listdir(tmp_path / "d") == ["a"]
    with pytest.raises(ValueError):
        with _files.atomic_dir(tmp_path / "e") as staging:
            raise ValueError("stop")
    assert os.listdir(tmp_path) == ["d"]
    with pytest.raises(FileExistsError, match="exists already"):
        with _files.atomic_dir(tmp_path / "d"):
            pass


def test_lock_is_keyed_to_the_real_target_path_not_the_root(tmp_path, monkeypatch):
    monkeypatch.setenv(_files.LOCK_DIR_ENV, str(tmp_path / "locks"))
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")
    set_dataset_root(tmp_path / "root-a")
    try:
        first = _files.lock_for(tmp_path / "real" / "f")
        set_dataset_root(tmp_path / "root-b")
        second = _files.lock_for(tmp_path / "alias" / "f")
    finally:
        set_dataset_root(None)
    assert first.lock_file == second.lock_file
    assert os.path.dirname(first.lock_file) == str(tmp_path / "locks")
    assert _files.lock_for(tmp_path / "real" / "g").lock_file != first.lock_file


def test_stale_parts_of_dead_writers_are_removed_and_others_kept(tmp_path):
    target = tmp_path / "f.bin"
    (tmp_path / ".f.bin.123-abcd.part").mkdir()
    (tmp_path / "f.bin.456-ef01.part").write_bytes(b"x")  # the 0.1 naming
    (tmp_path / ".g.bin.1-2.part").mkdir()
    _files.remove_stale_parts(target)
    assert os.listdir(tmp_path) == [".g.bin.1-2.part"]


def _create_under_own_root(target, base, log, barrier, results):
    # Every process has a root of its own: the lock must still be shared.
    _race_creator(target, os.path.join(base, f"root-{os.getpid()}"), log, barrier, results)


def test_processes_with_different_dataset_roots_exclude_each_other(tmp_path):
    target, log = str(tmp_path / "shared" / "x.txt"), str(tmp_path / "log")
    answers = run_together(4, _create_under_own_root, target, str(tmp_path), log)
    with open(log) as f:
        creators = f.read().split()
    assert len(creators) == 1
    assert set(answers) == {creators[0]}
    assert os.listdir(tmp_path / "shared") == ["x.txt"]


def test_without_the_lock_only_parts_of_dead_pids_are_removed(tmp_path):
    import subprocess
    import sys
    target = tmp_path / "f.bin"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / f".f.bin.{dead.pid}-abcd.part").mkdir()
        (tmp_path / f".f.bin.{live.pid}-abcd.part").mkdir()
        (tmp_path / f".f.bin.{os.getpid()}-abcd.part").mkdir()
        (tmp_path / ".f.bin.nopid.part").mkdir()
        removed = _files.remove_stale_parts(target, under_lock=False)
        assert removed == [str(tmp_path / f".f.bin.{dead.pid}-abcd.part")]
        assert sorted(os.listdir(tmp_path)) == sorted([
            f".f.bin.{live.pid}-abcd.part", f".f.bin.{os.getpid()}-abcd.part",
            ".f.bin.nopid.part"])
    finally:
        live.kill()
        live.wait()
