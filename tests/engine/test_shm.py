"""Shared-memory blocks: a worker's mapping has its pages at once, the main process's lazily."""

from __future__ import annotations

import mmap
import os
import resource
import uuid

import numpy as np
import pytest

from dataset_kit.engine._process import shm as _shm

pytestmark = pytest.mark.skipif(not _shm.available() or not hasattr(mmap, "MAP_POPULATE"),
                                reason="needs /dev/shm and MAP_POPULATE (Linux)")
SIZE = 8 << 20
PAGES = SIZE // mmap.PAGESIZE


def _faults_to_fill(block: _shm.Block) -> int:
    view = np.frombuffer(block.mmap, np.uint8)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    view[:] = 7
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del view
    return faults


@pytest.fixture
def name():
    name = f"dsk-test-{uuid.uuid4().hex[:12]}"
    yield name
    _shm.unlink(name)


def test_a_block_a_worker_creates_or_opens_is_filled_without_a_fault_per_page(name):
    created = _shm.Block(name, SIZE, create=True)
    opened = _shm.Block(name, SIZE, create=False)
    try:
        # One fault per 4 KiB page made the first fill of a 48 MB block 2.7x slower.
        assert _faults_to_fill(created) < PAGES // 8
        assert _faults_to_fill(opened) < PAGES // 8
        assert bytes(opened.mmap[:4]) == b"\x07" * 4
    finally:
        created.close()
        opened.close()


def test_the_main_process_maps_a_block_lazily_and_sees_what_the_worker_wrote(name):
    worker = _shm.Block(name, SIZE, create=True)
    pool = _shm.BlockPool(name)
    try:
        np.frombuffer(worker.mmap, np.uint8)[:] = 3
        adopted = pool.adopt(name, SIZE)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        assert int(np.frombuffer(adopted.mmap, np.uint8)[SIZE - 1]) == 3
        # Reading one byte mapped a few pages, not the block's 2048.
        assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < PAGES // 8
        assert os.path.exists(os.path.join(_shm.SHM_DIR, name))
    finally:
        worker.close()
        pool.close()


def test_with_no_free_block_the_pool_makes_one_the_size_workers_needed(name):
    pool = _shm.BlockPool(name)
    worker = _shm.Block(f"{name}w0", SIZE, create=True)
    try:
        assert pool.take() is None  # no batch seen yet: its size is unknown
        pool.adopt(worker.name, SIZE)
        made = pool.take()
        assert made is not None and made.size == SIZE and made.name.startswith(name)
        lent_again = _shm.Block(made.name, SIZE, create=False)  # the worker's side
        lent_again.close()
        pool.give_back(made)
        assert pool.take() is made  # a free block first
    finally:
        worker.close()
        pool.close()
    assert not [n for n in os.listdir(_shm.SHM_DIR) if n.startswith(name)]
