"""The state format: one envelope for every door, the engine's part, and old versions.

Every front door's ``state_dict()`` is one JSON-ready envelope (version 3)::

    format, version   "dataset_kit.state", 3
    engine            the engine's state (below), or None for a door whose
                      state is not one engine's (MXNet's ResizeIter and
                      PrefetchingIter wrap other iterators' states;
                      ShardedIterator's is global, the same on every rank)
    door              {"name": the door's family, ...the door's own fields}

The engine's part (:meth:`Engine.state_dict`) is a flat dict::

    dataset_length, epoch_size      the dataset's length; examples per epoch
    batch_size, repeat, last_batch  the batching spec, by name
    epoch, current_position, is_new_epoch, previous_epoch_detail, carry
                                    the position (carry: rolled-over examples)
    order_offset                    where in its sampler's order the current
                                    epoch began (0 unless resumed mid-order)
    seed                            the iterator's seed (shuffle, example_rng)
    order_sampler                   {"kind", "state"?, "order"?, "previous_order"?}

Old states are upgraded in :mod:`._upgrades` and nowhere else. Versions 1 (dataset_kit 0.1)
and 2 had no envelope: Chainer's, Gluon's and NNabla's doors saved the bare
engine state (``format`` "dataset_kit.iterator"; version 1 had no spec beyond
batch size and repeat, no carry, and named samplers by module path), the io
doors ``{"engine", "epoch_open", "exhausted"}``, ResizeIter ``{"inner",
"cur"}``, PrefetchingIter ``{"inner": [...]}``, the torch door ``{"engine",
"torch"}`` and ShardedIterator its own ``"dataset_kit.sharded_iterator"``
dict. Each is read as the version-3 state it stands for.
"""

from __future__ import annotations

import json
import math
import numbers
import reprlib
from typing import Any

import numpy as np

from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import Position

STATE_FORMAT = "dataset_kit.state"
STATE_VERSION = 3
# Epochs and positions travel through int64 arrays (batch plans, worker tasks).
_INT64_END = 2**63
# What a missing key reads as, so a message can say that it was missing.
MISSING = object()
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def make_state(spec: BatchSpec, dataset_length: int, position: Position, seed: int,
               order_sampler: dict, order_offset: int = 0) -> dict:
    """Return the engine's part of a state."""
    return {
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
        "order_offset": order_offset,
        "seed": seed,
        "order_sampler": order_sampler,
    }


def read_state(state: Any, spec: BatchSpec, dataset_length: int) -> dict:
    """Check an engine's part of a state against this engine and return it as of today.

    Every field is checked before anything is used, so a caller can apply the
    state knowing it is whole. The order sampler's part (``order_sampler``) is
    only checked to be a dict with a ``kind``, and ``order_offset`` to be an
    integer; :mod:`._orders` checks the rest against the sampler.

    Raises:
        ValueError: if it is not an engine state (a door's whole state, or a
            bare state of an unknown version), or was saved for another
            dataset length, epoch size, batch size, repeat mode or last-batch
            policy, or a field has the wrong type or an impossible value (the
            message names the field, what it must be and what it is).
    """
    if not isinstance(state, dict) or "format" in state:
        # An old bare state is upgraded first (see _upgrades.engine_part).
        raise ValueError(f"state is not a dataset_kit engine state: {short(state)}")
    for key, mine in (("dataset_length", dataset_length), ("batch_size", spec.batch_size),
                      ("repeat", spec.repeat), ("epoch_size", spec.epoch_size),
                      ("last_batch", spec.last_batch)):
        if not same(state.get(key, MISSING), mine):
            raise ValueError(
                f"state was saved with {key}={short(state.get(key, MISSING))}, but this "
                f"iterator has {key}={mine!r}"
            )
    n = spec.epoch_size
    invalid = "state has an invalid position: "
    epoch = index_field(state, "epoch", 0, _INT64_END, prefix=invalid)
    pos = index_field(state, "current_position", 0, max(n, 1), prefix=invalid)
    # Fewer examples than a batch roll over (more would have made a batch); they
    # may come from several epochs when the batch is larger than an epoch.
    carry = index_field(state, "carry", 0, spec.batch_size, prefix=invalid)
    if carry and not (pos == 0 and epoch * n >= carry):
        raise ValueError(f"{invalid}epoch={epoch!r}, "
                         f"current_position={pos!r}, carry={carry!r} (examples carry over "
                         f"only into the start of an epoch, from the epochs before it)")
    offset = index_field(state, "order_offset", 0, _INT64_END, prefix=invalid)
    if offset and carry:
        raise ValueError(f"{invalid}order_offset={offset!r} and carry={carry!r} (an epoch "
                         f"resumed at an offset of its order starts no rolled-over batch)")
    if type(state.get("is_new_epoch")) is not bool:
        raise ValueError(f"state['is_new_epoch'] must be True or False, got "
                         f"{short(state.get('is_new_epoch', MISSING))}")
    previous = state.get("previous_epoch_detail", MISSING)
    if previous is not None and not (_real(previous) and 0 <= previous < _INT64_END):
        raise ValueError(f"state['previous_epoch_detail'] must be None or a finite number >= 0, "
                         f"got {short(previous)}")
    # It is kept as a float: a number a float cannot hold exactly would not
    # come back as it was saved.
    if previous is not None and float(previous) != previous:
        raise ValueError(f"state['previous_epoch_detail'] must be a number a float holds "
                         f"exactly, got {short(previous)}")
    index_field(state, "seed", 0, None)
    sampler = state.get("order_sampler", MISSING)
    if not (isinstance(sampler, dict) and isinstance(sampler.get("kind"), str)):
        raise ValueError(f"state['order_sampler'] must be a dict with a 'kind' string, got "
                         f"{short(sampler)}")
    return state


def position_of(state: dict) -> Position:
    """Return the position a (checked) version-2 state records."""
    previous = state["previous_epoch_detail"]
    return Position(int(state["epoch"]), int(state["current_position"]), state["is_new_epoch"],
                    None if previous is None else float(previous), int(state["carry"]))


def index_field(mapping: dict, key: str, low: int, end: int | None, where: str = "state",
                prefix: str = "") -> int:
    """Return ``mapping[key]`` if it is an integer in ``[low, end)`` (no upper bound: None).

    ``prefix`` starts the error message (what the field is part of).

    Raises:
        ValueError: naming ``where[key]``, the allowed range and the value, if
            it is missing, not an integer (bools are not) or out of range.
    """
    value = mapping.get(key, MISSING)
    if _integral(value) and value >= low and (end is None or value < end):
        return int(value)
    allowed = f">= {low}" if end is None else f"in [{low}, {end})"
    raise ValueError(f"{prefix}{where}[{key!r}] must be an integer {allowed}, got "
                     f"{short(value)}")


def json_text(key: str, value: Any) -> str:
    """The text a deserializer returned for ``key`` (a str, bytes or 0-d string array).

    Raises:
        ValueError: naming ``key``, if it is not text.
    """
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "US":
        value = value.item()
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{key!r} is not UTF-8 text: {error}") from None
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be the JSON text of a state, got {short(value)}")
    return value


def parse_json(key: str, value: Any) -> Any:
    """Parse the JSON text a deserializer returned for ``key``.

    Raises:
        ValueError: naming ``key``, if it is not text or not valid JSON.
    """
    text = json_text(key, value)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{key!r} is not valid JSON ({type(error).__name__}: {error}); the "
                         f"checkpoint is damaged: {short(text)}") from None


def short(value: Any) -> str:
    """``repr(value)``, cut short (states can be large or deeply nested)."""
    if value is MISSING:
        return "nothing (the key is missing)"
    return _REPR.repr(value)


def _integral(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _real(value: Any) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
            and math.isfinite(value))


def same(got: Any, mine: Any) -> bool:
    """Whether a saved value equals ``mine`` and is of the same kind (1 is not True)."""
    if isinstance(mine, int) and not isinstance(mine, bool):
        return _integral(got) and got == mine
    return type(got) is type(mine) and got == mine
