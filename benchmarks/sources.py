"""An epoch of data_iterator_cache over a 1 GB cache directory, against a bare np.load loop.

The cache (NNabla's layout, written here by DataSourceWithFileCache): 80,000
examples of a 3x64x64 uint8 image and an int32 label, in 800 chunk files of
100 (about 0.98 GB). Rows, each the median of --runs interleaved runs, the
files in the page cache for all (this measures the loader, not the disk):

* baseline: ``np.load`` of every variable of every chunk file, in order;
* data_iterator_cache(batch_size=100, normalize=False, with_memory_cache=False,
  use_thread=False), one epoch in order: its GB/s and the ratio to the
  baseline (target >= 0.8);
* the same with the default use_thread=True (a thread builds the next batch);
* the same with shuffle=True, use_thread=False: every batch gathers 100
  examples scattered over the chunks (the reader's pread path; before issue 19
  this read memory maps).

Run: .venv/bin/python benchmarks/sources.py [--examples 80000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import tempfile

import numpy as np
from _timing import median_of

from dataset_kit.sources import DataSource, DataSourceWithFileCache, data_iterator_cache

SHAPE, BATCH = (3, 64, 64), 100


class _Images(DataSource):
    def __init__(self, n: int) -> None:
        super().__init__()
        self._size, self._variables = n, ("x", "y")
        self._pattern = np.random.default_rng(0).integers(0, 256, (256,) + SHAPE, np.uint8)

    def _get_data(self, position: int) -> tuple:
        return self._pattern[position % 256], np.array([position], np.int32)


def plain_load(cache_dir: str) -> int:
    total = 0
    with open(os.path.join(cache_dir, "cache_index.csv")) as f:
        for name, *_ in csv.reader(f):
            with open(os.path.join(cache_dir, name), "rb") as chunk:
                total += np.load(chunk).nbytes + np.load(chunk).nbytes
    return total


def epoch(cache_dir: str, use_thread: bool, shuffle: bool = False) -> int:
    total = 0
    with data_iterator_cache(cache_dir, BATCH, shuffle=shuffle, normalize=False,
                             with_memory_cache=False, use_thread=use_thread,
                             stop_exhausted=True) as it:
        for x, y in it:
            total += x.nbytes + y.nbytes
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=80_000)
    parser.add_argument("--keep", help="build (or reuse) the cache here instead of a temp dir")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cache_dir = args.keep or tempfile.mkdtemp(prefix="dataset_kit_bench_")
    try:
        DataSourceWithFileCache(_Images(args.examples), cache_dir)
        nbytes = plain_load(cache_dir)
        print(f"cache: {args.examples} examples, {nbytes / 1e9:.2f} GB in "
              f"{len(os.listdir(cache_dir)) - 2} chunk files")
        t = median_of(args.runs, plain=lambda: plain_load(cache_dir),
                      iterator=lambda: epoch(cache_dir, False),
                      threaded=lambda: epoch(cache_dir, True),
                      shuffled=lambda: epoch(cache_dir, False, shuffle=True))
        rate = {k: nbytes / v / 1e9 for k, v in t.items()}
        print(f"np.load loop:                    {rate['plain']:.2f} GB/s")
        print(f"data_iterator_cache:             {rate['iterator']:.2f} GB/s = "
              f"{t['plain'] / t['iterator']:.2f} of np.load  (target >= 0.8)")
        print(f"data_iterator_cache, use_thread: {rate['threaded']:.2f} GB/s = "
              f"{t['plain'] / t['threaded']:.2f} of np.load")
        print(f"data_iterator_cache, shuffle:    {rate['shuffled']:.2f} GB/s = "
              f"{t['plain'] / t['shuffled']:.2f} of np.load")
    finally:
        if not args.keep:
            shutil.rmtree(cache_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
