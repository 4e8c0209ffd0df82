"""The engine: one order, one batching state machine, one way to build batches.

Every front door (``iterators`` for Chainer, ``loader`` for Gluon, ``io`` for
MXNet, ``sources`` for NNabla, ``distributed``, ``shards``, ``torch``) is a
table of translations onto the names below, and uses no others:

* :class:`Engine` — batches of a dataset in an order it owns; ``next()``,
  ``epoch()`` (the batches of one epoch), ``state_dict()`` /
  ``load_state_dict()``, and read-only properties for what a door reports
  (``position``, ``last_plan``, ``batch_size``, ``epoch_size``...).
* :class:`LastBatch` and :data:`LAST_BATCH` — the last-batch policies, each
  as the properties the engine reads; a door translates its own words into
  them in one table.
* :class:`ExecutorSpec` and :func:`make_executor` — where batches are built
  (serial, threads, processes), checked once; :data:`DEFAULT_BATCH_TIMEOUT`.
* The sampler capabilities (:mod:`~dataset_kit.engine.protocols`): any
  callable order sampler, plus :class:`RandomAccessOrder`,
  :class:`BatchStops`, :class:`StatefulSampler`, :class:`OffsetOrder`
  (an epoch that begins at an offset of a cut order); :class:`OrderSampler` and
  :class:`ShuffleOrderSampler` are ready implementations, and
  :func:`sampler_kind` the name a state records for a sampler (and
  :func:`order_identity` what its ledger records of it). The dataset
  protocols: :class:`MapDataset` and :class:`BatchDataset`, and
  :class:`BatchLocality` (which worker process builds a batch cheapest) and
  :class:`BatchParts` (units warmed ahead, a straddling batch built in parts).
* The converter hook (:data:`Converter`, ``ExecutorSpec(converter=...)``).
* Adapters for users' samplers: :class:`IterableOrder` (an iterable of
  indices) and :class:`BatchListOrder` (an iterable of index lists).
* :mod:`~dataset_kit.engine.errors`: what a worker's failure raises.
* :class:`EngineStatistics` (``Engine.statistics()``, a hook every N batches)
  and :mod:`~dataset_kit.engine.profiling` (``dataset_kit.profile``).
* :class:`AutoWorkers` — the one ``num_workers="auto"`` controller
  (``Engine(autotune=...)``).
* :mod:`~dataset_kit.engine.states`: the one state envelope every door's
  ``state_dict()`` is (``wrap_state``) and its one validator (``unwrap_state``).

Everything in a module whose name starts with ``_`` is private to the engine.
"""

from dataset_kit.engine._engine import Engine
from dataset_kit.engine._executor_spec import DEFAULT_BATCH_TIMEOUT, ExecutorSpec, make_executor
from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import LAST_BATCH, BatchPlan, LastBatch, Position
from dataset_kit.engine._stats import EngineStatistics
from dataset_kit.engine.autotune import AutoWorkers
from dataset_kit.engine.errors import (
    BatchTimeoutError,
    ResumeMismatchError,
    ResumeMismatchWarning,
    SamplerMismatchError,
    TimeoutWarning,
    WorkerDiedError,
    WorkerError,
)
from dataset_kit.engine.ledger import Ledger, mix_sum
from dataset_kit.engine.protocols import (
    BatchDataset,
    BatchLocality,
    BatchParts,
    BatchStops,
    Converter,
    MapDataset,
    OffsetOrder,
    OrderSamplerLike,
    RandomAccessOrder,
    StatefulSampler,
)
from dataset_kit.engine.samplers import (
    BatchListOrder,
    IterableOrder,
    OrderSampler,
    ShuffleOrderSampler,
    draw_seed,
    order_identity,
    sampler_kind,
)

__all__ = [
    "AutoWorkers",
    "DEFAULT_BATCH_TIMEOUT",
    "LAST_BATCH",
    "BatchDataset",
    "BatchListOrder",
    "BatchLocality",
    "BatchParts",
    "BatchPlan",
    "BatchSpec",
    "BatchStops",
    "BatchTimeoutError",
    "Converter",
    "Engine",
    "EngineStatistics",
    "ExecutorSpec",
    "IterableOrder",
    "LastBatch",
    "Ledger",
    "MapDataset",
    "OffsetOrder",
    "OrderSampler",
    "OrderSamplerLike",
    "Position",
    "RandomAccessOrder",
    "ResumeMismatchError",
    "ResumeMismatchWarning",
    "SamplerMismatchError",
    "ShuffleOrderSampler",
    "StatefulSampler",
    "TimeoutWarning",
    "WorkerDiedError",
    "WorkerError",
    "draw_seed",
    "mix_sum",
    "make_executor",
    "order_identity",
    "sampler_kind",
]
