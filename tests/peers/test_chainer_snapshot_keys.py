"""A dataset_kit snapshot uses the keys of Chainer's iterator of the same kind, and loads into it.

Chainer 7.8.1's SerialIterator and MultiprocessIterator keep their order under
``order``; its MultithreadIterator under ``_order``, always (None when not
shuffled). Runs where Chainer is installed (CI's numpy<2 environment).
"""

from __future__ import annotations

import pytest

pytest.importorskip("chainer", reason="Chainer 7.8.1 is not installed here "
                    "(CI runs tests/peers in a numpy<2 environment that has it)")

import chainer.iterators  # noqa: E402
import chainer.serializers  # noqa: E402

import dataset_kit.serializers  # noqa: E402
from dataset_kit import iterators  # noqa: E402

N, BATCH, DONE = 23, 4, 3

KINDS = {
    "serial": (chainer.iterators.SerialIterator, iterators.SerialIterator, {}),
    "multithread": (chainer.iterators.MultithreadIterator, iterators.MultithreadIterator,
                    {"n_threads": 2}),
    "multiprocess": (chainer.iterators.MultiprocessIterator, iterators.MultiprocessIterator,
                     {"n_processes": 2}),
}
# Chainer's MultiprocessIterator cannot serialize itself without a shuffle
# (it calls order.copy() on None), so only its shuffled form is compared.
CASES = [("serial", True), ("serial", False), ("multithread", True), ("multithread", False),
         ("multiprocess", True)]


def make(library: int, kind: str, shuffle: bool, **seed):
    cls, options = KINDS[kind][library], KINDS[kind][2]
    return cls(list(range(N)), BATCH, shuffle=shuffle, **options, **seed)


def chainer_keys(kind: str, shuffle: bool) -> set:
    it = make(0, kind, shuffle)
    try:
        for _ in range(DONE):
            it.next()
        target: dict = {}
        it.serialize(chainer.serializers.DictionarySerializer(target))
        return set(target)
    finally:
        it.finalize()


def following(it, shuffle: bool) -> list:
    """The next batches: shuffled, to the end of the epoch in progress (the batch that
    crosses it is cut there: each library draws the next epoch's order itself);
    unshuffled, through two more epochs."""
    if shuffle:
        left, batches = N - it.current_position, []
        while left > 0:
            batches.append([int(x) for x in it.next()][:left])
            left -= len(batches[-1])
        return batches
    return [[int(x) for x in it.next()] for _ in range(3 * N // BATCH)]


@pytest.mark.parametrize("kind, shuffle", CASES)
def test_our_keys_are_those_of_chainers_iterator_of_the_same_kind(kind, shuffle):
    ours = make(1, kind, shuffle, seed=3)
    try:
        for _ in range(DONE):
            ours.next()
        target: dict = {}
        ours.serialize(chainer.serializers.DictionarySerializer(target))
    finally:
        ours.finalize()
    assert set(target) - {"dataset_kit_state"} == chainer_keys(kind, shuffle)


SAVERS = {"chainer": chainer.serializers.save_npz, "dataset_kit": dataset_kit.serializers.save_npz}


@pytest.mark.parametrize("kind, shuffle", CASES)
@pytest.mark.parametrize("saver", sorted(SAVERS))
def test_our_snapshot_loads_into_chainers_iterator_of_the_same_kind(tmp_path, kind, shuffle,
                                                                    saver):
    if (kind, shuffle, saver) == ("multithread", False, "dataset_kit"):
        pytest.skip("dataset_kit's npz serializer stores no None, and Chainer's "
                    "MultithreadIterator requires its `_order` entry even when it is None; "
                    "see docs/porting_chainer.rst")
    ours = make(1, kind, shuffle, seed=3)
    theirs = make(0, kind, shuffle)
    try:
        for _ in range(DONE):
            ours.next()
        path = tmp_path / "snapshot.npz"
        SAVERS[saver](str(path), ours)
        chainer.serializers.load_npz(str(path), theirs)
        assert (theirs.epoch, theirs.current_position) == (0, DONE * BATCH)
        assert following(theirs, shuffle) == following(ours, shuffle)
    finally:
        ours.finalize()
        theirs.finalize()
