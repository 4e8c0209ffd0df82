"""Orders: where each epoch's order comes from, and when a sampler is asked (issue 21, part 5).

A stateful (Chainer-style) sampler can only move forward, so *when* it is
called is behaviour: once at construction for epoch 0, then once per epoch,
on the batch that ends the epoch before (as Chainer's iterators call it),
never again for an epoch it has answered, and not at all when a loaded state
carries the order. A recomputable sampler is asked ``epoch_order`` instead and
its ``__call__`` never. These tests pin that on :class:`Orders` directly and
on an :class:`Engine` with the serial executor: no thread, no process.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.engine import Engine, OrderSampler, SamplerMismatchError, ShuffleOrderSampler
from dataset_kit.engine._orders import Orders
from dataset_kit.engine._statemachine import Position


class Counting:
    """A stateful sampler (no ``epoch_order``): each epoch rotates the last by one; logs calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], int]] = []

    def __call__(self, current_order, current_position):
        self.calls.append((list(map(int, current_order)), int(current_position)))
        return np.roll(np.asarray(current_order), 1)


class CountingShuffle(ShuffleOrderSampler):
    """A seeded shuffle that logs which epochs it was asked for."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.asked: list[int] = []
        self.called = 0

    def epoch_order(self, epoch, size):
        self.asked.append(epoch)
        return super().epoch_order(epoch, size)

    def __call__(self, current_order, current_position):
        self.called += 1
        return super().__call__(current_order, current_position)


# -- Orders directly -------------------------------------------------------------------------

def test_a_stateful_sampler_is_asked_for_epoch_0_at_once_then_once_per_later_epoch():
    sampler = Counting()
    orders = Orders(sampler, 4)
    assert sampler.calls == [([0, 1, 2, 3], 0)]  # a broken sampler fails at construction
    assert orders.order_of(0).tolist() == [3, 0, 1, 2] and len(sampler.calls) == 1
    orders.note_start(0, 2)  # the last batch of epoch 0 is planned from position 2
    assert orders.order_of(1).tolist() == [2, 3, 0, 1]
    assert sampler.calls[1] == ([3, 0, 1, 2], 2)  # Chainer's (current_order, current_position)
    orders.order_of(1)
    orders.order_of(0)
    assert len(sampler.calls) == 2  # answered epochs are cached, never asked again
    with pytest.raises(RuntimeError, match="order of epoch 3 requested before epoch 2"):
        orders.order_of(3)  # it only moves forward


def test_a_recomputable_sampler_is_asked_epoch_order_and_never_called():
    sampler = CountingShuffle(7)
    orders = Orders(sampler, 6)
    assert sampler.asked == [0]
    for epoch in (0, 1, 1, 3, 2):
        assert sorted(orders.order_of(epoch)) == list(range(6))
    assert sampler.asked == [0, 1, 3, 2] and sampler.called == 0
    orders.forget_before(3)
    orders.order_of(1)  # forgotten: recomputed, the same order
    assert sampler.asked[-1] == 1


def test_clear_asks_a_stateful_sampler_for_a_new_epoch_0_order_as_chainers_reset_does():
    sampler = Counting()
    orders = Orders(sampler, 3)
    orders.order_of(1)
    orders.clear()
    assert sampler.calls[-1] == ([0, 1, 2], 0) and len(sampler.calls) == 3
    assert orders.order_of(0).tolist() == [2, 0, 1]  # the sampler's new answer


def test_the_identity_needs_no_sampler_and_no_state_but_its_kind():
    orders = Orders(None, 5)
    assert orders.order_of(0) is None and orders.recomputable
    assert orders.state_dict(3) == {"kind": "none"}


def test_a_stateful_samplers_state_carries_the_order_and_loading_it_calls_nothing():
    sampler = Counting()
    orders = Orders(sampler, 4)
    orders.order_of(1)
    state = json.loads(json.dumps(orders.state_dict(1)))
    assert state == {"kind": "Counting", "order": [2, 3, 0, 1]}
    fresh = Counting()
    other = Orders(fresh, 4)
    loaded = other.loaded(state, Position(epoch=1, current_position=2))
    assert len(fresh.calls) == 1  # only its own construction: the state brought the order
    assert loaded.order_of(1).tolist() == [2, 3, 0, 1]
    assert loaded.order_of(2).tolist() == [1, 2, 3, 0] and len(fresh.calls) == 2
    assert fresh.calls[1][0] == [2, 3, 0, 1]  # derived from the loaded order
    assert other.order_of(0).tolist() == [3, 0, 1, 2]  # the original is unchanged


def test_a_recomputable_samplers_state_is_its_seed_and_no_order():
    orders = Orders(ShuffleOrderSampler(11), 50)
    state = orders.state_dict(4)
    assert state == {"kind": "shuffle", "state": {"seed": 11}}
    other = Orders(ShuffleOrderSampler(0), 50).loaded(state, Position(epoch=4))
    assert np.array_equal(other.order_of(4), orders.order_of(4))
    assert np.array_equal(other.order_of(9), orders.order_of(9))


def test_loading_never_changes_the_sampler_object_passed_in():
    sampler = ShuffleOrderSampler(1)
    orders = Orders(sampler, 5)
    loaded = orders.loaded({"kind": "shuffle", "state": {"seed": 2}}, Position())
    assert sampler.seed == 1 and loaded.sampler is not sampler and loaded.sampler.seed == 2


@pytest.mark.parametrize("state, error, message", [
    ({"kind": "other"}, SamplerMismatchError, "order sampler 'other'.* uses 'Counting'"),
    ({"kind": "Counting"}, ValueError, "lacks the 'order'"),
    ({"kind": "Counting", "order": [0, 1, 2]}, ValueError, "has length 3.* 4 examples"),
    ({"kind": "Counting", "order": [0, 1, 2, 9]}, ValueError, r"integers in \[0, 4\)"),
])
def test_a_state_that_does_not_fit_is_refused_naming_the_key(state, error, message):
    orders = Orders(Counting(), 4)
    with pytest.raises(error, match=message):
        orders.loaded(state, Position())


@pytest.mark.parametrize("answer, message", [
    (np.array([0, 1, 2, 3, 0]), "returned an order of length 5 for epoch 1.* length 4"),
    (np.arange(4.0), "expected a 1-D integer array"),
    (np.arange(4).reshape(2, 2), "expected a 1-D integer array"),
    (np.arange(1, 5), r"indices outside \[0, 4\)"),
])
def test_a_bad_order_from_the_sampler_is_named(answer, message):
    answers = iter([np.arange(4), answer])
    orders = Orders(lambda order, position: next(answers), 4)
    with pytest.raises(ValueError, match=message):
        orders.order_of(1)


def test_a_shuffles_pinned_order_must_be_a_permutation():
    orders = Orders(ShuffleOrderSampler(0), 3)
    with pytest.raises(ValueError, match=r"not a permutation of range\(3\)"):
        orders.pin(0, [0, 0, 1])
    orders.pin(0, [2, 0, 1])
    assert orders.state_dict(0)["order"] == [2, 0, 1]  # a pinned epoch is checkpointed as is


# -- through an Engine with the serial executor --------------------------------------------

def calls_per_step(engine: Engine, sampler: Counting, steps: int) -> list[int]:
    """How many times the sampler was called after each of ``steps`` batches."""
    out = []
    for _ in range(steps):
        engine.next()
        out.append(len(sampler.calls))
    return out


@pytest.mark.parametrize("policy, calls", [
    # 5 examples in batches of 2; the count after each of 7 batches:
    (None, [1, 1, 2, 2, 3, 3, 3]),  # Chainer's fill: on the batch that crosses an epoch end
    ("keep", [1, 1, 2, 2, 2, 3, 3]),  # on the short 3rd batch of each epoch
    ("pad", [1, 1, 2, 2, 2, 3, 3]),
    ("discard", [1, 2, 2, 3, 3, 4, 4]),  # two full batches per epoch
    ("rollover", [1, 2, 2, 2, 3, 3, 4]),  # epoch 1 opens with epoch 0's tail: three batches
])
def test_an_engine_asks_a_stateful_sampler_on_the_batch_that_ends_each_epoch(policy, calls):
    sampler = Counting()
    engine = Engine(list(range(5)), batch_size=2, order_sampler=sampler, last_batch=policy)
    assert len(sampler.calls) == 1  # epoch 0, at construction
    epochs = []
    for _ in range(7):
        engine.next()
        epochs.append(engine.position.epoch)
        # Never ahead of the caller and never late: one order per epoch begun.
        assert len(sampler.calls) == 1 + engine.position.epoch
    assert [1 + epoch for epoch in epochs] == calls


def test_the_position_chainer_passes_is_where_the_epochs_last_batch_began():
    sampler = Counting()
    engine = Engine(list(range(5)), batch_size=2, order_sampler=sampler, last_batch="keep")
    calls_per_step(engine, sampler, 6)
    assert [position for _, position in sampler.calls] == [0, 4, 4]
    sampler = Counting()
    engine = Engine(list(range(5)), batch_size=2, order_sampler=sampler, last_batch="rollover")
    calls_per_step(engine, sampler, 7)
    assert [position for _, position in sampler.calls] == [0, 2, 3, 2]


def test_a_resumed_engine_asks_no_order_the_state_carries_then_one_per_epoch():
    first_sampler, second_sampler = Counting(), Counting()
    first = Engine(list(range(5)), batch_size=2, order_sampler=first_sampler)
    calls_per_step(first, first_sampler, 4)  # into epoch 1
    state = json.loads(json.dumps(first.state_dict()))
    second = Engine(list(range(5)), batch_size=2, order_sampler=second_sampler)
    second.load_state_dict(state)
    assert len(second_sampler.calls) == 1  # its construction only
    for _ in range(6):
        assert list(second.next()) == list(first.next())
        assert len(second_sampler.calls) - 1 == second.position.epoch - 1
    assert second_sampler.calls[1][0] == first_sampler.calls[2][0]  # from the loaded order


def test_reset_asks_a_stateful_sampler_for_epoch_0_again():
    sampler = Counting()
    engine = Engine(list(range(4)), batch_size=2, order_sampler=sampler, last_batch="keep")
    calls_per_step(engine, sampler, 3)
    before = len(sampler.calls)
    engine.reset()
    assert len(sampler.calls) == before + 1 and sampler.calls[-1] == ([0, 1, 2, 3], 0)


def test_each_empty_epoch_asks_the_sampler_once():
    sampler = Counting()
    engine = Engine(list(range(3)), batch_size=5, order_sampler=sampler, last_batch="rollover")
    assert engine.skip_empty_epoch() and len(sampler.calls) == 2
    # Epoch 0's order [2, 0, 1] rolled over whole, then the start of epoch 1's [1, 2, 0].
    assert list(engine.next()) == [2, 0, 1, 1, 2]
    # Less than a batch of epoch 1 is left, so that batch ended it: epoch 2's order now.
    assert engine.position.epoch == 2 and len(sampler.calls) == 3


@given(n=st.integers(1, 12), b=st.integers(1, 5), seed=st.integers(0, 2**32 - 1),
       policy=st.sampled_from([None, "keep", "pad", "rollover"]), steps=st.integers(0, 20))
def test_a_recomputable_sampler_is_asked_each_epoch_once_and_never_called(n, b, seed, policy,
                                                                          steps):
    sampler = CountingShuffle(seed)
    engine = Engine(list(range(n)), batch_size=b, order_sampler=sampler, last_batch=policy)
    for _ in range(steps):
        engine.next()
    assert sampler.called == 0
    assert sorted(sampler.asked) == list(range(engine.position.epoch + 1))
    assert "order" not in engine.state_dict()["order_sampler"]


def test_an_order_sampler_subclass_without_epoch_order_is_stateful():
    class Reverse(OrderSampler):
        def __call__(self, current_order, current_position):
            return np.asarray(current_order)[::-1].copy()

    orders = Orders(Reverse(), 3)
    assert not orders.recomputable and orders.kind.endswith("Reverse")
    assert orders.state_dict(0)["order"] == [2, 1, 0]
