"""Throughput of SerialIterator + concat_examples against a plain numpy loop.

Data: a shuffled TupleDataset (and the same columns as a tabular dataset) of
60,000 float32 rows of 784 values with int32 labels; batch 128; 3 epochs. The
baseline takes ``x[idx], y[idx]`` for the batches of a fresh permutation each
epoch. Prints both times and the ratio (baseline time / dataset_kit time; 1.0
means as fast as the plain loop).
"""

from __future__ import annotations

import numpy as np
from _timing import best_of

import dataset_kit
from dataset_kit.datasets import TupleDataset
from dataset_kit.iterators import SerialIterator
from dataset_kit.tabular import from_data

N, D, BATCH, EPOCHS = 60_000, 784, 128, 3


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((N, D), dtype=np.float32)
    y = rng.integers(0, 10, N).astype(np.int32)
    dataset = TupleDataset(x, y)

    def plain_numpy() -> None:
        for _ in range(EPOCHS):
            perm = rng.permutation(N)
            for start in range(0, N, BATCH):
                idx = perm[start:start + BATCH]
                _xb, _yb = x[idx], y[idx]

    def with_dataset_kit() -> None:
        it = SerialIterator(dataset, BATCH, seed=0)
        while it.epoch < EPOCHS:
            _xb, _yb = dataset_kit.concat_examples(next(it))

    table = from_data((("x", x), ("y", y)))

    def with_tabular() -> None:
        it = SerialIterator(table, BATCH, seed=0)
        while it.epoch < EPOCHS:
            _xb, _yb = dataset_kit.concat_examples(next(it))

    def per_example_loop() -> None:
        # What a naive loader does: one Python-level example at a time.
        for _ in range(1):
            perm = rng.permutation(N)
            for start in range(0, N, BATCH):
                batch = [(x[i], y[i]) for i in perm[start:start + BATCH]]
                _xb = np.stack([b[0] for b in batch])
                _yb = np.array([b[1] for b in batch])

    t = best_of(9, plain_numpy=plain_numpy, dataset_kit=with_dataset_kit, tabular=with_tabular)
    naive = best_of(1, per_example=per_example_loop)["per_example"] * EPOCHS
    print(f"plain numpy loop:           {t['plain_numpy']:.3f} s")
    print(f"SerialIterator+concat:      {t['dataset_kit']:.3f} s")
    print(f"tabular (from_data)+concat: {t['tabular']:.3f} s")
    print(f"per-example Python loop:    {naive:.3f} s (1 epoch timed, scaled to {EPOCHS})")
    ratio = t['plain_numpy'] / t['dataset_kit']
    print(f"ratio dataset_kit / numpy:  {ratio:.2f}  (target >= 0.90)")
    print(f"ratio tabular / numpy:      {t['plain_numpy'] / t['tabular']:.2f}  (target >= 0.90)")
    print(f"ratio per-example / numpy:  {t['plain_numpy'] / naive:.2f}")


if __name__ == "__main__":
    main()
