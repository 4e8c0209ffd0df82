"""The engine's checkpoint format: what a state holds, how it is checked, and old versions.

Version 2 (this one) is a flat, JSON-ready dict::

    format, version                 "dataset_kit.iterator", 2
    dataset_length, epoch_size      the dataset's length; examples per epoch
    batch_size, repeat, last_batch  the batching spec, by name
    epoch, current_position, is_new_epoch, previous_epoch_detail, carry
                                    the position (carry: rolled-over examples)
    seed                            the iterator's seed (shuffle, example_rng)
    order_sampler                   {"kind", "state"?, "order"?, "previous_order"?}

Version 1 (dataset_kit 0.1) had no spec beyond batch size and repeat, no
carry, and named samplers by module path; it is read as the version-2 state
it stands for.
"""

from __future__ import annotations

from typing import Any

from dataset_kit.iterators._spec import BatchSpec
from dataset_kit.iterators._statemachine import Position

STATE_FORMAT = "dataset_kit.iterator"
STATE_VERSION = 2
_V1_SHUFFLE_KIND = "dataset_kit.iterators.order_samplers.ShuffleOrderSampler"


def make_state(spec: BatchSpec, dataset_length: int, position: Position, seed: int,
               order_sampler: dict) -> dict:
    """Return the version-2 state of an engine."""
    return {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "dataset_length": dataset_length,
        "epoch_size": spec.epoch_size,
        "batch_size": spec.batch_size,
        "repeat": spec.repeat,
        "last_batch": spec.last_batch,
        "epoch": position.epoch,
        "current_position": position.current_position,
        "is_new_epoch": position.is_new_epoch,
        "previous_epoch_detail": position.previous_epoch_detail,
        "carry": position.carry,
        "seed": seed,
        "order_sampler": order_sampler,
    }


def read_state(state: Any, spec: BatchSpec, dataset_length: int, sampler_kind: str) -> dict:
    """Check ``state`` against this engine and return it in version 2.

    Raises:
        ValueError: if it is not an iterator state, has an unknown version, or
            was saved for another dataset length, epoch size, batch size,
            repeat mode or last-batch policy, or holds an invalid position.
    """
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"state is not a dataset_kit iterator state: {_short(state)}")
    version = state.get("version")
    if version == 1:
        state = _upgrade_v1(state, sampler_kind)
    elif version != STATE_VERSION:
        raise ValueError(
            f"state has format version {version!r}; this dataset_kit reads versions 1 and "
            f"{STATE_VERSION}"
        )
    for key, mine in (("dataset_length", dataset_length), ("batch_size", spec.batch_size),
                      ("repeat", spec.repeat), ("epoch_size", spec.epoch_size),
                      ("last_batch", spec.last_batch)):
        if state.get(key) != mine:
            raise ValueError(
                f"state was saved with {key}={state.get(key)!r}, but this iterator has "
                f"{key}={mine!r}"
            )
    epoch, pos, carry = state.get("epoch"), state.get("current_position"), state.get("carry")
    n = spec.epoch_size
    if not (isinstance(epoch, int) and epoch >= 0 and isinstance(pos, int)
            and 0 <= pos < max(n, 1) and isinstance(carry, int)
            and 0 <= carry < max(spec.batch_size, n + 1)  # several epochs' tails may roll over
            and (carry == 0 or (pos == 0 and epoch * n >= carry))):
        raise ValueError(f"state has an invalid position: epoch={epoch!r}, "
                         f"current_position={pos!r}, carry={carry!r}")
    return state


def position_of(state: dict) -> Position:
    """Return the position a (checked) version-2 state records."""
    previous = state.get("previous_epoch_detail")
    return Position(state["epoch"], state["current_position"], bool(state.get("is_new_epoch")),
                    None if previous is None else float(previous), state["carry"])


def _upgrade_v1(state: dict, sampler_kind: str) -> dict:
    upgraded = dict(state, version=STATE_VERSION, epoch_size=state.get("dataset_length"),
                    last_batch=None, carry=0)
    sampler = state.get("order_sampler")
    if isinstance(sampler, dict):
        sampler = dict(sampler)
        kind = sampler.get("kind")
        if kind == _V1_SHUFFLE_KIND:
            sampler = {"kind": "shuffle", "state": {"seed": sampler.get("seed")}}
        elif isinstance(kind, str) and kind.endswith("." + sampler_kind):
            # 0.1 named a user's sampler by module path; today's name is stable.
            sampler["kind"] = sampler_kind
        upgraded["order_sampler"] = sampler
    return upgraded


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
