"""The worker process's own settings: what a worker runs with that the user's process does not."""

from __future__ import annotations

import ctypes
import time

import numpy as np
import pytest

from dataset_kit import DatasetMixin
from dataset_kit.iterators import MultiprocessIterator


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _free_heap_bytes_after_a_temporary(nbytes: int) -> int:
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    temporary = np.ones(nbytes, np.uint8)  # like a decoded image, freed after use
    del temporary
    return libc.mallinfo2().fordblks


class _FreedMemory(DatasetMixin):
    def __len__(self):
        return 4

    def get_example(self, i):
        return np.int64(_free_heap_bytes_after_a_temporary(8 << 20))


def test_a_worker_keeps_a_freed_temporary_for_the_next_example_instead_of_fresh_pages():
    # A temporary freed in a worker stays in its heap, so the next example's
    # temporaries reuse those pages instead of faulting in zeroed ones.
    try:
        ctypes.CDLL(None).mallinfo2  # noqa: B018 - glibc >= 2.33 has it
    except AttributeError:
        pytest.skip("mallinfo2 (glibc >= 2.33) is needed to see the worker's heap")
    with MultiprocessIterator(_FreedMemory(), 2, repeat=False, shuffle=False,
                              n_processes=2) as it:
        free = [int(v) for batch in it for v in batch]
    assert min(free) >= 8 << 20


class _Slow(DatasetMixin):
    """Examples that take a while, each leaving a file behind once built."""

    def __init__(self, folder):
        self.folder = folder

    def __len__(self):
        return 20

    def get_example(self, i):
        time.sleep(0.3)
        (self.folder / str(i)).touch()
        return np.int64(i)


def test_finalize_does_not_wait_for_the_batches_queued_behind_the_one_being_built(tmp_path):
    # One worker, four batches in flight: finalizing after the first batch stops the
    # worker in the batch in hand (it may just have finished it), never later.
    it = MultiprocessIterator(_Slow(tmp_path), 1, shuffle=False, n_processes=1, n_prefetch=3)
    try:
        assert int(next(it)[0]) == 0
    finally:
        it.finalize()
    built = sorted(int(p.name) for p in tmp_path.iterdir())
    assert built in ([0], [0, 1]), built
