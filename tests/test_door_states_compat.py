"""States written by main before the engine became a package still load in every door.

tests/data/door_states_main.json was written by tests/data/make_door_states.py
with main's code (84cb90b); each door loads its state and gives the same next
batches that main gave.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_door_checkpoints import DOORS

FROZEN = json.loads((Path(__file__).parent / "data" / "door_states_main.json").read_text())


def test_every_door_has_a_frozen_state():
    assert sorted(FROZEN) == sorted(DOORS)


@pytest.mark.parametrize("door", sorted(FROZEN))
def test_a_state_saved_by_main_loads_and_the_same_batches_follow(door):
    stepper = DOORS[door]()
    stepper.epoch = None
    stepper.door.load_state_dict(FROZEN[door]["state"])
    assert json.loads(json.dumps(stepper.take(5))) == FROZEN[door]["next"]
