"""Decoding a folder of JPEGs, each figure a ratio against a baseline from the same run.

2,000 JPEGs of 500x375 (generated here, in two class folders).

1. ImageFolderDataset through MultiprocessIterator(n_processes=2), uint8
   images, against a bare one-core loop of PIL.Image.open(p).convert('RGB')
   and np.asarray (target >= 1.7x): with simplejpeg (the image extra) where
   installed, and with Pillow decoding, what a user without it gets.
2. When a smaller image is wanted (short side 128): draft_size decoding
   (JPEG's reduced scales) against a full decode followed by a resize, both
   on one core.
3. (with MXNet 1.9.1 installed) ImageIter with 2 worker processes against
   MXNet's ImageIter (one Python thread) on the same .rec and augmenter list
   (CreateAugmenter(resize=256, rand_crop, rand_mirror, mean, std), 224x224),
   one epoch each (target >= 2.0x).
4. (likewise) The per-image cost of that augmenter list on decoded images,
   dataset_kit's against MXNet's, on one core.

Rows 3 and 4 report medians; MXNet runs in its own numpy<2 environment (the
one ../shared/peer_suites/mxnet/run_mxnet_suite.sh builds), with PYTHONPATH at
this checkout.

Run: .venv/bin/python benchmarks/images.py [--images 2000]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
from collections.abc import Callable

import numpy as np
from _timing import best_of, children_reaped, median_of
from PIL import Image

from dataset_kit import image as dk_image
from dataset_kit import recordio
from dataset_kit.datasets import ImageFolderDataset
from dataset_kit.image import decode
from dataset_kit.iterators import MultiprocessIterator

AUGMENT = dict(resize=256, rand_crop=True, rand_mirror=True, mean=True, std=True)


def cpu_seconds(fn: Callable[[], None], into: list[float]) -> Callable[[], None]:
    """``fn``, appending to ``into`` the CPU seconds each call took in this process and in
    the child processes it waited for (the workers, once joined)."""

    def timed() -> None:
        before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                      resource.RUSAGE_CHILDREN)]
        fn()
        children_reaped()
        after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN)]
        into.append(sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime
                        for a, b in zip(after, before)))

    return timed


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

        def pillow_only_two_workers() -> None:
            # What a user without simplejpeg gets: Pillow decodes (the workers are forked
            # with the module hidden, which read_image takes for "not installed").
            hidden = decode._simplejpeg()
            sys.modules["simplejpeg"] = None  # type: ignore[assignment]
            try:
                dataset_kit_two_workers()
            finally:
                if hidden is None:
                    del sys.modules["simplejpeg"]
                else:
                    sys.modules["simplejpeg"] = hidden

        cpu: dict[str, list[float]] = {"bare": [], "workers": [], "pillow": []}
        t = median_of(3, bare=cpu_seconds(bare_loop, cpu["bare"]),
                      workers=cpu_seconds(dataset_kit_two_workers, cpu["workers"]),
                      pillow=cpu_seconds(pillow_only_two_workers, cpu["pillow"]))
        n = len(paths)
        decoder = "simplejpeg" if decode._simplejpeg() is not None else "Pillow: no simplejpeg"
        print(f"1. {n} JPEGs of 500x375 ({size_mb:.0f} MB): bare PIL loop {n / t['bare']:.0f} "
              f"img/s, ImageFolderDataset + MultiprocessIterator(2) {n / t['workers']:.0f} img/s "
              f"({decoder}), the same with Pillow decoding {n / t['pillow']:.0f} img/s")
        print(f"   ratio dataset_kit / bare loop: {t['bare'] / t['workers']:.2f} ({decoder}), "
              f"{t['bare'] / t['pillow']:.2f} (Pillow)  (target >= 1.7; medians of 3, "
              f"interleaved)")
        per_image = {k: statistics.median(v) / n * 1e3 for k, v in cpu.items()}
        print(f"   CPU per image, every process: bare loop {per_image['bare']:.2f} ms, "
              f"dataset_kit {per_image['workers']:.2f} ms ({decoder}), "
              f"{per_image['pillow']:.2f} ms (Pillow); load average {os.getloadavg()[0]:.1f} "
              f"(under load, the wall ratio tends to the CPU ratio)")

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
        mxnet_rows(root, paths)


def _pack(root: str, paths: list[str]) -> tuple[str, str]:
    rec, idx = os.path.join(root, "all.rec"), os.path.join(root, "all.idx")
    with recordio.IndexedRecordWriter(idx, rec) as writer:
        for k, p in enumerate(paths):
            with open(p, "rb") as f:
                writer.write_idx(k, recordio.pack(recordio.IRHeader(0, float(k % 2), k, 0),
                                                  f.read()))
    return rec, idx


def mxnet_rows(root: str, paths: list[str]) -> None:
    """Rows 3 and 4, against MXNet 1.9.1 when it is installed."""
    if not hasattr(np, "bool"):
        np.bool = bool  # MXNet 1.9.1 still reads numpy.bool
    try:
        import mxnet as mx
    except ImportError:
        print("3-4. skipped: MXNet 1.9.1 is not installed here (run in a numpy<2 environment "
              "that has it)")
        return
    rec, idx = _pack(root, paths)
    n, shape = len(paths), (3, 224, 224)

    def ours_two_workers() -> None:
        it = dk_image.ImageIter(32, shape, path_imgrec=rec, path_imgidx=idx, num_workers=2,
                                seed=0, aug_list=dk_image.CreateAugmenter(shape, **AUGMENT))
        try:
            for _ in it:
                pass
        finally:
            it.close()

    def theirs() -> None:
        for _ in mx.image.ImageIter(32, shape, path_imgrec=rec, path_imgidx=idx,
                                    aug_list=mx.image.CreateAugmenter(shape, **AUGMENT)):
            pass

    t = median_of(3, ours=ours_two_workers, theirs=theirs)
    print(f"3. ImageIter over {n} JPEG records, CreateAugmenter(resize=256, rand_crop, "
          f"rand_mirror, mean, std): MXNet {n / t['theirs']:.0f} img/s, dataset_kit with "
          f"num_workers=2 {n / t['ours']:.0f} img/s")
    print(f"   ratio dataset_kit / MXNet: {t['theirs'] / t['ours']:.2f}  (target >= 2.0)")

    sample = paths[:200]
    ours_images = [dk_image.imread(p) for p in sample]
    their_images = [mx.image.imread(p) for p in sample]
    ours_chain = dk_image.SequentialAug(dk_image.CreateAugmenter(shape, **AUGMENT))
    their_chain = mx.image.CreateAugmenter(shape, **AUGMENT)

    def ours_augment() -> None:
        for image in ours_images:
            ours_chain(image)

    def their_augment() -> None:
        for image in their_images:
            for aug in their_chain:
                image = aug(image)
            image.wait_to_read()

    t = median_of(5, ours=ours_augment, theirs=their_augment)
    k = len(sample)
    print(f"4. CreateAugmenter(resize=256, rand_crop, rand_mirror, mean, std) per 500x375 "
          f"image, one core: MXNet {t['theirs'] / k * 1e3:.2f} ms, dataset_kit "
          f"{t['ours'] / k * 1e3:.2f} ms")
    print(f"   ratio MXNet / dataset_kit: {t['theirs'] / t['ours']:.2f}")


if __name__ == "__main__":
    main()
