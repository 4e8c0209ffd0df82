"""Plain runs: the engine's fast path gives exactly what stepping the state machine gives.

An engine with a serial executor cuts the plain batches of an epoch straight
from its order (:mod:`dataset_kit.engine._run`). The reference here is the
same engine that never keeps a run: before every batch it loads its own
state (a loaded engine plans its next batch with the state machine, and
resuming is exact by contract). Both must agree on every batch, position,
plan, state and stateful-sampler call, for every policy, with batch stops,
after a batch whose building raised, and across checkpoints.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit import DatasetMixin, example_rng
from dataset_kit.engine import BatchListOrder, Engine, ExecutorSpec, ShuffleOrderSampler, _run
from dataset_kit.engine._statemachine import LAST_BATCH_POLICIES


class Draws(DatasetMixin):
    """Examples ``(index, a draw of example_rng())``; raises once on its ``fail_at``-th batch."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.fail_at, self.batches = n, fail_at, 0

    def __len__(self) -> int:
        return self.n

    def get_example(self, i: int) -> tuple[int, int]:
        return int(i), int(example_rng().integers(1 << 30))

    def get_batch(self, indices: np.ndarray) -> list:
        self.batches += 1
        if self.batches == self.fail_at:
            raise OSError(f"batch {self.batches} could not be read")
        return super().get_batch(indices)


class Rotating:
    """A stateful (Chainer-style) sampler: each order is the last one rotated; logs calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], int]] = []

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        self.calls.append((np.asarray(current_order).tolist(), int(current_position)))
        return np.roll(np.asarray(current_order), 3)


class Chunks:
    """A batch sampler of any kind: a fixed partition of a permutation; counts its epochs."""

    def __init__(self, batches: list[list[int]]) -> None:
        self.batches = batches
        self.iterations = 0

    def __iter__(self):
        self.iterations += 1
        return iter(self.batches)


@st.composite
def setups(draw):
    """Engine arguments for any policy, sampler kind and executor, and where to fail."""
    n = draw(st.integers(1, 14))
    kind = draw(st.sampled_from(["identity", "shuffle", "stateful", "batches"]))
    policy = draw(st.sampled_from(LAST_BATCH_POLICIES))
    batch_size = draw(st.integers(1, 9))
    if kind == "stateful" and policy == "rollover":
        # A stateful sampler's state keeps one previous order, so a tail carried
        # over several epochs cannot be saved, and the reference saves every step.
        batch_size = min(batch_size, n)
    repeat = draw(st.booleans())
    if kind == "batches":
        order = draw(st.permutations(range(n)))
        cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=n - 1))) if n > 1 else []
        chunks = [list(order[a:b]) for a, b in zip([0, *cuts], [*cuts, n])]
        batch_size = None
    converter = draw(st.sampled_from([None, lambda batch: ("converted", list(batch))]))

    def make(dataset: Draws) -> Engine:
        sampler = {"identity": None, "shuffle": ShuffleOrderSampler(5), "stateful": Rotating(),
                   "batches": BatchListOrder(Chunks(chunks)) if kind == "batches" else None,
                   }[kind]
        executor = None if converter is None else ExecutorSpec("serial", converter=converter)
        return Engine(dataset, batch_size=batch_size, repeat=repeat, shuffle=False if sampler
                      is None else None, order_sampler=sampler, seed=11, last_batch=policy,
                      executor=executor)

    return n, make, draw(st.none() | st.integers(1, 40))


def step(engine: Engine) -> tuple:
    """Take the next batch and return everything a caller can see of the step."""
    try:
        batch = engine.next()
    except StopIteration:
        return ("stop",)
    plan = engine.last_plan
    epochs = plan.epochs if isinstance(plan.epochs, int) else plan.epochs.tolist()
    return (type(batch), batch, engine.position, plan.indices.dtype, plan.indices.tolist(),
            epochs, plan.pad, engine.state_dict())


def quiet_step(engine: Engine) -> tuple:
    """Take the next batch without reading anything else of the engine."""
    try:
        batch = engine.next()
    except StopIteration:
        return ("stop",)
    return (type(batch), batch)


def reference_step(engine: Engine) -> tuple:
    """The same step from a freshly loaded state: planned by the state machine, no run."""
    engine.load_state_dict(engine.state_dict())
    return step(engine)


def calls(engine: Engine) -> list:
    """What the engine's stateful sampler was asked, in order (a batch sampler: its epochs)."""
    sampler = engine.order_sampler
    if isinstance(sampler, Rotating):
        return list(sampler.calls)
    if isinstance(sampler, BatchListOrder):
        return ["epoch"] * sampler.batch_sampler.iterations
    return []


ACTIONS = ["rewind", "reset", "next epoch", "next epoch, drop rollover", "close", "pin"]


@settings(max_examples=200, deadline=None)
@given(setup=setups(), checkpoint_at=st.integers(0, 60),
       action=st.tuples(st.sampled_from(ACTIONS), st.integers(0, 40), st.integers(0, 40)),
       observe_every=st.integers(1, 4), by_copy=st.booleans())
def test_plain_runs_agree_with_the_state_machine_on_every_batch_state_and_sampler_call(
        setup, checkpoint_at, action, observe_every, by_copy):
    n, make, fail_at = setup
    engine, reference = make(Draws(n, fail_at)), make(Draws(n))
    if engine.spec.repeat and not engine.spec.yields_batches:
        return  # no batch at all (tested in test_empty_epochs)
    asked_before_resume: list = []
    fresh = False  # whether the engine was resumed from a state into a fresh one
    what, saved_at, act_at = action
    saved = None
    for k in range(60):
        if k == checkpoint_at and by_copy:
            engine = copy.copy(engine)  # a copy (sharing the sampler) goes on the same way
        elif k == checkpoint_at:
            # A fresh engine resumed here goes on exactly as this one does.
            resumed = make(Draws(n))
            resumed.load_state_dict(engine.state_dict())
            asked_before_resume = calls(engine)
            engine = resumed
            fresh = True
        if k == saved_at:
            saved = engine.state_dict()
        # (Not right after the resume: a state does not say where the last batch
        # of its epoch began, which Chainer passes to a stateful sampler, so an
        # engine that leaves the epoch before planning a batch passes 0. That
        # holds without runs too.)
        if k == act_at and k != checkpoint_at and (saved is not None or what != "rewind"):
            # Mid-run, both move elsewhere: the engine must leave its run.
            for each in (engine, reference):
                if what == "rewind":
                    each.load_state_dict(saved)
                elif what == "reset":
                    each.reset()
                elif what == "close":
                    each.close()  # a serial engine goes on after close()
                elif what == "pin":
                    if each.order_sampler is not None:
                        each.pin_current_order(each.current_order())
                else:
                    each.start_next_epoch(keep_rollover=what == "next epoch")
        expected = reference_step(reference)
        # Between observed steps nothing reads the engine's position: a run then
        # keeps it lazily, and the next read must give what stepping gives.
        observed = k % observe_every == 0 or k in (checkpoint_at, saved_at, act_at)
        if observed:
            # The reference saved its state before its step, which may ask a stateful
            # sampler for the order of an epoch just entered: so does this engine.
            engine.state_dict()
        take = step if observed else quiet_step
        try:
            got = take(engine)
        except OSError:
            # Not consumed (only epochs without a batch before it were): it comes next.
            got = take(engine)
        assert got == (expected if observed else expected[:2])
        # The sampler is asked exactly when, and with what, the state machine asks it
        # (a resumed engine's sampler also answered its constructor, once).
        if observed and not fresh:
            assert calls(engine) == calls(reference)
        elif observed:
            assert asked_before_resume + calls(engine)[1:] == calls(reference)
        if expected == ("stop",):
            break


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("run_examples", [1, 20, 1 << 16])
def test_a_long_epoch_is_cut_into_bounded_runs_that_give_the_same_batches(
        monkeypatch, shuffle, run_examples):
    # A run holds at most RUN_EXAMPLES examples (at least one batch); the next
    # one starts where it ends, through the state machine.
    monkeypatch.setattr(_run, "RUN_EXAMPLES", run_examples)
    data = np.arange(1000) * 10

    def make() -> Engine:
        return Engine(data, batch_size=7, shuffle=shuffle, seed=3, last_batch="pad")

    engine, reference = make(), make()
    for _ in range(400):  # almost three epochs
        expected = reference_step(reference)
        assert step(engine) == expected


def test_a_stateful_sampler_leaving_an_epoch_mid_run_is_told_where_the_last_batch_began():
    # Chainer passes a stateful sampler the position where the last batch of
    # the epoch began; the second and third batches here are plain ones.
    engine = Engine(np.arange(10), batch_size=2, order_sampler=Rotating(), seed=0)
    for _ in range(3):
        engine.next()
    engine.start_next_epoch()
    engine.next()
    first_order = np.roll(np.arange(10), 3).tolist()
    assert engine.order_sampler.calls == [(list(range(10)), 0), (first_order, 4)]
