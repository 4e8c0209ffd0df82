"""Gluon's Dataset base: a subclass defines __getitem__ and __len__, and gets Gluon's methods."""

import numpy as np
import pytest

from dataset_kit import DatasetMixin
from dataset_kit.datasets import SimpleDataset
from dataset_kit.iterators import SerialIterator
from dataset_kit.loader import DataLoader, Dataset, SequentialSampler

WORKERS = [dict(num_workers=0), dict(num_workers=2, thread_pool=True), dict(num_workers=2)]


class Squares(Dataset):
    """Written for mxnet.gluon.data.Dataset, with only its base class changed."""

    def __len__(self):
        return 10

    def __getitem__(self, idx):
        return np.full((2,), idx * idx, dtype=np.int64), idx


class PortedOntoMixin(DatasetMixin):
    """The same class ported onto DatasetMixin (NotImplementedError before)."""

    def __len__(self):
        return 4

    def __getitem__(self, idx):
        return idx + 100


def add_one(x, label):
    return x + 1, label


@pytest.mark.parametrize("workers", WORKERS, ids=["serial", "threads", "processes"])
def test_a_gluon_subclass_is_loaded_through_its_own_getitem(workers):
    with DataLoader(Squares(), 4, **workers) as loader:
        batches = list(loader)
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[2][0].tolist() == [[64, 64], [81, 81]]


def test_a_gluon_subclass_gets_gluons_dataset_methods():
    ds = Squares()
    assert ds.transform(add_one)[3][0].tolist() == [10, 10]
    assert ds.transform(add_one, lazy=False)[3][1] == 3
    assert ds.transform_first(lambda x: x.sum())[2] == (8, 2)
    assert [label for _, label in ds.filter(lambda example: example[1] % 3 == 0)] == [0, 3, 6, 9]
    assert [len(ds.shard(4, k)) for k in range(4)] == [3, 3, 2, 2]
    assert [label for _, label in ds.shard(4, 1)] == [3, 4, 5]
    assert len(ds.take(3)) == 3 and len(ds.take(None)) == 10 and len(ds.take(99)) == 10
    assert [label for _, label in ds.sample(SequentialSampler(3, 7))] == [7, 8, 9]


def test_a_gluon_class_ported_onto_datasetmixin_is_asked_through_getitem():
    ds = PortedOntoMixin()
    assert next(SerialIterator(ds, 4, shuffle=False)) == [100, 101, 102, 103]
    assert list(DataLoader(ds, 3))[1].tolist() == [103]
    # Gluon's views belong to Gluon's Dataset, not to Chainer's base class:
    # a class ported onto DatasetMixin reaches them through SimpleDataset.
    assert not hasattr(ds, "take")
    assert SimpleDataset(ds).take(2)[1] == 101


def test_a_dataset_that_defines_neither_getitem_nor_get_example_says_so():
    class Nothing(DatasetMixin):
        def __len__(self):
            return 3

    with pytest.raises(NotImplementedError, match="Nothing must define get_example"):
        Nothing()[0]
