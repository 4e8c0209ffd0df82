"""Prefetching ahead of the planned order: the next shards are cached before they are read."""

import os
import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.iterators import MultiprocessIterator, SerialIterator
from dataset_kit.shards import ShardOrderSampler, StreamingDataset
from dataset_kit.shards._prefetch import OrderPlan
from tests.shards.conftest import check, write
from tests.shards.test_dataset import serve
from tests.shards.test_sampler import manifest_of

DEADLINE = 60  # seconds: a prefetch that never comes fails, it does not hang


def _wait_for(paths, what):
    end = time.monotonic() + DEADLINE
    while not all(os.path.exists(p) for p in paths):
        assert time.monotonic() < end, f"{what} were not prefetched within {DEADLINE} s"
        time.sleep(0.005)


class _Peak:
    """The largest cache size seen by a thread that polls it until stopped."""

    def __init__(self, ds):
        self.ds, self.most, self._stop = ds, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            self.most = max(self.most, self.ds.cache_usage())
            time.sleep(0.001)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.most


@pytest.fixture(params=["s3", "slow-http"])
def remote(request, tmp_path):
    """The same shard set on the moto S3 server, or on an HTTP server that is slow."""
    if request.param == "s3":
        options = request.getfixturevalue("s3")
        write("s3://data/set", n=120, shard_size=1000, storage_options=options)
        return "s3://data/set", options
    http_server = request.getfixturevalue("http_server")
    write(tmp_path / "set", n=120, shard_size=1000)
    serve(http_server, tmp_path / "set", delay=0.05)
    return http_server.url("/set"), None


def test_the_shards_needed_next_are_cached_before_they_are_read(tmp_path, remote):
    url, options = remote
    probe = StreamingDataset(url, local=tmp_path / "probe", storage_options=options)
    limit = 4 * max(s.bytes for s in probe.manifest.shards)
    ds = StreamingDataset(url, local=tmp_path / "cache", storage_options=options,
                          cache_limit=limit, open_shards=1, prefetch_shards=2)
    sampler = ShardOrderSampler(ds, block_shards=1, seed=7)
    order = np.concatenate([sampler.epoch_order(0, len(ds)), sampler.epoch_order(1, len(ds))])
    it = SerialIterator(ds, 5, order_sampler=sampler)
    peak = _Peak(ds)
    try:
        for step in range(2 * len(ds) // 5):
            batch = order[5 * step:5 * step + 5]
            if step:
                # Waiting here (the reader busy elsewhere) must be enough: the
                # planned order says which shards come next, and they arrive.
                shards = {ds.locate(int(i))[0] for i in batch}
                _wait_for([ds._cache.path(s) for s in shards], f"shards {sorted(shards)}")
            got = next(it)
            for example, i in zip(got, batch):
                check(example, int(i))
    finally:
        most = peak.stop()
        ds.close()
    assert 0 < most <= limit


def test_workers_prefetch_without_downloading_a_shard_twice(tmp_path, http_server):
    write(tmp_path / "set", n=120, shard_size=1000)
    routes = serve(http_server, tmp_path / "set", delay=0.02)
    ds = StreamingDataset(http_server.url("/set"), local=tmp_path / "cache", prefetch_shards=3)
    sampler = ShardOrderSampler(ds, block_shards=2, seed=1)
    expected = sampler.epoch_order(0, len(ds))
    seen = []
    with MultiprocessIterator(ds, 8, order_sampler=sampler, n_processes=2,
                              repeat=False) as it:
        for batch in it:
            seen += [int(b["y"]) for b in batch]
    assert seen == expected.tolist()
    shards = {name: route.gets for name, route in routes.items() if name.endswith(".dks")}
    assert shards and set(shards.values()) == {1}, shards


def test_a_sampler_copy_loaded_from_a_state_is_the_one_followed(tmp_path):
    write(tmp_path / "set", n=120, shard_size=1000)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    first = SerialIterator(ds, 5, order_sampler=ShardOrderSampler(ds, block_shards=1, seed=2))
    for _ in range(3):
        next(first)
    state = first.state_dict()
    resumed = SerialIterator(ds, 5, order_sampler=ShardOrderSampler(ds, block_shards=1, seed=9))
    resumed.load_state_dict(state)
    next(resumed)
    followed = ds.prefetch_plan.sampler
    assert (followed.seed, followed.block_shards) == (2, 1)


@given(st.lists(st.integers(1, 20), min_size=1, max_size=12), st.integers(1, 6),
       st.integers(0, 1000), st.integers(1, 16), st.data())
def test_what_the_plan_says_comes_next_is_what_the_order_reads_next(counts, block, seed,
                                                                     batch, data):
    manifest = manifest_of(counts)
    sampler = ShardOrderSampler(manifest, block, seed)
    plan = OrderPlan()
    plan.follow(sampler)
    order = sampler.epoch_order(0, manifest.samples)
    shards = sampler.shards_of(order)
    start = data.draw(st.integers(0, len(order) - 1))
    now = {int(s) for s in shards[start:start + batch]}
    upcoming, current = plan.upcoming(0, now)
    upcoming = list(upcoming)
    # The shards read after the batch, not in its block, come up exactly, block
    # by block in reading order (which shard of a block is read first is the
    # samples' order, which the plan does not need); the next epoch follows.
    block_of = {int(s): k for k, b in enumerate(sampler.blocks(0)) for s in b}
    later = []
    for s in shards[start + batch:].tolist():
        if s not in now and s not in later:
            later.append(s)
    fresh = [s for s in later if s not in current]
    this_epoch = upcoming[:len(upcoming) - len(counts)]
    assert sorted(upcoming[len(this_epoch):]) == list(range(len(counts)))
    assert set(this_epoch) == set(fresh) | (current - now)
    fresh_part = [s for s in this_epoch if s not in current]
    assert [block_of[s] for s in fresh_part] == [block_of[s] for s in fresh]
    assert now & current and current == set(sampler.blocks(0)[max(block_of[s] for s in now)])
