"""Datasets and comparisons shared by the tests of dataset_kit.torch (picklable, module-level)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="dataset_kit.torch needs PyTorch (the torch extra)")

from dataset_kit import example_rng  # noqa: E402

Point = collections.namedtuple("Point", "x y")


class Mixed(torch.utils.data.Dataset):
    """Examples of every kind default_collate handles: arrays, numbers, strings, nesting."""

    def __init__(self, n: int = 37) -> None:
        self.x = np.random.default_rng(0).random((n, 3)).astype(np.float32)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return (self.x[i], i, {"f": float(i) / 2, "name": f"ex{i}", "flag": i % 2 == 0,
                               "h": np.float16(i), "p": Point(np.int32(i), [i, -i])},
                torch.full((2,), i, dtype=torch.int16))


class Uniform(torch.utils.data.Dataset):
    """Uniform numpy examples (the shared-memory fast path), augmented with example_rng()."""

    def __init__(self, n: int = 41, shape: tuple = (4, 5)) -> None:
        self.n, self.shape = n, shape

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        noise = example_rng().random(self.shape, dtype=np.float32)
        return np.full(self.shape, i, np.float32) + noise, np.int64(i)


class WithGetItems(torch.utils.data.Dataset):
    """Answers whole batches through __getitems__, and records that it did."""

    def __init__(self, n: int = 20) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return np.array([i, 0], np.int64)

    def __getitems__(self, indices: list):
        return [np.array([i, len(indices)], np.int64) for i in indices]


class Bulk(torch.utils.data.Dataset):
    """Answers a key that is a list (or tuple) of indices: its type's name, then the indices."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key):
        if not isinstance(key, (list, tuple)):
            raise TypeError(f"Bulk wants a list or tuple of indices, got {key!r}")
        return [type(key).__name__, *key]


def assert_same(ours, theirs, where: str = "batch") -> None:
    """Equal values, identical types, dtypes and nesting."""
    assert type(ours) is type(theirs), f"{where}: {type(ours)} != {type(theirs)}"
    if isinstance(theirs, torch.Tensor):
        assert ours.dtype == theirs.dtype, f"{where}: {ours.dtype} != {theirs.dtype}"
        assert ours.shape == theirs.shape, f"{where}: {ours.shape} != {theirs.shape}"
        assert torch.equal(ours, theirs), f"{where}: {ours} != {theirs}"
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs), where
        for k in theirs:
            assert_same(ours[k], theirs[k], f"{where}[{k!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for k, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{k}]")
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def assert_same_batches(ours: list, theirs: list) -> None:
    assert len(ours) == len(theirs), f"{len(ours)} batches != {len(theirs)}"
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert_same(a, b, f"batch {k}")


class StatefulCounter(torch.utils.data.IterableDataset):
    """A torchdata-``Stateful`` stream: its state is where each worker's copy stands."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.start = 0
        self.resume_at: int | None = None

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        w, k = (0, 1) if info is None else (info.id, info.num_workers)
        i, self.resume_at = self.resume_at or 0, None  # a loaded state, once
        while w + k * i < self.n:
            self.start = i + 1
            yield w + k * i
            i += 1

    def state_dict(self) -> dict:
        return {"start": self.start}

    def load_state_dict(self, state: dict) -> None:
        self.resume_at = state["start"]
