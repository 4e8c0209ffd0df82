"""Last-batch policies: pinned for every iterator kind, and resumable anywhere."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.iterators import MultiprocessIterator, MultithreadIterator, SerialIterator

POLICIES = ["keep", "discard", "rollover", "pad"]


def serial(*a, **k):
    return SerialIterator(*a, **k)


def threads(*a, **k):
    return MultithreadIterator(*a, n_threads=2, **k)


def processes(*a, **k):
    return MultiprocessIterator(*a, n_processes=2, **k)


def run(make, n, b, steps, **kwargs):
    """``steps`` batches as ``(indices, is_new_epoch, last_pad)``, and the iterator's state."""
    it = make(np.arange(n), b, **kwargs)
    out = []
    try:
        while len(out) < steps:
            try:
                batch = next(it)
            except StopIteration:
                break
            out.append((list(map(int, batch)), it.is_new_epoch, it.last_pad))
        return out, it.state_dict()
    finally:
        it.finalize()


def epochs_of(batches):
    """Split a batch stream at the batches that end an epoch."""
    epochs, current = [], []
    for indices, ends, pad in batches:
        current.append((indices, pad))
        if ends:
            epochs.append(current)
            current = []
    return epochs


sizes = dict(n=st.integers(1, 23), b=st.integers(1, 9), seed=st.integers(0, 2**31))


@given(**sizes)
def test_keep_visits_every_example_once_per_epoch_ending_short(n, b, seed):
    for epoch in epochs_of(run(serial, n, b, 4 * n, seed=seed, last_batch="keep")[0])[:3]:
        flat = [i for indices, _ in epoch for i in indices]
        assert sorted(flat) == list(range(n))
        assert [len(ix) for ix, _ in epoch[:-1]] == [b] * (len(epoch) - 1)


@given(**sizes)
def test_discard_drops_only_the_tail(n, b, seed):
    batches, _ = run(serial, n, b, 40, seed=seed, last_batch="discard", repeat=False)
    assert all(len(ix) == b for ix, _, _ in batches)
    assert len(batches) == n // b
    keep, _ = run(serial, n, b, 40, seed=seed, last_batch="keep", repeat=False)
    assert [ix for ix, _, _ in batches] == [ix for ix, _, _ in keep[:n // b]]


@given(**sizes)
def test_rollover_keeps_every_batch_full_and_every_example_once_per_epoch(n, b, seed):
    # Batches larger than the epoch gather several epochs' examples (Gluon's rollover).
    batches, _ = run(serial, n, b, 5 * n, seed=seed, last_batch="rollover")
    assert all(len(ix) == b for ix, _, _ in batches)
    stream = [i for ix, _, _ in batches for i in ix]
    chainer, _ = run(serial, n, b, 5 * n, seed=seed)  # Chainer's fill: the same stream
    assert stream == [i for ix, _, _ in chainer for i in ix]
    for k in range(len(stream) // n):
        assert sorted(stream[k * n:(k + 1) * n]) == list(range(n))
    for epoch in epochs_of(batches)[1:3] if b <= n else []:
        assert len(epoch) in ((n + n % b) // b, n // b, -(-n // b))


@given(**sizes)
def test_discard_with_batches_larger_than_the_epoch_is_refused_only_when_repeating(n, b, seed):
    if b <= n:
        return
    # Every epoch is empty: next() would never have a batch to return.
    with pytest.raises(ValueError, match="batch_size <= the epoch size"):
        SerialIterator(np.arange(n), b, seed=seed, last_batch="discard")
    batches, _ = run(serial, n, b, 3, seed=seed, last_batch="discard", repeat=False)
    assert batches == []


@given(**sizes)
def test_pad_fills_the_last_batch_from_the_start_of_the_order_and_counts_it(n, b, seed):
    batches, _ = run(serial, n, b, 40, seed=seed, last_batch="pad", repeat=False)
    order = [i for ix, _, _ in batches for i in ix][:n]
    assert sorted(order) == list(range(n))
    assert all(len(ix) == b for ix, _, _ in batches)
    *full, (last, ends, pad) = batches
    assert ends and pad == (-n) % b and all(p == 0 for _, _, p in full)
    assert last[b - pad:] == [order[k % n] for k in range(pad)]


@settings(max_examples=25)
@given(n=st.integers(1, 17), b=st.integers(1, 6), seed=st.integers(0, 2**31),
       policy=st.sampled_from(POLICIES), repeat=st.booleans(), data=st.data())
def test_resume_anywhere_equals_no_interruption_for_every_kind(n, b, seed, policy, repeat,
                                                               data):
    if repeat and policy in ("discard", "rollover") and b > n:
        return
    total = 3 * (n // b + 2)
    kwargs = dict(seed=seed, last_batch=policy, repeat=repeat)
    expected, _ = run(serial, n, b, total, **kwargs)
    k = data.draw(st.integers(0, len(expected)))
    make = data.draw(st.sampled_from([serial, threads, processes]))
    first, state = run(make, n, b, k, **kwargs)
    assert first == expected[:k]
    resumed = data.draw(st.sampled_from([serial, threads, processes]))(
        np.arange(n), b, shuffle=True, last_batch=policy, repeat=repeat)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    rest = []
    try:
        while k + len(rest) < len(expected):
            batch = next(resumed)
            rest.append((list(map(int, batch)), resumed.is_new_epoch, resumed.last_pad))
        if not repeat:
            with pytest.raises(StopIteration):
                next(resumed)
    finally:
        resumed.finalize()
    assert first + rest == expected


def test_an_unknown_policy_is_named():
    with pytest.raises(ValueError, match="last_batch must be one of .* got 'drop'"):
        SerialIterator([1, 2], 1, last_batch="drop")


def test_chainer_style_repeating_iterators_still_refuse_epochs_without_a_batch():
    # They promise a batch on every next(): an empty epoch would leave them nothing to give.
    with pytest.raises(ValueError, match="no epoch would yield a batch"):
        SerialIterator(np.arange(3), 5, last_batch="discard")
