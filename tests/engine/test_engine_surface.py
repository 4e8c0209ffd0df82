"""The engine's door-facing surface: epoch(), batches_in_epoch() and read-only properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dataset_kit.engine as engine_api
from dataset_kit.engine import Engine, ExecutorSpec


@given(n=st.integers(0, 20), batch=st.integers(1, 8),
       policy=st.sampled_from([None, "keep", "discard", "rollover", "pad"]))
def test_epoch_yields_what_next_gives_until_the_epoch_ends(n, batch, policy):
    by_epoch = Engine(list(range(n)), batch_size=batch, shuffle=True, seed=1, last_batch=policy)
    by_next = Engine(list(range(n)), batch_size=batch, shuffle=True, seed=1, last_batch=policy)
    for _ in range(3):
        expected = by_epoch.batches_in_epoch()
        got = list(by_epoch.epoch())
        if policy is not None:  # Chainer's crossing batch starts the next epoch mid-way
            assert len(got) == expected
        if n and not by_next.skip_empty_epoch():
            want = [by_next.next()]
            while not by_next.position.is_new_epoch:
                want.append(by_next.next())
            assert got == want
        else:
            assert got == []
        assert by_epoch.state_dict() == by_next.state_dict()


def test_epoch_of_a_non_repeating_engine_ends_at_its_end_and_then_yields_nothing():
    engine = Engine(list(range(5)), batch_size=2, repeat=False, shuffle=False)
    assert list(engine.epoch()) == [[0, 1], [2, 3], [4]]
    assert list(engine.epoch()) == []


def test_epoch_resumes_mid_epoch_from_a_state():
    first = Engine(list(range(10)), batch_size=3, shuffle=True, seed=4, last_batch="rollover")
    batches = first.epoch()
    head = [next(batches), next(batches)]
    second = Engine(list(range(10)), batch_size=3, shuffle=True, seed=0, last_batch="rollover",
                    executor=ExecutorSpec(kind="thread", workers=2))
    try:
        second.load_state_dict(first.state_dict())
        assert head + list(second.epoch()) == head + list(batches)
    finally:
        second.close()


def test_door_facing_properties_are_read_only():
    engine = Engine(list(range(7)), batch_size=3, shuffle=False)
    assert (engine.batch_size, engine.epoch_size, engine.dataset_length) == (3, 7, 7)
    assert engine.position == engine_api.Position() and engine.last_plan is None
    engine.next()
    assert list(engine.last_plan.indices) == [0, 1, 2]
    for name in ("position", "last_plan", "spec", "seed", "order_sampler", "dataset_length"):
        with pytest.raises(AttributeError):
            setattr(engine, name, None)


def test_the_public_surface_is_importable_from_the_package():
    for name in engine_api.__all__:
        assert getattr(engine_api, name) is not None


class _FailsOnce:
    """Six examples; reading example 3 raises the first time only."""

    def __init__(self) -> None:
        self.failed = False

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> int:
        if i == 3 and not self.failed:
            self.failed = True
            raise OSError("example 3 is not there yet")
        return i


@pytest.mark.parametrize("kind", ["serial", "thread"])
def test_an_epoch_goes_on_after_a_failed_batch_and_rebuilds_it(kind):
    executor = ExecutorSpec(kind, workers=1) if kind != "serial" else ExecutorSpec()
    engine = Engine(_FailsOnce(), batch_size=2, shuffle=False, executor=executor)
    batches = engine.epoch()
    assert next(batches) == [0, 1]
    with pytest.raises(OSError, match="example 3"):
        next(batches)
    assert engine.position.current_position == 2  # the failed batch was not consumed
    assert list(batches) == [[2, 3], [4, 5]]
    assert engine.position.is_new_epoch
