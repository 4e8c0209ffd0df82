"""The ledger's hash chain and its checkpoint form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.engine.ledger import CHAIN_START, Ledger, extend_chain, mix_sum

ids_lists = st.lists(st.integers(0, 2**40), max_size=300)


def chain_one_by_one(ids: list[int]) -> int:
    # The definition, written plainly: H' = H * P + mix(id), mod 2**64.
    mask = (1 << 64) - 1
    chain = CHAIN_START
    for i in ids:
        z = (i + 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        chain = (chain * 0x100000001B3 + z) & mask
    return chain


@settings(max_examples=60, deadline=None)
@given(ids_lists, ids_lists)
def test_a_chain_extends_block_by_block_as_one_by_one(a, b):
    assert extend_chain(extend_chain(CHAIN_START, a), b) == chain_one_by_one(a + b)


def test_chains_across_block_boundaries_agree():
    ids = np.random.default_rng(0).permutation(200_000)
    whole = extend_chain(CHAIN_START, ids)
    parts = CHAIN_START
    for cut in np.split(ids, [1, 65535, 65537, 131072, 199_999]):
        parts = extend_chain(parts, cut)
    assert whole == parts


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=2, max_size=50, unique=True), st.data())
def test_a_chain_tells_orders_skips_and_repeats_apart(ids, data):
    base = extend_chain(CHAIN_START, ids)
    i = data.draw(st.integers(0, len(ids) - 2))
    swapped = list(ids)
    swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    assert extend_chain(CHAIN_START, swapped) != base
    assert extend_chain(CHAIN_START, ids[:i] + ids[i + 1:]) != base
    assert extend_chain(CHAIN_START, ids[:i + 1] + ids[i:]) != base


def test_ids_must_be_integers_in_one_dimension():
    with pytest.raises(TypeError, match="ids"):
        extend_chain(CHAIN_START, np.zeros(3))
    with pytest.raises(TypeError, match="ids"):
        extend_chain(CHAIN_START, np.zeros((2, 2), int))
    assert extend_chain(5, []) == 5


def test_a_ledger_round_trips_its_state_and_refuses_bad_fields():
    ledger = Ledger(epoch=2, consumed_in_epoch=5, consumed_total=105, chain=2**63 + 7,
                    dataset_length=50, fingerprint="sha256:ab")
    assert Ledger.from_state(ledger.to_state()) == ledger
    assert "chain 8000000000000007" in str(ledger)
    for key, value in [("epoch", -1), ("chain", "xyz"), ("chain", 5), ("fingerprint", 3),
                       ("consumed_total", True)]:
        state = {**ledger.to_state(), key: value}
        with pytest.raises(ValueError, match=key):
            Ledger.from_state(state)
    with pytest.raises(ValueError, match="must be a dict"):
        Ledger.from_state([1])


def mix_one(i: int) -> int:
    mask = (1 << 64) - 1
    z = (i + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


@settings(max_examples=60, deadline=None)
@given(ids_lists)
def test_mix_sum_is_the_sum_of_the_mixed_ids(ids):
    assert mix_sum(ids) == sum(map(mix_one, ids)) & ((1 << 64) - 1)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint16])
def test_the_chain_and_the_sum_do_not_depend_on_the_ids_dtype_or_the_blocks(dtype):
    ids = np.random.default_rng(1).permutation(140_000) % 60_000
    ref = [int(i) for i in ids[:300]]
    assert extend_chain(CHAIN_START, ids[:300].astype(dtype)) == chain_one_by_one(ref)
    parts = CHAIN_START
    for cut in np.split(ids, [70_000]):
        parts = extend_chain(parts, cut.astype(dtype))
    assert extend_chain(CHAIN_START, ids.astype(dtype)) == parts
    assert mix_sum(ids.astype(dtype)) == (mix_sum(ids[:65_537]) + mix_sum(ids[65_537:])) % 2**64
