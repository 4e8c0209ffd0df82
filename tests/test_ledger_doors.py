"""Every door carries the engine's ledger, returns it from ledger(), and checks it on load."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dataset_kit import ResumeMismatchError
from dataset_kit.engine import ResumeMismatchWarning
from dataset_kit.io import NDArrayIter
from dataset_kit.iterators import SerialIterator
from dataset_kit.loader import DataLoader as GluonLoader


class Files:
    """A dataset over 'files' whose identity is ``fingerprint``."""

    def __init__(self, n: int, fingerprint: str) -> None:
        self.data = np.arange(n)
        self._fingerprint = fingerprint

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]

    def fingerprint(self) -> str:
        return self._fingerprint


def ids(batch) -> list[int]:
    if hasattr(batch, "data") and isinstance(batch.data, list):  # an MXNet DataBatch
        return np.asarray(batch.data[0]).ravel().astype(int).tolist()
    return np.asarray([np.asarray(x) for x in batch]).ravel().astype(int).tolist()


def chainer(n: int, fingerprint: str):
    return SerialIterator(Files(n, fingerprint), 3, seed=0)


def gluon(n: int, fingerprint: str):
    return GluonLoader(Files(n, fingerprint), 3, shuffle=True, seed=0)


def torch_loader(n: int, fingerprint: str):
    torch = pytest.importorskip("torch")
    from dataset_kit.torch import DataLoader
    return DataLoader(Files(n, fingerprint), batch_size=3, shuffle=True,
                      generator=torch.Generator().manual_seed(0))


def mxnet(n: int, fingerprint: str):
    # NDArrayIter holds arrays, which have no files: its data's identity is its length.
    return NDArrayIter(np.arange(n + (fingerprint == "b")), batch_size=3, shuffle=True, seed=0)


DOORS = {"chainer": chainer, "gluon": gluon, "torch": torch_loader, "mxnet": mxnet}


def take(loader, k: int) -> list[list[int]]:
    if hasattr(loader, "__next__"):
        return [ids(next(loader)) for _ in range(k)]
    return [ids(batch) for batch in itertools.islice(iter(loader), k)]


@pytest.mark.parametrize("door", sorted(DOORS))
def test_a_state_over_changed_files_is_refused_and_the_loader_is_unchanged(door):
    make = DOORS[door]
    saved = make(12, "a")
    take(saved, 2)
    state = saved.state_dict()
    assert saved.ledger().consumed_total == 6
    loader, twin = make(12, "b"), make(12, "b")
    take(loader, 1), take(twin, 1)
    with pytest.raises(ResumeMismatchError) as info:
        loader.load_state_dict(state)
    assert info.value.cause == ("dataset length" if door == "mxnet" else "files")
    assert loader.ledger() == twin.ledger()
    assert take(loader, 2) == take(twin, 2)


@pytest.mark.parametrize("door", ["chainer", "gluon", "torch"])
def test_strict_false_loads_changed_files_with_a_warning_naming_them(door):
    make = DOORS[door]
    saved = make(12, "a")
    take(saved, 2)
    loader, same_files = make(12, "b"), make(12, "a")
    with pytest.warns(ResumeMismatchWarning, match="files changed"):
        loader.load_state_dict(saved.state_dict(), strict=False)
    same_files.load_state_dict(saved.state_dict())
    assert take(loader, 2) == take(same_files, 2)


@pytest.mark.parametrize("door", sorted(DOORS))
def test_a_resumed_loader_logs_the_ledger_of_the_uninterrupted_one(door):
    make = DOORS[door]
    reference, first = make(12, "a"), make(12, "a")
    take(reference, 3)  # within one epoch: MXNet's iterators stop at its end
    take(first, 1)
    resumed = make(12, "a")
    resumed.load_state_dict(first.state_dict())
    take(resumed, 2)
    assert resumed.ledger() == reference.ledger()
