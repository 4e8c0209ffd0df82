"""Datasets and checks shared by the iterator tests (importable by spawned workers)."""

from __future__ import annotations

import faulthandler
import os
import signal
import time

import numpy as np

from dataset_kit import DatasetMixin, concat_examples
from dataset_kit.iterators import OrderSampler, example_rng


class Augmented(DatasetMixin):
    """Examples ``(features + noise, index)``; the noise comes from example_rng()."""

    def __init__(self, n: int, width: int = 8) -> None:
        self.n, self.width = n, width

    def __len__(self) -> int:
        return self.n

    def get_example(self, i: int):
        base = np.full(self.width, i, dtype=np.float32)
        return base + example_rng().normal(size=self.width).astype(np.float32), np.int64(i)


class Misbehaving(DatasetMixin):
    """Normal examples, except that index ``bad`` does ``action``."""

    def __init__(self, n: int, bad: int, action: str, delay: float = 0.0) -> None:
        self.n, self.bad, self.action, self.delay = n, bad, action, delay

    def __len__(self) -> int:
        return self.n

    def get_example(self, i: int):
        if self.delay:
            time.sleep(self.delay)
        if i == self.bad:
            if self.action == "raise":
                raise ValueError(f"boom at index {i}")
            if self.action == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.action == "sigsegv":
                faulthandler.disable()  # pytest's handler would print a stack dump
                os.kill(os.getpid(), signal.SIGSEGV)
            if self.action == "exit":
                os._exit(3)
            if self.action == "sleep":
                time.sleep(1.5)
        return np.full(256, i, dtype=np.float64), i


class Unpicklable(DatasetMixin):
    def __init__(self) -> None:
        self.fn = lambda: None

    def __len__(self) -> int:
        return 4

    def get_example(self, i: int):
        return i


def record_pid(directory: str):
    """A worker_init that records ``index n pid`` in a file per worker."""
    def init(index: int, n_workers: int) -> None:
        with open(os.path.join(directory, f"worker-{index}-{os.getpid()}"), "w") as f:
            f.write(f"{index} {n_workers} {os.getpid()}")
    return init


class PidRecorder:
    """Picklable worker_init (for spawn) writing ``index n pid`` files."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def __call__(self, index: int, n_workers: int) -> None:
        record_pid(self.directory)(index, n_workers)


def recorded_pids(directory: str) -> list[int]:
    return sorted(int(name.split("-")[2]) for name in os.listdir(directory)
                  if name.startswith("worker-"))


def batch_key(batch) -> list:
    """A comparable form of a batch (or converted batch) of Augmented examples."""
    if isinstance(batch, tuple):
        x, idx = batch
    else:
        x, idx = concat_examples(batch)
    return [idx.tolist(), x.round(6).tolist()]


def shm_blocks() -> list[str]:
    """This process's iterator blocks in /dev/shm."""
    prefix = f"dsk-{os.getpid()}-"
    return [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); read its state.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped between the two looks
        return False


class Reversing:
    """A stateful Chainer-style order sampler: each epoch reverses the previous order."""

    def __call__(self, current_order, current_position):
        return np.asarray(current_order)[::-1].copy()


class Curriculum(OrderSampler):
    """A recomputable sampler with state of its own: a rotation that a trainer moves on."""

    state_kind = "test-curriculum"

    def __init__(self, shift: int = 0) -> None:
        self.shift = shift

    def epoch_order(self, epoch, size):
        return np.roll(np.arange(size), self.shift + epoch)

    def state_dict(self):
        return {"shift": self.shift}

    def load_state_dict(self, state):
        self.shift = state["shift"]
