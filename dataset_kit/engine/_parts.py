"""What the engine's helper modules read and change of an engine (a protocol).

:mod:`._window`, :mod:`._moves` and :mod:`._engine_state` are plain
functions over an :class:`~dataset_kit.engine.Engine`'s insides; they type it
with this protocol so that none of them imports the engine module.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from dataset_kit.engine._executors import Executor
from dataset_kit.engine._orders import Orders
from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import BatchPlan, Position


class EngineParts(Protocol):
    """The engine's parts that its helpers share (see :class:`~dataset_kit.engine.Engine`)."""

    _dataset_length: int
    _order_sampler: Any
    _orders: Orders
    _spec: BatchSpec
    _seed: int
    _executor: Executor
    _hold: bool
    _pending: deque
    _deferred: BaseException | None
    _most_in_flight: int
    _position: Position
    _planned: Position
    _last_plan: BatchPlan | None

    @property
    def epoch_detail(self) -> float: ...

    def _drop_run(self) -> None: ...

    def _consume(self, position: Position, plan: BatchPlan) -> None: ...
