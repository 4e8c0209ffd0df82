"""States written by earlier code still load in every door, and the same batches follow.

tests/data/door_states_main.json was written by tests/data/make_door_states.py
with main's code before the engine became a package (84cb90b);
tests/data/door_states_ledger1.json with main's code at 9e1c582, whose states
carry the first ledger format (checked on load: it must still pass the check).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from dataset_kit.engine import ResumeMismatchWarning
from tests.test_door_checkpoints import DOORS

FROZEN = json.loads((Path(__file__).parent / "data" / "door_states_main.json").read_text())
LEDGER1 = json.loads((Path(__file__).parent / "data" / "door_states_ledger1.json").read_text())


def test_every_door_has_a_frozen_state():
    assert sorted(FROZEN) == sorted(DOORS)
    assert sorted(LEDGER1) == sorted(DOORS)


@pytest.mark.parametrize("door", sorted(FROZEN))
def test_a_state_saved_by_main_loads_and_the_same_batches_follow(door):
    stepper = DOORS[door]()
    stepper.epoch = None
    stepper.door.load_state_dict(FROZEN[door]["state"])
    assert json.loads(json.dumps(stepper.take(5))) == FROZEN[door]["next"]


@pytest.mark.parametrize("door", sorted(LEDGER1))
def test_a_state_with_the_first_ledger_format_passes_the_check_and_the_same_batches_follow(door):
    stepper = DOORS[door]()
    stepper.epoch = None
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResumeMismatchWarning)
        stepper.door.load_state_dict(LEDGER1[door]["state"])
    assert json.loads(json.dumps(stepper.take(5))) == LEDGER1[door]["next"]
