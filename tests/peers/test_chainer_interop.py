"""Snapshots move between Chainer 7.8.1 and dataset_kit, both ways, mid-epoch.

Runs where Chainer is installed (it needs numpy<2). CI installs Chainer
7.8.1 into a separate environment for tests/peers; see .ci/run.
"""

import numpy as np
import pytest

pytest.importorskip("chainer", reason="Chainer 7.8.1 is not installed here "
                    "(CI runs tests/peers in a numpy<2 environment that has it)")

import chainer.iterators  # noqa: E402
import chainer.serializers  # noqa: E402

import dataset_kit  # noqa: E402
from dataset_kit import iterators  # noqa: E402

N, BATCH, DONE = 23, 4, 3  # 3 batches into an epoch of 6


def chainer_kind(kind, dataset, **kwargs):
    if kind == "serial":
        return chainer.iterators.SerialIterator(dataset, BATCH, **kwargs)
    return chainer.iterators.MultiprocessIterator(dataset, BATCH, n_processes=2, **kwargs)


def our_kind(kind, dataset, **kwargs):
    if kind == "serial":
        return iterators.SerialIterator(dataset, BATCH, **kwargs)
    return iterators.MultiprocessIterator(dataset, BATCH, n_processes=2, **kwargs)


def rest_of_epoch(it):
    """The remaining batches of the epoch in progress, cut at the epoch's end.

    The batch that crosses into the next epoch is completed from the next
    epoch's order, which each library draws from its own generator.
    """
    left = N - it.current_position
    batches = []
    while left > 0:
        batch = [int(x) for x in it.next()][:left]
        left -= len(batch)
        batches.append(batch)
    return batches


# Chainer 7.8.1's MultiprocessIterator cannot serialize itself without a shuffle
# (its order is None and serialize() calls order.copy()), so that pairing is left out.
CASES = [("serial", True), ("serial", False), ("multiprocess", True)]


@pytest.mark.parametrize("kind, shuffle", CASES)
@pytest.mark.parametrize("loader", ["chainer", "dataset_kit"])
def test_a_chainer_snapshot_resumes_in_dataset_kit(tmp_path, kind, shuffle, loader):
    data = list(range(N))
    theirs = chainer_kind(kind, data, shuffle=shuffle)
    for _ in range(DONE):
        theirs.next()
    path = str(tmp_path / "snapshot.npz")
    chainer.serializers.save_npz(path, theirs)
    expected = rest_of_epoch(theirs)
    ours = our_kind(kind, data, shuffle=shuffle, seed=7)
    load = chainer.serializers.load_npz if loader == "chainer" else dataset_kit.serializers.load_npz
    load(path, ours)
    assert ours.epoch == 0 and ours.current_position == DONE * BATCH
    assert rest_of_epoch(ours) == expected
    for it in (theirs, ours):
        it.finalize()


@pytest.mark.parametrize("kind, shuffle", CASES)
@pytest.mark.parametrize("saver", ["chainer", "dataset_kit"])
def test_a_dataset_kit_snapshot_resumes_in_chainer(tmp_path, kind, shuffle, saver):
    data = list(range(N))
    ours = our_kind(kind, data, shuffle=shuffle, seed=3)
    for _ in range(DONE):
        ours.next()
    path = str(tmp_path / "snapshot.npz")
    save = chainer.serializers.save_npz if saver == "chainer" else dataset_kit.serializers.save_npz
    save(path, ours)
    expected = rest_of_epoch(ours)
    theirs = chainer_kind(kind, data, shuffle=shuffle)
    chainer.serializers.load_npz(path, theirs)
    assert theirs.epoch == 0 and theirs.current_position == DONE * BATCH
    assert rest_of_epoch(theirs) == expected
    for it in (theirs, ours):
        it.finalize()


def test_a_trainer_style_snapshot_with_a_path_prefix_resumes(tmp_path):
    data = list(range(N))
    theirs = chainer.iterators.SerialIterator(data, BATCH)
    for _ in range(DONE):
        theirs.next()
    target = {}
    chainer.serializers.DictionarySerializer(target)["updater"]["iterator:main"].save(theirs)
    np.savez(tmp_path / "snapshot.npz", **target)
    expected = rest_of_epoch(theirs)
    ours = iterators.SerialIterator(data, BATCH)
    with np.load(tmp_path / "snapshot.npz") as npz:
        ours.serialize(chainer.serializers.NpzDeserializer(npz, path="updater/iterator:main/"))
    assert rest_of_epoch(ours) == expected


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_splits_equal_chainers(seed):
    data = list(range(17))
    for ours, theirs in [
        (dataset_kit.datasets.split_dataset_random(data, 5, seed),
         chainer.datasets.split_dataset_random(data, 5, seed)),
        (dataset_kit.datasets.split_dataset_n_random(data, 3, seed),
         chainer.datasets.split_dataset_n_random(data, 3, seed)),
        (dataset_kit.datasets.split_dataset_n(data, 4),
         chainer.datasets.split_dataset_n(data, 4)),
    ]:
        assert [list(s) for s in ours] == [list(s) for s in theirs]
    for ours, theirs in [
        (dataset_kit.datasets.get_cross_validation_datasets_random(data, 4, seed),
         chainer.datasets.get_cross_validation_datasets_random(data, 4, seed)),
        (dataset_kit.datasets.get_cross_validation_datasets(data, 5, order=data[::-1]),
         chainer.datasets.get_cross_validation_datasets(data, 5, order=data[::-1])),
    ]:
        assert [(list(a), list(b)) for a, b in ours] == [(list(a), list(b)) for a, b in theirs]


@pytest.mark.parametrize("kwargs", [dict(), dict(ndim=2, scale=3.0),
                                    dict(ndim=3, rgb_format=True, withlabel=False),
                                    dict(dtype=np.float64, label_dtype=np.int64)])
def test_mnist_preprocessing_equals_chainers(kwargs):
    from chainer.datasets._mnist_helper import preprocess_mnist

    from dataset_kit.datasets import mnist

    rng = np.random.default_rng(0)
    raw = {"x": rng.integers(0, 256, (6, 784), dtype=np.uint8),
           "y": rng.integers(0, 10, 6, dtype=np.uint8)}
    options = {**dict(withlabel=True, ndim=1, scale=1.0, dtype=np.float32,
                      label_dtype=np.int32, rgb_format=False), **kwargs}
    theirs = preprocess_mnist(raw, options["withlabel"], options["ndim"], options["scale"],
                              options["dtype"], options["label_dtype"], options["rgb_format"])
    ours = mnist._preprocess(raw, **options)
    if options["withlabel"]:
        for k in range(6):
            assert np.array_equal(ours[k][0], theirs[k][0]) and ours[k][1] == theirs[k][1]
            assert ours[k][0].dtype == theirs[k][0].dtype
    else:
        assert np.array_equal(ours, theirs) and ours.dtype == theirs.dtype
