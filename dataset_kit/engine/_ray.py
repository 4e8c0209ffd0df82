"""The Ray executor: the engine's planned batches built by a pool of Ray actors.

Only *where* a batch is built moves to the cluster: the engine still plans
every batch (indices, epochs, seed), so the batches are the local executors'
for any number of actors and nodes, and a checkpoint is the engine's own.

* The dataset reaches the actors once: ``ray.put`` when the pool starts (each
  actor receives the object's reference and reads it from the object store),
  or ``dataset_factory``, which each actor calls to build its own (a dataset
  that opens files).
* Each planned batch is one task, sent to the live actor with the fewest
  batches in flight; results come back through Ray's object store (numpy
  arrays read zero-copy from it, so they are read-only).
* A batch is a pure function of its plan and the seed, so an actor or a node
  that dies costs nothing but time: its batches are submitted again to the
  survivors when they are collected. When no actor is left, collecting is a
  :class:`~dataset_kit.engine.errors.WorkerDiedError` naming the cluster's
  address and the last error Ray gave.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dataset_kit.engine._executors import _Closable
from dataset_kit.engine._fetch import fetch_batch
from dataset_kit.engine._statemachine import BatchPlan
from dataset_kit.engine.errors import BatchTimeoutError, WorkerDiedError, WorkerError

Converter = Callable[[Any], Any]


def import_ray() -> Any:
    """Return the ``ray`` module, or an ImportError naming the extra."""
    try:
        import ray
    except ImportError as error:
        raise ImportError("the Ray executor needs Ray: pip install 'dataset_kit[ray]' "
                          f"({error})") from error
    return ray


class _BatchBuilder:
    """The actor's body: holds the dataset, builds planned batches (see the module's doc)."""

    def __init__(self, dataset: Any, factory: Callable[[], Any] | None,
                 converter: Converter | None, worker_init: Callable[[int, int], Any] | None,
                 index: int, count: int) -> None:
        self.dataset = factory() if factory is not None else dataset
        self.converter = converter
        if worker_init is not None:
            worker_init(index, count)

    def build(self, indices: Any, epochs: Any, pad: int, seed: int) -> Any:
        plan = BatchPlan(indices, epochs, pad)
        if self.converter is None:
            return fetch_batch(self.dataset, plan, seed, stack=True)
        return self.converter(fetch_batch(self.dataset, plan, seed))


@dataclass
class RayHandle:
    """One submitted batch: its plan (kept to submit it again) and where it runs now."""

    plan: BatchPlan
    seed: int
    actor: int
    ref: Any = field(default=None, repr=False)


class RayExecutor(_Closable):
    """Builds batches ahead on ``workers`` Ray actors (see the module's doc).

    Args:
        dataset: the dataset (put in Ray's object store once, unless
            ``dataset_factory`` is given).
        workers: actors in the pool.
        address: the cluster's address (``"127.0.0.1:6379"``, ``"ray://..."``,
            ``"auto"``); None reads ``RAY_ADDRESS``, and without it starts a
            local Ray on this machine. Ignored when Ray is already initialised.
        resources: the Ray resources of each actor (``{"num_cpus": 1}`` when
            None; ``{"num_cpus": 2, "memory": 2**30}``, or custom resources).
        converter: applied to each batch on its actor, or None.
        worker_init: ``worker_init(index, workers)``, run once on each actor.
        timeout: seconds to wait for one batch before a
            :class:`~dataset_kit.engine.errors.BatchTimeoutError` (None: wait).
        depth: batches in flight; two per actor when None.
        dataset_factory: a picklable callable with no arguments that each
            actor calls once to build its own dataset (one that opens files),
            instead of receiving ``dataset``.
    """

    prefetches = True

    def __init__(self, dataset: Any, *, workers: int, address: str | None = None,
                 resources: dict | None = None, converter: Converter | None = None,
                 worker_init: Callable[[int, int], Any] | None = None,
                 timeout: float | None = None, depth: int | None = None,
                 dataset_factory: Callable[[], Any] | None = None) -> None:
        self.workers = workers
        self._factory = dataset_factory
        self.depth = 2 * workers if depth is None else max(depth, 1)
        self.timeout = timeout
        self.address = address if address is not None else os.environ.get("RAY_ADDRESS")
        self._resources = dict(resources) if resources else {"num_cpus": 1}
        self._dataset = dataset
        self._converter = converter
        self._worker_init = worker_init
        self._actors: list[Any] = []
        self._alive: list[bool] = []
        self._in_flight: list[int] = []
        self._last_error: BaseException | None = None

    # -- the pool ------------------------------------------------------------------------

    def _start(self) -> None:
        ray = import_ray()
        if not ray.is_initialized():
            ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False,
                     include_dashboard=False, configure_logging=False)
        remote = ray.remote(**self._resources, max_restarts=0)(_BatchBuilder)
        shipped = None if self._factory is not None else ray.put(self._dataset)
        self._actors = [remote.remote(shipped, self._factory, self._converter,
                                      self._worker_init, k, self.workers)
                        for k in range(self.workers)]
        self._alive = [True] * self.workers
        self._in_flight = [0] * self.workers

    def _pick(self) -> int:
        live = [k for k in range(len(self._actors)) if self._alive[k]]
        if not live:
            raise self._all_lost()
        return min(live, key=lambda k: self._in_flight[k])

    def _send(self, handle: RayHandle) -> None:
        handle.actor = self._pick()
        plan = handle.plan
        handle.ref = self._actors[handle.actor].build.remote(plan.indices, plan.epochs,
                                                              plan.pad, handle.seed)
        self._in_flight[handle.actor] += 1

    def _all_lost(self) -> WorkerDiedError:
        where = self.address or "a local Ray started by dataset_kit"
        last = str(self._last_error)
        last = last if len(last) < 2000 else last[:1000] + " ... " + last[-1000:]
        return WorkerDiedError(
            f"every one of the {self.workers} Ray actors building batches is gone "
            f"(cluster {where}); the last error Ray gave: {type(self._last_error).__name__}: "
            f"{last}")

    # -- the executor protocol -----------------------------------------------------------

    def submit(self, plan: BatchPlan, seed: int) -> RayHandle:
        if not self._actors:
            self._start()
        handle = RayHandle(plan, seed, -1)
        self._send(handle)
        return handle

    def collect(self, handle: RayHandle) -> Any:
        ray = import_ray()
        from ray import exceptions as ray_errors

        lost = (ray_errors.RayActorError, ray_errors.ObjectLostError,
                getattr(ray_errors, "ActorUnavailableError", ray_errors.RayActorError),
                getattr(ray_errors, "NodeDiedError", ray_errors.RayActorError))
        while True:
            try:
                batch = ray.get(handle.ref, timeout=self.timeout)
            except ray_errors.GetTimeoutError:
                error = BatchTimeoutError(
                    f"no batch came from Ray actor {handle.actor} for {self.timeout} s "
                    f"(timeout={self.timeout} s); an actor is stuck or the cluster "
                    f"({self.address or 'local'}) is out of resources: then pass a larger "
                    f"timeout, or None")
                self._fail(error)
                raise error from None
            except lost as error:
                # The actor (or its node) is gone: the batch is a pure function of its
                # plan, so build it again on a survivor.
                self._last_error = error
                self._alive[handle.actor] = False
                self._in_flight[handle.actor] -= 1
                try:
                    self._send(handle)
                except WorkerDiedError as died:
                    self._fail(died)
                    raise died from error
                continue
            except ray_errors.RayTaskError as error:
                self._in_flight[handle.actor] -= 1
                cause = getattr(error, "cause", None)
                raise WorkerError(f"Ray actor {handle.actor} raised while building a "
                                  f"batch:\n{error}") from cause
            self._in_flight[handle.actor] -= 1
            return batch

    def cancel(self, handles: list) -> None:
        if not self._actors:
            return  # closed: the actors and their tasks are gone
        ray = import_ray()
        for handle in handles:
            if handle.ref is not None:
                self._in_flight[handle.actor] -= 1
                ray.cancel(handle.ref, force=False)

    def reopen(self) -> None:
        if self.closed and self._failure is None:
            self.closed = False

    def _fail(self, error: BaseException) -> None:
        self._failure = error
        self.close()

    def close(self) -> None:
        """Kill the actors (the cluster and its other work are left alone). Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self._actors:
            ray = import_ray()
            for actor in self._actors:
                try:
                    ray.kill(actor)
                except Exception:  # noqa: BLE001 - an actor already gone
                    pass
        self._actors, self._alive, self._in_flight = [], [], []

    def __getstate__(self) -> dict:
        # A copy starts an actor pool of its own when first used.
        state = self.__dict__.copy()
        state.update(_actors=[], _alive=[], _in_flight=[])
        return state
