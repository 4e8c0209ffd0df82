"""dataset_kit.datasets.pack: concat and first-fit packing as a random-access dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.datasets import PackedDataset, mix, pack
from dataset_kit.iterators import MultithreadIterator, SerialIterator


def documents(lengths: list[int], seed: int = 0) -> list[dict]:
    """Documents with two aligned keys; token values say which document they come from."""
    rng = np.random.default_rng(seed)
    return [{"tokens": (1000 * (d + 1) + np.arange(n)).astype(np.int32),
             "mask": rng.integers(0, 2, n).astype(np.int64)}
            for d, n in enumerate(lengths)]


lengths_strategy = st.lists(st.integers(0, 40), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(lengths_strategy, st.integers(1, 17))
def test_concat_is_concatenate_then_split(lengths, length):
    docs = documents(lengths)
    packed = pack(docs, length)
    flat = np.concatenate([d["tokens"] for d in docs])
    chunks = [flat[i:i + length] for i in range(0, len(flat), length)]
    assert len(packed) == len(chunks)
    for got, want in zip(packed[:], chunks):
        assert np.array_equal(got["tokens"][:len(want)], want)
        assert (got["tokens"][len(want):] == 0).all()
        assert (got["tokens_segment_ids"][len(want):] == 0).all()


@settings(max_examples=60, deadline=None)
@given(lengths_strategy, st.integers(1, 50), st.integers(1, 5))
def test_first_fit_places_every_token_once_in_sequences_of_length(lengths, length, bins):
    docs = documents(lengths)
    packed = pack(docs, length, method="first_fit", num_bins=bins)
    seen = []
    for j in range(len(packed)):
        pieces = packed.pieces(j)
        assert sum(stop - start for _, start, stop in pieces) <= length
        seen += [(d, t) for d, start, stop in pieces for t in range(start, stop)]
    assert sorted(seen) == [(d, t) for d, n in enumerate(lengths) for t in range(n)]


def test_segment_ids_and_positions_mark_each_document():
    docs = documents([3, 2, 4])
    first = pack(docs, 8, keys=["tokens"])[0]
    assert first["tokens"].tolist() == [1000, 1001, 1002, 2000, 2001, 3000, 3001, 3002]
    assert first["tokens_segment_ids"].tolist() == [1, 1, 1, 2, 2, 3, 3, 3]
    assert first["tokens_positions"].tolist() == [0, 1, 2, 0, 1, 0, 1, 2]
    second = pack(docs, 8, keys=["tokens"], pad_id=-1)[1]
    assert second["tokens"].tolist() == [3003] + [-1] * 7
    assert second["tokens_segment_ids"].tolist() == [1] + [0] * 7
    assert set(first) == {"tokens", "tokens_segment_ids", "tokens_positions"}


def test_first_fit_follows_grains_rounds():
    # Bins of 10 with 2 bins: 6 -> bin 0; 5 -> bin 1; 4 -> bin 0; 7 fits none:
    # the round [6+4, 5] is emitted and 7 starts the next.
    docs = documents([6, 5, 4, 7, 3])
    packed = pack(docs, 10, method="first_fit", num_bins=2, keys=["tokens"])
    assert [[d for d, _, _ in packed.pieces(j)] for j in range(len(packed))] == \
        [[0, 2], [1], [3, 4]]
    assert packed[0]["tokens_segment_ids"].tolist() == [1] * 6 + [2] * 4


def test_a_long_document_is_split_or_refused_by_an_argument():
    docs = documents([25, 3])
    packed = pack(docs, 10, method="first_fit", num_bins=1)
    assert [packed.pieces(j) for j in range(len(packed))] == \
        [[(0, 0, 10)], [(0, 10, 20)], [(0, 20, 25), (1, 0, 3)]]
    with pytest.raises(ValueError, match=r"example 0 has 25 tokens, more than length=10"):
        len(pack(docs, 10, method="first_fit", too_long="error"))
    with pytest.raises(ValueError, match=r"example 0 has 25 tokens"):
        len(pack(docs, 10, too_long="error"))


@pytest.mark.parametrize("example, error, words", [
    ({"text": np.arange(3)}, KeyError, "example 1 has no key 'tokens' to pack (it has ['text'])"),
    ({"tokens": np.zeros((2, 2), np.int64)}, ValueError,
     "example 1's 'tokens' must be a 1-D integer token array, got dtype int64 and shape (2, 2)"),
    ({"tokens": np.zeros(3, np.float32)}, ValueError,
     "example 1's 'tokens' must be a 1-D integer token array, got dtype float32"),
    (np.arange(3), TypeError, "example 1 is a ndarray"),
])
def test_a_bad_document_is_refused_naming_it_the_key_and_the_value(example, error, words):
    docs = [{"tokens": np.arange(3)}, example]
    with pytest.raises(error) as raised:
        len(pack(docs, 4, keys=["tokens"]))
    assert words in str(raised.value)


def test_unaligned_keys_and_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="not aligned: 'a' has 3 tokens, 'b' 2"):
        len(pack([{"a": np.arange(3), "b": np.arange(2)}], 4))
    with pytest.raises(ValueError, match="method must be one of"):
        pack([], 4, method="best_fit")
    with pytest.raises(ValueError, match="length must be a positive integer, got 0"):
        pack([], 0)
    with pytest.raises(ValueError, match="too_long must be one of"):
        pack([], 4, too_long="truncate")
    with pytest.raises(TypeError, match="keys must be a non-empty sequence"):
        pack([], 4, keys="tokens")
    with pytest.raises(TypeError, match="dataset must be a sized"):
        pack(iter([]), 4)


@pytest.mark.parametrize("method", ["concat", "first_fit"])
def test_iterators_over_a_packed_mixture_agree_and_resume_exactly(method):
    sources = [documents(list(range(1, 60, 3)), seed=1), documents([17] * 25, seed=2)]
    packed = pack(mix(sources, [1, 2], seed=0, stop="all_exhausted"), 32, method=method,
                  num_bins=4, keys=["tokens"])
    it = SerialIterator(packed, 4, shuffle=False)
    for _ in range(3):
        next(it)
    state = it.state_dict()
    expected = [next(it) for _ in range(5)]
    other = MultithreadIterator(packed, 4, shuffle=False, n_threads=3)
    try:
        other.load_state_dict(state)
        got = [next(other) for _ in range(5)]
    finally:
        other.finalize()
    for a, b in zip(got, expected):
        for x, y in zip(a, b):
            assert all(np.array_equal(x[k], y[k]) for k in x)
    assert len(json.dumps(state)) < 1000


def test_packed_dataset_is_the_class_pack_returns():
    assert isinstance(pack(documents([2]), 4), PackedDataset)


@pytest.mark.parametrize("method", ["concat", "first_fit"])
def test_a_packed_mixture_resumes_on_three_ranks_from_a_two_rank_checkpoint(method):
    from dataset_kit.distributed import ShardedIterator
    from tests.distributed.thread_ranks import run_ranks, unwrap

    second = [{"tokens": d["tokens"] + 500_000} for d in documents([23] * 30, seed=2)]
    sources = [documents(list(range(1, 80, 2)), seed=1), second]  # no token in both
    # first_exhausted: no document twice, so a sequence's tokens name it.
    packed = pack(mix(sources, [2, 1], seed=0, stop="first_exhausted"), 32, method=method,
                  num_bins=4, keys=["tokens"])
    names = {tuple(e["tokens"].tolist()): j for j, e in enumerate(packed[:])}
    assert len(names) == len(packed)

    def run(ranks: int, state: dict | None, steps: int | None):
        def body(comm):
            it = ShardedIterator(packed, 2, comm, shuffle=False, seed=0, repeat=False)
            if state is not None:
                it.load_state_dict(state)
            taken = []
            for k, batch in enumerate(it):
                taken += [names[tuple(e["tokens"].tolist())] for e in batch]
                if steps is not None and k + 1 == steps:
                    break
            return taken, it.state_dict()
        return unwrap(run_ranks(ranks, body))

    before = run(2, None, 3)
    after = run(3, before[0][1], None)
    seen = sorted(j for taken, _ in before + after for j in taken)
    # Every sequence once (the last batches may pad with sequences from the start).
    assert sorted(set(seen)) == list(range(len(packed)))
    assert len(seen) - len(packed) < 3 * 2


@pytest.mark.parametrize("method", ["concat", "first_fit"])
def test_given_lengths_make_the_same_plan_without_reading_and_are_checked(method):
    docs = documents([5, 0, 17, 3, 9, 30, 2])
    lengths = [len(d["tokens"]) for d in docs]
    plain = pack(docs, 8, method=method, num_bins=2)
    given = pack(docs, 8, method=method, num_bins=2, lengths=lengths)
    assert len(given) == len(plain)
    for a, b in zip(given[:], plain[:]):
        assert set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)
    wrong = pack(docs, 8, method=method, num_bins=2, lengths=[5, 0, 17, 3, 9, 31, 2])
    with pytest.raises(ValueError, match=r"example 5's 'tokens' has 30 tokens, but lengths\[5\] "
                                         r"says 31"):
        wrong[:]
    with pytest.raises(ValueError, match=r"lengths must be one integer token count per "
                                         r"document \(7\)"):
        pack(docs, 8, lengths=[1, 2])
    with pytest.raises(ValueError, match="lengths must not be negative, got -1 for document 1"):
        pack(docs, 8, lengths=[5, -1, 17, 3, 9, 30, 2])
    with pytest.raises(ValueError, match="example 5 has 30 tokens, more than length=8"):
        pack(docs, 8, lengths=lengths, too_long="error")


def tagged_sources(lengths: list[list[int]]) -> list[list[dict]]:
    """Sources of documents whose tokens say (source, example, position), all distinct."""
    return [[{"tokens": (10**6 * (s + 1) + 1000 * e + np.arange(n)).astype(np.int64)}
             for e, n in enumerate(source)] for s, source in enumerate(lengths)]


def tokens_of(sequences: list[dict]) -> list[int]:
    return [int(t) for seq in sequences
            for t in seq["tokens"][seq["tokens_segment_ids"] > 0]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), min_size=1, max_size=12), min_size=2, max_size=3),
       st.sampled_from(["concat", "first_fit"]), st.integers(4, 12), st.integers(1, 4),
       st.lists(st.integers(0, 4), min_size=3, max_size=3), st.data())
def test_reweighting_under_packing_at_any_sequence_emits_every_drawn_token_once(
        lengths, method, length, bins, new, data):
    sources = tagged_sources(lengths)
    count = len(sources)
    new_weights = new[:count] if any(new[:count]) else [1] * count
    old_mixture = mix(sources, [2, 1, 1][:count], seed=3, stop="all_exhausted")
    old = pack(old_mixture, length, method=method, num_bins=bins)
    j = data.draw(st.integers(0, len(old)), label="j")
    state = json.loads(json.dumps(old.state_at(j)))
    mixture = mix(sources, new_weights, seed=3, stop="all_exhausted", state=state["mixture"])
    resumed = pack(mixture, length, method=method, num_bins=bins, state=state)
    # And once more from the continued packing, back to equal weights.
    j2 = data.draw(st.integers(0, len(resumed)), label="j2")
    state = json.loads(json.dumps(resumed.state_at(j2)))
    mixture = mix(sources, [1] * count, seed=3, stop="all_exhausted", state=state["mixture"])
    again = pack(mixture, length, method=method, num_bins=bins, state=state)
    emitted = tokens_of(old[:j]) + tokens_of(resumed[:j2]) + tokens_of(again[:])
    # Every token of every document the sources gave, once: each mixture's
    # draws up to its checkpoint, then the next one's.
    drawn = mixture.consumed_at(len(mixture))
    expected = []
    for s in range(count):
        alone = mix(sources, [int(i == s) for i in range(count)], seed=3, stop="never")
        for example in alone[np.arange(drawn[s])] if drawn[s] else []:
            expected += example["tokens"].tolist()
    assert sorted(emitted) == sorted(expected)
    assert all(len(seq["tokens"]) == length for seq in resumed[:])


def test_reweighting_under_packing_keeps_the_open_round_and_the_cut_document():
    sources = tagged_sources([[7, 3, 9, 5, 2, 8], [4, 6, 1, 7]])
    old = pack(mix(sources, [1, 1], seed=0, stop="all_exhausted"), 8, method="concat")
    state = old.state_at(2)
    assert state["tail"][2] > 0 and state["pending"] == []
    first_fit = pack(mix(sources, [1, 1], seed=0, stop="all_exhausted"), 10,
                     method="first_fit", num_bins=3)
    state = first_fit.state_at(1)
    # The rest of the first round goes out as it was packed.
    resumed = pack(mix(sources, [1, 4], seed=0, stop="all_exhausted", state=state["mixture"]),
                   10, method="first_fit", num_bins=3, state=state)
    for k, pieces in enumerate(state["pending"]):
        assert tokens_of([resumed[k]]) == tokens_of([first_fit[1 + k]])
        assert len(pieces) >= 1


def test_a_packing_state_is_refused_for_another_packing_or_mixture():
    sources = tagged_sources([[5, 5, 5], [5, 5]])
    packed = pack(mix(sources, [1, 1], seed=0, stop="all_exhausted"), 8)
    state = packed.state_at(2)
    fresh = mix(sources, [1, 1], seed=0, stop="all_exhausted")
    with pytest.raises(ValueError, match="dataset is not the mixture continued from"):
        pack(fresh, 8, state=state)
    continued = mix(sources, [1, 2], seed=0, stop="all_exhausted", state=state["mixture"])
    with pytest.raises(ValueError, match="state's length is 8, this packing's 9"):
        pack(continued, 9, state=state)
    with pytest.raises(ValueError, match="must be a packing state"):
        pack(continued, 8, state={"kind": "mixture"})
    with pytest.raises(TypeError, match="a packing state continues a mixture"):
        pack(sources[0], 8, state=state)
    with pytest.raises(TypeError, match="state_at continues a mixture"):
        pack(sources[0], 8).state_at(1)
    with pytest.raises(ValueError, match="j must be at most"):
        packed.state_at(10**6)
