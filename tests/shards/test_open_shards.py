import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.formats.shards._layout import ShardFile
from dataset_kit.shards._open_shards import OpenShards
from tests.shards.conftest import COLUMNS, write


class Recorded(ShardFile):
    """A real shard file that remembers whether it was closed."""

    closed = False

    def close(self):
        self.closed = True
        super().close()


class Opener:
    """Opens the real shards of a written set, keeping every file it made."""

    def __init__(self, manifest, folder, in_memory=()):
        self.manifest, self.folder, self.in_memory = manifest, folder, set(in_memory)
        self.made = []

    def __call__(self, shard):
        info = self.manifest.shards[shard]
        path = str(self.folder / info.name)
        data = open(path, "rb").read() if shard in self.in_memory else None
        self.made.append(Recorded(path, info.samples, len(COLUMNS), False, data=data))
        return self.made[-1]

    def published(self, shard):
        self.in_memory.discard(shard)
        return self(shard)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("set")
    return write(folder, n=60, shard_size=1000), folder


def readable(file):
    return len(file.columns_of(np.array([0]))[0]) == 1


def test_a_shard_that_leaves_the_table_stays_open_until_its_reader_lets_go(written):
    opener = Opener(*written)
    shards = OpenShards(1, opener, lambda shard: None)
    first = shards.hold(0)
    with shards.hold(1) as other:  # the table holds one: shard 0 is let go
        assert readable(other)
    assert not first.file.closed and readable(first.file)
    shards.release(first)
    assert first.file.closed


def test_idle_shards_beyond_the_limit_are_closed_least_recently_used_first(written):
    opener = Opener(*written)
    shards = OpenShards(2, opener, lambda shard: None)
    for shard in (0, 1, 0, 2):
        with shards.hold(shard):
            pass
    assert [f.closed for f in opener.made] == [False, True, False]
    assert len(shards) == 2
    assert shards.close() == 2 and all(f.closed for f in opener.made)


def test_close_while_a_thread_reads_leaves_that_shard_open_until_it_is_done(written):
    opener = Opener(*written)
    shards = OpenShards(2, opener, lambda shard: None)
    with shards.hold(0) as file:
        assert shards.close() == 1
        assert not file.closed and readable(file)
    assert file.closed


def test_a_shard_read_from_memory_is_swapped_for_the_published_file(written):
    opener = Opener(*written, in_memory={0})
    shards = OpenShards(2, opener, opener.published)
    held = shards.hold(0)
    assert held.file.in_memory
    with shards.hold(0) as mapped:  # published now: mapped, the memory let go
        assert not mapped.in_memory and readable(mapped)
    assert not held.file.closed and readable(held.file)
    shards.release(held)
    assert held.file.closed
    with shards.hold(0) as again:
        assert again is mapped


def test_the_limit_is_checked(written):
    with pytest.raises(ValueError, match="open_shards"):
        OpenShards(0, Opener(*written), lambda shard: None)


@settings(max_examples=60, deadline=None)
@given(limit=st.integers(1, 3), steps=st.lists(st.tuples(st.booleans(), st.integers(0, 4)),
                                               max_size=40))
def test_no_shard_is_closed_while_held_and_idle_ones_stay_within_the_limit(written, limit,
                                                                           steps):
    opener = Opener(*written)
    shards = OpenShards(limit, opener, lambda shard: None)
    held = []
    for take, number in steps:
        if take or not held:
            held.append(shards.hold(number))
        else:
            shards.release(held.pop(number % len(held)))
        assert not any(h.file.closed for h in held)
        in_use = {id(h.file) for h in held}
        idle = [f for f in opener.made if not f.closed and id(f) not in in_use]
        assert len(idle) <= limit
    for h in held:
        shards.release(h)
    shards.close()
    assert all(f.closed for f in opener.made)


def test_threads_reading_through_a_table_of_one_never_meet_a_closed_shard(written):
    opener = Opener(*written)
    shards = OpenShards(1, opener, lambda shard: None)
    count = len(written[0].shards)
    failures = []

    def read(seed):
        rng = np.random.default_rng(seed)
        try:
            for shard in rng.integers(0, count, 300).tolist():
                with shards.hold(shard) as file:
                    assert readable(file)
        except Exception as error:  # noqa: BLE001 - reported by the test thread
            failures.append(error)

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert len(shards) == 1
    shards.close()
    assert all(f.closed for f in opener.made)
