"""A small dataset module: Gaussian blobs, one per class, with noise augmentation.

This is what a user writes for their own data. The raw file is "published" as
a gzipped CSV in a local folder and fetched with ``cached_download`` from its
``file://`` URL, exactly as a remote dataset would be from ``https://``; the
parsed arrays are kept with ``cache_or_load_file``, so only the first run pays
for parsing. The dataset subclasses DatasetMixin, and its augmentation draws
from ``example_rng()``, so it is the same for the same (seed, epoch, example)
in every iterator and after every resume.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile

import numpy as np

import dataset_kit
from dataset_kit.iterators import example_rng

N_CLASSES, N_FEATURES = 10, 32


def make_blobs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Generate ``n`` float32 points around ``N_CLASSES`` centres, with int32 labels."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 0.6, (N_CLASSES, N_FEATURES))
    labels = rng.integers(0, N_CLASSES, n)
    points = centres[labels] + rng.normal(0.0, 1.0, (n, N_FEATURES))
    return points.astype(np.float32), labels.astype(np.int32)


def publish_raw_file(n: int = 20_000) -> str:
    """Write the raw CSV once into a local "server" folder; return its file:// URL."""
    folder = os.path.join(tempfile.gettempdir(), "dataset_kit_example_server")
    path = os.path.join(folder, "blobs.csv.gz")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        x, y = make_blobs(n)
        table = np.column_stack([y, x])
        fmt = ["%d"] + ["%.6f"] * N_FEATURES
        temp = f"{path}.{os.getpid()}.tmp"
        with gzip.open(temp, "wt") as f:
            np.savetxt(f, table, fmt=fmt, delimiter=",")
        os.replace(temp, path)
    return "file://" + path


def load_blobs() -> tuple[np.ndarray, np.ndarray, bool]:
    """Return ``(x, y, parsed_now)``: download the raw file, parse it once, cache the arrays."""
    url = publish_raw_file()
    with open(url[len("file://"):], "rb") as f:
        sha256 = hashlib.sha256(f.read()).hexdigest()  # a real module hard-codes this
    raw = dataset_kit.cached_download(url, sha256=sha256)
    parsed_now = []

    def parse(path: str) -> tuple[np.ndarray, np.ndarray]:
        table = np.loadtxt(raw, delimiter=",", dtype=np.float64)
        x, y = table[:, 1:].astype(np.float32), table[:, 0].astype(np.int32)
        np.savez(path, x=x, y=y)
        parsed_now.append(True)
        return x, y  # the call that parses returns this; later calls load the file

    cached = os.path.join(dataset_kit.get_dataset_directory("blobs"), "blobs.npz")
    x, y = dataset_kit.cache_or_load_file(
        cached, parse, lambda path: tuple(np.load(path)[k] for k in ("x", "y")))
    return x, y, bool(parsed_now)


class Blobs(dataset_kit.DatasetMixin):
    """Labelled points; each access adds a little reproducible noise."""

    def __init__(self, x: np.ndarray, y: np.ndarray, noise: float = 0.1) -> None:
        self.x, self.y, self.noise = x, y, noise

    def __len__(self) -> int:
        return len(self.x)

    def get_example(self, i: int) -> tuple[np.ndarray, np.int32]:
        jitter = example_rng().normal(0.0, self.noise, N_FEATURES).astype(np.float32)
        return self.x[i] + jitter, self.y[i]
