"""dataset_kit against PyTorch's DataLoader on the same datasets, side by side.

Every row runs both loaders on the same dataset object, with the same number of
workers and batch size, in interleaved rounds, and prints the median of each
and their ratio (> 1: dataset_kit is faster). Without torch installed it says
so and prints dataset_kit's figures alone.

1. ~1 ms of numpy work per example, batch 32, 2 workers: dataset_kit's default
   path (MultiprocessIterator, lists, concat_examples in the main process)
   against DataLoader(num_workers=2, persistent_workers=True); and 0 workers.
   Row 1 also times our serial path on half the batches in the same rounds:
   twice its rate is what two workers on two cores can reach at most, so it
   bounds the ratio any loader could show against PyTorch here.
2. 600 KB examples (3x224x224 float32), batch 64, 2 workers.
3. An array dataset, 60k x 784 float32, batch 128, shuffled, in the main
   process; also against a bare numpy loop over shuffled epochs (a permutation
   per epoch, one take per column per batch).
4. 500x375 JPEG files decoded with Pillow, batch 32, 2 workers.
5. The first batch of 32 x 1 ms examples with 2 fresh workers.

Run: .venv/bin/python benchmarks/peers.py [--rounds 5] [--rows 1,1b,2,3,4,5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings

import numpy as np
from _timing import median_of_timed
from parallel import CpuBound, calibrate_rounds
from PIL import Image

from dataset_kit import DatasetMixin, concat_examples
from dataset_kit.datasets import TupleDataset
from dataset_kit.iterators import MultiprocessIterator, SerialIterator

try:
    import torch
    from torch.utils.data import DataLoader
except ImportError:  # the torch extra is optional
    torch = None


class Jpegs(DatasetMixin):
    """JPEG files decoded with Pillow: what a user without extras writes."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def get_example(self, i: int):
        with Image.open(self.paths[i]) as image:
            return np.asarray(image.convert("RGB")), np.int64(i % 2)


def make_jpegs(root: str, count: int) -> list[str]:
    rng = np.random.default_rng(0)
    paths = []
    for k in range(count):
        pixels = rng.integers(0, 255, (375, 500, 3), dtype=np.uint8)
        pixels[:, :, 0] = np.arange(500, dtype=np.uint8)[None, :]  # some structure
        path = os.path.join(root, f"{k:05d}.jpg")
        Image.fromarray(pixels).save(path, quality=90)
        paths.append(path)
    return paths


def endless_torch(dataset, batch_size: int, workers: int, shuffle: bool = False):
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers, shuffle=shuffle,
                        persistent_workers=workers > 0)
    while True:
        yield from loader


def ours(dataset, batch_size: int, workers: int, shuffle: bool = False):
    if workers:
        return MultiprocessIterator(dataset, batch_size, n_processes=workers, shuffle=shuffle,
                                    seed=0)
    return SerialIterator(dataset, batch_size, shuffle=shuffle, seed=0)


def take(it, batches: int, convert: bool = True, skip: int = 0) -> float:
    """Seconds to take ``batches`` batches, after ``skip`` untimed ones.

    With workers, ``skip`` is the batches a loader holds ready when its turn
    comes (both loaders' default window: 2 per worker), built while the other
    candidates ran: timed, they made a round's rate depend on its neighbours
    (10% of a 40-batch round) rather than on the loader.
    """
    for _ in range(skip):
        next(it)
    start = time.perf_counter()
    for _ in range(batches):
        batch = next(it)
        if convert and isinstance(batch, list):
            concat_examples(batch)  # the default path: converted in the main process
    return time.perf_counter() - start


def row(title: str, dataset, batch_size: int, workers: int, batches: int, rounds: int,
        shuffle: bool = False, extra: dict | None = None) -> None:
    mine = ours(dataset, batch_size, workers, shuffle)
    skip = 2 * workers
    candidates = {"dataset_kit": lambda: take(mine, batches, skip=skip)}
    if torch is not None:
        theirs = endless_torch(dataset, batch_size, workers, shuffle)
        take(theirs, 2, convert=False)  # workers started and warm
        candidates["pytorch"] = lambda: take(theirs, batches, convert=False, skip=skip)
    candidates.update(extra or {})
    take(mine, 2)
    t = median_of_timed(rounds, **candidates)
    rates = {name: batches / seconds for name, seconds in t.items()}
    text = ", ".join(f"{name} {rate:.1f} batches/s" for name, rate in rates.items())
    print(f"{title}: {text}")
    for name in rates:
        if name != "dataset_kit":
            print(f"   ratio dataset_kit / {name}: {rates['dataset_kit'] / rates[name]:.2f}")
    if "2 x serial" in rates and "pytorch" in rates:
        ceiling = rates["2 x serial"]
        print(f"   of the 2-worker ceiling (2 x serial, {ceiling:.1f} batches/s): dataset_kit "
              f"{rates['dataset_kit'] / ceiling:.0%}, pytorch {rates['pytorch'] / ceiling:.0%}; "
              f"highest ratio any loader could reach here: {ceiling / rates['pytorch']:.2f}")
    if hasattr(mine, "finalize"):
        mine.finalize()


def first_batch(dataset, rounds: int) -> None:
    def ours_once() -> None:
        with MultiprocessIterator(dataset, 32, n_processes=2, seed=0) as it:
            next(it)

    def torch_once() -> None:
        next(iter(DataLoader(dataset, batch_size=32, num_workers=2)))

    mine, theirs = [], []
    for _ in range(rounds):
        for fn, out in ((ours_once, mine), (torch_once, theirs)):
            if fn is torch_once and torch is None:
                continue
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    text = f"5. first batch of 32 x ~1 ms, 2 fresh workers: dataset_kit " \
           f"{statistics.median(mine) * 1e3:.0f} ms"
    if theirs:
        text += f", pytorch {statistics.median(theirs) * 1e3:.0f} ms"
    print(text)


ROWS = {"1", "1b", "2", "3", "4", "5"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", default=",".join(sorted(ROWS)),
                        help="the rows to run, by number (default: all), e.g. --rows 3")
    args = parser.parse_args()
    rows = set(args.rows.split(","))
    if not rows <= ROWS:
        parser.error(f"--rows takes rows among {sorted(ROWS)}, got {sorted(rows - ROWS)}")
    # PyTorch warns once that a Pillow array is read-only; the row measures speed.
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    if torch is None:
        print("torch is not installed: dataset_kit's figures only (pip install torch)")
    else:
        torch.set_num_threads(1)
    rounds = args.rounds
    cpu = CpuBound(20000, calibrate_rounds()) if rows & {"1", "1b", "5"} else None
    if "1" in rows:
        # The most 2 workers can give is twice one process building batches
        # (row 1b shows ours and PyTorch's serial paths equal): measured in the
        # same rounds, it bounds the ratio any loader can reach against PyTorch.
        serial = SerialIterator(cpu, 32, seed=0)
        row("1. ~1 ms examples, batch 32, 2 workers", cpu, 32, 2, 40, rounds,
            extra={"2 x serial": lambda: take(serial, 20)})
    if "1b" in rows:
        row("1b. ~1 ms examples, batch 32, 0 workers", cpu, 32, 0, 20, rounds)
    if "2" in rows:
        big = np.random.default_rng(0).random((512, 3, 224, 224), dtype=np.float32)
        row("2. 600 KB examples, batch 64, 2 workers",
            TupleDataset(big, np.arange(512, dtype=np.int64)), 64, 2, 24, rounds)
        # Freed before row 5: a fork copies the page tables of all the memory
        # the process has, so 300 MB left here made row 5's forks slower.
        del big
    if "3" in rows:
        array_row(rounds)
    if "4" in rows:
        with tempfile.TemporaryDirectory() as root:
            row("4. 500x375 JPEGs (Pillow), batch 32, 2 workers", Jpegs(make_jpegs(root, 600)),
                32, 2, 8, rounds)
    if "5" in rows:
        first_batch(cpu, rounds)


def array_row(rounds: int) -> None:
    """Row 3: an array dataset in the main process, against a bare numpy gather."""
    x = np.random.default_rng(0).random((60000, 784), dtype=np.float32)
    y = np.arange(60000, dtype=np.int64)
    # The bare loop a user would write for shuffled epochs: a fresh permutation
    # each epoch (as PyTorch's RandomSampler and our shuffle draw), then one
    # take per column per batch; the last partial batch of an epoch is dropped.
    rng = np.random.default_rng(1)
    state = {"order": rng.permutation(60000), "start": 0}

    def gather() -> float:
        began = time.perf_counter()
        for _ in range(200):
            start = state["start"]
            if start + 128 > 60000:
                state["order"], start = rng.permutation(60000), 0
            rows = state["order"][start:start + 128]
            x.take(rows, axis=0), y.take(rows)
            state["start"] = start + 128
        return time.perf_counter() - began

    row("3. 60k x 784 float32, batch 128, shuffled, main process",
        TupleDataset(x, y), 128, 0, 200, rounds, shuffle=True, extra={"numpy gather": gather})


if __name__ == "__main__":
    main()
