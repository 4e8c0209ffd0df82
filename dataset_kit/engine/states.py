"""One state envelope for every door, and the one validator that reads it.

Every front door's ``state_dict()`` returns :func:`wrap_state`'s envelope::

    {"format": "dataset_kit.state", "version": 3,
     "engine": <Engine.state_dict(), or None>,
     "door": {"name": <the door's family>, ...the door's own fields}}

and its ``load_state_dict()`` reads it with :func:`unwrap_state`, which
upgrades states of earlier versions (:mod:`._upgrades`), checks the format,
the version, the door's name and each of the door's fields, and names the
mismatching field with both values in a :class:`ValueError`. A door never
checks a state by itself: it declares its fields (:func:`flag`,
:func:`integer`, :func:`equal`, :func:`anything`) and gets them back checked.

``engine`` is None for a door whose state is not one engine's: a pure
wrapper of other iterators (MXNet's ``ResizeIter``, ``PrefetchingIter``) or
``ShardedIterator``, whose state is global (the same on every rank) while
each rank's engine is its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, overload

from dataset_kit.engine import _upgrades
from dataset_kit.engine._checkpoint import (
    MISSING,
    STATE_FORMAT,
    STATE_VERSION,
    index_field,
    json_text,
    parse_json,
    same,
    short,
)

__all__ = ["MISSING", "STATE_FORMAT", "STATE_VERSION", "FieldCheck", "anything", "equal", "flag",
           "index_field", "integer", "json_text", "parse_json", "same", "short", "unwrap_state",
           "wrap_state"]

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
    state = _upgrades.door_state(state, door)
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
