"""Real parts for the shard tests: a shard set, a small tmpfs (the S3 server: tests/conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from dataset_kit.shards import ShardWriter

COLUMNS = {"x": "ndarray", "y": "int", "name": "str"}


def sample(i: int) -> dict:
    """The i-th sample of the test sets: distinct, checkable values."""
    return {"x": np.full((4, 3), i, dtype=np.float32), "y": i, "name": f"sample-{i}"}


def write(out, n: int = 100, shard_size: int = 1000, **options) -> object:
    """Write ``n`` samples of :func:`sample` to ``out``; return the manifest."""
    with ShardWriter(out, COLUMNS, shard_size=shard_size, **options) as writer:
        for i in range(n):
            writer.write(sample(i))
    return writer.manifest


def check(example: dict, i: int) -> None:
    expected = sample(i)
    np.testing.assert_array_equal(example["x"], expected["x"])
    assert (example["y"], example["name"]) == (expected["y"], expected["name"])


@contextlib.contextmanager
def small_tmpfs(path, size: str):
    """Mount a tmpfs of ``size`` at ``path`` (root only); always unmounted."""
    os.makedirs(path, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill the disk needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def sigkill_when(proc: subprocess.Popen, ready, what: str, timeout: float,
                 poll: float = 0.05) -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` holds; fail if it exits first or ``timeout`` passes.

    The caller still kills and reaps ``proc`` in its own ``finally``.
    """
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"the process exited before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        time.sleep(poll)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
