"""What a worker process knows about itself, the way PyTorch tells it.

The engine starts each worker with ``worker_init(index, n_workers)``; the
door's :class:`WorkerStart` turns that into PyTorch's rules: the worker's
seed is ``base_seed + id``; ``random``, ``torch`` and numpy's global
generator are seeded from it as PyTorch seeds them; PyTorch's
``get_worker_info()`` answers (it is the one place PyTorch code looks, so
the door sets PyTorch's own record); then the user's ``worker_init_fn(id)``
runs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data._utils import worker as _torch_worker

#: PyTorch's own ``WorkerInfo``: ``id``, ``num_workers``, ``seed``, ``dataset``
#: (read-only, as in PyTorch).
WorkerInfo = _torch_worker.WorkerInfo


def get_worker_info() -> WorkerInfo | None:
    """Return this worker's ``WorkerInfo``, or None in the main process.

    The same object ``torch.utils.data.get_worker_info()`` returns, inside
    the workers of either loader.
    """
    return _torch_worker._worker_info


class WorkerStart:
    """The engine's ``worker_init``: PyTorch's per-worker seeding, then ``worker_init_fn``.

    It is pickled with the dataset (one pickle), so ``dataset`` is the
    worker's own copy of it.

    Args:
        dataset: the loader's dataset.
        worker_init_fn: the user's ``worker_init_fn(worker_id)``, or None.
        base_seed: drawn as PyTorch draws it for the first epoch.
    """

    def __init__(self, dataset: Any, worker_init_fn: Callable[[int], Any] | None,
                 base_seed: int) -> None:
        self.dataset = dataset
        self.worker_init_fn = worker_init_fn
        self.base_seed = base_seed

    def __call__(self, index: int, n_workers: int) -> None:
        # As PyTorch's workers: one intra-op thread (a forked copy of the
        # parent's thread pool deadlocks, and workers run in parallel anyway).
        torch.set_num_threads(1)
        seed = self.base_seed + index
        random.seed(seed)
        torch.manual_seed(seed)
        np.random.seed(_torch_worker._generate_state(self.base_seed, index))
        # torch.utils.data.get_worker_info() is read by user datasets and by
        # PyTorch's collate (to build tensors in shared memory): it must answer.
        _torch_worker._worker_info = WorkerInfo(
            id=index, num_workers=n_workers, seed=seed, dataset=self.dataset)
        if self.worker_init_fn is not None:
            self.worker_init_fn(index)
