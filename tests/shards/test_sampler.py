import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.shards import Manifest, ManifestChangedError, ShardInfo, ShardOrderSampler


def manifest_of(counts):
    return Manifest({"y": "int"}, None, tuple(
        ShardInfo(f"shard.{i:05d}.dks", n, 100 * n, f"{i:064x}") for i, n in enumerate(counts)))


counts_st = st.lists(st.integers(1, 20), min_size=1, max_size=12)


@given(counts_st, st.integers(1, 6), st.integers(0, 2**63 - 1), st.integers(0, 50))
def test_every_epoch_is_a_permutation_and_a_pure_function_of_seed_and_epoch(counts, block,
                                                                            seed, epoch):
    manifest = manifest_of(counts)
    order = ShardOrderSampler(manifest, block, seed).epoch_order(epoch, manifest.samples)
    assert sorted(order.tolist()) == list(range(manifest.samples))
    again = ShardOrderSampler(manifest, block, seed).epoch_order(epoch, manifest.samples)
    assert order.tolist() == again.tolist()


@given(counts_st, st.integers(1, 6), st.integers(0, 1000))
def test_each_block_of_the_order_touches_at_most_block_shards(counts, block, seed):
    manifest = manifest_of(counts)
    sampler = ShardOrderSampler(manifest, block, seed)
    order = sampler.epoch_order(0, manifest.samples)
    shards = sampler.shards_of(order)
    position = 0
    while position < len(order):
        touched = set()
        # A block holds the samples of `block` whole shards.
        while position < len(order) and (len(touched) < block or shards[position] in touched):
            touched.add(int(shards[position]))
            position += 1
        assert len(touched) <= block


def test_a_block_of_one_shard_reads_each_shard_whole_before_the_next():
    manifest = manifest_of([5, 5, 5, 5])
    sampler = ShardOrderSampler(manifest, block_shards=1, seed=0)
    shards = sampler.shards_of(sampler.epoch_order(0, 20))
    runs = [int(s) for i, s in enumerate(shards) if i == 0 or s != shards[i - 1]]
    assert sorted(runs) == [0, 1, 2, 3]


def test_epochs_differ_and_chainer_calls_step_through_them():
    manifest = manifest_of([10, 10, 10])
    sampler = ShardOrderSampler(manifest, 2, seed=4)
    first = sampler(np.arange(30), 0)
    assert first.tolist() == sampler.epoch_order(1, 30).tolist()
    assert first.tolist() != sampler.epoch_order(0, 30).tolist()


def test_state_round_trips_and_a_changed_manifest_is_named():
    sampler = ShardOrderSampler(manifest_of([3, 4]), 2, seed=7)
    state = sampler.state_dict()
    other = ShardOrderSampler(manifest_of([3, 4]), 1, seed=1)
    other.load_state_dict(state)
    assert (other.seed, other.block_shards) == (7, 2)
    changed = ShardOrderSampler(manifest_of([3, 5]), 2, seed=7)
    with pytest.raises(ManifestChangedError, match=r"samples 7 -> 8"):
        changed.load_state_dict(state)
    assert changed.seed == 7


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="StreamingDataset or a Manifest"):
        ShardOrderSampler([1, 2, 3])
    with pytest.raises(ValueError, match="block_shards"):
        ShardOrderSampler(manifest_of([3]), 0)
    with pytest.raises(ValueError, match="built for 3 samples, but the dataset has 4"):
        ShardOrderSampler(manifest_of([3]), 1, 0).epoch_order(0, 4)
