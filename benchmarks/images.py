"""Decoding a folder of JPEGs, each figure a ratio against a baseline from the same run.

2,000 JPEGs of 500x375 (generated here, in two class folders).

1. ImageFolderDataset through MultiprocessIterator(n_processes=2), uint8
   images, against a bare one-core loop of PIL.Image.open(p).convert('RGB')
   and np.asarray (target >= 1.7x).
2. When a smaller image is wanted (short side 128): draft_size decoding
   (JPEG's reduced scales) against a full decode followed by a resize, both
   on one core.

Run: .venv/bin/python benchmarks/images.py [--images 2000]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
from _timing import best_of
from PIL import Image

from dataset_kit.datasets import ImageFolderDataset
from dataset_kit.iterators import MultiprocessIterator


def make_folder(root: str, count: int) -> list[str]:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:375, 0:500]
    paths = []
    for k in range(count):
        folder = os.path.join(root, f"class{k % 2}")
        os.makedirs(folder, exist_ok=True)
        base = np.stack([(x + 3 * k) % 256, (y + 5 * k) % 256, (x + y) % 256], -1)
        pixels = (base + rng.integers(0, 40, base.shape)).clip(0, 255).astype(np.uint8)
        path = os.path.join(folder, f"{k:05d}.jpg")
        Image.fromarray(pixels).save(path, quality=90)
        paths.append(path)
    return sorted(paths)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        paths = make_folder(root, args.images)
        size_mb = sum(os.path.getsize(p) for p in paths) / 1e6

        def bare_loop() -> None:
            for p in paths:
                np.asarray(Image.open(p).convert("RGB"))

        def dataset_kit_two_workers() -> None:
            dataset = ImageFolderDataset(root, dtype=np.uint8)
            with MultiprocessIterator(dataset, 32, repeat=False, shuffle=False,
                                      n_processes=2) as it:
                for _ in it:
                    pass

        t = best_of(2, bare=bare_loop, workers=dataset_kit_two_workers)
        n = len(paths)
        print(f"1. {n} JPEGs of 500x375 ({size_mb:.0f} MB): bare PIL loop {n / t['bare']:.0f} "
              f"img/s, ImageFolderDataset + MultiprocessIterator(2) {n / t['workers']:.0f} img/s")
        print(f"   ratio dataset_kit / bare loop: {t['bare'] / t['workers']:.2f}  (target >= 1.7)")

        def full_then_resize() -> None:
            for p in paths:
                image = Image.open(p).convert("RGB")
                scale = 128 / min(image.size)
                np.asarray(image.resize((round(image.width * scale), round(image.height * scale))))

        def draft_then_resize() -> None:
            dataset = ImageFolderDataset(root, dtype=np.uint8, draft_size=(128, 128))
            for k in range(len(dataset)):
                chw, _ = dataset[k]
                image = Image.fromarray(chw.transpose(1, 2, 0))
                scale = 128 / min(image.size)
                np.asarray(image.resize((round(image.width * scale), round(image.height * scale))))

        t = best_of(2, full=full_then_resize, draft=draft_then_resize)
        print(f"2. short side 128, one core: full decode + resize {n / t['full']:.0f} img/s, "
              f"draft_size decode + resize {n / t['draft']:.0f} img/s")
        print(f"   ratio draft / full: {t['full'] / t['draft']:.2f}")


if __name__ == "__main__":
    main()
