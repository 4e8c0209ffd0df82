"""Columnar data: ParquetDataset against Hugging Face datasets and a bare pyarrow read.

Rows of (int64 label, float32[16] features, ~256 int32 token ids), written by
pyarrow in row groups of ``--group-rows``. Printed, as ratios of medians over
interleaved rounds (batch 256):

* a shuffled epoch (RowGroupOrderSampler, one row group per block), 0 and 2
  workers, against ``datasets`` iterating its own shuffled dataset in numpy
  format (``ds.shuffle(seed).with_format("numpy")``; with 2 workers through
  torch's DataLoader, as its docs show), same batch size (goal >= 3); with 2
  workers both pad each batch into arrays in the workers (our
  MultiprocessIterator's ``converter``, torch's ``collate_fn``);
* the same epoch against a bare sequential
  ``pyarrow.parquet.ParquetFile.iter_batches`` of the same columns, converted
  to numpy (goal >= 0.8);
* a fully random shuffle (one block of every row group) against the bare read,
  with a cache that holds the whole decoded table (``--full-cache-mib``);
* from a local S3 server (moto), cold, against ``datasets`` streaming the same
  files (``load_dataset("parquet", data_files="s3://...", streaming=True)``)
  (goal >= 1.0), by ranged reads and through ``cache=`` (each file
  downloaded whole into an empty cache folder), every column and one column;
  and resuming 2 -> 3 ranks: ours with ShardedIterator,
  theirs with ``split_dataset_by_node`` and ``IterableDataset.state_dict``;
  rows missing / repeated in the epoch;
* the peak resident memory of the 2 workers after an epoch, both loaders;
* whether ShardWriter should write Parquet: the same rows written as our
  shards and as Parquet shards (``ShardWriter(format="parquet")``), both by
  ``dataset-kit shards write``'s Parquet conversion, and read by
  StreamingDataset (its cache warm, ShardOrderSampler), against the Parquet
  files read in place by ParquetDataset (RowGroupOrderSampler), a shuffled
  epoch each, and the bytes each takes on disk;
* (``--sections nulls``) a shuffled epoch, 0 and 2 workers, over the same rows
  with 5% of the token lists empty against none empty: Parquet's statistics
  count an empty list as a null, and such a column must stay columnar
  (a RaggedColumn) rather than fall back to rows (goal: a ratio near 1).

Needs pyarrow, datasets, torch, moto[server], s3fs::

    python benchmarks/columnar.py [--rows 1000000] [--group-rows 65536] [--runs 3]
        [--sections local,s3,writer,nulls] [--full-cache-mib 2048]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
from _timing import median_of_timed

from dataset_kit import concat_examples
from dataset_kit.datasets import ParquetDataset, RowGroupOrderSampler
from dataset_kit.distributed import ShardedIterator
from dataset_kit.iterators import MultiprocessIterator, SerialIterator

BATCH = 256
COLUMNS = ["label", "features", "tokens"]


def _write(folder: str, rows: int, group_rows: int, files: int = 4,
           empty: float = 0.0) -> list[str]:
    """Write the rows as ``files`` Parquet files (a share ``empty`` of the token lists
    empty); return their paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    paths, per_file = [], -(-rows // files)
    for number in range(files):
        n = min(per_file, rows - number * per_file)
        lengths = rng.integers(192, 321, n)
        if empty:
            lengths[rng.random(n) < empty] = 0
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        start = number * per_file
        table = pa.table({
            "label": np.arange(start, start + n, dtype=np.int64),
            "features": pa.FixedSizeListArray.from_arrays(
                rng.random(n * 16, dtype=np.float32), 16),
            "tokens": pa.ListArray.from_arrays(offsets, rng.integers(
                0, 50_000, offsets[-1], dtype=np.int32))})
        path = os.path.join(folder, f"part-{number}.parquet")
        pq.write_table(table, path, row_group_size=group_rows)
        paths.append(path)
    return paths


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _ours(paths: list[str], workers: int, block: int | None, seed: int = 0,
          cache_bytes: int = 256 << 20, placed: bool = True) -> float:
    """One epoch from a cold dataset (opened, its cache empty), timed whole; ``placed``
    False sends batches to the workers in turn (``locality_groups = 0``)."""
    start = time.perf_counter()
    ds = ParquetDataset(paths, COLUMNS, cache_bytes=cache_bytes)
    if not placed:
        ds.locality_groups = 0
    sampler = RowGroupOrderSampler(ds, block or ds.row_groups, seed=seed)
    if workers:
        it = MultiprocessIterator(ds, BATCH, repeat=False, order_sampler=sampler,
                                  n_processes=workers, converter=_pad)
    else:
        it = SerialIterator(ds, BATCH, repeat=False, order_sampler=sampler)
    try:
        for _ in it:
            pass
        return time.perf_counter() - start
    finally:
        it.finalize()


def _theirs(hf_ds, workers: int, seed: int = 0) -> float:
    shuffled = hf_ds.shuffle(seed=seed).with_format("numpy")
    if not workers:
        return _timed(lambda: sum(1 for _ in shuffled.iter(batch_size=BATCH)))
    import torch

    loader = torch.utils.data.DataLoader(shuffled, batch_size=BATCH, num_workers=workers,
                                         collate_fn=_pad)
    return _timed(lambda: sum(1 for _ in loader))


def _pad(rows: list) -> dict:
    """A batch of rows as padded arrays, made in the worker (the loaders' way)."""
    return concat_examples(rows, padding=0)


def _bare(paths: list[str]) -> float:
    import pyarrow.parquet as pq

    def run() -> None:
        for path in paths:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH, columns=COLUMNS):
                batch.column(0).to_numpy()
                batch.column(1).flatten().to_numpy()
                tokens = batch.column(2)
                np.split(tokens.values.to_numpy(), tokens.offsets.to_numpy()[1:-1])
    return _timed(run)


def _peak_rss_of_children() -> int:
    """Summed peak resident memory (VmHWM) of this process's live children, in bytes."""
    total, me = 0, os.getpid()
    for task in os.listdir(f"/proc/{me}/task"):
        try:
            with open(f"/proc/{me}/task/{task}/children") as f:
                children = f.read().split()
        except OSError:
            continue
        for child in children:
            try:
                with open(f"/proc/{child}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            total += int(line.split()[1]) * 1024
            except OSError:
                pass
    return total


def _memory(ds: ParquetDataset, hf_ds) -> tuple[int, int]:
    it = MultiprocessIterator(ds, BATCH, repeat=False, n_processes=2, converter=_pad,
                              order_sampler=RowGroupOrderSampler(ds, 1, seed=0))
    try:
        for _ in it:
            pass
        ours = _peak_rss_of_children()
    finally:
        it.finalize()
    import torch

    loader = torch.utils.data.DataLoader(hf_ds.shuffle(seed=0).with_format("numpy"),
                                         batch_size=BATCH, num_workers=2, collate_fn=_pad,
                                         persistent_workers=True)
    for _ in loader:
        pass
    theirs = _peak_rss_of_children()
    del loader
    return ours, theirs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _s3(paths: list[str]) -> tuple[subprocess.Popen, dict]:
    import s3fs

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket="bench")
    fs = s3fs.S3FileSystem(**options)
    for path in paths:
        fs.put_file(path, f"bench/{os.path.basename(path)}")
    return proc, options


def _stream_epoch(options: dict) -> float:
    from datasets import load_dataset

    stream = load_dataset("parquet", data_files="s3://bench/*.parquet", split="train",
                          streaming=True, storage_options=copy.deepcopy(options))
    stream = stream.shuffle(seed=0, buffer_size=10_000)
    return _timed(lambda: sum(1 for _ in stream.iter(batch_size=BATCH)))


def _s3_epoch(options: dict, columns: list[str] = COLUMNS, cache: str | None = None,
              warm: bool = False) -> float:
    """One shuffled epoch from S3 (a new dataset): by ranged reads, or through ``cache``,
    emptied first unless ``warm`` (then the epoch before left every file there)."""
    def run() -> None:
        ds = ParquetDataset("s3://bench/*.parquet", columns, storage_options=options,
                            cache=cache)
        it = SerialIterator(ds, BATCH, repeat=False,
                            order_sampler=RowGroupOrderSampler(ds, 1, seed=0))
        for _ in it:
            pass
    if cache is not None and not warm:
        shutil.rmtree(cache, ignore_errors=True)  # cold: nothing cached yet
    return _timed(run)


def _write_shards(paths: list[str], out: str, shard_format: str = "shards") -> None:
    """The Parquet rows as shards of ``shard_format``, the way ``dataset-kit shards write``
    converts them."""
    from dataset_kit.shards import ShardWriter
    from dataset_kit.shards.convert import from_parquet

    columns, _, samples = from_parquet(os.path.dirname(paths[0]))
    with ShardWriter(out, {c: columns[c] for c in COLUMNS}, format=shard_format) as writer:
        for sample in samples:
            writer.write({c: sample[c] for c in COLUMNS})


def _shards_epoch(folder: str, cache: str, full: bool = False) -> float:
    """One shuffled epoch of shards (StreamingDataset, its cache already warm): blocks of
    one shard, or (``full``) one block of every shard, each kept open."""
    from dataset_kit.shards import ShardOrderSampler, StreamingDataset

    def run() -> None:
        shards = StreamingDataset(folder, local=cache).manifest.shards
        block = len(shards) if full else 1
        # Every shard of a block stays open (a Parquet shard keeps its row groups
        # decoded while open: one opened again would decode them again).
        ds = StreamingDataset(folder, local=cache, open_shards=max(2, block))
        it = SerialIterator(ds, BATCH, repeat=False,
                            order_sampler=ShardOrderSampler(ds, block, 0))
        for _ in it:
            pass
        ds.close()
    return _timed(run)


def _size(paths: list[str]) -> int:
    return sum(os.path.getsize(p) for p in paths)


def _writer_section(paths: list[str], work: str, runs: int, full_cache_mib: int) -> None:
    folders = {"shards": os.path.join(work, "shards"),
               "pshards": os.path.join(work, "parquet-shards")}
    caches = {name: folder + "-cache" for name, folder in folders.items()}
    files = {}
    for name, folder in folders.items():
        _write_shards(paths, folder, "parquet" if name == "pshards" else "shards")
        _shards_epoch(folder, caches[name])  # warms the cache: all read local files in place
        files[name] = [os.path.join(folder, n) for n in os.listdir(folder)
                       if n.endswith((".dks", ".parquet"))]

    def shards(name: str, full: bool = False):
        return lambda: _shards_epoch(folders[name], caches[name], full)

    t = median_of_timed(runs, shards=shards("shards"), pshards=shards("pshards"),
                        parquet=lambda: _ours(paths, 0, 1))
    print(f"writer: shuffled epoch, 0 workers, local: our shards (StreamingDataset, "
          f"{len(files['shards'])} shards, {_size(files['shards']) / 2**20:.0f} MiB) "
          f"{t['shards']:.2f} s, Parquet shards (ShardWriter(format='parquet'), "
          f"StreamingDataset, {len(files['pshards'])} shards, "
          f"{_size(files['pshards']) / 2**20:.0f} MiB) {t['pshards']:.2f} s, Parquet "
          f"(ParquetDataset, {len(paths)} files, {_size(paths) / 2**20:.0f} MiB) "
          f"{t['parquet']:.2f} s; shards/parquet {t['shards'] / t['parquet']:.2f}, "
          f"parquet shards/parquet {t['pshards'] / t['parquet']:.2f}")
    t = median_of_timed(runs, shards=shards("shards", True), pshards=shards("pshards", True),
                        parquet=lambda: _ours(paths, 0, None, cache_bytes=full_cache_mib << 20))
    # Each holds every decoded row group (ParquetDataset: cache_bytes of --full-cache-mib;
    # a Parquet shard: while open, and every shard is): a smaller cache decodes again.
    print(f"writer: fully random epoch (one block of everything, every row group held), "
          f"0 workers, local: our shards {t['shards']:.2f} s, Parquet shards "
          f"{t['pshards']:.2f} s, Parquet {t['parquet']:.2f} s; shards/parquet "
          f"{t['shards'] / t['parquet']:.2f}, "
          f"parquet shards/parquet {t['pshards'] / t['parquet']:.2f}")


class _Replay:
    """One rank of ranks that run one after the other (as benchmarks/streaming.py does).

    ShardedIterator only gathers to check that ranks agree and to share rank
    0's seed (given here), so each answer is this rank's own value.
    """

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    def allgather(self, obj):
        return [obj] * self.size

    def bcast(self, obj, root: int = 0):
        return obj

    def barrier(self) -> None:
        pass


def _resume_ours(options: dict, steps: int = 3) -> str:
    ds = ParquetDataset("s3://bench/*.parquet", ["label"], storage_options=options)

    def make(rank: int, size: int) -> ShardedIterator:
        # check_epochs=False: the epoch-end exactly-once check gathers every
        # rank's count, which ranks replayed one after another cannot give
        # (each would see its own count size times); _tally counts instead.
        return ShardedIterator(ds, BATCH, _Replay(rank, size), seed=0, repeat=False,
                               order_sampler=RowGroupOrderSampler(ds, 1, seed=0),
                               check_epochs=False)

    seen, state = [], None
    for rank in range(2):
        it = make(rank, 2)
        seen += [int(r["label"]) for _ in range(steps) for r in next(it)]
        state = json.loads(json.dumps(it.state_dict()))
    pads = 0
    for rank in range(3):
        it = make(rank, 3)
        it.load_state_dict(state)
        for batch in it:
            # The last batch of a rank may end in padding (ShardedIterator.last_pad):
            # every rank gets as many batches; a metric leaves the pads out.
            pad = it.last_pad
            pads += pad
            seen += [int(r["label"]) for r in batch][:len(batch) - pad]
    return f"{_tally(seen, len(ds))} (pads left out, as last_pad says: {pads})"


def _resume_theirs(options: dict, rows: int, steps: int = 3) -> str:
    from datasets import load_dataset
    from datasets.distributed import split_dataset_by_node

    def stream():
        # datasets adds keys of its own to storage_options: give it a copy.
        stream = load_dataset("parquet", data_files="s3://bench/*.parquet", split="train",
                              streaming=True, storage_options=copy.deepcopy(options))
        return stream.select_columns(["label"])

    seen, states = [], []
    for rank in range(2):
        part = split_dataset_by_node(stream(), rank=rank, world_size=2)
        batches = part.iter(batch_size=BATCH)
        for _ in range(steps):
            seen += list(next(batches)["label"])
        states.append(part.state_dict())
    for rank in range(3):
        part = split_dataset_by_node(stream(), rank=rank, world_size=3)
        try:  # there is no 3-rank state: each rank takes a 2-rank one
            part.load_state_dict(states[rank % 2])
            seen += [int(x) for batch in part.iter(batch_size=BATCH) for x in batch["label"]]
        except Exception as error:  # noqa: BLE001 - what it raises is the finding
            return (f"cannot resume a 2-rank state on 3 ranks: rank {rank} raised "
                    f"{type(error).__name__}: {error}")
    return _tally(seen, rows)


def _tally(seen: list[int], rows: int) -> str:
    counts = np.bincount(np.asarray(seen, dtype=np.int64), minlength=rows)
    return (f"{int((counts == 0).sum())} rows missing, {int((counts > 1).sum())} repeated, "
            f"of {rows}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--group-rows", type=int, default=65_536)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sections", default="local,s3,writer",
                        help="which measurements: local, s3, writer, nulls (comma-separated)")
    parser.add_argument("--full-cache-mib", type=int, default=2048,
                        help="cache_bytes (MiB) of the full-shuffle run: the whole decoded table")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    import datasets

    datasets.disable_progress_bars()
    work = tempfile.mkdtemp(prefix="columnar-")
    proc = None
    try:
        paths = _write(work, args.rows, args.group_rows)
        ds = ParquetDataset(paths, COLUMNS)
        hf_ds = datasets.Dataset.from_parquet(paths, cache_dir=os.path.join(work, "hf"))
        print(f"{args.rows} rows in {len(paths)} files, {ds.row_groups} row groups of "
              f"<= {args.group_rows}; batch {BATCH}; medians of {args.runs} interleaved runs")
        for workers in (0, 2) if "local" in sections else ():
            t = median_of_timed(
                args.runs, ours=lambda w=workers: _ours(paths, w, 1),
                hf=lambda w=workers: _theirs(hf_ds, w), bare=lambda: _bare(paths))
            print(f"shuffled epoch, {workers} workers: ours {t['ours']:.2f} s, datasets "
                  f"{t['hf']:.2f} s, bare iter_batches {t['bare']:.2f} s; datasets/ours "
                  f"{t['hf'] / t['ours']:.2f}x (goal >= 3), bare/ours "
                  f"{t['bare'] / t['ours']:.2f} (goal >= 0.8)")
        if "local" in sections:
            # What placing by row group and warming ahead buys: the same epoch with
            # the batches sent to the workers in turn (each decodes every row group).
            t = median_of_timed(args.runs, placed=lambda: _ours(paths, 2, 1),
                                turn=lambda: _ours(paths, 2, 1, placed=False))
            print(f"shuffled epoch, 2 workers: placed by row group and warmed ahead "
                  f"{t['placed']:.2f} s, in turn (locality_groups=0) {t['turn']:.2f} s; "
                  f"turn/placed {t['turn'] / t['placed']:.2f}")
        if "local" in sections:
            _local_tail(paths, ds, hf_ds, args.runs, args.full_cache_mib)
        if "writer" in sections:
            _writer_section(paths, work, args.runs, args.full_cache_mib)
        if "nulls" in sections:
            _nulls_section(paths, work, args.rows, args.group_rows, args.runs)
        if "s3" not in sections:
            return
        proc, options = _s3(paths)
        cache = os.path.join(work, "c")
        t = median_of_timed(args.runs, ours=lambda: _s3_epoch(options),
                            cached=lambda: _s3_epoch(options, cache=cache),
                            hf=lambda: _stream_epoch(options))
        print(f"S3 (moto), cold, shuffled: ours {t['ours']:.2f} s by ranged reads, "
              f"{t['cached']:.2f} s through cache=; datasets streaming {t['hf']:.2f} s; "
              f"streaming/ours {t['hf'] / t['ours']:.2f}x by ranges, "
              f"{t['hf'] / t['cached']:.2f}x cached (goal >= 1.0); ranges/cache "
              f"{t['ours'] / t['cached']:.2f}")
        t = median_of_timed(args.runs, ours=lambda: _s3_epoch(options),
                            cached=lambda: _s3_epoch(options, cache=cache, warm=True))
        print(f"S3 (moto), a later epoch (a new dataset; the cache warm, the memory cold): "
              f"ranged reads {t['ours']:.2f} s, cache= {t['cached']:.2f} s; ranges/cache "
              f"{t['ours'] / t['cached']:.2f}")
        one = ["label"]
        t = median_of_timed(args.runs, ours=lambda: _s3_epoch(options, one),
                            cached=lambda: _s3_epoch(options, one, cache))
        print(f"S3 (moto), cold, shuffled, one column (label): ranged reads {t['ours']:.2f} s, "
              f"cache= {t['cached']:.2f} s; ranges/cache {t['ours'] / t['cached']:.2f}")
        try:
            print(f"resume 2 -> 3 ranks, ours: {_resume_ours(options)}")
        except ValueError as error:  # what it raises is the finding
            print(f"resume 2 -> 3 ranks, ours: {type(error).__name__}: {error}")
        print(f"resume 2 -> 3 ranks, datasets streaming: {_resume_theirs(options, len(ds))}")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


def _nulls_section(paths: list[str], work: str, rows: int, group_rows: int,
                   runs: int) -> None:
    """A shuffled epoch over token lists of which 5% are empty, against none empty."""
    folder = os.path.join(work, "empty")
    os.makedirs(folder)
    empty = _write(folder, rows, group_rows, empty=0.05)
    kind = type(ParquetDataset(empty, COLUMNS)[np.arange(4)]).__name__
    for workers in (0, 2):
        t = median_of_timed(runs, full=lambda w=workers: _ours(paths, w, 1),
                            empty=lambda w=workers: _ours(empty, w, 1))
        print(f"lists 5% empty (a batch: {kind}), shuffled epoch, {workers} workers: "
              f"{t['empty']:.2f} s, none empty {t['full']:.2f} s; empty/none "
              f"{t['empty'] / t['full']:.2f} (goal: near 1)")


def _local_tail(paths: list[str], ds: ParquetDataset, hf_ds, runs: int,
                full_cache_mib: int) -> None:
    """The local measurements after the shuffled epochs: a full shuffle, and memory."""
    # A full shuffle touches nearly every row group in every batch: with a
    # cache smaller than the decoded table each batch would decode several
    # groups again (hours at 1M rows), so the cache is sized to hold it.
    full_cache = full_cache_mib << 20
    t = median_of_timed(runs, full=lambda: _ours(paths, 0, None, cache_bytes=full_cache),
                        bare=lambda: _bare(paths))
    print(f"full shuffle (one block of all {ds.row_groups} row groups, cache_bytes "
          f"{full_cache_mib} MiB): {t['full']:.2f} s, bare/ours "
          f"{t['bare'] / t['full']:.2f}; bounded by holding every decoded row group "
          f"(a smaller cache decodes groups again in nearly every batch)")
    ours_mem, theirs_mem = _memory(ds, hf_ds)
    print(f"peak RSS of 2 workers after an epoch: ours {ours_mem / 2**20:.0f} MiB, "
          f"datasets + torch DataLoader {theirs_mem / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
