"""What the ledger costs: checking a state at load, and computing it at save.

Data: an index dataset of 10**7 examples (the engine never reads it here),
batch 1000, seeded shuffle. A state is saved after 10**7 - 1000 examples
consumed (one batch short of the epoch's end), then loaded into a fresh
engine. Prints the median of 5 interleaved loads with and without the ledger
check (the load without it still recomputes the epoch's order, as every load
does), the check's own cost (the difference), and the cost of state_dict()
computing the ledger from nothing. The goal for the check is <= 100 ms.

The difference of two loads of about half a second is noisier than the check
itself, so the check's own work is also timed alone: hashing the consumed ids
(:func:`~dataset_kit.engine.ledger.extend_chain`, what the load adds).

Then ShardedIterator's exactly-once check at an epoch's end
(:meth:`~dataset_kit.distributed.ShardedIterator.check_epoch`, one rank whose
share is the whole epoch) at 10**5, 10**6 and 10**7 examples per rank, in
both modes: ``"order"`` (the default: the ranks compare the order's
fingerprint) and ``"full"`` (each rank hashes its ids). The goal is < 1 ms.
"""

from __future__ import annotations

import numpy as np
from _timing import median_of

from dataset_kit.distributed import ShardedIterator
from dataset_kit.engine import Engine
from dataset_kit.engine.ledger import CHAIN_START, extend_chain

N, BATCH = 10**7, 1000


class Indices:
    """A dataset of ``n`` examples whose example ``i`` is ``i`` (nothing is read here)."""

    def __init__(self, n: int = N) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index):
        return np.asarray(index)

    def get_batch(self, indices):
        return indices


def main() -> None:
    engine = Engine(Indices(), batch_size=BATCH, seed=0)
    engine.seek(epoch=0, position=N - BATCH)
    state = engine.state_dict()
    unchecked = dict(state)
    del unchecked["ledger"]
    target = Engine(Indices(), batch_size=BATCH, seed=0)
    consumed_ids = np.random.default_rng(0).permutation(N)[:N - BATCH]

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

    def hash_consumed() -> None:
        extend_chain(CHAIN_START, consumed_ids)

    t = median_of(7, checked=load_checked, unchecked=load_unchecked, save=save_from_nothing,
                  hashing=hash_consumed)
    consumed = state["ledger"]["consumed_total"]
    print(f"consumed examples in the state:     {consumed}")
    print(f"load with the ledger check:         {t['checked'] * 1e3:.0f} ms")
    print(f"load without it (old state):        {t['unchecked'] * 1e3:.0f} ms")
    print(f"the check's own cost:               {(t['checked'] - t['unchecked']) * 1e3:.0f} ms "
          f"(goal <= 100 ms)")
    print(f"the check's own work, timed alone:  {t['hashing'] * 1e3:.0f} ms (hashing "
          f"{len(consumed_ids)} ids; goal <= 100 ms)")
    print(f"seek + state_dict() from nothing:   {t['save'] * 1e3:.0f} ms")
    for per_rank in (10**5, 10**6, 10**7):
        checks = {}
        for mode in ("order", "full"):
            it = ShardedIterator(Indices(per_rank), per_rank, seed=0, check_epochs=mode)
            next(it)  # one batch: the epoch ends, and is checked once
            checks[mode] = it.check_epoch
        c = median_of(7, **checks)
        print(f"epoch check, {per_rank:>8} per rank:    order {c['order'] * 1e3:.3f} ms, "
              f"full {c['full'] * 1e3:.1f} ms (goal < 1 ms)")


if __name__ == "__main__":
    main()
