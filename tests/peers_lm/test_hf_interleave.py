"""mix() against Hugging Face's interleave_datasets(probabilities=...) (pip install datasets).

Hugging Face draws each source at random; dataset_kit follows an exact schedule. So
the comparison is of what both promise: for a given count per source, the same
multiset of examples (each source read in order, cyclically once exhausted), the
same stopping rule, and dataset_kit's counts within one of the weights where
Hugging Face's drift.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

hf = pytest.importorskip("datasets", reason="the comparison needs Hugging Face datasets")

from dataset_kit.datasets import mix  # noqa: E402

LENGTHS = (40, 90, 25)
WEIGHTS = (0.2, 0.5, 0.3)


def sources() -> list[list[dict]]:
    return [[{"source": s, "i": i} for i in range(n)] for s, n in enumerate(LENGTHS)]


def hugging_face(stop: str, seed: int) -> list[tuple[int, int]]:
    parts = [hf.Dataset.from_list(rows) for rows in sources()]
    mixed = hf.interleave_datasets(parts, probabilities=list(WEIGHTS), seed=seed,
                                   stopping_strategy=stop)
    return [(row["source"], row["i"]) for row in mixed]


def ours(stop: str) -> list[tuple[int, int]]:
    m = mix(sources(), list(WEIGHTS), seed=0, stop=stop, shuffle=False)
    return [(row["source"], row["i"]) for row in m[:]]


def per_source(rows: list[tuple[int, int]]) -> dict[int, collections.Counter]:
    out: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for s, i in rows:
        out[s][i] += 1
    return out


def cyclic(n: int, count: int) -> collections.Counter:
    """The multiset of a source of ``n`` examples read in order ``count`` times, cyclically."""
    return collections.Counter(k % n for k in range(count))


def stops_where_hugging_face_stops(rows: list[tuple[int, int]], stop: str) -> bool:
    counts = [0] * len(LENGTHS)
    done_at = None
    for k, (s, _) in enumerate(rows):
        counts[s] += 1
        exhausted = [c >= n for c, n in zip(counts, LENGTHS)]
        if (any if stop == "first_exhausted" else all)(exhausted) and done_at is None:
            done_at = k + 1
    return done_at == len(rows)


@pytest.mark.parametrize("stop", ["first_exhausted", "all_exhausted"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_both_give_each_source_in_order_cyclically_and_stop_by_the_same_rule(stop, seed):
    for rows in (hugging_face(stop, seed), ours(stop)):
        assert stops_where_hugging_face_stops(rows, stop)
        for s, got in per_source(rows).items():
            assert got == cyclic(LENGTHS[s], sum(got.values()))


@pytest.mark.parametrize("stop", ["first_exhausted", "all_exhausted"])
def test_the_multiset_per_source_is_hugging_faces_for_the_same_counts(stop):
    theirs = per_source(hugging_face(stop, 0))
    # Each source alone, read as far as Hugging Face read it.
    counts = {s: sum(c.values()) for s, c in theirs.items()}
    mine = {}
    for s, count in counts.items():
        only = mix(sources(), [1.0 if t == s else 0.0 for t in range(3)], seed=0,
                   stop="never", shuffle=False)
        mine[s] = collections.Counter(row["i"] for row in only[np.arange(count)])
    assert mine == theirs


@pytest.mark.parametrize("stop", ["first_exhausted", "all_exhausted"])
def test_our_counts_stay_within_one_of_the_weights_where_hugging_faces_drift(stop):
    rows = ours(stop)
    counts = np.zeros(3)
    for k, (s, _) in enumerate(rows, start=1):
        counts[s] += 1
        assert np.abs(counts - k * np.array(WEIGHTS)).max() < 1
    drift = 0.0
    counts[:] = 0
    for k, (s, _) in enumerate(hugging_face(stop, 0), start=1):
        counts[s] += 1
        drift = max(drift, float(np.abs(counts - k * np.array(WEIGHTS)).max()))
    assert drift > 1  # HF's random draws wander; what our schedule rules out
