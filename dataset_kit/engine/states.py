"""One state envelope for every door, and the one validator that reads it.

Every front door's ``state_dict()`` returns :func:`wrap_state`'s envelope::

    {"format": "dataset_kit.state", "version": 3,
     "engine": <Engine.state_dict(), or None>,
     "door": {"name": <the door's family>, ...the door's own fields}}

and its ``load_state_dict()`` reads it with :func:`unwrap_state`, which
upgrades states of earlier versions (each door teaches it its own old shapes
with :func:`register_upgrade`), checks the format,
the version, the door's name and each of the door's fields, and names the
mismatching field with both values in a :class:`ValueError`. A door never
checks a state by itself: it declares its fields (:func:`flag`,
:func:`integer`, :func:`equal`, :func:`anything`) and gets them back checked.

``engine`` is None for a door whose state is not one engine's: a pure
wrapper of other iterators (MXNet's ``ResizeIter``, ``PrefetchingIter``) or
``ShardedIterator``, whose state is global (the same on every rank) while
each rank's engine is its own.

The format is defined once, in :mod:`dataset_kit.engine._checkpoint`; this
module is its public face for doors.
"""

from dataset_kit.engine._checkpoint import (
    MISSING,
    STATE_FORMAT,
    STATE_VERSION,
    FieldCheck,
    Upgrade,
    anything,
    equal,
    flag,
    index_field,
    integer,
    json_text,
    parse_json,
    register_upgrade,
    same,
    short,
    unwrap_state,
    wrap_state,
)

__all__ = ["MISSING", "STATE_FORMAT", "STATE_VERSION", "FieldCheck", "Upgrade", "anything",
           "equal", "flag", "index_field", "integer", "json_text", "parse_json",
           "register_upgrade", "same", "short", "unwrap_state", "wrap_state"]
