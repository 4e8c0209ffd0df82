"""dataset_kit.torch.DataLoader yields torch.utils.data.DataLoader's batches, and its errors."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from tests.torch.helpers import Bulk, Mixed, Uniform, WithGetItems, assert_same_batches, torch

from torch.utils.data import (  # noqa: E402
    BatchSampler,
    DataLoader as TorchDataLoader,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

from dataset_kit.torch import DataLoader  # noqa: E402


def _gen(seed: int = 7):
    return torch.Generator().manual_seed(seed)


def _samplers(n: int) -> dict:
    """Each case builds fresh (sampler, batch_sampler, loader kwargs) for one loader."""
    return {
        "sequential": lambda: dict(batch_size=5),
        "shuffle": lambda: dict(batch_size=5, shuffle=True, generator=_gen()),
        "shuffle_drop_last": lambda: dict(batch_size=6, shuffle=True, drop_last=True,
                                          generator=_gen()),
        "random_replacement": lambda: dict(batch_size=4, sampler=RandomSampler(
            range(n), replacement=True, num_samples=23, generator=_gen(1))),
        "random_num_samples": lambda: dict(batch_size=4, sampler=RandomSampler(
            range(n), num_samples=2 * n + 3, generator=_gen(2))),
        "subset_random": lambda: dict(batch_size=3, sampler=SubsetRandomSampler(
            list(range(0, n, 2)), generator=_gen(3))),
        "weighted": lambda: dict(batch_size=4, sampler=WeightedRandomSampler(
            [1.0 + i % 3 for i in range(n)], 30, generator=_gen(4))),
        "batch_sampler": lambda: dict(batch_sampler=BatchSampler(
            RandomSampler(range(n), generator=_gen(5)), 6, drop_last=False)),
        "distributed": lambda: dict(batch_size=4, sampler=DistributedSampler(
            range(n), num_replicas=3, rank=1, shuffle=True, seed=11)),
        "no_auto_batching": lambda: dict(batch_size=None, shuffle=True, generator=_gen()),
        "loader_generator_and_sampler": lambda: dict(batch_size=5, generator=_gen(9),
                                                     sampler=RandomSampler(range(n))),
        "list_of_batches": lambda: dict(batch_sampler=[[3, 1], [0], [2, 4, 5]]),
    }


CASES = sorted(_samplers(37))


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("case", CASES)
def test_batches_equal_pytorchs_for_the_same_sampler_and_seed(case, num_workers):
    dataset = Mixed(37)
    make = _samplers(len(dataset))[case]
    torch.manual_seed(123)  # samplers without a generator draw from the global one
    ours = DataLoader(dataset, num_workers=num_workers, **make())
    theirs = TorchDataLoader(dataset, num_workers=num_workers, **make())
    try:
        for epoch in range(2):
            for loader in (ours, theirs):
                if isinstance(loader.sampler, DistributedSampler):
                    loader.sampler.set_epoch(epoch)
            torch.manual_seed(1000 + epoch)
            mine = list(ours)
            torch.manual_seed(1000 + epoch)
            assert_same_batches(mine, list(theirs))
            assert len(ours) == len(theirs) == len(mine)
    finally:
        ours.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_uniform_numpy_examples_arrive_as_pytorchs_tensors(num_workers):
    dataset = Uniform(41, (3, 8, 8))
    ours = DataLoader(dataset, batch_size=8, shuffle=True, generator=_gen(),
                      num_workers=num_workers)
    theirs = TorchDataLoader(Uniform(41, (3, 8, 8)), batch_size=8, shuffle=True,
                             generator=_gen(), num_workers=0)
    try:
        mine, reference = list(ours), list(theirs)
        # example_rng() draws differ outside our engine; compare what is not noise.
        assert [[b[0].shape, b[0].dtype, b[1].dtype] for b in mine] == \
            [[b[0].shape, b[0].dtype, b[1].dtype] for b in reference]
        assert all(torch.equal(a[1], b[1]) for a, b in zip(mine, reference))
        assert all(torch.equal(a[0].floor(), b[0].floor()) for a, b in zip(mine, reference))
    finally:
        ours.close()


def test_getitems_is_asked_for_whole_batches():
    ours = list(DataLoader(WithGetItems(10), batch_size=4))
    theirs = list(TorchDataLoader(WithGetItems(10), batch_size=4))
    assert_same_batches(ours, theirs)
    assert ours[0][:, 1].tolist() == [4, 4, 4, 4] and ours[-1][:, 1].tolist() == [2, 2]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_custom_collate_fn_runs_on_the_list_of_examples(num_workers):
    loader = DataLoader(Mixed(9), batch_size=4, num_workers=num_workers,
                        collate_fn=_count_examples)
    try:
        assert list(loader) == [4, 4, 1]
    finally:
        loader.close()


def _count_examples(examples: list) -> int:
    assert type(examples) is list
    return len(examples)


def test_each_iter_is_one_fresh_epoch_even_after_a_break():
    # The order after a break is not compared with PyTorch's: its RandomSampler
    # draws once more only when an epoch runs to its end, and how far it ran
    # depends on its prefetching (a documented deviation).
    loader = DataLoader(list(range(10)), batch_size=3, shuffle=True, generator=_gen())
    first = next(iter(loader))
    epoch = list(loader)
    assert len(first) == 3 and len(epoch) == len(loader) == 4
    assert sorted(torch.cat(epoch).tolist()) == list(range(10))


def test_an_object_neither_map_style_nor_iterable_is_a_type_error():
    with pytest.raises(TypeError, match="map-style .* or an IterableDataset, got object"):
        DataLoader(object())


@pytest.mark.parametrize("kwargs", [dict(shuffle=True), dict(sampler=[0, 1]),
                                    dict(batch_sampler=[[0]])])
def test_an_iterable_dataset_with_a_sampler_or_shuffle_is_pytorchs_value_error(kwargs):
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError) as theirs:
        TorchDataLoader(Stream(), **kwargs)
    with pytest.raises(ValueError) as ours:
        DataLoader(Stream(), **kwargs)
    assert str(ours.value) == str(theirs.value)


class BulkKeys(torch.utils.data.Sampler):
    """Yields lists of indices, each one key for the dataset (PyTorch's bulk loading)."""

    def __init__(self, n: int, size: int, kind: type = list) -> None:
        self.n, self.size, self.kind = n, size, kind

    def __iter__(self):
        for x in torch.randperm(self.n, generator=_gen(3)).split(self.size):
            yield self.kind(x.tolist())

    def __len__(self) -> int:
        return -(-self.n // self.size)


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("kind", [list, tuple])
def test_a_sampler_yielding_lists_of_indices_passes_each_list_whole(num_workers, kind):
    dataset = Bulk(35)
    kwargs = dict(batch_size=None, sampler=BulkKeys(35, 4, kind), num_workers=num_workers)
    loader = DataLoader(dataset, **kwargs)
    try:
        ours = [list(b) for b in loader]
    finally:
        loader.close()
    theirs = [list(b) for b in TorchDataLoader(dataset, **kwargs)]
    assert ours == theirs and len(ours) == 9
    assert all(b[0] == kind.__name__ for b in ours)  # the key arrived as its own type


def test_a_sampler_mixing_integers_and_lists_is_a_value_error():
    with pytest.raises(ValueError, match="keys of one type"):
        DataLoader(Bulk(35), batch_size=None, sampler=[[0, 1], 2])


CONFLICTS = [
    (dict(num_workers=-1), "num_workers option should be non-negative"),
    (dict(timeout=-1), "timeout option should be non-negative"),
    (dict(prefetch_factor=2), "prefetch_factor option could only be specified in multiproc"),
    (dict(num_workers=1, prefetch_factor=-1), "prefetch_factor option should be non-negative"),
    (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
    (dict(sampler=SequentialSampler(range(4)), shuffle=True),
     "sampler option is mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
    (dict(multiprocessing_context="spawn"), "can only be used with multi-process loading"),
    (dict(num_workers=1, multiprocessing_context="bad"), "should specify a valid start method"),
]


@pytest.mark.parametrize("kwargs,message", CONFLICTS)
def test_conflicting_arguments_raise_pytorchs_errors(kwargs, message):
    with pytest.raises(ValueError) as theirs:
        TorchDataLoader(list(range(4)), **kwargs)
    with pytest.raises(ValueError) as ours:
        DataLoader(list(range(4)), **kwargs)
    assert str(ours.value) == str(theirs.value)
    assert message in str(ours.value)


def test_a_context_that_is_not_one_is_pytorchs_type_error():
    with pytest.raises(TypeError) as theirs:
        TorchDataLoader(list(range(4)), num_workers=1, multiprocessing_context=object)
    with pytest.raises(TypeError) as ours:
        DataLoader(list(range(4)), num_workers=1, multiprocessing_context=object)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("attr", ["batch_size", "sampler", "batch_sampler", "drop_last",
                                  "dataset", "persistent_workers"])
def test_the_batching_cannot_be_changed_after_construction(attr):
    loader = DataLoader(list(range(4)), batch_size=2)
    with pytest.raises(ValueError, match=f"{attr} attribute should not be set after DataLoader"):
        setattr(loader, attr, {})
    assert loader._auto_collation and not DataLoader([1], batch_size=None)._auto_collation


def test_explicit_default_collate_and_a_multiprocessing_context_are_accepted():
    import multiprocessing

    loader = DataLoader(Mixed(6), batch_size=3, num_workers=1, timeout=30,
                        collate_fn=torch.utils.data.default_collate,
                        multiprocessing_context=multiprocessing.get_context("spawn"))
    try:
        assert_same_batches(list(loader), list(TorchDataLoader(Mixed(6), batch_size=3)))
    finally:
        loader.close()


def test_it_is_generic_like_pytorchs():
    assert DataLoader[list] is not None  # annotations such as DataLoader[list[Tensor]]


def test_more_workers_than_cpus_is_pytorchs_warning():
    with pytest.warns(UserWarning, match="excessive worker creation might get DataLoader"):
        DataLoader(list(range(4)), num_workers=1000)


def test_pin_memory_without_an_accelerator_warns_like_pytorch():
    if torch.accelerator.is_available():
        pytest.skip("this machine has an accelerator; the warning is for CPU-only machines")
    loader = DataLoader(Mixed(4), batch_size=2, pin_memory=True)
    with pytest.warns(UserWarning, match="no accelerator is found"):
        assert len(list(loader)) == 2


def test_the_converter_pickles_for_spawned_workers():
    loader = DataLoader(Mixed(4), batch_size=2)
    assert pickle.loads(pickle.dumps(loader._engine.dataset)) is not None
    np.testing.assert_array_equal(next(iter(loader))[1].numpy(), [0, 1])


def _mapping_of(address: int) -> str:
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high:
                return fields[5] if len(fields) > 5 else ""
    return ""


def test_worker_batches_are_tensors_over_the_shared_memory_they_arrived_in():
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs Linux's /proc/self/maps to see where a tensor's memory lies")
    loader = DataLoader(Uniform(32, (64, 64)), batch_size=8, num_workers=2)
    try:
        for images, labels in loader:
            assert _mapping_of(images.data_ptr()).startswith("/dev/shm/")
            assert images.dtype == torch.float32 and labels.dtype == torch.int64
    finally:
        loader.close()


def test_the_main_processs_conversion_to_tensors_is_a_profile_phase_apart_from_the_wait():
    import dataset_kit

    loader = DataLoader(Uniform(12, (3, 4, 4)), batch_size=4, num_workers=2)
    try:
        with dataset_kit.profile(loader) as p:
            batches = list(loader)
    finally:
        loader.close()
    assert len(batches) == 3
    assert p.summary()["marked"]["main"]["converter"]["spans"] == 3
    waits = [(b["start"], b["start"] + b["wait"]) for b in p.to_json()["batches"]]
    for span in p.to_json()["main_spans"]:  # after its batch's wait, not inside it
        assert not any(a < span["start"] < b for a, b in waits)
