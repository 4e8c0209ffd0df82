"""The Gluon and MXNet front doors, each figure a ratio against a baseline from the same run.

1. DataLoader(num_workers=2) on parallel.py's CPU-bound workload (about 1 ms
   per example, batch 32) against MultiprocessIterator(n_processes=2,
   converter=concat_examples): the layer should cost nothing (target >= 0.95).
2. CSVIter over a numeric CSV of about 500 MB (generated here, 100 float32
   columns): MB/s of a full epoch, against numpy.loadtxt of the whole file
   and, where pandas is installed, pandas.read_csv.

Run: .venv/bin/python benchmarks/loader.py [--csv-mb 500]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
from _timing import best_of
from parallel import CpuBound, calibrate_rounds

from dataset_kit import concat_examples
from dataset_kit.io import CSVIter
from dataset_kit.iterators import MultiprocessIterator
from dataset_kit.loader import DataLoader

BATCH, BATCHES = 32, 60


def loader_against_iterator() -> None:
    dataset = CpuBound(BATCH * BATCHES * 4, calibrate_rounds())

    def with_iterator() -> None:
        with MultiprocessIterator(dataset, BATCH, n_processes=2, shuffle=False,
                                  converter=concat_examples) as it:
            for _ in range(BATCHES):
                next(it)

    def with_loader() -> None:
        with DataLoader(dataset, BATCH, num_workers=2, batchify_fn=concat_examples) as loader:
            batches = iter(loader)
            for _ in range(BATCHES):
                next(batches)

    t = best_of(3, iterator=with_iterator, loader=with_loader)
    rate = {k: BATCH * BATCHES / v for k, v in t.items()}
    print(f"1. CPU-bound, batch 32, 2 workers: MultiprocessIterator+converter "
          f"{rate['iterator']:.0f} ex/s, DataLoader {rate['loader']:.0f} ex/s")
    print(f"   ratio DataLoader / MultiprocessIterator: {t['iterator'] / t['loader']:.2f}  "
          f"(target >= 0.95)")


def write_csv(path: str, megabytes: int) -> int:
    rng = np.random.default_rng(0)
    block = rng.random((20_000, 100), dtype=np.float32)
    with open(path, "w") as f:
        np.savetxt(f, block, delimiter=",", fmt="%.6f")
    chunk = open(path, "rb").read()
    with open(path, "ab") as f:
        while os.path.getsize(path) < megabytes << 20:
            f.write(chunk)
    return os.path.getsize(path)


def csv_parsing(megabytes: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "data.csv")
        size = write_csv(path, megabytes) / 1e6

        def csv_iter() -> None:
            it = CSVIter(path, (100,), batch_size=1024, round_batch=False)
            for _ in it:
                pass

        def loadtxt() -> None:
            np.loadtxt(path, delimiter=",", dtype=np.float32)

        runs = {"csv_iter": csv_iter, "loadtxt": loadtxt}
        try:
            import pandas

            runs["pandas"] = lambda: pandas.read_csv(path, header=None, dtype=np.float32)
        except ImportError:
            pass
        t = best_of(1, **runs)
        print(f"2. CSV of {size:.0f} MB, 100 float32 columns, batch 1024:")
        for name, seconds in t.items():
            print(f"   {name:9s} {size / seconds:7.1f} MB/s")
        if "pandas" not in t:
            print("   pandas    not installed here")
        print(f"   ratio CSVIter / numpy.loadtxt: {t['loadtxt'] / t['csv_iter']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--csv-mb", type=int, default=500)
    args = parser.parse_args()
    start = time.perf_counter()
    loader_against_iterator()
    csv_parsing(args.csv_mb)
    print(f"(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
