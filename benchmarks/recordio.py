"""Record files, each figure a ratio against a baseline from the same run.

1. Sequential scan of a .rec of 100 KB records (1 GB by default) with
   RecordReader, against a plain f.readinto loop over the same file
   (target >= 0.7).
2. Random IndexedRecordReader.read_idx against MXNet's MXIndexedRecordIO
   (C++), where MXNet is installed (otherwise ours alone), every record kept
   (target >= 1.0, issue 32): interleaved medians.
1b/2b. pread (what the readers use) against a memory map (what they used
   before; a file truncated under a map kills the process with SIGBUS), for
   the scan and for random reads: interleaved medians. A large record is
   read as its header, then its payload straight into the bytes returned
   (two preads, one copy); a reused buffer costs a second copy, and a map
   cannot be made safe against truncation, so neither is used.
4. Opening a pair with 1M keys: IndexedRecordReader (parse the .idx, check
   the pair) against parsing the .idx alone, interleaved medians.
3. ImageRecordIter over 2,000 JPEGs of 500x375 (resize 256, crop 3x224x224,
   random crop and mirror, normalised, batch 64, 2 workers) against MXNet's
   ImageRecordIter(preprocess_threads=2) on the same .rec, where MXNet is
   installed (target >= 1.2, issue 22).

Run: .venv/bin/python benchmarks/recordio.py [--gb 1]; for the MXNet rows, run it
with a Python that has mxnet==1.9.1 (numpy<2), such as CI's .venv-peers.
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import time
from functools import partial

import numpy as np
from _timing import best_of, median_of
from images import cpu_seconds, make_folder

if not hasattr(np, "bool"):
    np.bool = bool  # MXNet 1.9.1 still reads numpy.bool
try:
    import mxnet as mx
except ImportError:
    mx = None

from dataset_kit.formats.recordio._format import parse
from dataset_kit.formats.recordio._index import read_index
from dataset_kit.io import ImageRecordIter
from dataset_kit.recordio import IndexedRecordReader, IndexedRecordWriter, RecordReader, im2rec

RECORD = 100 << 10


class MappedBaseline:
    """The readers' former design: parse records straight out of a memory map."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.view, self.size = memoryview(self.map), len(self.map)
        self.read = lambda offset, n: self.view[offset:offset + n]

    def scan(self) -> None:
        offset = 0
        while offset < self.size:
            record, offset = parse(self.read, offset, self.size, "")
            bytes(record)

    def read_at(self, offset: int) -> bytes:
        return bytes(parse(self.read, offset, self.size, "")[0])


def scan(directory: str, gigabytes: float) -> None:
    path, count = os.path.join(directory, "big.rec"), int(gigabytes * (1 << 30) / RECORD)
    payload = np.random.default_rng(0).integers(0, 255, RECORD, dtype=np.uint8).tobytes()
    with IndexedRecordWriter(os.path.join(directory, "big.idx"), path) as writer:
        for k in range(count):
            writer.write_idx(k, payload)
    size = os.path.getsize(path)

    def plain_readinto() -> None:
        buffer = bytearray(RECORD)
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buffer):
                pass

    def record_reader() -> None:
        for _ in RecordReader(path):
            pass

    def record_views() -> None:
        for _ in RecordReader(path, copy=False):
            pass

    t = best_of(3, readinto=plain_readinto, reader=record_reader, views=record_views)
    gbs = {k: size / v / 1e9 for k, v in t.items()}
    print(f"1. scan of {size / 1e9:.2f} GB, {count} records of 100 KB: readinto "
          f"{gbs['readinto']:.2f} GB/s, RecordReader {gbs['reader']:.2f} GB/s (bytes), "
          f"{gbs['views']:.2f} GB/s (copy=False)")
    print(f"   ratio RecordReader / readinto: {t['readinto'] / t['reader']:.2f} (bytes), "
          f"{t['readinto'] / t['views']:.2f} (copy=False)  (target >= 0.7)")

    mapped = MappedBaseline(path)
    t = median_of(5, pread=record_reader, mmap=mapped.scan)
    print(f"1b. scan, copies of each record: pread {size / t['pread'] / 1e9:.2f} GB/s, mmap "
          f"(before) {size / t['mmap'] / 1e9:.2f} GB/s; ratio pread / mmap "
          f"{t['mmap'] / t['pread']:.2f} (medians of 5, interleaved)")

    keys = np.random.default_rng(1).integers(0, count, 20_000).tolist()
    ours = IndexedRecordReader(os.path.join(directory, "big.idx"), path)
    offsets = [ours.idx[k] for k in keys]
    def pread_reads() -> None:
        for k in keys:  # each record dropped after use, as a training loop does
            ours.read_idx(k)

    def mmap_reads() -> None:
        for o in offsets:
            mapped.read_at(o)

    t = median_of(5, pread=pread_reads, mmap=mmap_reads)
    print(f"2b. random reads of 100 KB records: pread {len(keys) / t['pread']:.0f}/s, mmap "
          f"(before) {len(keys) / t['mmap']:.0f}/s; ratio pread / mmap "
          f"{t['mmap'] / t['pread']:.2f} (medians of 5, interleaved)")
    runs = {"ours": lambda: [ours.read_idx(k) for k in keys]}
    if mx is not None:
        theirs = mx.recordio.MXIndexedRecordIO(os.path.join(directory, "big.idx"), path, "r")
        runs["mxnet"] = lambda: [theirs.read_idx(k) for k in keys]
    t = median_of(5, **runs)
    rates = {k: len(keys) / v for k, v in t.items()}
    line = f"2. random read_idx of 100 KB records, kept: ours {rates['ours']:.0f}/s"
    if mx is None:
        print(line + " (MXNet not installed here)")
        return
    print(line + f", MXNet {rates['mxnet']:.0f}/s")
    print(f"   ratio ours / MXNet: {rates['ours'] / rates['mxnet']:.2f}  (target >= 1.0; "
          f"medians of 5, interleaved)")


def open_cost(directory: str, keys: int) -> None:
    rec, idx = os.path.join(directory, "many.rec"), os.path.join(directory, "many.idx")
    with IndexedRecordWriter(idx, rec) as writer:
        for k in range(keys):
            writer.write_idx(k, b"r" * (k % 97))

    def parse_only() -> None:
        with open(idx, "rb") as f:
            read_index(f.read(), idx, int)

    t = median_of(7, open=partial(IndexedRecordReader, idx, rec), parse=parse_only)
    print(f"4. open a pair of {keys} keys ({os.path.getsize(rec) / 1e6:.0f} MB .rec): "
          f"IndexedRecordReader {t['open'] * 1e3:.0f} ms, parsing the .idx alone "
          f"{t['parse'] * 1e3:.0f} ms: the lock, the journal check and the pair checks cost "
          f"{(t['open'] - t['parse']) * 1e3:.0f} ms (medians of 7, interleaved)")


def image_pipeline(directory: str, images: int) -> None:
    root = os.path.join(directory, "imgs")
    make_folder(root, images)
    (lst,) = im2rec.make_lists(os.path.join(directory, "img"), root, recursive=True)
    im2rec.pack_list(lst, root, num_thread=2, progress=False)
    rec = os.path.join(directory, "img.rec")
    common = dict(data_shape=(3, 224, 224), batch_size=64, resize=256, rand_crop=True,
                  rand_mirror=True, mean_r=123.7, mean_g=116.3, mean_b=103.5, std_r=58.4,
                  std_g=57.1, std_b=57.4, preprocess_threads=2, shuffle=True)

    def ours() -> None:
        it = ImageRecordIter(rec, path_imgidx=os.path.join(directory, "img.idx"), seed=0,
                             **common)
        for _ in it:
            pass
        it.close()

    cpu: dict[str, list[float]] = {"ours": [], "mxnet": []}
    runs = {"ours": cpu_seconds(ours, cpu["ours"])}
    if mx is not None:
        def theirs() -> None:
            it = mx.io.ImageRecordIter(path_imgrec=rec,
                                       path_imgidx=os.path.join(directory, "img.idx"), **common)
            for batch in it:
                batch.data[0].wait_to_read()

        runs["mxnet"] = cpu_seconds(theirs, cpu["mxnet"])
    t = best_of(2, **runs)
    rates = {k: images / v for k, v in t.items()}
    line = f"3. ImageRecordIter, {images} JPEGs 500x375 -> 3x224x224, 2 workers: ours " \
           f"{rates['ours']:.0f} img/s"
    if mx is None:
        print(line + " (MXNet not installed here)")
        return
    print(line + f", MXNet {rates['mxnet']:.0f} img/s")
    print(f"   ratio ours / MXNet: {rates['ours'] / rates['mxnet']:.2f}  (target >= 1.2)")
    per_image = {k: min(v) / images * 1e3 for k, v in cpu.items()}
    print(f"   CPU per image (every process and thread, least of 2): ours "
          f"{per_image['ours']:.2f} ms, MXNet {per_image['mxnet']:.2f} ms; load average "
          f"{os.getloadavg()[0]:.1f} (under load, the wall ratio tends to the CPU ratio)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        scan(directory, args.gb)
    with tempfile.TemporaryDirectory() as directory:
        open_cost(directory, args.keys)
    if args.images:
        with tempfile.TemporaryDirectory() as directory:
            image_pipeline(directory, args.images)
    print(f"(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
