"""Hypothesis strategies that corrupt a state dict, and the all-or-nothing check.

A mutation picks one place in a (nested) state, by its path of keys and list
indices, and removes it, retypes it, nudges it, or replaces it with garbage.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

GARBAGE = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.integers(-3, 40),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.lists(st.integers(-3, 40), max_size=14),
    st.lists(st.one_of(st.integers(0, 9), st.text(max_size=2), st.none()), max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers(-2, 5), max_size=2),
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in ``value`` that a mutation can hit (dict keys, list items)."""
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            paths += _paths(item, prefix + (key,))
    elif isinstance(value, list) and len(value) <= 64:
        for k, item in enumerate(value):
            paths += _paths(item, prefix + (k,))
    return paths


def _nudged(value: Any, draw: Any) -> Any:
    if isinstance(value, bool):
        return draw(st.sampled_from([not value, int(value), str(value), None]))
    if isinstance(value, int):
        return draw(st.sampled_from([value + 1, value - 1, -1, float(value), str(value),
                                     True, [value], 2**64]))
    if isinstance(value, float):
        return draw(st.sampled_from([value + 0.5, -value - 1, float("nan"), str(value),
                                     int(value)]))
    if isinstance(value, list):
        return draw(st.sampled_from([value[:-1], value + value[:1], value[:1], [],
                                     [0] * len(value), list(reversed(value)),
                                     [[v] for v in value], [str(v) for v in value]]))
    if isinstance(value, str):
        return draw(st.sampled_from(["", value + "x", value.upper(), 0]))
    return draw(GARBAGE)


@st.composite
def corrupted(draw: Any, state: dict) -> dict:
    """``state`` with one place removed, retyped, nudged or replaced with garbage."""
    state = copy.deepcopy(state)
    path = draw(st.sampled_from(_paths(state)))
    parent = state
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    action = draw(st.sampled_from(["remove", "nudge", "garbage"]))
    if action == "remove":
        del parent[last]
    elif action == "nudge":
        parent[last] = _nudged(parent[last], draw)
    else:
        parent[last] = draw(GARBAGE)
    if draw(st.booleans()):  # the state as it comes back from a JSON file
        try:
            state = json.loads(json.dumps(state))
        except ValueError:  # nan and infinity do not survive JSON; keep the dict
            pass
    return state


def load_or_reject(it: Any, state: Any) -> bool:
    """Load ``state`` into ``it``; True if it loaded, False if it was refused.

    A refusal must be a ValueError (or subclass) with a message; any other
    exception fails the test.
    """
    try:
        it.load_state_dict(state)
    except ValueError as error:
        assert str(error), "a refused state must say why"
        return False
    return True
