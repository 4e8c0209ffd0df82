"""A complete front door: one epoch per ``iter()``, like Gluon's DataLoader.

It owns no loop, thread or state: the constructor builds an engine, and the
rest translates names. It imports public names of :mod:`dataset_kit.engine`
only; threads or processes come from the :class:`ExecutorSpec` passed in.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dataset_kit.engine import Engine, ExecutorSpec, states


class EpochLoader:
    """Batches of ``dataset``, one epoch per ``iter()``, resumable from ``state_dict()``."""

    def __init__(self, dataset: Any, batch_size: int, shuffle: bool = False,
                 last_batch: str = "keep", seed: int | None = None,
                 executor: ExecutorSpec | None = None) -> None:
        self._engine = Engine(dataset, batch_size=batch_size, shuffle=shuffle, seed=seed,
                              last_batch=last_batch, executor=executor or ExecutorSpec())

    def __iter__(self) -> Iterator[Any]:
        # The engine ends the epoch; an epoch without a full batch yields nothing.
        return self._engine.epoch()

    def __len__(self) -> int:
        return self._engine.batches_in_epoch()

    def state_dict(self) -> dict:
        # The one envelope: the engine's state, this door's name, no fields of its own.
        return states.wrap_state("epoch-loader", self._engine.state_dict())

    def load_state_dict(self, state: dict) -> None:
        # The shared validator refuses another door's state, naming both doors.
        engine, _ = states.unwrap_state(state, "epoch-loader")
        self._engine.load_state_dict(engine)

    def close(self) -> None:
        self._engine.close()
