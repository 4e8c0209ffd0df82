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
    order_sampler                   {"kind", "state"?, "order"?, "previous_order"?,
                                     "stops"?}
    ledger                          what was consumed (counts, the chain of the ids,
                                    the data's identity, the chain's base): the
                                    engine's ledger book writes and checks it; a
                                    state without one (older) loads unchecked

Old states are upgraded here and nowhere else. Versions 1 (dataset_kit 0.1)
and 2 had no envelope. The engine's own old format is read by
:func:`upgrade_engine_part`: the bare engine state (``format``
"dataset_kit.iterator"; version 1 had no spec beyond batch size and repeat, no
carry, and named samplers by module path). Every other old shape is a door's,
and the door that saved it teaches it to :func:`unwrap_state` with
:func:`register_upgrade` where the door is defined (this module names no door):
the doors that saved bare engine states say so, and the others give a
function that turns their old shape into the door fields it stands for.
"""

from __future__ import annotations

import json
import math
import numbers
import reprlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, overload

import numpy as np

from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import Position
from dataset_kit.engine.errors import ResumeMismatchError

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
        # An old bare state is upgraded first (see upgrade_engine_part).
        raise ValueError(f"state is not a dataset_kit engine state: {short(state)}")
    for key, mine in (("dataset_length", dataset_length), ("batch_size", spec.batch_size),
                      ("repeat", spec.repeat), ("epoch_size", spec.epoch_size),
                      ("last_batch", spec.last_batch)):
        if not same(state.get(key, MISSING), mine):
            message = (f"state was saved with {key}={short(state.get(key, MISSING))}, but this "
                       f"iterator has {key}={mine!r}")
            if key in ("dataset_length", "epoch_size") and key in state:
                # Another dataset (or another sampler's epoch): a refused resume.
                raise ResumeMismatchError(
                    message, cause="dataset length" if key == "dataset_length" else "sampler")
            raise ValueError(message)
    n = spec.epoch_size
    invalid = "state has an invalid position: "
    epoch = index_field(state, "epoch", 0, _INT64_END, prefix=invalid)
    pos = index_field(state, "current_position", 0, max(n, 1), prefix=invalid)
    # Fewer examples than a batch roll over (more would have made a batch); they
    # may come from several epochs when the batch is larger than an epoch.
    carry = index_field(state, "carry", 0, spec.batch_size, prefix=invalid)
    if carry and not spec.policy.carries:
        raise ValueError(f"{invalid}carry={carry!r}, but last_batch={spec.last_batch!r} carries "
                         f"no example into the next epoch")
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


# -- the envelope every door's state is -----------------------------------------

#: Checks one door field: ``check(where, value)`` returns the value to use,
#: or raises ValueError naming ``where`` (``"state['door']['cur']"``).
#: A missing field arrives as a sentinel that :func:`short` names.
FieldCheck = Callable[[str, Any], Any]


def wrap_state(door: str, engine: dict | None, **fields: Any) -> dict:
    """Return a door's state: the envelope around the engine's state and the door's fields.

    Args:
        door: the door's family name (``"chainer"``, ``"gluon"``, ``"mxnet"``...).
        engine: the engine's :meth:`~dataset_kit.engine.Engine.state_dict`, or
            None for a door whose state is not one engine's.
        **fields: the door's own JSON-ready fields (not ``name``).
    """
    return {"format": STATE_FORMAT, "version": STATE_VERSION, "engine": engine,
            "door": {"name": door, **fields}}


# The engine part's type follows with_engine: a dict (checked) with it, None without.
@overload
def unwrap_state(state: Any, door: str, fields: Mapping[str, FieldCheck] | None = None, *,
                 accepts: Iterable[str] = (), with_engine: Literal[True] = True
                 ) -> tuple[dict, dict]: ...


@overload
def unwrap_state(state: Any, door: str, fields: Mapping[str, FieldCheck] | None = None, *,
                 accepts: Iterable[str] = (), with_engine: Literal[False]
                 ) -> tuple[None, dict]: ...


def unwrap_state(state: Any, door: str, fields: Mapping[str, FieldCheck] | None = None, *,
                 accepts: Iterable[str] = (), with_engine: bool = True
                 ) -> tuple[dict | None, dict]:
    """Check a door's state and return its engine part and its door fields.

    States of versions 1 and 2 are upgraded first. Nothing is loaded here:
    the caller loads the engine part (the engine checks it) and applies the
    fields it got back, so a refused state changes nothing.

    Args:
        state: what ``load_state_dict`` was given.
        door: this door's family name.
        fields: the door's fields and how to check each; a field the state
            lacks is passed to its check as missing, and a field the state has
            beyond these is refused.
        accepts: other door names whose states this door loads.
        with_engine: whether the state holds an engine part (else it must be None).

    Returns:
        ``(engine, door_fields)``: the engine part (None without one) and the
        checked fields by name.

    Raises:
        ValueError: if ``state`` is not an envelope, has another version,
            comes from another door (naming both), lacks or has a wrong engine
            part, or a door field is missing, unknown or invalid (naming it and,
            for a mismatch, both values).
    """
    state = upgrade_door_state(state, door)
    if not (isinstance(state, dict) and same(state.get("format", MISSING), STATE_FORMAT)):
        raise ValueError(f"state is not a dataset_kit iterator state (state['format'] must be "
                         f"{STATE_FORMAT!r}): {short(state)}")
    version = state.get("version", MISSING)
    if not same(version, STATE_VERSION):
        raise ValueError(f"state has format version {short(version)} (state['version']); this "
                         f"dataset_kit reads version {STATE_VERSION} and upgrades 1 and 2")
    extra = sorted(map(str, set(state) - {"format", "version", "engine", "door"}))
    if extra:
        raise ValueError(f"state has unknown keys {extra}")
    own = state.get("door", MISSING)
    name = own.get("name", MISSING) if isinstance(own, dict) else MISSING
    if not isinstance(name, str):
        raise ValueError(f"state['door'] must be a dict with the door's 'name', got {short(own)}")
    if name != door and name not in accepts:
        raise ValueError(f"state is from door {name!r}, but this is door {door!r} "
                         f"(state['door']['name']); a door loads only its own family's states")
    engine = state.get("engine", MISSING)
    if with_engine and not isinstance(engine, dict):
        raise ValueError(f"state['engine'] must be the engine's state (a dict) in a {door!r} "
                         f"state, got {short(engine)}")
    if not with_engine and engine is not None:
        raise ValueError(f"state['engine'] must be None in a {door!r} state, got "
                         f"{short(engine)}")
    fields = fields or {}
    unknown = sorted(map(str, set(own) - {"name"} - set(fields)))
    if unknown:
        raise ValueError(f"state['door'] has fields {unknown} that door {door!r} does not have")
    checked = {key: check(f"state['door'][{key!r}]", own.get(key, MISSING))
               for key, check in fields.items()}
    return engine, checked


def flag(default: Any = MISSING) -> FieldCheck:
    """A field that is True or False (``default`` when missing, if given)."""
    def check(where: str, value: Any) -> Any:
        if value is MISSING and default is not MISSING:
            return default
        if type(value) is not bool:
            raise ValueError(f"{where} must be True or False, got {short(value)}")
        return value
    return check


def integer(low: int, end: int | None) -> FieldCheck:
    """A field that is an integer in ``[low, end)`` (no upper bound: None)."""
    def check(where: str, value: Any) -> int:
        # index_field names "{where}[{key}]"; here the key is part of where.
        head, _, key = where.rpartition("[")
        return index_field({key[:-1].strip("'\""): value}, key[:-1].strip("'\""), low, end,
                           where=head)
    return check


def equal(mine: Any, what: str | None = None) -> FieldCheck:
    """A field that must equal this door's ``mine`` (the same kind: 1 is not True).

    The message names the field (``what``, by default its key) and both values.
    """
    def check(where: str, value: Any) -> Any:
        if not same(value, mine):
            key = what or where.rsplit("[", 1)[-1].strip("[]'\"")
            raise ValueError(f"state was saved with {key}={short(value)}, but this iterator "
                             f"has {key}={mine!r} ({where})")
        return value
    return check


def anything(required: bool = True) -> FieldCheck:
    """A field checked by whoever uses it (another iterator's state); only its presence here."""
    def check(where: str, value: Any) -> Any:
        if value is MISSING and required:
            raise ValueError(f"{where} is missing")
        return None if value is MISSING else value
    return check


# -- old states: the engine's own bare format, and what doors register --------

ENGINE_FORMAT = "dataset_kit.iterator"
_V1_SHUFFLE_KIND = "dataset_kit.iterators.order_samplers.ShuffleOrderSampler"

#: An upgrade a door registers: it returns ``(engine part, door fields)`` for
#: a state of that door's old shape, or None for any other state.
Upgrade = Callable[[dict], "tuple[Any, dict] | None"]
_UPGRADES: list[tuple[str, Upgrade]] = []
# Doors whose old states were the engine's bare state (format ENGINE_FORMAT).
_BARE_DOORS: list[str] = []


def register_upgrade(door: str, upgrade: Upgrade | None = None, *,
                     bare_engine_states: bool = False) -> None:
    """Teach :func:`unwrap_state` a door's old state formats (versions 1 and 2).

    A door calls this once, where it is defined, for the states it saved
    before the envelope: the engine knows no door's old shapes.

    Args:
        door: the door's family name.
        upgrade: ``upgrade(state)`` returns ``(engine part, door fields)``
            for a dict of this door's old shape, else None. It checks only the
            shape that identifies the door; the validator checks the rest.
        bare_engine_states: whether the door saved the engine's bare state
            (format ``"dataset_kit.iterator"``, versions 1 and 2).

    Raises:
        ValueError: if ``door`` is not a non-empty string, or the door
            registers nothing.
        TypeError: if ``upgrade`` is neither None nor callable.
    """
    if not (isinstance(door, str) and door):
        raise ValueError(f"door must be a non-empty string, got {door!r}")
    if upgrade is not None and not callable(upgrade):
        raise TypeError(f"upgrade must be callable or None, got {type(upgrade).__name__}")
    if upgrade is None and not bare_engine_states:
        raise ValueError(f"door {door!r} registers no upgrade: pass upgrade, or "
                         f"bare_engine_states=True")
    if upgrade is not None and (door, upgrade) not in _UPGRADES:
        _UPGRADES.append((door, upgrade))
    if bare_engine_states and door not in _BARE_DOORS:
        _BARE_DOORS.append(door)


def _bare_name() -> str:
    """How a wrong-door message names a bare state: it does not say which door saved it."""
    doors = sorted(_BARE_DOORS)
    names = doors[0] if len(doors) == 1 else f"{', '.join(doors[:-1])} or {doors[-1]}"
    return f"{names} (a bare engine state of version 1 or 2)"


def upgrade_door_state(state: Any, door: str) -> Any:
    """Return ``state`` as a version-3 envelope if it is a door state of versions 1 or 2.

    Args:
        state: what a door was asked to load.
        door: the loading door's name (a bare engine state carries none; it is
            taken as this door's when the door saved bare states).

    Returns:
        The envelope, or ``state`` itself when it has no registered old
        shape (the validator then says what is wrong with it).
    """
    if not isinstance(state, dict) or same(state.get("format"), STATE_FORMAT):
        return state
    if same(state.get("format"), ENGINE_FORMAT):
        return wrap_state(door if door in _BARE_DOORS else _bare_name(), state)
    for name, upgrade in _UPGRADES:
        upgraded = upgrade(state)
        if upgraded is not None:
            engine, fields = upgraded
            return wrap_state(name, engine, **fields)
    return state


def upgrade_engine_part(state: Any, sampler_kind: str) -> Any:
    """Return an engine's bare state of version 1 or 2 as today's engine part.

    Args:
        state: the engine part of an envelope (today's has no ``format``), or
            an old bare state.
        sampler_kind: the engine's sampler kind (version 1 named a user's
            sampler by its module path).

    Raises:
        ValueError: if ``state`` has a ``format`` that is not an engine
            state's of version 1 or 2.
    """
    if not (isinstance(state, dict) and "format" in state):
        return state
    if same(state.get("format"), STATE_FORMAT):
        raise ValueError("state is a front door's whole state (format 'dataset_kit.state'); "
                         "an engine loads its 'engine' part")
    if not same(state.get("format"), ENGINE_FORMAT):
        raise ValueError(f"state is not a dataset_kit iterator state: {short(state)}")
    version = state.get("version")
    if same(version, 1):
        state = _upgrade_v1(state, sampler_kind)
    elif not same(version, 2):
        raise ValueError(f"state has format version {short(version)}; this dataset_kit reads "
                         f"versions 1, 2 and {STATE_VERSION}")
    upgraded = {key: value for key, value in state.items() if key not in ("format", "version")}
    upgraded["order_offset"] = 0
    return upgraded


def _upgrade_v1(state: dict, sampler_kind: str) -> dict:
    upgraded = dict(state, version=2, epoch_size=state.get("dataset_length"),
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
