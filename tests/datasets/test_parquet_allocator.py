"""Which allocator decodes Parquet: jemalloc in the pool's workers, the user's choice elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dataset_kit.datasets import ParquetDataset, TransformDataset
from dataset_kit.iterators import MultiprocessIterator
from tests.datasets.parquet_files import pa, write


def _has_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return False
    return True


needs_jemalloc = pytest.mark.skipif(not _has_jemalloc(),
                                    reason="this pyarrow was built without jemalloc")


def _backend(row: dict) -> tuple[int, str]:
    """A row's id and the default pool of the process that read it (run in a worker)."""
    return int(row["id"]), pa.default_memory_pool().backend_name


def _backends_seen(folder, workers: int) -> set[str]:
    dataset = TransformDataset(ParquetDataset(folder, ["id", "tokens"]), _backend)
    it = MultiprocessIterator(dataset, 4, repeat=False, shuffle=False, n_processes=workers)
    try:
        rows = [row for batch in it for row in batch]
    finally:
        it.finalize()
    assert sorted(i for i, _ in rows) == list(range(20))
    return {backend for _, backend in rows}


@needs_jemalloc
@pytest.mark.parametrize("workers", [1, 2])
def test_workers_decode_in_jemalloc_and_the_loop_keeps_its_pool(tmp_path, workers):
    write(tmp_path / "a.parquet", [8, 12])
    before = pa.default_memory_pool().backend_name
    assert _backends_seen(tmp_path, workers) == {"jemalloc"}
    assert pa.default_memory_pool().backend_name == before


def test_a_pool_the_user_names_is_kept_in_the_workers(tmp_path):
    write(tmp_path / "a.parquet", [8, 12])
    # ARROW_DEFAULT_MEMORY_POOL is read when pyarrow loads: a fresh interpreter.
    script = ("import sys; sys.path.insert(0, sys.argv[1]);"
              "from tests.datasets.test_parquet_allocator import _backends_seen;"
              "print(sorted(_backends_seen(sys.argv[2], 2)))")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, ARROW_DEFAULT_MEMORY_POOL="system")
    out = subprocess.run([sys.executable, "-c", script, root, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['system']"
