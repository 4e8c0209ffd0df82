"""Every front door that has worker processes, built the same way for the transport tests.

Importable by spawned workers and by the scripts the tests run, so datasets
and converters here are module-level (picklable) classes and functions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dataset_kit import DatasetMixin
from dataset_kit.distributed import ShardedIterator
from dataset_kit.io import ImageRecordIter
from dataset_kit.iterators import MultiprocessIterator
from dataset_kit.loader import DataLoader
from dataset_kit.recordio import IndexedRecordWriter, IRHeader, pack_img
from dataset_kit.sources import DataIterator, DataSource

DOORS = ("MultiprocessIterator", "DataLoader", "ImageRecordIter", "DataIterator",
         "ShardedIterator")
START_METHODS = ("fork", "forkserver", "spawn")
BIG_BATCH = 16384


class Ragged(DatasetMixin):
    """Small int32 arrays of 1-3 elements: a batch of them is pickled, not shared.

    With ``delay`` each example takes that long, and with ``pid_dir`` every
    process that builds examples leaves a file named by its pid there.
    """

    def __init__(self, n: int, delay: float = 0.0, pid_dir: str | None = None) -> None:
        self.n, self.delay, self.pid_dir = n, delay, pid_dir

    def __len__(self) -> int:
        return self.n

    def get_example(self, i: int) -> np.ndarray:
        note_pid(self.pid_dir)
        if self.delay:
            time.sleep(self.delay)
        return np.full(1 + i % 3, i, dtype=np.int32)


class Source(DataSource):
    """NNabla's vocabulary over the same examples, padded to 3 so they stack."""

    def __init__(self, n: int, delay: float = 0.0, pid_dir: str | None = None) -> None:
        super().__init__(shuffle=False)
        self._size, self._variables = n, ("x",)
        self.delay, self.pid_dir = delay, pid_dir

    def _get_data(self, position: int) -> tuple:
        note_pid(self.pid_dir)
        if self.delay:
            time.sleep(self.delay)
        return (np.full(3, position, dtype=np.int32),)


def note_pid(pid_dir: str | None) -> None:
    if pid_dir is not None:
        path = os.path.join(pid_dir, str(os.getpid()))
        if not os.path.exists(path):
            open(path, "w").close()


def as_list(batch: list) -> list:
    """A Gluon batchify_fn that keeps the examples as they are."""
    return list(batch)


def write_records(path: str, n: int) -> str:
    """Write ``n`` 8x8 JPEG records (labels 0..n-1) to ``path`` (+ ``.idx``); return it."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)
    encoded = pack_img(IRHeader(0, 0.0, 0, 0), image)
    with IndexedRecordWriter(path[:-4] + ".idx", path) as writer:
        for i in range(n):
            # The label lives in the header; the image bytes are the same.
            writer.write_idx(i, _relabel(encoded, float(i)))
    return path


def _relabel(record: bytes, label: float) -> bytes:
    from dataset_kit.recordio import pack, unpack
    header, payload = unpack(record)
    return pack(header._replace(label=label), payload)


def batches(door: str, n: int, batch_size: int, start_method: str, *, timeout: float | None,
            delay: float = 0.0, pid_dir: str | None = None, records: str | None = None,
            ) -> tuple[Iterator[Any], Callable[[], None]]:
    """Build ``door`` with one worker process; return (endless batches, close).

    Each batch is turned into the list of example indices it holds, so every
    door's batches compare with ``list(range(...))``.
    """
    if door == "MultiprocessIterator":
        it = MultiprocessIterator(Ragged(n, delay, pid_dir), batch_size, shuffle=False,
                                  n_processes=1, n_prefetch=1, start_method=start_method,
                                  timeout=timeout)
        return (_indices_of_ragged(b) for b in it), it.finalize
    if door == "DataLoader":
        loader = DataLoader(Ragged(n, delay, pid_dir), batch_size, num_workers=1, prefetch=2,
                            batchify_fn=as_list, start_method=start_method,
                            timeout=timeout if timeout is not None else 10 ** 6)

        def epochs() -> Iterator[list]:
            while True:
                for b in loader:
                    yield _indices_of_ragged(b)
        return epochs(), loader.close
    if door == "ImageRecordIter":
        assert records is not None
        it = ImageRecordIter(records, (3, 8, 8), batch_size, preprocess_threads=1,
                             start_method=start_method, timeout=timeout,
                             last_batch_handle="roll_over")

        def mx_epochs() -> Iterator[list]:
            while True:
                for b in it:
                    yield [int(v) for v in b.label[0][: batch_size - b.pad]]
                it.reset()
        return mx_epochs(), it.close
    if door == "DataIterator":
        di = DataIterator(Source(n, delay, pid_dir), batch_size, n_processes=1,
                          start_method=start_method, timeout=timeout)
        return ([int(v) for v in di.next()[0][:, 0]] for _ in iter(int, 1)), di.close
    if door == "ShardedIterator":
        sharded = ShardedIterator(Ragged(n, delay, pid_dir), batch_size, shuffle=False,
                                  n_processes=1, start_method=start_method, timeout=timeout)
        return (_indices_of_ragged(b) for b in sharded), sharded.finalize
    raise ValueError(f"unknown door {door!r}")


def _indices_of_ragged(batch: list) -> list:
    return [int(x[0]) for x in batch]
