"""dataset_kit.shards against MosaicML Streaming, from a local S3 server (moto).

Same samples for both (1 KB records; 100 KB images as bytes), same shard
size, each system's own shard format. Rows (medians of interleaved runs,
printed as ratios):

* cold cache throughput: ours / Streaming, and ours / a bare fsspec read of
  the same shard bytes (goals >= 1.0 and >= 0.8);
* warm cache throughput: ours / our shard reader and column decoding on the
  same local files, without the dataset and iterator layers (goal >= 0.9);
* first batch on a cold cache / one shard's download (goal <= 1.5);
* peak cache size with ``cache_limit`` of four shards (goal: <= the limit).

Needs the ``stream`` extra, ``moto[server]`` and ``mosaicml-streaming``::

    python benchmarks/streaming.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

# This file is named like MosaicML's package: keep its folder off the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

from dataset_kit.iterators import SerialIterator  # noqa: E402
from dataset_kit.shards import ShardOrderSampler, ShardWriter, StreamingDataset  # noqa: E402
from dataset_kit.shards._columns import DECODE  # noqa: E402
from dataset_kit.shards._layout import ShardFile  # noqa: E402

SHARD_SIZE = 4 << 20
BATCH = 256
SETS = {"1KB records": (20_000, 1024), "100KB images": (400, 100 * 1024)}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_s3() -> tuple[subprocess.Popen, str]:
    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, endpoint


def _median(values: list[float]) -> float:
    return float(np.median(values))


def _ours_epoch(remote: str, options: dict, local: str, cache_limit: int | None = None,
                watch: list | None = None) -> tuple[float, float, int]:
    """(seconds for one epoch, seconds to the first batch, samples), cold cache at ``local``."""
    start = time.perf_counter()
    ds = StreamingDataset(remote, local=local, storage_options=options, cache_limit=cache_limit,
                          open_shards=1)
    it = SerialIterator(ds, BATCH, repeat=False, order_sampler=ShardOrderSampler(ds, 1, 0))
    first, count = None, 0
    for batch in it:
        count += len(batch)
        if first is None:
            first = time.perf_counter() - start
        if watch is not None:
            watch.append(ds.cache_usage())
    ds.close()
    return time.perf_counter() - start, first, count


def _theirs_epoch(remote: str, local: str, cache_limit: int | None = None,
                  watch: list | None = None) -> tuple[float, float, int]:
    import streaming
    streaming.base.util.clean_stale_shared_memory()
    start = time.perf_counter()
    ds = streaming.StreamingDataset(remote=remote, local=local, shuffle=True, shuffle_seed=0,
                                    batch_size=BATCH, cache_limit=cache_limit)
    first, count = None, 0
    for _ in ds:
        count += 1
        if first is None:
            first = time.perf_counter() - start
        if watch is not None and count % BATCH == 0:
            watch.append(_du(local))
    del ds
    return time.perf_counter() - start, first, count


def _du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(b, n)) for b, _, ns in os.walk(path) for n in ns
               if os.path.exists(os.path.join(b, n)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import fsspec
    from streaming import MDSWriter

    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_DEFAULT_REGION="us-east-1")
    proc, endpoint = _start_s3()
    os.environ["S3_ENDPOINT_URL"] = endpoint
    work = tempfile.mkdtemp(prefix="bench-streaming-")
    try:
        options = {"client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
        fs = fsspec.filesystem("s3", **options)
        import boto3
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="bench")
        for label, (n, size) in SETS.items():
            rng = np.random.default_rng(0)
            payloads = [rng.bytes(size) for _ in range(n)]
            ours, theirs = f"s3://bench/{n}/ours", f"s3://bench/{n}/theirs"
            with ShardWriter(ours, {"x": "bytes", "y": "int"}, shard_size=SHARD_SIZE,
                             storage_options=options) as w:
                for i, p in enumerate(payloads):
                    w.write({"x": p, "y": i})
            mds = os.path.join(work, f"mds-{n}")
            with MDSWriter(out=mds, columns={"x": "bytes", "y": "int"},
                           size_limit=SHARD_SIZE) as w:
                for i, p in enumerate(payloads):
                    w.write({"x": p, "y": i})
            fs.put(mds + "/", theirs + "/", recursive=True)
            manifest = StreamingDataset(ours, local=os.path.join(work, "probe"),
                                        storage_options=options).manifest
            shard_paths = [f"bench/{n}/ours/{s.name}" for s in manifest.shards]

            def bare(shard_paths: list[str] = shard_paths) -> None:
                for path in shard_paths:
                    fs.cat_file(path)

            times: dict[str, list[float]] = {k: [] for k in
                                             ("ours", "theirs", "bare", "first", "shard")}
            for run in range(args.runs):
                local = os.path.join(work, f"c-{n}-{run}")
                seconds, first, count = _ours_epoch(ours, options, local + "-ours")
                assert count == n, (count, n)
                times["ours"].append(seconds)
                times["first"].append(first)
                seconds, _, count = _theirs_epoch(theirs, local + "-theirs")
                assert count == n, (count, n)
                times["theirs"].append(seconds)
                start = time.perf_counter()
                bare()
                times["bare"].append(time.perf_counter() - start)
                start = time.perf_counter()
                fs.cat_file(shard_paths[0])
                times["shard"].append(time.perf_counter() - start)
            # Warm: the same cache again, against our shard reader on those files.
            warm_local = os.path.join(work, f"c-{n}-0-ours")
            ds = StreamingDataset(ours, local=warm_local, storage_options=options)
            order = ShardOrderSampler(ds, 1, 0).epoch_order(0, n)
            warm, raw = [], []
            for _ in range(args.runs):
                start = time.perf_counter()
                for first in range(0, n, BATCH):
                    ds[order[first:first + BATCH]]
                warm.append(time.perf_counter() - start)
                files = [ShardFile(os.path.join(warm_local, s.name), s.samples, 2, False)
                         for s in manifest.shards]
                start = time.perf_counter()
                for index in order:
                    shard, offset = ds.locate(int(index))
                    x, y = files[shard].fields(offset)
                    {"x": DECODE["bytes"](x), "y": DECODE["int"](y)}
                raw.append(time.perf_counter() - start)
                for f in files:
                    f.close()
            ds.close()
            # Streaming refuses a limit under four shards; both get that.
            limit = 4 * max(s.bytes for s in manifest.shards)
            ours_peak, theirs_peak = [], []
            _ours_epoch(ours, options, os.path.join(work, f"l-{n}-ours"), limit, ours_peak)
            _theirs_epoch(theirs, os.path.join(work, f"l-{n}-theirs"), limit, theirs_peak)
            med = {k: _median(v) for k, v in times.items()}
            byte_total = sum(s.bytes for s in manifest.shards)
            print(f"== {label}: {n} samples, {len(manifest.shards)} shards, "
                  f"{byte_total / 1e6:.1f} MB, {args.runs} interleaved runs (medians)")
            print(f"  cold epoch: ours {med['ours']:.2f} s, Streaming {med['theirs']:.2f} s, "
                  f"bare fsspec read {med['bare']:.2f} s")
            print(f"    throughput ours / Streaming      {med['theirs'] / med['ours']:.2f}x "
                  f"(goal >= 1.0)")
            print(f"    throughput ours / bare fsspec    {med['bare'] / med['ours']:.2f}x "
                  f"(goal >= 0.8)")
            print(f"  warm epoch: ours {_median(warm):.3f} s, shard reader {_median(raw):.3f} s"
                  f" -> {_median(raw) / _median(warm):.2f}x (goal >= 0.9)")
            print(f"  first batch cold: {med['first']:.3f} s, one shard download "
                  f"{med['shard']:.3f} s -> {med['first'] / med['shard']:.2f}x (goal <= 1.5)")
            print(f"  peak cache with cache_limit {limit}: ours {max(ours_peak)} "
                  f"({'within' if max(ours_peak) <= limit else 'OVER'}), Streaming "
                  f"{max(theirs_peak)} ({'within' if max(theirs_peak) <= limit else 'OVER'})")
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
