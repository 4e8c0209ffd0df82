"""Small files in the real upstream formats of CIFAR, SVHN and PTB, for serving in tests."""

from __future__ import annotations

import io
import pickle
import tarfile

import numpy as np


def _add(archive: tarfile.TarFile, name: str, body: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(body)
    archive.addfile(info, io.BytesIO(body))


def _pixels(rng: np.random.Generator, n: int) -> np.ndarray:
    if n <= 100:
        return rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    # Many images: a random block repeated with offsets (compresses, generates fast).
    block = rng.integers(0, 256, (97, 3072), dtype=np.uint8)
    return (np.resize(block, (n, 3072)) + (np.arange(n) % 7)[:, None]).astype(np.uint8)


def cifar10_archive(rng: np.random.Generator, per_batch: int = 3) -> tuple[bytes, dict]:
    """cifar-10-python.tar.gz: five training batches and a test batch (Python 2 pickles)."""
    batches = [(_pixels(rng, per_batch), rng.integers(0, 10, per_batch).tolist())
               for _ in range(6)]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for k, (x, y) in enumerate(batches):
            name = f"cifar-10-batches-py/data_batch_{k + 1}" if k < 5 else \
                "cifar-10-batches-py/test_batch"
            _add(archive, name, pickle.dumps({"data": x, "labels": y}, protocol=2))
    train_x = np.concatenate([x for x, _ in batches[:5]])
    train_y = np.concatenate([y for _, y in batches[:5]])
    return buffer.getvalue(), {"train": (train_x, train_y),
                               "test": (batches[5][0], np.asarray(batches[5][1]))}


def cifar100_archive(rng: np.random.Generator, n: int = 4) -> tuple[bytes, dict]:
    """cifar-100-python.tar.gz: train, test (fine and coarse labels) and meta."""
    splits = {s: (rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                  rng.integers(0, 100, n).tolist()) for s in ("train", "test")}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for split, (x, y) in splits.items():
            _add(archive, f"cifar-100-python/{split}", pickle.dumps(
                {"data": x, "fine_labels": y, "coarse_labels": [v // 5 for v in y]},
                protocol=2))
        _add(archive, "cifar-100-python/meta", pickle.dumps(
            {"fine_label_names": [f"class{k:02d}" for k in range(100)]}, protocol=2))
    return buffer.getvalue(), {s: (x, np.asarray(y)) for s, (x, y) in splits.items()}


def svhn_mat(rng: np.random.Generator, n: int) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A ``*_32x32.mat`` file: X of 32 x 32 x 3 x n uint8, y of n x 1 labels 1..10."""
    from scipy.io import savemat

    x = rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
    y = rng.integers(1, 11, (n, 1)).astype(np.uint8)
    y[0, 0] = 10  # a zero digit
    buffer = io.BytesIO()
    savemat(buffer, {"X": x, "y": y})
    return buffer.getvalue(), x, y


PTB_TEXT = {
    "train": " the cat sat on the mat \n a dog <unk> the cat \n",
    "valid": " the dog sat \n",
    "test": " a cat on a mat \n the <unk> \n",
}
