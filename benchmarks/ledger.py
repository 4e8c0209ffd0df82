"""What the ledger costs: checking a state at load, and computing it at save.

Data: an index dataset of 10**7 examples (the engine never reads it here),
batch 1000, seeded shuffle. A state is saved after 10**7 - 1000 examples
consumed (one batch short of the epoch's end), then loaded into a fresh
engine. Prints the median of 5 interleaved loads with and without the ledger
check (the load without it still recomputes the epoch's order, as every load
does), the check's own cost (the difference), and the cost of state_dict()
computing the ledger from nothing. The goal for the check is <= 100 ms.
"""

from __future__ import annotations

import numpy as np
from _timing import median_of

from dataset_kit.engine import Engine

N, BATCH = 10**7, 1000


class Indices:
    """A dataset of ``N`` examples whose example ``i`` is ``i`` (nothing is read here)."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, index):  # pragma: no cover - never fetched
        return np.asarray(index)


def main() -> None:
    engine = Engine(Indices(), batch_size=BATCH, seed=0)
    engine.seek(epoch=0, position=N - BATCH)
    state = engine.state_dict()
    unchecked = dict(state)
    del unchecked["ledger"]
    target = Engine(Indices(), batch_size=BATCH, seed=0)

    def load_checked() -> None:
        target.load_state_dict(state)

    def load_unchecked() -> None:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            target.load_state_dict(unchecked)

    def save_from_nothing() -> None:
        fresh = Engine(Indices(), batch_size=BATCH, seed=0)
        fresh.seek(epoch=0, position=N - BATCH)
        fresh.state_dict()

    t = median_of(5, checked=load_checked, unchecked=load_unchecked, save=save_from_nothing)
    consumed = state["ledger"]["consumed_total"]
    print(f"consumed examples in the state:     {consumed}")
    print(f"load with the ledger check:         {t['checked'] * 1e3:.0f} ms")
    print(f"load without it (old state):        {t['unchecked'] * 1e3:.0f} ms")
    print(f"the check's own cost:               {(t['checked'] - t['unchecked']) * 1e3:.0f} ms "
          f"(goal <= 100 ms)")
    print(f"seek + state_dict() from nothing:   {t['save'] * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
