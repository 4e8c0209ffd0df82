"""pack(method="first_fit") against Grain's own FirstFitPackIterDataset (pip install grain)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

grain = pytest.importorskip("grain", reason="the comparison needs Grain (pip install grain)")

from dataset_kit.datasets import pack  # noqa: E402


def documents(lengths: list[int], seed: int, keys: tuple[str, ...]) -> list[dict]:
    rng = np.random.default_rng(seed)
    docs = []
    for n in lengths:
        tokens = rng.integers(1, 30000, n).astype(np.int32)
        docs.append({k: (tokens + i).astype(np.int32 if i == 0 else np.int64)
                     for i, k in enumerate(keys)})
    return docs


def grains(docs: list[dict], length: int, bins: int, shuffle: bool, seed: int) -> list[dict]:
    source = grain.MapDataset.source(docs).to_iter_dataset()
    packed = grain.experimental.FirstFitPackIterDataset(
        source, length_struct={k: length for k in docs[0]}, num_packing_bins=bins,
        shuffle_bins=shuffle, seed=seed)
    return list(packed)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 64), min_size=1, max_size=60), st.integers(1, 8),
       st.booleans(), st.integers(0, 1000), st.sampled_from([("tokens",), ("inputs", "targets")]))
def test_first_fit_gives_grains_sequences(lengths, bins, shuffle, seed, keys):
    docs = documents(lengths, seed, keys)
    theirs = grains(docs, 64, bins, shuffle, seed)
    ours = pack(docs, 64, method="first_fit", num_bins=bins, shuffle_bins=shuffle, seed=seed)[:]
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert set(a) == set(b)
        for key in a:
            assert a[key].dtype == b[key].dtype, key
            assert np.array_equal(a[key], b[key]), key


def test_first_fit_gives_grains_sequences_on_long_tailed_documents():
    rng = np.random.default_rng(7)
    lengths = np.minimum(rng.lognormal(np.log(300), 1.0, 3000).astype(int) + 1, 2048).tolist()
    docs = documents(lengths, 7, ("tokens",))
    theirs = grains(docs, 2048, 16, True, 3)
    ours = pack(docs, 2048, method="first_fit", num_bins=16, shuffle_bins=True, seed=3)
    assert len(ours) == len(theirs)
    for j in range(len(ours)):
        assert all(np.array_equal(ours[j][k], theirs[j][k]) for k in theirs[j])
