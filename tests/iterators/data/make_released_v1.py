"""How the fixtures here were made, with dataset_kit at commit ee46d76 (format version 1).

Kept for the record; rerunning it with a later dataset_kit would not reproduce format 1.
Run from the repository root with PYTHONPATH=. ."""
import json, numpy as np
from dataset_kit import concat_examples
from dataset_kit.datasets import TupleDataset
from dataset_kit.iterators import SerialIterator, MultiprocessIterator, ShuffleOrderSampler
from dataset_kit.serializers import save_npz
from tests.iterators.helpers import Reversing

def ds(n):
    return TupleDataset(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.float32))

def ids(b):
    return concat_examples(b)[0].tolist()

cases = []
def record(name, make, steps, n, b, sampler=None, **kw):
    it = make(ds(n), b, **kw) if sampler is None else make(ds(n), b, order_sampler=sampler(), **kw)
    for _ in range(steps): next(it)
    state = it.state_dict()
    nxt = [ids(b) for _, b in zip(range(12), it)]
    it.finalize()
    cases.append({"name": name, "n": n, "batch_size": b, "kwargs": {k: v for k, v in kw.items()},
                  "sampler": None if sampler is None else sampler.__name__,
                  "state": state, "next_batches": nxt})

record("serial_seeded_shuffle", SerialIterator, 5, 11, 3, seed=7)
record("serial_no_shuffle", SerialIterator, 2, 10, 4, shuffle=False)
record("serial_no_repeat", SerialIterator, 1, 10, 4, shuffle=False, repeat=False)
record("serial_shuffle_sampler", SerialIterator, 6, 9, 2, sampler=lambda: ShuffleOrderSampler(123), seed=1)
cases[-1]["sampler"] = "ShuffleOrderSampler(123)"
record("serial_stateful_sampler", SerialIterator, 4, 5, 2, sampler=Reversing, seed=3)
record("multiprocess_seeded", MultiprocessIterator, 3, 13, 4, seed=11, n_processes=2)
json.dump(cases, open("tests/iterators/data/released_v1_states.json", "w"), indent=1)

it = SerialIterator(ds(9), 4, seed=3)
for _ in range(5): next(it)
save_npz("tests/iterators/data/released_v1_serial.npz", it)
print(json.dumps({"next": [ids(next(it)) for _ in range(5)]}))
