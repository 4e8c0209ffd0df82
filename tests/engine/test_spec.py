"""BatchSpec: validated once, and its counts agree with the state machine it drives."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import LAST_BATCH_POLICIES, Position


@pytest.mark.parametrize("kwargs, error, message", [
    ({"batch_size": 0, "epoch_size": 3}, ValueError, "batch_size must be a positive .*, got 0"),
    ({"batch_size": 2.0, "epoch_size": 3}, TypeError, "batch_size must be a positive integer"),
    ({"batch_size": True, "epoch_size": 3}, TypeError, "batch_size"),
    ({"batch_size": 2, "epoch_size": -1}, ValueError, "epoch_size must be a non-negative"),
    ({"batch_size": 2, "epoch_size": 3, "last_batch": "drop"}, ValueError,
     r"last_batch must be one of \[None, 'keep', 'discard', 'rollover', 'pad'\], got 'drop'"),
])
def test_bad_values_are_named_with_what_came(kwargs, error, message):
    with pytest.raises(error, match=message):
        BatchSpec(**kwargs)


def test_a_spec_is_a_frozen_value():
    spec = BatchSpec(2, 5, True, "pad")
    with pytest.raises(AttributeError):
        spec.batch_size = 3
    assert spec == BatchSpec(2, 5, True, "pad") and hash(spec) == hash(BatchSpec(2, 5, True, "pad"))


@given(b=st.integers(1, 9), n=st.integers(1, 14), policy=st.sampled_from(LAST_BATCH_POLICIES))
def test_only_discard_with_batches_larger_than_the_epoch_yields_no_batch(b, n, policy):
    spec = BatchSpec(b, n, True, policy)
    assert spec.yields_batches == (not (policy == "discard" and b > n))
    position, batches = Position(), 0
    for _ in range(3 * (b + 1)):  # enough epochs for 'rollover' to gather a full batch
        position, plan = spec.advance(position, lambda epoch: None)
        batches += bool(plan.indices.size)
    assert bool(batches) == spec.yields_batches


@given(b=st.integers(1, 9), n=st.integers(1, 14), carry=st.integers(0, 8),
       policy=st.sampled_from(["keep", "discard", "rollover", "pad"]))
def test_batches_per_epoch_counts_the_batches_the_machine_plans(b, n, carry, policy):
    if policy != "rollover" or carry >= b:
        carry = 0  # only a rolled-over epoch starts with a carry, and it is below a batch
    spec = BatchSpec(b, n, True, policy)
    position = Position(epoch=carry // n + 1, carry=carry)
    planned = 0
    while True:
        position, plan = spec.advance(position, lambda epoch: None)
        planned += bool(plan.indices.size)
        if position.is_new_epoch:
            break
    assert planned == spec.batches_per_epoch(carry)
