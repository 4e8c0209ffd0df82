"""dataset_kit.datasets.mix: exact weights over every prefix, pure indexing, re-weighting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.batch import ExampleBatch
from dataset_kit.datasets import Mixture, mix
from dataset_kit.datasets.mixture import exact_weights, source_counts, tijdeman_schedule
from dataset_kit.iterators import SerialIterator


def sources(*lengths: int) -> list[list[tuple[int, int]]]:
    """Sources whose examples say where they come from: ``(source, index)``."""
    return [[(s, i) for i in range(n)] for s, n in enumerate(lengths)]


def simulate(lengths: list[int], picks: list[int], stop: str) -> int:
    """Hugging Face's stopping loop (interleave_datasets with probabilities) over given draws."""
    current = [0] * len(lengths)
    exhausted = [False] * len(lengths)
    done = any if stop == "first_exhausted" else all
    for k, s in enumerate(picks):
        if done(exhausted):
            return k
        current[s] += 1
        if current[s] >= lengths[s]:
            exhausted[s], current[s] = True, 0
    return len(picks) if done(exhausted) else -1


weights_strategy = st.lists(st.integers(0, 20), min_size=1, max_size=6).filter(any)


@settings(max_examples=60, deadline=None)
@given(weights_strategy)
def test_every_prefix_is_within_one_of_the_weights(weights):
    shares = exact_weights(weights, len(weights))
    schedule = tijdeman_schedule(shares)
    total = sum(weights)
    counts = np.zeros(len(weights))
    for t, s in enumerate(np.tile(schedule, 3), start=1):
        counts[s] += 1
        assert np.abs(counts - t * np.array(weights) / total).max() < 1


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(0.001, 1.0), min_size=2, max_size=16))
def test_float_weights_stay_within_one_of_their_rounded_weights(weights):
    shares = exact_weights(weights, len(weights))
    schedule = tijdeman_schedule(shares)
    period = len(schedule)
    counts = np.stack([np.cumsum(schedule == i) for i in range(len(weights))], axis=1)
    steps = np.arange(1, period + 1)[:, None]
    assert np.abs(counts - steps * np.array(shares) / period).max() < 1
    assert np.abs(np.array(shares) / period - np.array(weights) / sum(weights)).max() < 1e-4


def test_grains_example_weights_are_exact_where_grain_is_off_by_more_than_one():
    m = mix(sources(100, 100, 100), [0.1, 0.2, 0.7], seed=0)
    assert m.period == 10 and m.shares == (1, 2, 7)
    for n in range(1, 50):
        counts = source_counts(m, n)
        assert max(abs(c - n * w) for c, w in zip(counts, (0.1, 0.2, 0.7))) < 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=4), st.data())
def test_the_length_is_hugging_faces_stop_over_the_same_draws(lengths, data):
    weights = data.draw(st.lists(st.integers(1, 5), min_size=len(lengths),
                                 max_size=len(lengths)))
    for stop in ("first_exhausted", "all_exhausted"):
        m = mix(sources(*lengths), weights, seed=1, stop=stop)
        picks = m.draws(np.arange(4 * sum(lengths) * sum(weights)))[0].tolist()
        assert len(m) == simulate(lengths, picks, stop)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.integers(0, 2**32))
def test_each_source_is_read_once_per_epoch_in_a_permutation(lengths, seed):
    m = mix(sources(*lengths), [1] * len(lengths), seed=seed, stop="never")
    seen: dict[int, list[int]] = {s: [] for s in range(len(lengths))}
    for s, i in m[np.arange(3 * sum(lengths))]:
        seen[s].append(i)
    for s, got in seen.items():
        n = lengths[s]
        for e in range(len(got) // n):
            assert sorted(got[e * n:(e + 1) * n]) == list(range(n))


def test_an_example_is_a_pure_function_of_seed_and_index():
    a = mix(sources(7, 30, 11), [3, 1, 2], seed=5, stop="all_exhausted")
    b = mix(sources(7, 30, 11), [3, 1, 2], seed=5, stop="all_exhausted")
    idx = np.random.default_rng(0).permutation(len(a))
    assert [b[int(i)] for i in idx] == a[idx]
    assert a[:] != mix(sources(7, 30, 11), [3, 1, 2], seed=6, stop="all_exhausted")[:]


def test_a_sources_order_does_not_depend_on_the_weights():
    def order_of(weights: list[int]) -> list[tuple[int, int]]:
        m = mix(sources(13, 13), weights, seed=3, stop="never")
        return [e for e in m[np.arange(200)] if e[0] == 0][:13]
    assert order_of([1, 1]) == order_of([1, 4]) == order_of([5, 1])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 150), st.lists(st.integers(1, 6), min_size=3, max_size=3))
def test_reweighting_at_a_checkpoint_continues_every_source_where_it_stopped(k, new):
    data = sources(20, 35, 50)
    old = mix(data, [1, 2, 3], seed=9, stop="never")
    before = old[np.arange(k)] if k else []
    state = old.state_at(k)
    again = mix(data, new, seed=9, stop="never", state=state)
    after = again[np.arange(200)]
    # Source by source, the draws continue the one stream each source has.
    whole = mix(data, [1, 0, 0], seed=9, stop="never"), \
        mix(data, [0, 1, 0], seed=9, stop="never"), mix(data, [0, 0, 1], seed=9, stop="never")
    for s in range(3):
        stream = [e for e in before if e[0] == s] + [e for e in after if e[0] == s]
        assert stream == whole[s][np.arange(len(stream))]


def test_reweighting_with_the_same_weights_keeps_the_stop_epoch():
    data = sources(10, 20)
    m = mix(data, [1, 1], seed=0, stop="first_exhausted")
    k = 7
    rest = mix(data, [1, 1], seed=0, stop="first_exhausted", state=m.state_at(k))
    firsts = {e[0] for e in m[:k]}
    assert firsts and len(rest) > 0
    # Source 0 ends its epoch in the continued mixture exactly when it would have.
    assert sum(e[0] == 0 for e in m[:]) == 10
    assert sum(e[0] == 0 for e in m[:k]) + sum(e[0] == 0 for e in rest[:]) == 10


def test_a_never_ending_mixture_answers_every_index():
    m = mix(sources(3, 4), [1, 1], seed=0, stop="never")
    assert len(m) == mix(sources(3, 4), [1, 1], seed=0, stop="all_exhausted").__len__()
    assert m[10**9][0] in (0, 1)
    assert len(m[np.array([10**6, 10**7])]) == 2
    with pytest.raises(IndexError):
        m[-10**9]


def test_a_zero_weight_leaves_its_source_out():
    m = mix(sources(5, 5, 5), [1, 0, 1], seed=0, stop="all_exhausted")
    assert {e[0] for e in m[:]} == {0, 2}


def test_the_state_is_a_few_integers_whatever_the_number_of_sources():
    import json
    for count in (3, 16, 1000):
        m = mix(sources(*([10] * count)), [1] * count, seed=0, stop="never")
        state = m.state_at(10**9)
        assert sum(m.consumed_at(10**9)) == 10**9
        assert len(json.dumps(state)) < 160, state


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=1, max_size=5).filter(any), st.integers(0, 300))
def test_consumed_at_counts_the_draws_of_each_source(weights, k):
    m = mix(sources(*([4] * len(weights))), weights, seed=0, stop="never")
    drawn = [e[0] for e in m[np.arange(k)]] if k else []
    assert m.consumed_at(k) == [drawn.count(s) for s in range(len(weights))]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 80), st.integers(0, 80), st.lists(st.integers(0, 5), min_size=3,
                                                          max_size=3).filter(any))
def test_a_state_of_a_reweighted_mixture_continues_every_source_again(k1, k2, third):
    data = sources(20, 35, 50)
    first = mix(data, [1, 2, 3], seed=9, stop="never")
    second = mix(data, [3, 1, 1], seed=9, stop="never", state=first.state_at(k1))
    state = second.state_at(k2)
    assert "start" in state or k1 == 0
    again = mix(data, third, seed=9, stop="never", state=state)
    assert list(again.start) == [a + b for a, b in zip(first.consumed_at(k1),
                                                       source_counts(second, k2))]


def test_an_iterator_over_a_mixture_resumes_exactly_for_any_worker_count():
    from dataset_kit.iterators import MultithreadIterator
    m = mix(sources(30, 50, 20), [2, 3, 1], seed=4, stop="all_exhausted")
    it = SerialIterator(m, 8, shuffle=False)
    for _ in range(5):
        next(it)
    state = it.state_dict()
    expected = [next(it) for _ in range(6)]
    other = MultithreadIterator(m, 8, shuffle=False, n_threads=3)
    other.load_state_dict(state)
    try:
        assert [next(other) for _ in range(6)] == expected
    finally:
        other.finalize()


@pytest.mark.parametrize("weights, words", [
    ([1, -1], "weights[1] must be a finite number >= 0, got -1.0"),
    ([1, math.nan], "weights[1] must be a finite number >= 0, got nan"),
    ([1, math.inf], "weights[1]"),
    ([0, 0], "weights must not all be zero, got [0.0, 0.0]"),
    ([1], "one number per source: got 1 weights [1.0] for 2 datasets"),
])
def test_bad_weights_are_refused_naming_the_argument_and_value(weights, words):
    with pytest.raises(ValueError) as raised:
        mix(sources(3, 3), weights, seed=0)
    assert words in str(raised.value)


def test_bad_sources_and_stops_are_refused():
    with pytest.raises(ValueError, match=r"datasets\[1\] is empty \(length 0\)"):
        mix([[1], []], [1, 1], seed=0)
    with pytest.raises(ValueError, match="datasets must hold at least one"):
        mix([], [], seed=0)
    with pytest.raises(ValueError, match="stop must be one of"):
        mix(sources(2), [1], seed=0, stop="oversample")
    with pytest.raises(TypeError, match="weights must be a sequence of numbers"):
        mix(sources(2), "a", seed=0)
    with pytest.raises(TypeError, match=r"datasets\[0\] must be a sized"):
        mix([iter([1])], [1], seed=0)
    with pytest.raises(ValueError, match="seed must be a non-negative integer, got -1"):
        mix(sources(2), [1], seed=-1)


@pytest.mark.parametrize("change, words", [
    (lambda d: d[:2], "state is of a mixture of 3 sources, this one has 2"),
    (lambda d: [d[0], d[1][:5], d[2]], "state's sources have other lengths: their checksum is"),
])
def test_a_state_of_other_sources_is_refused_naming_what_differs(change, words):
    data = sources(4, 6, 8)
    state = mix(data, [1, 1, 1], seed=0).state_at(3)
    with pytest.raises(ValueError) as raised:
        mix(change(data), [1] * len(change(data)), seed=0, state=state)
    assert words in str(raised.value)


def test_a_state_with_another_seed_or_kind_is_refused():
    data = sources(4, 6)
    state = mix(data, [1, 1], seed=0).state_at(3)
    with pytest.raises(ValueError, match="state's seed is 0, this mixture's 1"):
        mix(data, [1, 1], seed=1, state=state)
    with pytest.raises(ValueError, match="must be a mixture state"):
        mix(data, [1, 1], seed=0, state={"kind": "engine"})
    with pytest.raises(ValueError, match=r"state's version is 7"):
        mix(data, [1, 1], seed=0, state={**state, "version": 7})
    with pytest.raises(ValueError, match=r"state\['k'\] must be a non-negative integer"):
        mix(data, [1, 1], seed=0, state={**state, "k": -1})
    with pytest.raises(ValueError, match=r"state's shares must be one integer per source"):
        mix(data, [1, 1], seed=0, state={**state, "shares": [1, 2, 3]})
    with pytest.raises(ValueError, match="k must be at most the mixture's length"):
        mix(data, [1, 1], seed=0).state_at(1000)


def test_mixture_is_the_class_mix_returns():
    assert isinstance(mix(sources(2), [1], seed=0), Mixture)


def test_states_in_the_first_format_still_load_and_continue_as_they_did():
    import json
    from pathlib import Path
    saved = json.loads((Path(__file__).parent / "data" / "mixture_states_v1.json").read_text())
    data = sources(20, 35, 50)
    for case in saved["cases"]:
        stop = case.get("stop", "never")
        m = mix(data, case["weights"], seed=9, stop=stop, state=case["state"])
        if "length" in case:
            assert len(m) == case["length"]
            assert [list(e) for e in m[:]] == case["next"]
        else:
            assert [list(e) for e in m[np.arange(40)]] == case["next"]
    # A first-format state still names the source whose length differs.
    with pytest.raises(ValueError, match=r"state's source 1 had 35 examples, datasets\[1\] has 34"):
        mix([data[0], data[1][:34], data[2]], [1, 1, 1], seed=9, state=saved["cases"][0]["state"])


def array_sources(lengths: list[int], shape: tuple = (3,)) -> list[np.ndarray]:
    """Array sources whose rows say where they come from: ``[source, index, ...]``."""
    out = []
    for s, n in enumerate(lengths):
        rows = np.zeros((n, *shape), dtype=np.int32)
        rows.reshape(n, -1)[:, 0] = s
        rows.reshape(n, -1)[:, 1] = np.arange(n)
        out.append(rows)
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=5).filter(any),
       st.integers(0, 20_000), st.integers(1, 700), st.sampled_from([(3,), (2, 2), ()]),
       st.booleans(), st.sampled_from([1, 2, 3, 50]))
def test_a_run_of_indices_over_arrays_gives_the_examples_one_by_one(weights, first, count,
                                                                   shape, shuffle, stride):
    if shape == ():
        data = [np.arange(n, dtype=np.int64) + 1000 * s
                for s, n in enumerate([37, 5, 300, 64, 9][:len(weights)])]
    else:
        data = array_sources([37, 5, 300, 64, 9][:len(weights)], shape)
    m = mix(data, weights, seed=5, stop="never", shuffle=shuffle)
    # A run (stride 1), a rank's share of one (stride > 1), and the same backwards.
    run = np.arange(first, first + count * stride, stride, dtype=np.int64)
    batch = m[run]
    one_by_one = np.stack([m[int(k)] for k in run])
    assert isinstance(batch, ExampleBatch)
    assert np.array_equal(np.asarray(batch), one_by_one)
    back = m[run[::-1].copy()]
    assert isinstance(back, ExampleBatch)
    assert np.array_equal(np.asarray(back), one_by_one[::-1])


def test_a_run_over_arrays_crossing_a_block_gives_the_same_examples():
    data = array_sources([1000, 700, 50])
    m = mix(data, [5, 3, 1], seed=1, stop="never")
    for first in (8192 - 100, 3 * 8192 - 1, 0):
        run = np.arange(first, first + 300, dtype=np.int64)
        assert np.array_equal(np.asarray(m[run]), np.stack([m[int(k)] for k in run]))


def test_arrays_of_other_dtypes_or_layouts_are_mixed_example_by_example():
    a = np.arange(40, dtype=np.int32).reshape(20, 2)
    b = np.arange(40, dtype=np.float64).reshape(20, 2)[:, ::-1]  # another dtype, a view
    m = mix([a, b], [1, 1], seed=0, stop="first_exhausted")
    batch = m[np.arange(10)]
    for k, example in enumerate(batch):
        assert np.array_equal(example, m[k])
    c = np.asfortranarray(np.arange(40, dtype=np.int32).reshape(20, 2))
    m = mix([a, c], [1, 2], seed=0, stop="first_exhausted")
    assert np.array_equal(np.asarray(m[np.arange(12)]), np.stack([m[k] for k in range(12)]))


def test_an_iterator_over_a_mixture_of_arrays_gives_the_same_batches_for_any_worker_count():
    from dataset_kit.iterators import MultiprocessIterator
    data = array_sources([300, 120, 80], (4,))
    m = mix(data, [3, 2, 1], seed=2, stop="all_exhausted")
    serial = SerialIterator(m, 32, repeat=False, shuffle=False)
    expected = [np.asarray(b) for b in serial]
    other = MultiprocessIterator(m, 32, repeat=False, shuffle=False, n_processes=2)
    try:
        got = [np.asarray(b) for b in other]
    finally:
        other.finalize()
    assert len(got) == len(expected)
    assert all(np.array_equal(g, e) for g, e in zip(got, expected))
    assert sum(len(b) for b in expected) == len(m)
