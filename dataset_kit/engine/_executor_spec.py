"""One way to say where batches are built, checked once, and one factory for every door.

Every front door (Chainer's iterators, Gluon's ``DataLoader``, MXNet's
``ImageRecordIter``, NNabla's ``DataIterator``, ``ShardedIterator``)
translates its own words (``n_processes``, ``num_workers``,
``preprocess_threads``...) into an :class:`ExecutorSpec` and asks
:func:`make_executor` for the executor. So the start method's default, its
check, and what a stuck batch does are decided here, once.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dataset_kit._checks import positive_int
from dataset_kit.engine._executors import (
    Executor,
    ProcessExecutor,
    SerialExecutor,
    ThreadExecutor,
)
from dataset_kit.engine._ray import RayExecutor

#: Seconds a worker may stay silent while its batch is awaited before that is a
#: :class:`~dataset_kit.iterators.BatchTimeoutError`. Long enough for a
#: legitimately slow first batch (starting ``spawn`` workers that import a
#: framework and unpickle a large dataset), short enough that a hang is loud.
DEFAULT_BATCH_TIMEOUT = 300.0

KINDS = ("serial", "thread", "process", "ray")


def resolve_start_method(start_method: str | None) -> str:
    """Return ``start_method``, or the default ("fork" where available), checked.

    Raises:
        ValueError: if this platform has no such start method.
    """
    methods = multiprocessing.get_all_start_methods()
    if start_method is None:
        return "fork" if "fork" in methods else methods[0]
    if start_method not in methods:
        raise ValueError(f"start_method must be one of {methods}, got {start_method!r}")
    return start_method


def _seconds_or_none(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ExecutorSpec:
    """Where and how batches are built: validated once, the same for every door.

    Attributes:
        kind: ``"serial"`` (in the caller's thread), ``"thread"``, ``"process"``
            or ``"ray"`` (actors of a Ray cluster, the ``ray`` extra; see
            :doc:`/cluster`).
        workers: threads, processes or Ray actors (ignored, and 0, for ``"serial"``).
        depth: batches in flight; None for two per worker.
        start_method: for ``"process"``: ``"fork"``, ``"forkserver"`` or
            ``"spawn"``; None resolves to the platform's default (fork where
            available).
        timeout: seconds a worker may stay silent while its batch is awaited
            before the iterator raises
            :class:`~dataset_kit.iterators.BatchTimeoutError` and stops its
            workers; None waits as long as the workers live.
        converter: applied to each batch where it is built, or None.
        worker_init: ``worker_init(worker_index, workers)``, run once in each
            worker process before its first batch.
        max_tasks: batches a worker process builds before it is replaced.
        warn_after: seconds after which a slow batch is warned about
            (Chainer's ``dataset_timeout``), or None.
        address: for ``"ray"``: the cluster's address; None reads
            ``RAY_ADDRESS``, and without it starts Ray on this machine.
        resources: for ``"ray"``: each actor's Ray resources
            (``{"num_cpus": 1}`` when None).
        dataset_factory: for ``"ray"``: a picklable callable with no
            arguments that each actor calls once to build its own copy of the
            dataset (one that opens files), instead of receiving it through
            Ray's object store.

    Raises:
        TypeError: for a non-integer count or a non-callable converter or
            worker_init.
        ValueError: for an unknown kind or start method, or an out-of-range
            number.
    """

    kind: str = "serial"
    workers: int = 0
    depth: int | None = None
    start_method: str | None = None
    timeout: float | None = DEFAULT_BATCH_TIMEOUT
    converter: Callable[[Any], Any] | None = None
    worker_init: Callable[[int, int], Any] | None = None
    max_tasks: int | None = None
    warn_after: float | None = None
    address: str | None = None
    resources: dict | None = field(default=None, hash=False)
    dataset_factory: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "serial":
            object.__setattr__(self, "workers", 0)
        else:
            positive_int("workers", self.workers)
        if self.depth is not None:
            positive_int("depth", self.depth)
        if self.kind == "process":
            object.__setattr__(self, "start_method", resolve_start_method(self.start_method))
        elif self.start_method is not None:
            resolve_start_method(self.start_method)
        object.__setattr__(self, "timeout", _seconds_or_none("timeout", self.timeout))
        object.__setattr__(self, "warn_after", _seconds_or_none("warn_after", self.warn_after))
        for name in ("converter", "worker_init"):
            fn = getattr(self, name)
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable or None, got {type(fn).__name__}")
        if self.max_tasks is not None:
            positive_int("max_tasks", self.max_tasks)
        ray_only = {"address": self.address, "resources": self.resources,
                    "dataset_factory": self.dataset_factory}
        given = {name: value for name, value in ray_only.items() if value is not None}
        if self.kind != "ray" and given:
            raise ValueError(f"address, resources and dataset_factory are for kind='ray', "
                             f"not {self.kind!r} (got {given!r})")
        if self.dataset_factory is not None and not callable(self.dataset_factory):
            raise TypeError(f"dataset_factory must be callable or None, got "
                            f"{type(self.dataset_factory).__name__}")
        if self.address is not None and not isinstance(self.address, str):
            raise TypeError(f"address must be a string or None, got {self.address!r}")
        if self.resources is not None and not isinstance(self.resources, dict):
            raise TypeError(f"resources must be a dict or None, got {self.resources!r}")

    def placed(self, executor: str | None, ray_address: str | None = None) -> ExecutorSpec:
        """Return this spec, or the same workers as Ray actors when ``executor`` is ``"ray"``.

        The doors' one translation of their ``executor=`` / ``ray_address=``
        arguments: a door builds its local spec as always and asks for it placed.

        Args:
            executor: None or ``"local"`` (this spec), or ``"ray"`` (its workers,
                converter, worker_init, timeout and depth on Ray actors).
            ray_address: the Ray cluster's address (None: ``RAY_ADDRESS``, else a
                local Ray); only with ``executor="ray"``.

        Raises:
            ValueError: for another ``executor``, a ``ray_address`` without
                ``executor="ray"``, or ``"ray"`` for a spec without workers.
        """
        if executor is None or executor == "local":
            if ray_address is not None:
                raise ValueError(f"ray_address is for executor='ray', got executor={executor!r} "
                                 f"and ray_address={ray_address!r}")
            return self
        if executor != "ray":
            raise ValueError(f"executor must be None, 'local' or 'ray', got {executor!r}")
        if self.kind == "serial":
            raise ValueError("executor='ray' builds batches on Ray actors: give the door "
                             "workers (its worker count is the number of actors), got 0")
        return replace(self, kind="ray", start_method=None, max_tasks=None,
                       address=ray_address)

def make_executor(spec: ExecutorSpec, dataset: Any) -> Executor:
    """Build the executor ``spec`` describes, over ``dataset``.

    Workers start lazily, on the first batch.
    """
    if spec.kind == "serial":
        return SerialExecutor(dataset, spec.converter)
    if spec.kind == "ray":
        return RayExecutor(dataset, workers=spec.workers, address=spec.address,
                           resources=spec.resources, converter=spec.converter,
                           worker_init=spec.worker_init, timeout=spec.timeout, depth=spec.depth,
                           dataset_factory=spec.dataset_factory)
    if spec.kind == "thread":
        return ThreadExecutor(dataset, spec.workers, spec.converter, depth=spec.depth,
                              timeout=spec.timeout)
    assert spec.start_method is not None  # a process spec resolves it in __post_init__
    return ProcessExecutor(
        dataset, workers=spec.workers, start_method=spec.start_method,
        converter=spec.converter, worker_init=spec.worker_init, max_tasks=spec.max_tasks,
        warn_after=spec.warn_after, timeout=spec.timeout, depth=spec.depth)
