"""Row group size of Parquet shards: a shuffled epoch against one read from a closed shard.

Rows of the columnar benchmark (int64 label, float32[16] features, ~256 int32
token ids) written by ``ShardWriter(format="parquet")`` with row groups of
256 KiB, 1 MiB and 8 MiB, read by StreamingDataset (its cache warm): a
shuffled epoch (ShardOrderSampler, blocks of one shard, batch 256) and the
mean of 20 single reads, each from a shard not open (so its row group is
decoded). Medians of interleaved runs::

    python benchmarks/shard_row_groups.py [--rows 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import numpy as np

from dataset_kit.formats.shards import _parquet
from dataset_kit.iterators import SerialIterator
from dataset_kit.shards import ShardOrderSampler, ShardWriter, StreamingDataset

SIZES = {"256 KiB": 256 << 10, "1 MiB": 1 << 20, "8 MiB": 8 << 20}
COLUMNS = {"label": "int", "features": "ndarray", "tokens": "ndarray"}


def _write(out: str, rows: int) -> None:
    rng = np.random.default_rng(0)
    with ShardWriter(out, COLUMNS, format="parquet") as writer:
        for i in range(rows):
            writer.write({"label": i, "features": rng.random(16, dtype=np.float32),
                          "tokens": rng.integers(0, 50_000, rng.integers(192, 321),
                                                 dtype=np.int32)})


def _epoch(folder: str, cache: str) -> float:
    ds = StreamingDataset(folder, local=cache)
    start = time.perf_counter()
    for _ in SerialIterator(ds, 256, repeat=False, order_sampler=ShardOrderSampler(ds, 1, 0)):
        pass
    ds.close()
    return time.perf_counter() - start


def _single(folder: str, cache: str, reads: int = 20) -> float:
    ds = StreamingDataset(folder, local=cache)
    indices = np.random.default_rng(1).integers(0, len(ds), reads).tolist()
    start = time.perf_counter()
    for i in indices:
        ds.close()  # no shard open: the read opens one and decodes one row group
        ds[i]
    ds.close()
    return (time.perf_counter() - start) / reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="row-groups-")
    try:
        folders = {}
        for name, size in SIZES.items():
            # The writer reads the module's value when it closes each shard.
            _parquet.ROW_GROUP_BYTES = size
            folders[name] = f"{work}/{name.replace(' ', '')}"
            _write(folders[name], args.rows)
            _epoch(folders[name], folders[name] + "-cache")  # warms the cache
        times: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in SIZES}
        for _ in range(args.runs):
            for name, folder in folders.items():
                times[name][0].append(_epoch(folder, folder + "-cache"))
                times[name][1].append(_single(folder, folder + "-cache"))
        print(f"{args.rows} rows; medians of {args.runs} interleaved runs")
        for name, (epochs, singles) in times.items():
            print(f"row groups of {name}: shuffled epoch {np.median(epochs):.2f} s, a read "
                  f"from a closed shard {1000 * np.median(singles):.1f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
