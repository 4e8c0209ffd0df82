import os
import time

import numpy as np
import pytest

from dataset_kit.iterators import MultiprocessIterator, MultithreadIterator, SerialIterator
from dataset_kit.shards import (
    CacheFullError,
    ShardIntegrityError,
    ShardOrderSampler,
    ShardTimeoutError,
    ShardWriter,
    StreamingDataset,
)
from dataset_kit.shards._cache import cached_name
from tests.http_server import Route
from tests.processes import run_together
from tests.shards.conftest import check, sigkill_when, small_tmpfs, write


def serve(http_server, folder, prefix="/set", **route_options):
    """Put every file of a written shard folder on the HTTP server; return the routes."""
    routes = {}
    for name in os.listdir(folder):
        body = (folder / name).read_bytes()
        options = route_options if name.endswith(".dks") else {}
        routes[name] = Route(body, **options)
        http_server.add(f"{prefix}/{name}", routes[name])
    return routes


def files_in(directory):
    """Every file and folder under ``directory`` but the cache's boot marker."""
    return sorted(os.path.relpath(os.path.join(base, name), directory)
                  for base, dirs, names in os.walk(directory) for name in names + dirs
                  if name != ".boot")


def test_random_access_by_global_index_from_s3(tmp_path, s3):
    write("s3://data/set", n=100, shard_size=900, storage_options=s3)
    ds = StreamingDataset("s3://data/set", local=tmp_path / "cache", storage_options=s3)
    for i in np.random.default_rng(0).permutation(100)[:30]:
        check(ds[int(i)], int(i))
    batch = ds[[5, 99, 0]]
    for got, i in zip(batch, [5, 99, 0]):
        check(got, i)
    assert ds.locate(0) == (0, 0)
    assert ds.locate(99)[0] == len(ds.manifest.shards) - 1


def test_a_connection_cut_mid_shard_retries_and_resumes(tmp_path, http_server):
    with ShardWriter(tmp_path / "set", {"x": "bytes"}, shard_size=300_000) as w:
        w.write({"x": os.urandom(300_000)})
    routes = serve(http_server, tmp_path / "set", drop_after=150_000, drops=1)
    ds = StreamingDataset(http_server.url("/set"), local=tmp_path / "cache",
                          chunk_size=64 * 1024)
    assert ds[0]["x"] == (tmp_path / "set").joinpath("shard.00000.dks").read_bytes()[-300_000:]
    shard = routes["shard.00000.dks"]
    ranges = -(-len(shard.body) // (64 * 1024))
    # One range was cut and asked for again; the others were not fetched twice.
    assert shard.gets == ranges + 1


def test_a_corrupt_shard_is_fetched_twice_then_refused_naming_both_hashes(tmp_path,
                                                                           http_server):
    manifest = write(tmp_path / "set", n=20, shard_size=10_000)
    body = (tmp_path / "set" / "shard.00000.dks").read_bytes()
    routes = serve(http_server, tmp_path / "set")
    routes["shard.00000.dks"].body = body[:-1] + bytes([body[-1] ^ 1])
    bad = routes["shard.00000.dks"].sha256
    ds = StreamingDataset(http_server.url("/set"), local=tmp_path / "cache")
    with pytest.raises(ShardIntegrityError) as error:
        ds[0]
    message = str(error.value)
    assert "shard.00000.dks" in message and http_server.url("/set/shard.00000.dks") in message
    assert manifest.shards[0].sha256 in message and bad in message
    assert routes["shard.00000.dks"].gets == 2
    assert files_in(tmp_path / "cache") == []


def test_a_stalled_download_times_out_naming_the_shard(tmp_path, http_server):
    with ShardWriter(tmp_path / "set", {"x": "bytes"}) as w:
        w.write({"x": os.urandom(300_000)})
    serve(http_server, tmp_path / "set", delay=60.0, drop_after=None)
    ds = StreamingDataset(http_server.url("/set"), local=tmp_path / "cache", timeout=1.0,
                          chunk_size=1 << 20)
    started = time.monotonic()
    with pytest.raises(ShardTimeoutError, match=r"shard .*shard.00000.dks stalled"):
        ds[0]
    assert time.monotonic() - started < 30, "a stall must fail, not hang"
    assert files_in(tmp_path / "cache") == []


def test_a_cache_smaller_than_one_shard_is_refused_at_once(tmp_path):
    manifest = write(tmp_path / "set", n=50, shard_size=2000)
    largest = max(s.bytes for s in manifest.shards)
    with pytest.raises(ValueError, match=rf"cache_limit {largest - 1} bytes is smaller than "
                                         rf"shard shard\.\d+\.dks \({largest} bytes\)"):
        StreamingDataset(tmp_path / "set", local=tmp_path / "cache", cache_limit=largest - 1)


def test_a_full_disk_is_a_clear_error_and_leaves_nothing(tmp_path):
    with ShardWriter(tmp_path / "set", {"x": "bytes"}, shard_size=1 << 20) as w:
        w.write({"x": os.urandom(3 << 20)})
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        ds = StreamingDataset(tmp_path / "set", local=disk / "cache")
        with pytest.raises(CacheFullError, match=r"no space left in the cache .* for shard "
                                                  r"shard\.00000\.dks"):
            ds[0]
        assert files_in(disk / "cache") == []


def test_least_recently_used_shards_are_evicted_within_the_limit(tmp_path):
    manifest = write(tmp_path / "set", n=100, shard_size=1000)
    limit = 2 * max(s.bytes for s in manifest.shards)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache", cache_limit=limit,
                          open_shards=1)
    for i in range(100):
        check(ds[i], i)
        assert ds.cache_usage() <= limit
    ds.close()  # the last shard read is published
    last = ds.locate(99)[0]
    cached = sorted(n for n in os.listdir(tmp_path / "cache") if n.endswith(".dks"))
    assert cached_name(manifest.shards[last]) in cached
    assert cached_name(manifest.shards[0]) not in cached


def test_a_shard_in_use_is_never_evicted(tmp_path):
    manifest = write(tmp_path / "set", n=100, shard_size=1000)
    limit = max(s.bytes for s in manifest.shards)
    holder = StreamingDataset(tmp_path / "set", local=tmp_path / "cache", cache_limit=limit)
    holder.prefetch([0])  # published in the cache
    check(holder[0], 0)  # maps it and keeps it open
    other = StreamingDataset(tmp_path / "set", local=tmp_path / "cache", cache_limit=limit)
    with pytest.raises(CacheFullError, match=r"cannot hold shard shard\.00001\.dks"):
        other[ds_index_of_shard(other, 1)]
    assert (tmp_path / "cache" / cached_name(manifest.shards[0])).exists()
    check(holder[1], 1)
    holder.close()
    check(other[ds_index_of_shard(other, 1)], ds_index_of_shard(other, 1))


def ds_index_of_shard(ds, shard):
    return int(ds.manifest.starts[shard])


def _read_first(url, cache, barrier, results):
    ds = StreamingDataset(url, local=cache)
    barrier.wait(30)
    results.put(int(ds[0]["y"]))


def test_eight_processes_wanting_one_shard_cause_one_download(tmp_path, http_server):
    write(tmp_path / "set", n=20, shard_size=10_000)
    routes = serve(http_server, tmp_path / "set", delay=0.05)
    answers = run_together(8, _read_first, http_server.url("/set"), str(tmp_path / "cache"),
                           timeout=120)
    assert sorted(answers) == [0] * 8
    assert routes["shard.00000.dks"].gets == 1


@pytest.mark.parametrize("stop", [1, 4, 7, 13])
def test_resume_with_the_shard_sampler_repeats_the_same_batches(tmp_path, stop):
    write(tmp_path / "set", n=60, shard_size=700)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache", cache_limit=10_000)
    sampler = ShardOrderSampler(ds, block_shards=2, seed=3)
    it = SerialIterator(ds, 8, order_sampler=sampler)
    for _ in range(stop):
        next(it)
    state = it.state_dict()
    expected = [[b["y"] for b in next(it)] for _ in range(10)]
    again = SerialIterator(ds, 8, order_sampler=ShardOrderSampler(ds, block_shards=2, seed=9))
    again.load_state_dict(state)
    assert [[b["y"] for b in next(again)] for _ in range(10)] == expected


@pytest.mark.parametrize("where", ["local", "http"])
def test_worker_processes_read_the_shards_as_the_main_process_does(tmp_path, where,
                                                                   http_server):
    write(tmp_path / "set", n=60, shard_size=700)
    if where == "http":  # fsspec's HTTP filesystem is not fork-safe: workers make their own
        serve(http_server, tmp_path / "set")
    remote = tmp_path / "set" if where == "local" else http_server.url("/set")
    ds = StreamingDataset(remote, local=tmp_path / "cache")
    sampler = ShardOrderSampler(ds, block_shards=2, seed=3)
    serial = SerialIterator(ds, 8, order_sampler=sampler)
    expected = [[b["y"] for b in next(serial)] for _ in range(12)]
    with MultiprocessIterator(ds, 8, order_sampler=sampler, n_processes=2) as it:
        assert [[b["y"] for b in next(it)] for _ in range(12)] == expected


def test_threads_sharing_one_dataset_read_the_batches_one_thread_reads(tmp_path):
    # Four threads reading blocks of four shards through a table of two open
    # shards: shards leave the table while other threads read them.
    write(tmp_path / "set", n=400, shard_size=1000)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    assert len(ds.manifest.shards) > 8
    serial = SerialIterator(ds, 6, order_sampler=ShardOrderSampler(ds, block_shards=4, seed=5))
    with MultithreadIterator(ds, 6, order_sampler=ShardOrderSampler(ds, block_shards=4, seed=5),
                             n_threads=4) as threads:
        for _ in range(2000):
            expected, got = next(serial), next(threads)
            assert len(got) == len(expected)
            for a, b in zip(got, expected):
                check(a, b["y"])
    ds.close()


def test_resuming_after_the_manifest_changed_is_refused_naming_the_change(tmp_path):
    write(tmp_path / "set", n=60, shard_size=700)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    it = SerialIterator(ds, 8, order_sampler=ShardOrderSampler(ds, seed=1))
    next(it)
    state = it.state_dict()
    write(tmp_path / "set", n=60, shard_size=1400, overwrite=True)
    changed = StreamingDataset(tmp_path / "set", local=tmp_path / "cache2")
    fresh = SerialIterator(changed, 8, order_sampler=ShardOrderSampler(changed, seed=1))
    before = fresh.state_dict()
    with pytest.raises(ValueError, match=r"manifest changed since the checkpoint.*shards \d+ "
                                         r"-> \d+"):
        fresh.load_state_dict(state)
    assert fresh.state_dict() == before


def test_ranks_resume_two_to_three_with_nothing_repeated_or_skipped(tmp_path, s3):
    import json

    from dataset_kit.distributed import ShardedIterator
    from tests.distributed.thread_ranks import run_ranks, unwrap

    write("s3://data/set", n=60, shard_size=700, storage_options=s3)

    def dataset():
        return StreamingDataset("s3://data/set", local=tmp_path / "cache", storage_options=s3)

    def first(comm):
        it = ShardedIterator(dataset(), 5, comm, seed=5)
        seen = [int(b["y"]) for _ in range(3) for b in next(it)]
        return seen, json.loads(json.dumps(it.state_dict()))

    before = unwrap(run_ranks(2, first))
    state = before[0][1]
    assert state["door"]["global_position"] == 30

    def second(comm):
        it = ShardedIterator(dataset(), 5, comm, seed=5)
        it.load_state_dict(state)
        seen = []
        while it.epoch == 0:
            seen += [int(b["y"]) for b in next(it)]
        return seen

    after = unwrap(run_ranks(3, second))
    seen = [y for part, _ in before for y in part] + [y for part in after for y in part]
    assert sorted(seen) == list(range(60))


def test_a_killed_download_does_not_count_against_the_limit(tmp_path):
    import subprocess
    import sys

    manifest = write(tmp_path / "set", n=100, shard_size=1000)
    limit = max(s.bytes for s in manifest.shards)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    # What a download killed mid-way leaves: its staging folder, named with its pid.
    name = cached_name(manifest.shards[3])
    staging = tmp_path / "cache" / f".{name}.{dead.pid}-00000000.part"
    staging.mkdir(parents=True)
    (staging / name).write_bytes(b"\0" * limit)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache", cache_limit=limit)
    check(ds[0], 0)
    assert not staging.exists()


def test_a_dataset_written_again_at_the_same_url_is_never_read_from_the_old_cache(tmp_path):
    write(tmp_path / "set", n=30, shard_size=700)
    old = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    check(old[0], 0)
    old.close()
    with ShardWriter(tmp_path / "set", {"x": "ndarray", "y": "int", "name": "str"},
                     shard_size=700, overwrite=True) as w:
        for i in range(30):  # the same layout, other values
            w.write({"x": np.zeros((4, 3), np.float32), "y": 100 + i, "name": f"new-{i}"})
    new = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    assert new[0]["y"] == 100 and new[0]["name"] == "new-0"


def test_after_a_reboot_a_cached_shard_that_lost_its_data_is_fetched_again(tmp_path):
    from dataset_kit.filecache import _reboot

    if _reboot.boot_id() is None:
        pytest.skip("this system gives no boot id; shards are fsynced instead")
    manifest = write(tmp_path / "set", n=40, shard_size=700)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    check(ds[0], 0)
    check(ds[len(ds) - 1], len(ds) - 1)
    ds.close()
    # What an OS crash before writeback can leave: a published shard with other
    # bytes, written in another boot.
    damaged = tmp_path / "cache" / cached_name(manifest.shards[0])
    data = bytearray(damaged.read_bytes())
    data[-1] ^= 0xFF
    damaged.write_bytes(bytes(data))
    kept = tmp_path / "cache" / cached_name(manifest.shards[-1])
    kept_inode = kept.stat().st_ino
    (tmp_path / "cache" / ".boot").write_text("another-boot")
    again = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    assert not damaged.exists() and kept.stat().st_ino == kept_inode
    check(again[0], 0)
    assert (tmp_path / "cache" / ".boot").read_text() == _reboot.boot_id()


def test_sigkill_mid_download_leaves_nothing_that_looks_cached(tmp_path, http_server):
    import subprocess
    import sys

    with ShardWriter(tmp_path / "set", {"x": "bytes"}, shard_size=1 << 20) as w:
        w.write({"x": os.urandom(1 << 20)})
    serve(http_server, tmp_path / "set", delay=0.2)  # ~3 s for the shard
    cache = tmp_path / "cache"
    script = (f"from dataset_kit.shards import StreamingDataset\n"
              f"StreamingDataset({http_server.url('/set')!r}, local={str(cache)!r}, "
              f"chunk_size=1 << 16)[0]\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ,
                                                                  "PYTHONPATH": root})
    try:
        # A shard's staging folder (not the boot marker's): a download started.
        sigkill_when(proc, lambda: any(".dks." in n and n.endswith(".part") for n in (
            os.listdir(cache) if cache.exists() else [])), "a download started", 60, 0.02)
    finally:
        proc.kill()
        proc.wait()
    assert [n for n in os.listdir(cache) if n.endswith(".dks")] == []
    ds = StreamingDataset(http_server.url("/set"), local=cache, cache_limit=2 << 20)
    assert ds[0]["x"] == (tmp_path / "set").joinpath("shard.00000.dks").read_bytes()[-(1 << 20):]
    ds.close()  # the shard read is published
    assert not any(n.endswith(".part") for n in os.listdir(cache))
