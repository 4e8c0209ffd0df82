"""LastBatch: each policy's properties say what the state machine does with it."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.engine import LAST_BATCH, Engine, LastBatch
from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import Position, advance, last_batch_policy


def _steps(policy: LastBatch, n: int, b: int, epochs: int):
    """The plans of ``epochs`` repeating epochs of ``n`` examples in identity order."""
    position, plans = Position(), []
    while position.epoch < epochs:
        position, plan = advance(position, b, n, True, lambda e: None, policy)
        plans.append(plan)
    return plans


def test_the_table_holds_each_policy_under_its_name_and_refuses_others():
    assert list(LAST_BATCH) == [None, "keep", "discard", "rollover", "pad"]
    for name, policy in LAST_BATCH.items():
        assert policy.name == name and last_batch_policy(name) is policy
        assert last_batch_policy(policy) is policy
    for bad in ("roll_over", "drop", ["keep"]):
        with pytest.raises(ValueError, match="last_batch must be one of"):
            last_batch_policy(bad)


@given(name=st.sampled_from(list(LAST_BATCH)), n=st.integers(1, 20), b=st.integers(1, 8))
def test_each_property_holds_for_every_batch_the_state_machine_plans(name, n, b):
    policy = LAST_BATCH[name]
    plans = _steps(policy, n, b, epochs=4)
    sizes = [len(plan.indices) for plan in plans]
    full = [size == b for size in sizes if size]
    if policy.drops_tail or policy.pads or policy.fills_across:
        assert all(full)  # a short tail is dropped, padded or filled from the next epoch
    if not policy.may_yield_empty_epochs:
        assert 0 not in sizes
    if policy.pads:
        # Only an epoch's last batch is padded, and only up to the batch size.
        assert sum(plan.pad > 0 for plan in plans) == (4 if n % b else 0)
        assert all(plan.pad < b for plan in plans)
    else:
        assert all(plan.pad == 0 for plan in plans)
    served = sum(sizes) - sum(plan.pad for plan in plans)
    if policy.fills_across:
        # The batch that ends the fourth epoch may take examples of later ones.
        assert 0 <= served - 4 * n < b
    elif policy.carries:
        # Nothing is lost: every example of the epochs is served, but for less than a batch.
        assert 4 * n - served < b
    elif policy.drops_tail:
        assert served == 4 * (n // b) * b
    else:
        assert served == 4 * n


def test_an_engine_takes_a_policy_as_its_value_and_records_its_name():
    engine = Engine(np.arange(7), batch_size=3, seed=0, last_batch=LAST_BATCH["rollover"])
    assert engine.spec.last_batch == "rollover" and engine.spec.policy.carries
    assert engine.state_dict()["last_batch"] == "rollover"
    assert BatchSpec(2, 4, True, "pad").policy is LAST_BATCH["pad"]
