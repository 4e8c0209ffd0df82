"""Write door_states_main.json: each door's state after 4 steps, and the 5 steps after it.

Run once with the code of the release to freeze (main at 84cb90b, before the
engine became a package): ``PYTHONPATH=<checkout> python tests/data/make_door_states.py``
from that checkout. door_states_ledger1.json was written the same way by main
at 9e1c582 (the first ledger format), with its name as the argument.
tests/test_door_states_compat.py loads these states with today's code and
checks the same batches follow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.test_door_checkpoints import DOORS


def main(out: Path) -> None:
    frozen = {}
    for name in sorted(DOORS):
        stepper = DOORS[name]()
        stepper.epoch = None
        stepper.take(4)
        state = stepper.door.state_dict()
        frozen[name] = {"state": state, "next": stepper.take(5)}
    out.write_text(json.dumps(frozen, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name(
        "door_states_main.json"))
