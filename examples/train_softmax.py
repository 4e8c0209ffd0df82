"""Train a tiny softmax classifier, checkpoint mid-epoch, resume, and check.

Runs in seconds. It trains for three epochs without interruption, then trains
again from a checkpoint saved halfway through epoch two, in fresh objects, and
checks that both runs end with bit-identical weights.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dataset_kit  # noqa: E402
from blobs import N_CLASSES, N_FEATURES, Blobs, load_blobs  # noqa: E402
from dataset_kit.iterators import SerialIterator  # noqa: E402
from dataset_kit.serializers import load_npz, save_npz  # noqa: E402

EPOCHS, BATCH, LEARNING_RATE = 3, 64, 0.1


class SoftmaxClassifier:
    """Multinomial logistic regression trained by plain SGD."""

    def __init__(self) -> None:
        self.w = np.zeros((N_FEATURES, N_CLASSES), np.float64)
        self.b = np.zeros(N_CLASSES, np.float64)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        logits = x @ self.w + self.b
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
        p[np.arange(len(y)), y] -= 1.0
        self.w -= LEARNING_RATE * x.T @ p / len(y)
        self.b -= LEARNING_RATE * p.mean(axis=0)
        return float(loss)

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        return float(((x @ self.w + self.b).argmax(axis=1) == y).mean())

    def serialize(self, serializer) -> None:
        self.w = serializer("w", self.w)
        self.b = serializer("b", self.b)


class Checkpoint:
    """Model and iterator saved together, as a training loop would."""

    def __init__(self, model: SoftmaxClassifier, iterator: SerialIterator) -> None:
        self.model, self.iterator = model, iterator

    def serialize(self, serializer) -> None:
        self.model.serialize(serializer)
        self.iterator.serialize(serializer)


def train(model, iterator, stop_at=None, checkpoint_path=None) -> float:
    """Train until EPOCHS; optionally save a checkpoint at ``stop_at`` epochs."""
    loss = float("nan")
    while iterator.epoch < EPOCHS:
        x, y = dataset_kit.concat_examples(next(iterator))
        loss = model.step(x, y)
        if stop_at is not None and iterator.epoch_detail >= stop_at:
            save_npz(checkpoint_path, Checkpoint(model, iterator))
            stop_at = None
    return loss


def main() -> int:
    start = time.perf_counter()
    x, y, parsed_now = load_blobs()
    how = "downloaded and parsed" if parsed_now else "loaded from the cache"
    print(f"data: {len(x)} examples {how} in {time.perf_counter() - start:.2f} s "
          f"(dataset root {dataset_kit.get_dataset_root()})")
    # The same seed splits the augmented and the clean view identically, so
    # the two parts are disjoint; evaluation uses clean, deterministic data.
    n_train = int(0.8 * len(x))
    train_set, _ = dataset_kit.datasets.split_dataset_random(Blobs(x, y), n_train, seed=0)
    _, test_set = dataset_kit.datasets.split_dataset_random(
        Blobs(x, y, noise=0.0), n_train, seed=0)
    test_x, test_y = dataset_kit.concat_examples(test_set[:])

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "checkpoint.npz")
        model = SoftmaxClassifier()
        loss = train(model, SerialIterator(train_set, BATCH, seed=42), 1.5, path)
        print(f"uninterrupted: {EPOCHS} epochs, last loss {loss:.4f}, "
              f"test accuracy {model.accuracy(test_x, test_y):.3f}")

        resumed = SoftmaxClassifier()
        iterator = SerialIterator(train_set, BATCH)  # unseeded: the checkpoint brings the seed
        load_npz(path, Checkpoint(resumed, iterator))
        print(f"resumed from the checkpoint at epoch_detail {iterator.epoch_detail:.3f}")
        train(resumed, iterator)

    same = np.array_equal(model.w, resumed.w) and np.array_equal(model.b, resumed.b)
    print("resume check:", "bit-identical weights" if same else "MISMATCH")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
