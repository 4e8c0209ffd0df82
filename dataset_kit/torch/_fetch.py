"""What the engine runs where batches are built: PyTorch's fetch and collate steps.

:class:`Fetch` is the dataset the engine asks for each batch's examples and
:class:`Collate` its converter. As PyTorch's workers do, both catch an
exception raised by dataset or collate code and hand it back as the batch (a
:class:`Failed`): the engine then counts the batch as delivered, the door
raises the exception in the main process, and the next ``next()`` goes on to
the following batch, as PyTorch's iterator does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch._utils import ExceptionWrapper
from torch.utils.data._utils import worker as _torch_worker

from dataset_kit.dataset import DatasetMixin, fetch_examples
from dataset_kit.engine import BatchLocality
from dataset_kit.torch import _collate


class Failed:
    """A batch whose dataset or collate code raised: re-raised by the door.

    In a worker it holds PyTorch's own ``ExceptionWrapper`` (the exception's
    type and its traceback as text, worded "Caught X in DataLoader worker
    process N"); in the calling thread, the exception itself.
    """

    def __init__(self, error: Exception) -> None:
        info = _torch_worker._worker_info
        if info is None:
            self.error: Exception | None = error
            self.wrapper = None
        else:
            self.error = None  # its traceback cannot cross processes; the wrapper's text does
            self.wrapper = ExceptionWrapper(where=f"in DataLoader worker process {info.id}")

    def reraise(self) -> None:
        """Raise the exception, as PyTorch's ``_process_data`` does."""
        if self.wrapper is not None:
            self.wrapper.reraise()
        assert self.error is not None  # __init__ sets exactly one of error and wrapper
        raise self.error


class Fetch(DatasetMixin):
    """The loader's dataset as the engine asks it: a batch of keys at once.

    Args:
        dataset: the user's map-style dataset.
        key_type: None when the engine's indices are the dataset's keys; else
            ``list`` or ``tuple``: each batch's indices are one key of that
            type (a sampler yielding lists, with ``batch_size=None``).
    """

    def __init__(self, dataset: Any, key_type: type | None = None) -> None:
        self.dataset = dataset
        self.key_type = key_type
        self.getitems = callable(getattr(dataset, "__getitems__", None))

    def __len__(self) -> int:
        return len(self.dataset)

    def get_example(self, i: int) -> Any:
        return self.dataset[i]

    def batch_locality(self, indices: Any) -> Any:
        """The user's dataset's answer (what a batch reads, for the engine's placement), or None."""
        if self.key_type is None and isinstance(self.dataset, BatchLocality):
            return self.dataset.batch_locality(indices)
        return None

    def get_batch(self, indices: Any) -> Any:
        try:
            if self.key_type is not None:
                return [self.dataset[self.key_type(indices.tolist())]]
            if self.getitems:
                return self.dataset.__getitems__(indices.tolist())  # as PyTorch 2 asks
            return fetch_examples(self.dataset, indices)
        except Exception as error:  # noqa: BLE001 - PyTorch re-raises any, in the main process
            return Failed(error)


class Collate:
    """The converter run where batches are built: PyTorch's collate step."""

    def __init__(self, collate_fn: Callable | None, auto_collation: bool) -> None:
        self.collate_fn = collate_fn
        self.auto_collation = auto_collation

    def __call__(self, batch: Any) -> Any:
        if isinstance(batch, Failed):
            return batch
        try:
            if not self.auto_collation:
                fn = _collate.default_convert if self.collate_fn is None else self.collate_fn
                return fn(batch[0])
            if self.collate_fn is None:
                return _collate.collate_to_numpy(batch)
            return self.collate_fn(batch if isinstance(batch, list) else list(batch))
        except Exception as error:  # noqa: BLE001 - as in Fetch
            return Failed(error)
