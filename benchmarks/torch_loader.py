"""dataset_kit.torch.DataLoader against torch.utils.data.DataLoader: ratios from the same run.

Each figure is the median of interleaved rounds (ours, theirs, ours, ...),
with the same dataset, batch size, sampler seed and num_workers; a round
makes the loader, runs two epochs and closes it, as training does (ours
keeps its workers across epochs and plans the next epoch's first batches
ahead; PyTorch, without ``persistent_workers``, starts workers per epoch):

1. an array dataset, 60k x 784 float32, batch 128, shuffled (num_workers 0 and 2);
2. ~1 ms examples (parallel.py's CpuBound), batch 32, 2 workers;
3. 3 x 224 x 224 float32 examples, batch 32, 2 workers;
4. worker memory after one epoch over a dataset of 10**6 Python objects,
   2 workers (fork): each worker's private resident memory (copy-on-write
   copies included), from /proc/<pid>/smaps_rollup.

Timings are printed, never asserted. Run: .venv/bin/python benchmarks/torch_loader.py
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from _timing import children_reaped
from parallel import CpuBound, calibrate_rounds
from torch.utils.data import DataLoader as TorchDataLoader
from torch.utils.data import Dataset

from dataset_kit import concat_examples
from dataset_kit.iterators import MultiprocessIterator
from dataset_kit.torch import DataLoader

EPOCHS = 2


class Arrays(Dataset):
    """A torch-style dataset over numpy arrays, one example per __getitem__."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i], int(self.y[i])


class Images(Dataset):
    """3 x 224 x 224 float32 examples, served from a small bank (no compute)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.bank = np.random.default_rng(0).random((8, 3, 224, 224), dtype=np.float32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.bank[i % 8], i


class Objects(Dataset):
    """A million small Python objects: the copy-on-write workload."""

    def __init__(self, n: int = 10**6) -> None:
        self.items = [{"id": i, "name": str(i)} for i in range(n)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        return self.items[i]["id"]


def median_ratio(rounds: int, ours: Callable[[], object], theirs: Callable[[], object],
                 **others: Callable[[], object]) -> tuple[float, ...]:
    """Median seconds of each, interleaved, and theirs / ours; then each other's median."""
    runs = {"ours": ours, "theirs": theirs, **others}
    times: dict[str, list[float]] = {name: [] for name in runs}
    CPU_SECONDS.clear()
    for _ in range(rounds):
        for name, fn in runs.items():
            start, cpu = time.perf_counter(), _cpu_seconds()
            fn()
            times[name].append(time.perf_counter() - start)
            children_reaped()  # the workers' CPU counts once they are joined
            CPU_SECONDS.setdefault(name, []).append(_cpu_seconds() - cpu)
    a, b = statistics.median(times["ours"]), statistics.median(times["theirs"])
    return (a, b, b / a, *(statistics.median(times[name]) for name in others))


#: CPU seconds of each round (the main process plus its workers, which every
#: loader here has stopped and reaped by the round's end), by loader name: on a
#: shared machine the wall time is the scheduler's; this is the loader's cost.
CPU_SECONDS: dict[str, list[float]] = {}


def _cpu_seconds() -> float:
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def report_cpu(label: str, names: dict[str, str]) -> None:
    """Print the median CPU seconds per round of each loader in the last median_ratio()."""
    parts = [f"{shown} {statistics.median(CPU_SECONDS[name]):.2f} s"
             for name, shown in names.items() if name in CPU_SECONDS]
    print(f"{label}: CPU per round (main + workers): {', '.join(parts)}")


def epoch_of(make: Callable[[], object]) -> Callable[[], None]:
    """One round: make the loader, run EPOCHS epochs, close it (as training does)."""
    def run() -> None:
        loader = make()
        try:
            for _ in range(EPOCHS):
                for _ in loader:
                    pass
        finally:
            getattr(loader, "close", lambda: None)()
    return run


def report(label: str, examples: int, seconds: tuple[float, ...], goal: str,
           others: tuple[str, ...] = ()) -> None:
    ours, theirs, ratio, *rest = seconds
    examples *= EPOCHS
    extra = "".join(f", {name} {examples / t:,.0f} ex/s" for name, t in zip(others, rest))
    print(f"{label}: ours {examples / ours:,.0f} ex/s, torch {examples / theirs:,.0f} ex/s, "
          f"ratio {ratio:.2f} (goal {goal}){extra}")


def engine_iterator(dataset, workers: int, batch: int) -> Callable[[], None]:
    """dataset_kit's own MultiprocessIterator on the same data: what the door adds is the rest.

    Its workers stack each batch (``concat_examples``) as the door's collate
    does; it keeps its workers across epochs and has as many batches in flight
    as the door (``n_processes * (n_prefetch + 1)`` = ``prefetch_factor * num_workers``).
    """
    def run() -> None:
        it = MultiprocessIterator(dataset, batch, repeat=True, shuffle=True, n_processes=workers,
                                  n_prefetch=1, seed=0, converter=concat_examples)
        try:
            for _ in range(EPOCHS * -(-len(dataset) // batch)):
                next(it)
        finally:
            it.finalize()
    return run


def loaders(dataset, workers: int, batch: int, shuffle: bool = True):
    def ours():
        return DataLoader(dataset, batch_size=batch, shuffle=shuffle, num_workers=workers,
                          generator=torch.Generator().manual_seed(0))

    def theirs():
        return TorchDataLoader(dataset, batch_size=batch, shuffle=shuffle, num_workers=workers,
                               generator=torch.Generator().manual_seed(0))
    return epoch_of(ours), epoch_of(theirs)


def private_mib(pid: int) -> float:
    total = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total / 1024


def children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(c) for c in f.read().split()]
    return found


def worker_memory() -> None:
    dataset = Objects()
    me = os.getpid()
    for name, make in (
            ("ours", lambda: DataLoader(dataset, batch_size=256, num_workers=2)),
            ("torch", lambda: TorchDataLoader(dataset, batch_size=256, num_workers=2,
                                              persistent_workers=True))):
        before = set(children(me))
        loader = make()
        for _ in loader:
            pass
        workers = [p for p in children(me) if p not in before]
        sizes = [private_mib(p) for p in workers]
        print(f"4. 10**6 objects, 2 workers, after one epoch: {name} workers' private RSS "
              f"{', '.join(f'{s:.0f}' for s in sizes)} MiB (main process private "
              f"{private_mib(me):.0f} MiB)")
        getattr(loader, "close", lambda: None)()
        del loader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--only", type=int, choices=(1, 2, 3, 4), action="append",
                        help="run only this row (repeatable)")
    args = parser.parse_args()
    rows = set(args.only or (1, 2, 3, 4)) - ({4} if args.skip_memory else set())
    rng = np.random.default_rng(0)
    if 1 in rows:
        arrays = Arrays(rng.random((60_000, 784), dtype=np.float32),
                        rng.integers(0, 10, 60_000))
        for workers in (0, 2):
            report(f"1. array 60k x 784 float32, batch 128, shuffled, {workers} workers", 60_000,
                   median_ratio(args.rounds, *loaders(arrays, workers, 128)), ">= 1.5")
    if 2 in rows:
        cpu = CpuBound(32 * 40, calibrate_rounds())
        report("2. ~1 ms examples, batch 32, 2 workers", len(cpu),
               median_ratio(args.rounds, *loaders(cpu, 2, 32),
                            engine=engine_iterator(cpu, 2, 32)), ">= 1.0",
               others=("MultiprocessIterator",))
        report_cpu("2.", {"ours": "ours", "theirs": "torch", "engine": "MultiprocessIterator"})
    if 3 in rows:
        images = Images(32 * 40)
        report("3. 3x224x224 float32, batch 32, 2 workers", len(images),
               median_ratio(args.rounds, *loaders(images, 2, 32)), ">= 1.3")
    if 4 in rows:
        worker_memory()


if __name__ == "__main__":
    main()
