"""A complete front door: one epoch per ``iter()``, like Gluon's DataLoader.

It owns no loop, thread or state: the constructor builds an engine, and the
rest translates names. Threads or processes come from the executor passed in.
"""

from __future__ import annotations

from typing import Any

from dataset_kit.iterators._engine import Engine
from dataset_kit.iterators._executors import SerialExecutor


class EpochLoader:
    def __init__(self, dataset: Any, batch_size: int, shuffle: bool = False,
                 last_batch: str = "keep", seed: int | None = None,
                 executor: Any = None) -> None:
        self._engine = Engine(dataset, batch_size=batch_size, shuffle=shuffle, seed=seed,
                              last_batch=last_batch,
                              executor=executor or SerialExecutor(dataset))

    def __iter__(self):
        # An epoch ends with the batch that sets is_new_epoch; an epoch without
        # a full batch ('discard', 'rollover') yields nothing.
        if self._engine.skip_empty_epoch():
            return
        while True:
            batch = self._engine.next()
            yield batch
            if self._engine.position.is_new_epoch:
                return

    def __len__(self) -> int:
        return self._engine.spec.batches_per_epoch(self._engine.position.carry)

    def state_dict(self) -> dict:
        return self._engine.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self._engine.load_state_dict(state)
