"""Profiling overhead, and the hand-picked number of workers on an image pipeline.

1. The overhead of ``dataset_kit.profile`` on P1 (benchmarks/serial.py's
   serial arrays: 60,000 rows of 784 float32, batch 128, one epoch) and P2
   (benchmarks/parallel.py's ~1 ms examples, batch 32, 2 worker processes):
   the same loop with and without the profile, interleaved rounds, medians;
   printed as (profiled / plain - 1), beside two plain runs' difference
   (the machine's noise). Goal <= 2%.
2. The issue's pipeline: JPEGs of 500x375 -> decode -> random resized crop
   to 224 -> flip -> normalize -> batch 32, with MultiprocessIterator at
   n_processes 0 (serial), 1, 2, 3: images/s, medians over interleaved
   rounds, and each setting's ratio to the best. ``--images`` sets how many
   JPEGs (2,000 in the issue).

``num_workers="auto"`` and the tf.data comparison are not here yet (see the
report of issue 37).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
from _timing import median_of
from parallel import CpuBound, calibrate_rounds, consume

import dataset_kit
from dataset_kit import DatasetMixin, concat_examples
from dataset_kit.datasets import TupleDataset
from dataset_kit.iterators import MultiprocessIterator, SerialIterator


def overhead(rounds: int, loop) -> tuple[float, float]:
    """Return (profiled / plain - 1, plain / plain - 1): medians of paired rounds.

    Each round runs ``loop`` plain, inside ``dataset_kit.profile``, and plain
    again, in turn; the second figure (two plain runs) is the machine's noise.
    """
    profiled_ratios, noise = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        loop()
        plain = time.perf_counter() - start
        start = time.perf_counter()
        with dataset_kit.profile():
            loop()
        profiled = time.perf_counter() - start
        start = time.perf_counter()
        loop()
        again = time.perf_counter() - start
        profiled_ratios.append(profiled / ((plain + again) / 2) - 1)
        noise.append(again / plain - 1)
    return statistics.median(profiled_ratios), statistics.median(noise)


def overhead_p1(rounds: int) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    dataset = TupleDataset(rng.random((60_000, 784), dtype=np.float32),
                           rng.integers(0, 10, 60_000).astype(np.int32))

    def loop() -> None:
        it = SerialIterator(dataset, 128, seed=0, repeat=False)
        for batch in it:
            concat_examples(batch)

    return overhead(rounds, loop)


def overhead_p2(rounds: int) -> tuple[float, float]:
    dataset = CpuBound(4096, calibrate_rounds())
    it = MultiprocessIterator(dataset, 32, seed=0, n_processes=2)
    try:
        consume(it, 2)  # workers started and warm

        def loop() -> None:
            consume(it, 60)

        return overhead(rounds, loop)
    finally:
        it.finalize()


class Jpegs(DatasetMixin):
    """Decode, random resized crop to 224, flip, normalize: the issue's pipeline."""

    MEAN = np.array([0.485, 0.456, 0.406], np.float32) * 255
    STD = np.array([0.229, 0.224, 0.225], np.float32) * 255

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def get_example(self, i: int) -> np.ndarray:
        from PIL import Image

        rng = dataset_kit.example_rng()
        with Image.open(self.paths[i]) as image:
            image = image.convert("RGB")
            w, h = image.size
            scale, ratio = rng.uniform(0.08, 1.0), np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
            cw = min(w, int(round(np.sqrt(w * h * scale * ratio))))
            ch = min(h, int(round(np.sqrt(w * h * scale / ratio))))
            x, y = rng.integers(0, w - cw + 1), rng.integers(0, h - ch + 1)
            image = image.resize((224, 224), Image.BILINEAR, box=(x, y, x + cw, y + ch))
        a = np.asarray(image, np.float32)
        if rng.random() < 0.5:
            a = a[:, ::-1]
        return ((a - self.MEAN) / self.STD).transpose(2, 0, 1)


def make_jpegs(folder: str, n: int) -> list[str]:
    from PIL import Image

    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (375, 500, 3), np.uint8)
    paths = []
    for i in range(n):
        path = os.path.join(folder, f"{i:05d}.jpg")
        Image.fromarray(np.roll(base, i, axis=1)).save(path, quality=90)
        paths.append(path)
    return paths


def hand_picked(paths: list[str], rounds: int) -> dict[str, float]:
    dataset = Jpegs(paths)
    batches = len(paths) // 32

    def run(workers: int):
        def loop() -> None:
            it = (SerialIterator(dataset, 32, seed=0, repeat=False) if workers == 0 else
                  MultiprocessIterator(dataset, 32, seed=0, repeat=False, n_processes=workers,
                                       converter=concat_examples))
            try:
                for _ in range(batches):
                    next(it)
            finally:
                if workers:
                    it.finalize()
        return loop

    t = median_of(rounds, **{f"workers={n}": run(n) for n in (0, 1, 2, 3)})
    return {name: batches * 32 / seconds for name, seconds in t.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for name, measure in (("P1 (serial arrays)", overhead_p1),
                          ("P2 (1 ms examples, 2 workers)", overhead_p2)):
        cost, noise = measure(args.rounds)
        print(f"profiling overhead, {name}: {cost:+.1%} (plain vs plain: {noise:+.1%})")
    with tempfile.TemporaryDirectory() as folder:
        paths = make_jpegs(folder, args.images)
        rates = hand_picked(paths, max(1, args.rounds // 2))
    best = max(rates.values())
    for name, rate in rates.items():
        print(f"JPEG pipeline, {name}:  {rate:7.1f} images/s  ({rate / best:.2f}x the best)")


if __name__ == "__main__":
    main()
