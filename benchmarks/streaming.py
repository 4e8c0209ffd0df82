"""dataset_kit.shards against MosaicML Streaming, from a local S3 server (moto).

Same samples for both (1 KB records; 100 KB images kept as encoded bytes),
same shard size, each system's own shard format and its own shuffle (ours:
``ShardOrderSampler`` with blocks of one shard; Streaming: its default
``py1e``). Rows, printed as ratios of medians over interleaved rounds:

* throughput, cold cache: ours / Streaming (goal >= 1.0) and ours / a bare
  ``fs.cat_file`` of every shard, one after the other (goal >= 0.8); beside
  them, what a cold epoch does that a bare read does not, each timed alone
  on the same bytes: the sha256 of every shard, and writing every shard
  into new files;
* throughput, warm cache: ours / our shard reader on the same local files
  with the same column decoding, batch by batch, without the dataset,
  cache and iterator layers (goal >= 0.9); and ours / Streaming, warm;
* first batch on a cold cache (the dataset made, its manifest read) / one
  shard's download (goal <= 1.5); making the dataset is printed beside it;
* resume 2 -> 3 ranks of one node, both systems, each rank a process of its
  own, the node's cache cold: are the samples seen before and after exactly
  the epoch (missing / repeated beyond the padding to equal shares), and the
  time to the first resumed batch;
* peak cache size with ``cache_limit`` of four shards (Streaming's minimum),
  polled every millisecond (goal: <= the limit).

Needs the ``bench`` extra (``mosaicml-streaming``, which pulls torch, so it is
not in ``test``; ``moto[server]``; the ``stream`` extra's fsspec and s3fs)::

    pip install -e '.[bench]'
    python benchmarks/streaming.py [--runs 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

# This file is named like MosaicML's package: keep its folder off the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

from dataset_kit.distributed import ShardedIterator  # noqa: E402
from dataset_kit.formats.shards._columns import DECODE  # noqa: E402
from dataset_kit.formats.shards._layout import ShardFile  # noqa: E402
from dataset_kit.iterators import SerialIterator  # noqa: E402
from dataset_kit.shards import ShardOrderSampler, ShardWriter, StreamingDataset  # noqa: E402
from dataset_kit.shards._cache import cached_name  # noqa: E402

# 100 KB images: shards of 16 MB (160 images) and batches of 64, so that a
# first batch needs one shard, as it does for 1 KB records in 4 MB shards.
SETS = {"1KB records": {"n": 20_000, "size": 1024, "shard": 4 << 20, "batch": 256},
        "100KB images": {"n": 800, "size": 100 * 1024, "shard": 16 << 20, "batch": 64}}
RESUME_STEPS = 3  # batches per rank before the 2-rank run stops


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


def _du(path: str) -> int:
    total = 0
    for base, _, names in os.walk(path):
        for name in names:
            try:
                total += os.stat(os.path.join(base, name)).st_size
            except FileNotFoundError:
                pass
    return total


class _PeakDisk:
    """The largest size of a folder seen by a thread polling it every millisecond."""

    def __init__(self, path: str) -> None:
        self.path, self.most, self._stop = path, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, _du(self.path))
            time.sleep(0.001)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most


def _ours_epoch(remote: str, options: dict, local: str, batch: int,
                cache_limit: int | None = None) -> dict:
    """Seconds to make the dataset, to its first batch, and for one epoch; samples seen."""
    start = time.perf_counter()
    ds = StreamingDataset(remote, local=local, storage_options=options, cache_limit=cache_limit)
    made = time.perf_counter()
    it = SerialIterator(ds, batch, repeat=False, order_sampler=ShardOrderSampler(ds, 1, 0))
    first, count = None, 0
    for got in it:
        count += len(got)
        if first is None:
            first = time.perf_counter() - made
    ds.close()
    return {"make": made - start, "first": first, "epoch": time.perf_counter() - start,
            "count": count}


def _theirs_epoch(remote: str, local: str, batch: int, cache_limit: int | None = None) -> dict:
    import streaming
    streaming.base.util.clean_stale_shared_memory()
    start = time.perf_counter()
    ds = streaming.StreamingDataset(remote=remote, local=local, shuffle=True, shuffle_seed=0,
                                    batch_size=batch, cache_limit=cache_limit)
    first, count = None, 0
    for _ in ds:
        count += 1
        if first is None:
            first = time.perf_counter() - start
    del ds
    return {"first": first, "epoch": time.perf_counter() - start, "count": count}


def _raw_epoch(local: str, manifest, order: np.ndarray, batch: int) -> float:
    """Our shard reader and column decoding on local files, batch by batch, no layers."""
    start = time.perf_counter()
    files = [ShardFile(os.path.join(local, cached_name(s)), s.samples, 2, False)
             for s in manifest.shards]
    starts = np.asarray(manifest.starts)
    for first in range(0, len(order), batch):
        indices = order[first:first + batch]
        shard_of = np.searchsorted(starts, indices, side="right") - 1
        for shard in np.unique(shard_of).tolist():
            where = shard_of == shard
            x, y = files[shard].columns_of(indices[where] - starts[shard])
            [{"x": a, "y": b} for a, b in zip(map(DECODE["bytes"], x), map(DECODE["int"], y))]
    for f in files:
        f.close()
    return time.perf_counter() - start


def _integrity_costs(cached: str, manifest, fresh: str) -> tuple[float, float]:
    """Seconds to sha256 every shard, and to write every shard into new files in ``fresh``.

    What a cold epoch must do and a bare read does not (the cache is the
    point, and the manifest pins each shard's sha256), timed alone on the
    same bytes, so the cold rows can be read against them.
    """
    blobs = []
    for s in manifest.shards:
        with open(os.path.join(cached, cached_name(s)), "rb") as f:
            blobs.append(f.read())
    start = time.perf_counter()
    for blob in blobs:
        hashlib.sha256(blob).hexdigest()
    hashed = time.perf_counter() - start
    os.makedirs(fresh)
    start = time.perf_counter()
    for k, blob in enumerate(blobs):
        with open(os.path.join(fresh, f"{k}.shard"), "wb") as f:
            f.write(blob)
    written = time.perf_counter() - start
    return hashed, written


# -- resume 2 -> 3 ranks, each rank a process ------------------------------------


class _Replay:
    """The communicator of one rank of ranks that run the same code one after the other.

    ShardedIterator only gathers to check that ranks agree (and to share rank
    0's seed, given here): every rank computes the same, so each answer is
    this rank's own value, once per rank.
    """

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    def allgather(self, obj):
        return [obj] * self.size

    def bcast(self, obj, root: int = 0):
        return obj

    def barrier(self) -> None:
        pass


def _rank_job(job: dict) -> dict:
    """One rank of one system: take ``steps`` batches (or the rest of the epoch)."""
    if job["system"] != "ours":
        import streaming  # imported before the clock starts, as ours is
    start = time.perf_counter()
    seen, first = [], None
    if job["system"] == "ours":
        ds = StreamingDataset(job["remote"], local=job["local"], storage_options=job["options"])
        it = ShardedIterator(ds, job["batch"], _Replay(job["rank"], job["ranks"]), seed=0,
                             repeat=False, order_sampler=ShardOrderSampler(ds, 1, 0))
        if job["state"] is not None:
            it.load_state_dict(job["state"])
        for k, got in enumerate(it):
            first = first or time.perf_counter() - start
            seen += [int(b["y"]) for b in got]
            if k + 1 == job["steps"]:
                break
        return {"seen": seen, "first": first, "state": it.state_dict(),
                "order": "ShardOrderSampler"}
    # The ranks of one node (Streaming's local ranks share one cache and meet
    # in shared memory; across nodes they would each need a host of their own).
    os.environ.update(RANK=str(job["rank"]), WORLD_SIZE=str(job["ranks"]),
                      LOCAL_RANK=str(job["rank"]), LOCAL_WORLD_SIZE=str(job["ranks"]))
    ds = streaming.StreamingDataset(remote=job["remote"], local=job["local"], shuffle=True,
                                    shuffle_seed=0, batch_size=job["batch"])
    if job["state"] is not None:
        ds.load_state_dict(job["state"])
    for k, sample in enumerate(ds):
        seen.append(int(sample["y"]))
        if len(seen) == job["batch"]:
            first = first or time.perf_counter() - start
        if job["steps"] and k + 1 == job["steps"] * job["batch"]:
            break
    state = ds.state_dict(num_samples=len(seen) * job["ranks"], from_beginning=False)
    return {"seen": seen, "first": first, "state": state, "order": "py1e"}


def _run_ranks(jobs: list[dict]) -> list[dict]:
    """Run the ranks of ``jobs`` as processes at once (Streaming meets its ranks in gloo)."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_port()))
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank-job",
                               json.dumps(job)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for job in jobs]
    out = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=600)
            if proc.returncode:
                lines = stderr.strip().splitlines()
                out.append({"error": lines[-1] if lines else f"exit {proc.returncode}"})
            else:
                out.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return out


def _resume(system: str, remote: str, options: dict, work: str, n: int, batch: int) -> str:
    """Run 2 ranks for RESUME_STEPS batches, resume on 3 ranks; describe what was seen."""
    def job(rank, ranks, steps, state):
        return {"system": system, "remote": remote, "options": options, "rank": rank,
                "ranks": ranks, "steps": steps, "state": state, "batch": batch,
                "local": os.path.join(work, f"r-{n}-{system}-{ranks}")}

    if system != "ours":
        import streaming
        streaming.base.util.clean_stale_shared_memory()
    before = _run_ranks([job(r, 2, RESUME_STEPS, None) for r in range(2)])
    if any("error" in b for b in before):
        return f"the 2-rank run failed: {sorted({b.get('error') for b in before})}"
    if system != "ours":
        streaming.base.util.clean_stale_shared_memory()
    after = _run_ranks([job(r, 3, 0, before[0]["state"]) for r in range(3)])
    if any("error" in a for a in after):
        return f"resuming on 3 ranks failed: {sorted({a.get('error') for a in after})}"
    seen = [y for part in before + after for y in part["seen"]]
    missing = n - len(set(seen))
    repeated = len(seen) - len(set(seen))
    # Both systems give every rank as many samples: the rest of the epoch is
    # padded with repeats up to a multiple of the ranks (ours, last_batch='keep').
    pad = -(n - sum(len(b["seen"]) for b in before)) % 3
    verdict = ("exact" if not missing and repeated <= pad else "NOT exact")
    firsts = statistics.median(a["first"] for a in after if a["first"] is not None)
    return (f"{verdict}: {missing} missing, {repeated} repeated of {n} (padding the rest to "
            f"3 equal shares takes {pad}); first resumed batch {firsts:.3f} s (median of "
            f"3 ranks of one node, cold cache, order: {before[0]['order']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rank-job", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_job:
        print(json.dumps(_rank_job(json.loads(args.rank_job))))
        return
    import boto3
    import fsspec

    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_DEFAULT_REGION="us-east-1")
    proc, endpoint = _start_s3()
    os.environ["S3_ENDPOINT_URL"] = endpoint
    work = tempfile.mkdtemp(prefix="bench-streaming-")
    try:
        options = {"client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
        fs = fsspec.filesystem("s3", **options)
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="bench")
        for label, spec in SETS.items():
            _compare(label, spec, fs, options, work, args.runs)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def _compare(label: str, spec: dict, fs, options: dict, work: str, runs: int) -> None:
    from streaming import MDSWriter

    n, batch = spec["n"], spec["batch"]
    rng = np.random.default_rng(0)
    payloads = [rng.bytes(spec["size"]) for _ in range(n)]
    ours, theirs = f"s3://bench/{n}/ours", f"s3://bench/{n}/theirs"
    with ShardWriter(ours, {"x": "bytes", "y": "int"}, shard_size=spec["shard"],
                     storage_options=options) as w:
        for i, p in enumerate(payloads):
            w.write({"x": p, "y": i})
    mds = os.path.join(work, f"mds-{n}")
    with MDSWriter(out=mds, columns={"x": "bytes", "y": "int"}, size_limit=spec["shard"]) as w:
        for i, p in enumerate(payloads):
            w.write({"x": p, "y": i})
    fs.put(mds + "/", theirs + "/", recursive=True)
    manifest = StreamingDataset(ours, local=os.path.join(work, "probe"),
                                storage_options=options).manifest
    paths = [f"bench/{n}/ours/{s.name}" for s in manifest.shards]
    order = ShardOrderSampler(manifest, 1, 0).epoch_order(0, n)
    rows: dict[str, list[float]] = {k: [] for k in ("ours", "theirs", "bare", "make", "first",
                                                    "theirs_first", "shard", "warm", "raw",
                                                    "theirs_warm", "hash", "write")}
    warm_ours, warm_theirs = os.path.join(work, f"w-{n}-ours"), os.path.join(work,
                                                                            f"w-{n}-theirs")
    _ours_epoch(ours, options, warm_ours, batch)
    _theirs_epoch(theirs, warm_theirs, batch)
    first_shard = paths[int(np.searchsorted(manifest.starts, order[0], side="right")) - 1]
    for run in range(runs):  # every row once per round, rounds interleaved
        start = time.perf_counter()
        fs.cat_file(first_shard)  # the shard our first batch reads
        rows["shard"].append(time.perf_counter() - start)
        got = _ours_epoch(ours, options, os.path.join(work, f"c-{n}-{run}-ours"), batch)
        assert got["count"] == n, got
        rows["ours"].append(got["epoch"])
        rows["make"].append(got["make"])
        rows["first"].append(got["first"])
        got = _theirs_epoch(theirs, os.path.join(work, f"c-{n}-{run}-theirs"), batch)
        assert got["count"] == n, got
        rows["theirs"].append(got["epoch"])
        rows["theirs_first"].append(got["first"])
        start = time.perf_counter()
        for path in paths:
            fs.cat_file(path)
        rows["bare"].append(time.perf_counter() - start)
        # Warm ours and the shard reader take turns going first (page cache, CPU boost).
        for which in (("ours", "raw") if run % 2 else ("raw", "ours")):
            if which == "ours":
                got = _ours_epoch(ours, options, warm_ours, batch)
                rows["warm"].append(got["epoch"] - got["make"])
            else:
                rows["raw"].append(_raw_epoch(warm_ours, manifest, order, batch))
        rows["theirs_warm"].append(_theirs_epoch(theirs, warm_theirs, batch)["epoch"])
        hashed, written = _integrity_costs(warm_ours, manifest, os.path.join(work, f"x-{n}-{run}"))
        rows["hash"].append(hashed)
        rows["write"].append(written)
    med = {k: statistics.median(v) for k, v in rows.items()}
    limit = 4 * max(s.bytes for s in manifest.shards)
    peaks = {}
    for system in ("ours", "theirs"):
        local = os.path.join(work, f"l-{n}-{system}")
        os.makedirs(local)
        poll = _PeakDisk(local)
        if system == "ours":
            _ours_epoch(ours, options, local, batch, limit)
        else:
            _theirs_epoch(theirs, local, batch, limit)
        peaks[system] = poll.stop()
    resumed = {system: _resume(system, remote, options, work, n, batch)
               for system, remote in (("ours", ours), ("Streaming", theirs))}
    mb = sum(s.bytes for s in manifest.shards) / 1e6
    print(f"== {label}: {n} samples, {len(manifest.shards)} shards of {spec['shard'] >> 20} MB, "
          f"{mb:.1f} MB, batches of {batch}; medians of {runs} interleaved rounds")
    print(f"  cold epoch: ours {med['ours']:.3f} s, Streaming {med['theirs']:.3f} s, "
          f"bare fsspec read {med['bare']:.3f} s")
    print(f"    throughput ours / Streaming        {med['theirs'] / med['ours']:.2f}x "
          f"(goal >= 1.0)")
    print(f"    throughput ours / bare fsspec      {med['bare'] / med['ours']:.2f}x "
          f"(goal >= 0.8)")
    print(f"    what a cold epoch does beyond a bare read, each alone: sha256 of every shard "
          f"{med['hash']:.3f} s, writing them into new files {med['write']:.3f} s")
    print(f"  warm epoch: ours {med['warm']:.3f} s (+ {med['make']:.3f} s making the dataset), "
          f"our shard reader {med['raw']:.3f} s, Streaming {med['theirs_warm']:.3f} s in all")
    print(f"    throughput ours / shard reader     {med['raw'] / med['warm']:.2f}x "
          f"(goal >= 0.9)")
    print(f"    throughput ours / Streaming        "
          f"{med['theirs_warm'] / (med['warm'] + med['make']):.2f}x (both making the dataset)")
    print(f"  first batch, cold cache: ours {med['first']:.3f} s after making the dataset "
          f"({med['make']:.3f} s), Streaming {med['theirs_first']:.3f} s in all; one shard "
          f"download {med['shard']:.3f} s")
    print(f"    ours / one shard download          {med['first'] / med['shard']:.2f}x "
          f"(goal <= 1.5); with making the dataset "
          f"{(med['first'] + med['make']) / med['shard']:.2f}x")
    for system, verdict in resumed.items():
        print(f"  resume 2 -> 3 ranks, {system}: {verdict}")
    for system, peak in peaks.items():
        print(f"  peak cache, cache_limit {limit}: {system} {peak} "
              f"({'within' if peak <= limit else 'OVER'})")


if __name__ == "__main__":
    main()
