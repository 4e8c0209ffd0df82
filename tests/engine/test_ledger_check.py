"""The ledger in every engine state, and the check on load (issue 34)."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.datasets.record_dataset import RecordFileDataset
from dataset_kit.engine import Engine, OrderSampler, ResumeMismatchError, ResumeMismatchWarning
from dataset_kit.engine.ledger import CHAIN_START, extend_chain
from dataset_kit.recordio import IndexedRecordWriter

POLICIES = [None, "keep", "discard", "rollover", "pad"]


class SeededOrder(OrderSampler):
    """A user's sampler whose seed is in its constructor only (not in its state)."""

    state_kind = "test.seeded"

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __call__(self, current_order, current_position):
        raise AssertionError("random access only")

    def epoch_order(self, epoch, size):
        return np.random.default_rng([self.seed, epoch]).permutation(size)


def consumed_ids(engine: Engine, steps: int) -> list[int]:
    ids: list[int] = []
    for _ in range(steps):
        engine.next()
        plan = engine.last_plan
        ids += plan.indices[:len(plan.indices) - plan.pad].tolist()
    return ids


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 12), batch=st.integers(1, 14), steps=st.integers(0, 20),
       policy=st.sampled_from(POLICIES), seed=st.integers(0, 3))
def test_the_ledger_chains_every_id_consumed_in_order_and_reloads_the_same(size, batch, steps,
                                                                           policy, seed):
    if policy == "discard" and batch > size:
        return  # no epoch has a batch
    engine = Engine(np.arange(size), batch_size=batch, last_batch=policy, seed=seed)
    ids = consumed_ids(engine, steps)
    ledger = engine.ledger()
    assert ledger.consumed_total == len(ids)
    assert ledger.chain == extend_chain(CHAIN_START, np.asarray(ids, np.int64))
    state = json.loads(json.dumps(engine.state_dict()))
    twin = Engine(np.arange(size), batch_size=batch, last_batch=policy, seed=seed)
    twin.load_state_dict(state)
    assert twin.ledger() == ledger
    # Both go on with the same ledgers.
    consumed_ids(engine, 3), consumed_ids(twin, 3)
    assert twin.ledger() == engine.ledger()


@pytest.mark.parametrize("executor", ["serial", "thread-2", "thread-3", "process-2",
                                      "process-3"])
def test_ledgers_agree_across_executors_at_every_step(executor):
    from dataset_kit.engine import ExecutorSpec
    kind, _, workers = executor.partition("-")
    spec = ExecutorSpec(kind, workers=int(workers or 0))
    reference = Engine(np.arange(23), batch_size=4, seed=5, last_batch="rollover")
    with_executor = Engine(np.arange(23), batch_size=4, seed=5, last_batch="rollover",
                           executor=spec)
    try:
        for _ in range(15):
            reference.next()
            with_executor.next()
            assert with_executor.ledger() == reference.ledger()
            assert with_executor.state_dict()["ledger"] == reference.state_dict()["ledger"]
    finally:
        with_executor.close()


def test_another_seed_of_the_sampler_is_refused_and_the_engine_is_unchanged():
    saved = Engine(np.arange(20), batch_size=3, order_sampler=SeededOrder(1), seed=0)
    consumed_ids(saved, 4)
    state = saved.state_dict()
    engine = Engine(np.arange(20), batch_size=3, order_sampler=SeededOrder(2), seed=0)
    twin = Engine(np.arange(20), batch_size=3, order_sampler=SeededOrder(2), seed=0)
    consumed_ids(engine, 2), consumed_ids(twin, 2)
    with pytest.raises(ResumeMismatchError, match=r"seed changed \(1 -> 2\)") as info:
        engine.load_state_dict(state)
    assert info.value.cause == "seed"
    assert consumed_ids(engine, 5) == consumed_ids(twin, 5)
    with pytest.warns(ResumeMismatchWarning, match=r"seed changed \(1 -> 2\).*ids consumed"):
        engine.load_state_dict(state, strict=False)
    assert engine.position == saved.position


def test_a_checkpoint_at_an_epoch_end_still_proves_the_epoch():
    saved = Engine(np.arange(12), batch_size=4, order_sampler=SeededOrder(1), seed=0)
    consumed_ids(saved, 3)
    assert saved.position.is_new_epoch
    with pytest.raises(ResumeMismatchError):
        Engine(np.arange(12), batch_size=4, order_sampler=SeededOrder(9),
               seed=0).load_state_dict(saved.state_dict())


def test_a_tampered_count_is_refused_naming_the_epoch():
    engine = Engine(np.arange(20), batch_size=3, seed=0)
    consumed_ids(engine, 2)
    state = engine.state_dict()
    state["ledger"]["consumed_total"] += 3
    with pytest.raises(ResumeMismatchError) as info:
        Engine(np.arange(20), batch_size=3, seed=0).load_state_dict(state)
    assert info.value.cause == "epoch"


def test_a_state_without_a_ledger_warns_once_and_the_next_state_has_one():
    engine = Engine(np.arange(20), batch_size=3, seed=0)
    consumed_ids(engine, 9)
    state = engine.state_dict()
    expected = state.pop("ledger")
    other = Engine(np.arange(20), batch_size=3, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other.load_state_dict(state)
    assert [w.category for w in caught] == [ResumeMismatchWarning]
    assert other.state_dict()["ledger"] == expected


def write_records(path: str, records: list[bytes]) -> None:
    with IndexedRecordWriter(path[:-4] + ".idx", path) as writer:
        for i, record in enumerate(records):
            writer.write_idx(i, record)


def test_a_rewritten_record_file_is_refused_naming_its_files(tmp_path):
    path = str(tmp_path / "data.rec")
    write_records(path, [b"a%d" % i for i in range(10)])
    saved = Engine(RecordFileDataset(path), batch_size=3, seed=0)
    consumed_ids(saved, 2)
    state = saved.state_dict()
    assert state["ledger"]["fingerprint"]
    write_records(path, [b"b%d" % i for i in range(10)])
    os.utime(path, ns=(1, 1))  # another mtime even within the clock's tick
    engine = Engine(RecordFileDataset(path), batch_size=3, seed=0)
    with pytest.raises(ResumeMismatchError, match="files changed") as info:
        engine.load_state_dict(state)
    assert info.value.cause == "files"
    assert engine.position.epoch == 0 and engine.position.current_position == 0


def test_the_active_sampler_after_a_load_is_the_copy_holding_the_loaded_state():
    # ShardedIterator saves the sampler's state: it saved the sampler given at
    # construction (engine.order_sampler), so a resumed job saved the wrong seed.
    from dataset_kit.engine import ShuffleOrderSampler
    saved = Engine(np.arange(10), batch_size=3, order_sampler=ShuffleOrderSampler(1), seed=0)
    engine = Engine(np.arange(10), batch_size=3, order_sampler=ShuffleOrderSampler(2), seed=0)
    engine.load_state_dict(saved.state_dict())
    assert engine.active_sampler.state_dict() == saved.active_sampler.state_dict()
    assert engine.order_sampler.state_dict() == {"seed": 2}  # the object given is untouched


@pytest.mark.parametrize("change", ["skip one", "repeat a batch", "wrong seed"])
def test_the_oracle_s_mutants_are_refused_by_the_ledger_alone(change):
    engine = Engine(np.arange(20), batch_size=3, seed=0)
    consumed_ids(engine, 2)
    state = engine.state_dict()
    if change == "skip one":
        state["current_position"] += 1
    elif change == "repeat a batch":
        state["current_position"] -= 3
    else:
        state["order_sampler"]["state"]["seed"] += 1
    with pytest.raises(ResumeMismatchError) as info:
        Engine(np.arange(20), batch_size=3, seed=0).load_state_dict(state)
    assert info.value.cause == ("seed" if change == "wrong seed" else "epoch")


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("left_at", [1, 3])
def test_a_state_saved_after_leaving_an_epoch_early_loads_and_goes_on_alike(shuffle, left_at):
    # start_next_epoch mid-epoch (PyTorch's iter() after a break does it): the ids of the
    # skipped rest were never consumed, and a load must not expect them.
    def make() -> Engine:
        return Engine(np.arange(10), batch_size=2, shuffle=shuffle, seed=3)

    engine = make()
    for _ in range(left_at):
        engine.next()
    engine.start_next_epoch()
    engine.next()
    state = engine.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    assert resumed.ledger() == engine.ledger()
    for _ in range(7):
        assert np.array_equal(resumed.next(), engine.next())
    assert resumed.ledger() == engine.ledger()
    engine.start_next_epoch()
    again = make()
    again.load_state_dict(engine.state_dict())
    assert again.ledger() == engine.ledger()


def test_what_the_ledger_records_of_a_sampler():
    from dataset_kit.engine import ShuffleOrderSampler, order_identity

    class Odd:
        seed = -1  # not a seed the ledger can record

        def __call__(self, order, position):
            return order

    class Saying(Odd):
        def identity(self):
            return {"sampler": "mine", "rank": [1, 4]}

    class Lying(Odd):
        def identity(self):
            return {"rank": [4, 4]}

    assert order_identity(None) == {"sampler": "none", "seed": None, "rank": None}
    assert order_identity(ShuffleOrderSampler(7)) == {"sampler": "shuffle", "seed": 7,
                                                     "rank": None}
    assert order_identity(Odd())["seed"] is None
    assert order_identity(Saying()) == {"sampler": "mine", "seed": None, "rank": [1, 4]}
    with pytest.raises(TypeError, match=r"identity\(\)\['rank'\]"):
        order_identity(Lying())


def test_a_malformed_sampler_record_in_a_ledger_is_refused_naming_it():
    engine = Engine(np.arange(20), batch_size=3, seed=0)
    engine.next()
    state = engine.state_dict()
    state["ledger"]["orders"]["seed"] = "seven"
    with pytest.raises(ValueError, match=r"state\['ledger'\]\['orders'\]\['seed'\]"):
        Engine(np.arange(20), batch_size=3, seed=0).load_state_dict(state)


def test_another_seed_is_refused_even_before_any_id_was_consumed():
    # Nothing consumed, so the chains agree; the orders still to come would not.
    state = Engine(np.arange(20), batch_size=3, order_sampler=SeededOrder(1),
                   seed=0).state_dict()
    with pytest.raises(ResumeMismatchError, match=r"seed changed \(1 -> 2\)") as info:
        Engine(np.arange(20), batch_size=3, order_sampler=SeededOrder(2),
               seed=0).load_state_dict(state)
    assert info.value.cause == "seed"
