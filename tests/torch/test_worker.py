"""Inside workers: get_worker_info(), worker_init_fn(worker_id) and PyTorch's seeding."""

from __future__ import annotations

import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.torch.helpers import torch

from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402

import dataset_kit.torch as dkt  # noqa: E402
from dataset_kit.iterators import BatchTimeoutError, WorkerDiedError  # noqa: E402

_seeded: dict = {}


def _record_seeding(worker_id: int) -> None:
    """A worker_init_fn that draws from every generator PyTorch seeds per worker."""
    _seeded.update(id=worker_id, np=int(np.random.randint(2**31)), random=random.random(),
                   torch=int(torch.randint(2**31, ())))


class Reports(torch.utils.data.Dataset):
    """Each example reports who built it, as both get_worker_info()s see it."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        theirs = torch.utils.data.get_worker_info()
        ours = dkt.get_worker_info()
        if theirs is None:
            return {"main": True}
        same = ours is theirs
        return {"id": theirs.id, "n": theirs.num_workers, "seed": theirs.seed,
                "same": same, "own_dataset": type(theirs.dataset) is Reports, **_seeded}


def _per_worker(batches: list) -> dict:
    seen = {}
    for batch in batches:
        for k in range(len(batch["id"])):
            seen[int(batch["id"][k])] = {key: batch[key][k].item() for key in batch}
    return seen


def test_workers_are_seeded_and_introduced_as_pytorch_does():
    ours = dkt.DataLoader(Reports(), batch_size=2, num_workers=2, worker_init_fn=_record_seeding,
                          generator=torch.Generator().manual_seed(17))
    theirs = TorchDataLoader(Reports(), batch_size=2, num_workers=2,
                             worker_init_fn=_record_seeding,
                             generator=torch.Generator().manual_seed(17))
    try:
        mine, reference = _per_worker(list(ours)), _per_worker(list(theirs))
    finally:
        ours.close()
    assert set(mine) == {0, 1}
    assert all(w["same"] and w["own_dataset"] and w["n"] == 2 for w in mine.values())
    for w in (*mine.values(), *reference.values()):
        del w["same"]  # only our workers know dataset_kit.torch.get_worker_info()
    assert mine == reference  # seeds, and the first draws of numpy, random and torch


def test_without_workers_get_worker_info_is_none():
    assert next(iter(dkt.DataLoader(Reports(), batch_size=2)))["main"].tolist() == [True, True]
    assert dkt.get_worker_info() is None


class Fails(torch.utils.data.Dataset):
    """Examples 3 and 6 raise; the others are their index."""

    def __len__(self) -> int:
        return 9

    def __getitem__(self, i: int):
        if i in (3, 6):
            raise KeyError(f"bad example {i}")
        return i


def _outcomes(loader) -> list:
    """Each next() of one epoch: the batch as a list, or the exception's type and words."""
    seen, it = [], iter(loader)
    while True:
        try:
            seen.append(next(it).tolist())
        except StopIteration:
            return seen
        except Exception as error:  # noqa: BLE001 - the test compares them with PyTorch's
            seen.append((type(error), str(error).splitlines()[0]))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_failed_batch_is_raised_as_its_own_type_and_the_epoch_goes_on(num_workers):
    loader = dkt.DataLoader(Fails(), batch_size=2, num_workers=num_workers)
    try:
        ours = _outcomes(loader)
    finally:
        loader.close()
    theirs = _outcomes(TorchDataLoader(Fails(), batch_size=2, num_workers=num_workers))
    assert ours == theirs
    assert [o[0] for o in ours if isinstance(o, tuple)] == [KeyError, KeyError]
    assert len(ours) == 5  # the batches after each failed one came too


def test_a_failed_batch_in_a_worker_carries_the_workers_traceback():
    loader = dkt.DataLoader(Fails(), batch_size=2, num_workers=2)
    try:
        with pytest.raises(KeyError) as raised:
            list(loader)
    finally:
        loader.close()
    assert "Caught KeyError in DataLoader worker process" in str(raised.value)
    assert "bad example 3" in str(raised.value) and "__getitem__" in str(raised.value)


def _failing_init(worker_id: int) -> None:
    raise RuntimeError(f"Error in worker_init_fn {worker_id}")


def test_an_error_in_worker_init_fn_is_raised_as_pytorch_raises_it():
    loader = dkt.DataLoader(Reports(), batch_size=2, num_workers=2, worker_init_fn=_failing_init)
    try:
        with pytest.raises(RuntimeError, match="Error in worker_init_fn"):
            list(loader)
    finally:
        loader.close()


class ReadOnlyInfo(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int):
        info = dkt.get_worker_info()
        try:
            info.id = 5
        except Exception as error:  # noqa: BLE001 - the test compares the type with PyTorch's
            return type(error).__name__
        return "assignable"


def test_worker_info_is_pytorchs_read_only_record():
    loader = dkt.DataLoader(ReadOnlyInfo(), batch_size=None, num_workers=1)
    try:
        ours = list(loader)
    finally:
        loader.close()
    theirs = list(TorchDataLoader(ReadOnlyInfo(), batch_size=None, num_workers=1))
    assert ours == theirs and ours[0] != "assignable"


class ConvAfterFork(torch.utils.data.Dataset):
    """Uses torch's intra-op thread pool in the parent before workers fork."""

    def __init__(self) -> None:
        self.x = torch.ones(1, 1, 24000)
        self[0]

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int):
        out = torch.nn.functional.conv1d(self.x, torch.ones(1, 1, 2))
        return out.shape[-1], torch.get_num_threads()


def test_workers_use_one_thread_as_pytorchs_so_forked_thread_pools_do_not_hang():
    loader = dkt.DataLoader(ConvAfterFork(), batch_size=None, num_workers=1, timeout=60)
    try:
        assert list(loader) == [[23999, 1], [23999, 1]]  # default_convert makes lists
    finally:
        loader.close()


class Hangs(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        time.sleep(600)


def test_a_silent_worker_is_an_error_after_timeout_not_a_hang():
    loader = dkt.DataLoader(Hangs(), batch_size=2, num_workers=1, timeout=1)
    start = time.monotonic()
    try:
        with pytest.raises(BatchTimeoutError, match="DataLoader timed out after 1 seconds"):
            next(iter(loader))
        assert time.monotonic() - start < 60
    finally:
        loader.close()


class Dies(torch.utils.data.Dataset):
    """The worker building example 2 ends: by a real SIGKILL, or os._exit(3)."""

    def __init__(self, how: str) -> None:
        self.how = how

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        if i == 2:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        return i


@pytest.mark.parametrize("how, words", [
    ("kill", r"DataLoader worker \(pid (\d+)\) is killed by signal: Killed\. "),
    ("exit", r"DataLoader worker \(pid\(s\) (\d+)\) exited unexpectedly"),
])
def test_a_dead_worker_is_reported_in_pytorchs_words_with_its_pid(how, words):
    loader = dkt.DataLoader(Dies(how), batch_size=1, num_workers=1, timeout=60)
    start = time.monotonic()
    try:
        with pytest.raises(WorkerDiedError, match=words) as raised:
            list(loader)
        assert time.monotonic() - start < 60  # not a hang
    finally:
        loader.close()
    error = raised.value
    assert isinstance(error, RuntimeError)  # PyTorch raises a RuntimeError
    assert error.exitcode == (-signal.SIGKILL if how == "kill" else 3)
    assert str(error.pid) == re.search(words, str(error)).group(1)


_ROOT = pathlib.Path(__file__).resolve().parents[2]  # the checkout, whose dataset_kit runs
_KEEPS_EVERY_BATCH = """
import resource
import torch
from torch.utils.data import IterableDataset
from dataset_kit.torch import DataLoader

class Tensors(IterableDataset):
    def __iter__(self):
        return (torch.full((2, 2), float(i)) for i in range(300))

resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
kept = []
try:
    for batch in DataLoader(Tensors(), num_workers=1, multiprocessing_context="fork"):
        kept.append(batch)
except RuntimeError as error:
    print(type(error).__name__, error)
else:
    print("no error after", len(kept), "batches")
"""


def test_running_out_of_file_descriptors_is_named_with_pytorchs_cure():
    # Each kept tensor from a worker holds a file descriptor (torch's sharing
    # strategy); past the limit the answer cannot be received, and the error
    # must say so, as PyTorch's does, not "received 0 items of ancdata".
    # In a child process: the lowered limit must not reach this one.
    done = subprocess.run([sys.executable, "-c", _KEEPS_EVERY_BATCH], capture_output=True,
                          text=True, timeout=240, cwd=_ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RuntimeError Too many open files."), done.stdout
    assert "ulimit -n" in done.stdout and "set_sharing_strategy" in done.stdout
