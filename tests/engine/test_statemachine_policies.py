"""The pure state machine, for every last-batch policy and for batch stops (issue 21, part 5).

No iterator, no executor, no process: :func:`advance` is driven directly with
orders that tag every index with its epoch (``epoch * TAG + example``), so each
check can tell where an index came from. Each property holds for all dataset
lengths (0 included), batch sizes, policies, ``repeat`` and checkpoint points.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import (
    LAST_BATCH_POLICIES,
    BatchPlan,
    Position,
    plain_bounds,
)

START = Position()
TAG = 1000  # an index's epoch is index // TAG, its example index % TAG
EPOCHS = 4  # epochs a repeating stream is followed for


def tagged(n: int, seed: int):
    """An order per epoch: a permutation of range(n) drawn from (seed, epoch), tagged."""

    def order_of(epoch: int) -> np.ndarray:
        rng = np.random.default_rng([seed, epoch])
        return rng.permutation(n) + epoch * TAG

    return order_of


@dataclass
class Step:
    before: Position
    after: Position
    plan: BatchPlan
    asked: list[int] = field(default_factory=list)  # epochs whose order this step asked for


def run(spec: BatchSpec, order_of, stops_of=None, start: Position = START,
        epochs: int = EPOCHS, limit: int = 400) -> list[Step]:
    """Drive the machine from ``start`` until it stops or has entered epoch ``epochs``."""
    steps, position = [], start
    while position.epoch < epochs and len(steps) < limit:
        asked: list[int] = []

        def recording(epoch, asked=asked):
            asked.append(epoch)
            return order_of(epoch)

        result = spec.advance(position, recording, stops_of)
        if result is None:
            break
        after, plan = result
        steps.append(Step(position, after, plan, asked))
        position = after
    return steps


def detail(position: Position, n: int) -> float:
    return position.epoch + position.current_position / n


def flat(steps: list[Step]) -> list[int]:
    """Every index the steps planned, in order."""
    return [int(i) for step in steps for i in step.plan.indices]


def by_epoch(steps: list[Step]) -> dict[int, list[Step]]:
    """The steps grouped by the epoch they end in (the epoch of their last index)."""
    grouped: dict[int, list[Step]] = {}
    for step in steps:
        grouped.setdefault(step.before.epoch if not step.plan.indices.size
                           else step.plan.epoch_at(len(step.plan.indices) - 1), []).append(step)
    return grouped


specs = st.builds(
    BatchSpec,
    batch_size=st.integers(1, 9),
    epoch_size=st.integers(0, 14),
    repeat=st.booleans(),
    last_batch=st.sampled_from(LAST_BATCH_POLICIES),
)
# Specs a stream can run: a repeating one needs examples (the ValueError is tested apart).
streams = specs.filter(lambda s: s.epoch_size > 0 or not s.repeat)


@given(spec=specs, seed=st.integers(0, 2**32 - 1))
def test_every_step_moves_forward_and_flags_a_new_epoch_exactly_at_its_boundary(spec, seed):
    n = spec.epoch_size
    if spec.repeat and n == 0:
        with pytest.raises(ValueError, match="non-empty dataset, got length 0"):
            spec.advance(Position(), tagged(n, seed))
        return
    steps = run(spec, tagged(n, seed))
    for step in steps:
        assert detail(step.after, n) > detail(step.before, n)  # epoch_detail is monotone
        assert step.after.previous_epoch_detail == detail(step.before, n)
        assert step.after.is_new_epoch == (step.after.epoch > step.before.epoch)
        if step.after.is_new_epoch and spec.last_batch is not None:
            assert step.after.current_position == 0 and step.after.epoch == step.before.epoch + 1
        indices = step.plan.indices
        assert indices.dtype == np.int64
        assert [step.plan.epoch_at(k) for k in range(len(indices))] == (indices // TAG).tolist()
        # The order of the epoch the machine now stands in, and no later one, was asked for.
        assert max(step.asked) == step.after.epoch
    if not spec.repeat:
        assert not steps or steps[-1].after.epoch == 1
        end = steps[-1].after if steps else Position()
        assert spec.advance(end, tagged(n, seed)) is None  # and it stays stopped


@given(spec=streams.filter(lambda s: s.last_batch in ("keep", "pad")
                         or (s.last_batch is None and not s.repeat)),
       seed=st.integers(0, 2**32 - 1))
def test_keep_and_pad_visit_every_example_once_per_epoch_in_its_order(spec, seed):
    n, b, order_of = spec.epoch_size, spec.batch_size, tagged(spec.epoch_size, seed)
    steps = run(spec, order_of)
    epochs = by_epoch(steps)
    assert sorted(epochs) == list(range(0 if n == 0 else EPOCHS if spec.repeat else 1))
    for epoch, group in epochs.items():
        *full, last = group
        assert all(s.plan.pad == 0 and len(s.plan.indices) == b for s in full)
        assert all(not s.after.is_new_epoch for s in full) and last.after.is_new_epoch
        real = [s.plan.indices[:len(s.plan.indices) - s.plan.pad] for s in group]
        assert np.concatenate(real).tolist() == order_of(epoch).tolist()
        assert len(group) == spec.batches_per_epoch()
        if spec.last_batch == "pad":
            assert len(last.plan.indices) == b and last.plan.pad == (-n) % b
            filler = last.plan.indices[b - last.plan.pad:]
            assert filler.tolist() == np.resize(order_of(epoch), last.plan.pad).tolist()
        else:
            assert last.plan.pad == 0 and 0 < len(last.plan.indices) <= b


@given(spec=streams.filter(lambda s: s.last_batch == "discard"), seed=st.integers(0, 2**32 - 1))
def test_discard_keeps_full_batches_and_drops_only_each_epochs_tail(spec, seed):
    n, b, order_of = spec.epoch_size, spec.batch_size, tagged(spec.epoch_size, seed)
    steps = run(spec, order_of)
    if not spec.repeat and n < b:
        assert steps == []  # a single epoch without a full batch: nothing, then the end
        return
    assert [s.after.epoch for s in steps if s.after.is_new_epoch] == \
        list(range(1, EPOCHS + 1 if spec.repeat else 2))  # every epoch ends once
    for epoch in range(EPOCHS if spec.repeat else 1):
        group = [s for s in steps if s.before.epoch == epoch]
        assert all(len(s.plan.indices) == b and s.plan.pad == 0 for s in group if n >= b)
        assert flat(group) == order_of(epoch)[:n // b * b].tolist()
        # An epoch without a full batch is still an epoch: one empty step ends it.
        assert len(group) == max(spec.batches_per_epoch(), 1)
        assert group[-1].after.is_new_epoch


@given(spec=streams.filter(lambda s: s.last_batch == "rollover" or
                         (s.last_batch is None and s.repeat)),
       seed=st.integers(0, 2**32 - 1))
def test_rollover_and_chainers_fill_keep_every_batch_full_and_lose_no_example(spec, seed):
    n, b, order_of = spec.epoch_size, spec.batch_size, tagged(spec.epoch_size, seed)
    steps = run(spec, order_of)
    if n == 0:
        assert steps == []
        return
    emitted = 0
    for step in steps:
        size = len(step.plan.indices)
        assert size in ((0, b) if spec.last_batch == "rollover" else (b,))
        emitted += size
        # Nothing lost, nothing repeated: emitted + carried = examples the position passed.
        assert emitted + step.after.carry == step.after.epoch * n + step.after.current_position
    stream = flat(steps)
    # (A batch larger than the epochs spans several: up to batch_size of them.)
    orders = np.concatenate([order_of(e) for e in range(EPOCHS + b + 1)])
    assert stream == orders[:emitted].tolist()
    if spec.last_batch == "rollover":
        # A batch ends an epoch exactly when less than a full batch of it is left.
        for step in steps:
            left = step.before.carry + n - step.before.current_position - len(step.plan.indices)
            assert step.after.is_new_epoch == (left < b)
            if step.plan.indices.size:  # a batch belongs to the epoch of its last example
                assert step.plan.epoch_at(b - 1) == step.before.epoch


@st.composite
def stops_specs(draw):
    n = draw(st.integers(1, 14))
    ends = draw(st.lists(st.integers(1, n - 1), unique=True, max_size=n - 1)) if n > 1 else []
    stops = np.asarray(sorted(ends) + [n], dtype=np.int64)
    spec = BatchSpec(draw(st.integers(1, 9)), n, draw(st.booleans()),
                     draw(st.sampled_from(LAST_BATCH_POLICIES)))
    return spec, stops


@given(spec_stops=stops_specs(), seed=st.integers(0, 2**32 - 1))
def test_batch_stops_cut_every_epoch_at_the_samplers_ends_whatever_the_policy(spec_stops, seed):
    spec, stops = spec_stops
    order_of = tagged(spec.epoch_size, seed)
    steps = run(spec, order_of, stops_of=lambda epoch: stops)
    for epoch in range(EPOCHS if spec.repeat else 1):
        group = [s for s in steps if s.before.epoch == epoch]
        assert [s.after.current_position or spec.epoch_size for s in group] == stops.tolist()
        assert [s.after.is_new_epoch for s in group] == [False] * (len(group) - 1) + [True]
        assert flat(group) == order_of(epoch).tolist()
        assert all(s.plan.pad == 0 and s.after.carry == 0 for s in group)


def test_the_identity_order_equals_an_explicit_arange():
    for policy in LAST_BATCH_POLICIES:
        spec = BatchSpec(4, 10, True, policy)
        identity = run(spec, lambda epoch: None)
        explicit = run(spec, lambda epoch: np.arange(10))
        assert [s.after for s in identity] == [s.after for s in explicit]
        assert all(np.array_equal(a.plan.indices, b.plan.indices)
                   for a, b in zip(identity, explicit, strict=True))


def is_plain(step: Step) -> bool:
    """Whether a step is a plain batch: inside its epoch's order, ending neither it nor
    another, with no carried or padding example, and asking no other epoch's order."""
    before, after, plan = step.before, step.after, step.plan
    return (len(plan.indices) > 0 and isinstance(plan.epochs, int)
            and plan.epochs == before.epoch == after.epoch and not after.is_new_epoch
            and plan.pad == 0 and before.carry == 0 and set(step.asked) == {before.epoch})


@given(spec=streams, seed=st.integers(0, 2**32 - 1))
@example(spec=BatchSpec(3, 7, True, "rollover"), seed=1)  # a carried tail opens each epoch
@example(spec=BatchSpec(3, 7, True, None), seed=1)  # a batch crosses into the next epoch
@example(spec=BatchSpec(3, 8, True, "pad"), seed=1)
@example(spec=BatchSpec(3, 8, False, "discard"), seed=1)
def test_plain_bounds_predict_every_plain_batch_exactly_and_no_other(spec, seed):
    check_plain_bounds(spec, None, seed)


@given(spec_stops=stops_specs(), seed=st.integers(0, 2**32 - 1))
def test_plain_bounds_follow_batch_stops(spec_stops, seed):
    check_plain_bounds(*spec_stops, seed)


def check_plain_bounds(spec: BatchSpec, stops: np.ndarray | None, seed: int) -> None:
    """plain_bounds, from every position a stream passes, against advance()'s steps."""
    n, order_of = spec.epoch_size, tagged(spec.epoch_size, seed)
    stops_of = None if stops is None else (lambda epoch: stops)
    steps = run(spec, order_of, stops_of)
    for k, step in enumerate(steps):
        before = step.before
        bounds = plain_bounds(before, spec.batch_size, n, spec.repeat, spec.last_batch, stops)
        assert bounds == spec.plain_bounds(before, stops)
        # None exactly when advance() takes a batch that is not plain.
        assert (bounds is not None) == is_plain(step)
        if bounds is None:
            continue
        assert bounds[0] == before.current_position and len(bounds) >= 2
        # Every batch of the run is the step advance() takes, and only plain ones.
        ahead = steps[k:k + len(bounds) - 1]
        assert len(ahead) == len(bounds) - 1
        epoch = before.epoch
        for j, taken in enumerate(ahead):
            start, stop = bounds[j], bounds[j + 1]
            assert is_plain(taken)
            assert taken.after == Position(epoch, stop, False, epoch + start / n, 0)
            assert taken.plan.indices.tolist() == order_of(epoch)[start:stop].tolist()
        # The run ends where the next batch is not plain: it is as long as it can be.
        if k + len(bounds) - 1 < len(steps):
            assert not is_plain(steps[k + len(bounds) - 1])


def as_checkpoint(position: Position) -> Position:
    """The position through what a checkpoint stores: a JSON object."""
    return Position(**json.loads(json.dumps(position._asdict())))


def same(a: list[Step], b: list[Step]) -> bool:
    return [(s.after, s.plan.indices.tolist(), s.plan.pad) for s in a] == [
        (s.after, s.plan.indices.tolist(), s.plan.pad) for s in b]


class Checkpoints(RuleBasedStateMachine):
    """Step a stream, checkpoint anywhere; every checkpoint resumes into the same stream."""

    @initialize(spec=specs.filter(lambda s: s.epoch_size > 0), seed=st.integers(0, 2**32 - 1),
                with_stops=st.booleans())
    def start(self, spec, seed, with_stops):
        self.spec, self.order_of = spec, tagged(spec.epoch_size, seed)
        n = spec.epoch_size
        # Every third position a batch end: a batch sampler's own cuts.
        stops = np.asarray(sorted({*range(3, n, 3), n}), dtype=np.int64)
        self.stops_of = (lambda epoch: stops) if with_stops else None
        self.steps: list[Step] = []
        self.position = Position()
        self.done = False
        self.saved: list[tuple[Position, int]] = []

    @precondition(lambda self: not self.done)
    @rule()
    def step(self):
        taken = run(self.spec, self.order_of, self.stops_of, self.position,
                    epochs=self.position.epoch + 2, limit=1)
        if not taken:
            self.done = True
            return
        self.steps += taken
        self.position = taken[-1].after

    @rule()
    def checkpoint(self):
        self.saved.append((as_checkpoint(self.position), len(self.steps)))

    @invariant()
    def epoch_detail_only_grows(self):
        if not hasattr(self, "spec"):
            return
        n = self.spec.epoch_size
        details = [0.0] + [detail(s.after, n) for s in self.steps]
        assert details == sorted(details) and len(set(details)) == len(details)

    def teardown(self):
        if not hasattr(self, "spec"):
            return
        for position, k in self.saved:
            ahead = self.steps[-1].after.epoch + 1 if self.steps else 1
            resumed = run(self.spec, self.order_of, self.stops_of, position, epochs=ahead,
                          limit=len(self.steps) - k)
            assert same(resumed, self.steps[k:])


Checkpoints.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_resume_from_any_checkpoint_yields_the_same_remaining_stream = Checkpoints.TestCase
