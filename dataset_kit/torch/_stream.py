"""An ``IterableDataset`` as the engine asks for it: batch ``k`` is from stream ``k % n``.

PyTorch gives each of its ``n`` workers a copy of the dataset to iterate, and
takes their batches round robin, skipping a worker once it is exhausted. The
door translates that onto the engine without a loop of its own:

==========================================  ======================================
PyTorch                                     engine
==========================================  ======================================
worker ``w``'s copy and its iterator        stream ``w``: a copy iterated where the
                                            engine's tasks for it are built
one ``iter(loader)``                        one engine epoch over :class:`Streams`
                                            (identity order, one index per batch)
the ``k``-th batch, round robin             index ``k``: the next batch of stream
                                            ``(k + first) % n``
``get_worker_info()`` in the dataset        stream ``w``'s ``WorkerInfo``
a worker's ``StopIteration``                an ``ended`` answer, skipped by the door
==========================================  ======================================

The process pool sends task ``t`` to process ``t % n`` and an epoch's tasks
are consecutive, so within an epoch each stream is always built by the same
process, which keeps its iterator. Each answer carries the stream's position
after the batch (its dataset's and iterator's ``state_dict()`` when they have
one, torchdata's ``Stateful`` protocol, and how many batches it has given), so
the door's checkpoint is the streams' positions as of the batches it yielded.
"""

from __future__ import annotations

from typing import Any

from torch.utils.data._utils import worker as _torch_worker

from dataset_kit import _example_context
from dataset_kit.dataset import DatasetMixin
from dataset_kit.torch._fetch import Failed

#: The length the engine sees: an epoch that never ends before its streams do.
ENDLESS = 1 << 62


def stateful(obj: Any) -> bool:
    """Whether ``obj`` follows torchdata's ``Stateful`` protocol."""
    return callable(getattr(obj, "state_dict", None)) and \
        callable(getattr(obj, "load_state_dict", None))


class Resume:
    """Where each stream starts in the engine epoch that resumes a checkpoint.

    Args:
        epoch: the engine epoch the resume applies to.
        first: the stream that gives that epoch's first batch.
        positions: per stream, ``{"batches", "ended", "dataset", "iterator"}``.
    """

    def __init__(self, epoch: int, first: int, positions: list[dict]) -> None:
        self.epoch = epoch
        self.first = first
        self.positions = positions


class _Stream:
    """One stream's iterator and position in one epoch."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.iterator: Any = None
        self.batches = 0
        self.ended = False


class Streams(DatasetMixin):
    """The engine's dataset for an ``IterableDataset``: index ``k`` -> the next batch of a stream.

    Args:
        dataset: the user's ``IterableDataset``.
        n_streams: ``max(1, num_workers)``.
        batch_size: examples per batch, or None for one item (no auto-batching).
        drop_last: drop each stream's last incomplete batch.
    """

    def __init__(self, dataset: Any, n_streams: int, batch_size: int | None,
                 drop_last: bool) -> None:
        self.dataset = dataset
        self.n_streams = n_streams
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.resume: Resume | None = None
        self._streams: dict[int, _Stream] = {}

    def __len__(self) -> int:
        return ENDLESS

    def get_example(self, i: int) -> Any:
        return self.get_batch([i])[0]

    def stream_of(self, epoch: int, k: int) -> int:
        """The stream that gives batch ``k`` of engine epoch ``epoch``."""
        first = self.resume.first if self.resume and self.resume.epoch == epoch else 0
        return (k + first) % self.n_streams

    def get_batch(self, indices: Any) -> Any:
        context = _example_context.current()
        epoch = 0 if context is None else int(context.epochs if isinstance(
            context.epochs, int) else context.epochs[0])
        s = self.stream_of(epoch, int(indices[0]))
        info = _torch_worker._worker_info
        if info is not None:  # in a worker: the dataset sees its stream as its worker
            _torch_worker._worker_info = _torch_worker.WorkerInfo(
                id=s, num_workers=self.n_streams, seed=info.seed - info.id + s,
                dataset=info.dataset)
        try:
            return [self._next_batch(epoch, s)]
        finally:
            if info is not None:
                _torch_worker._worker_info = info

    def _open(self, epoch: int, s: int) -> _Stream:
        stream = _Stream(epoch)
        position = None
        if self.resume is not None and self.resume.epoch == epoch:
            position = self.resume.positions[s]
        if position is not None and position["ended"]:
            stream.ended = True
            return stream
        if position is not None and position["dataset"] is not None:
            self.dataset.load_state_dict(position["dataset"])
        stream.iterator = iter(self.dataset)
        if position is not None:
            if position["iterator"] is not None:
                stream.iterator.load_state_dict(position["iterator"])
            elif position["dataset"] is None:
                # Neither is Stateful: replay the batches already given, as
                # torchdata's StatefulDataLoader fast-forwards.
                for _ in range(position["batches"]):
                    self._take(stream)
            stream.batches = position["batches"]
        return stream

    def _take(self, stream: _Stream) -> list | None:
        """The next batch's examples of ``stream``, or None when it has ended."""
        size = 1 if self.batch_size is None else self.batch_size
        items = []
        for item in stream.iterator:
            items.append(item)
            if len(items) == size:
                break
        if not items or (len(items) < size and self.drop_last):
            stream.ended = True
            return None
        return items

    def _next_batch(self, epoch: int, s: int) -> tuple:
        stream = self._streams.get(s)
        if stream is None or stream.epoch != epoch:
            stream = self._streams[s] = self._open(epoch, s)
        batch: Any = None
        if not stream.ended:
            try:
                batch = self._take(stream)
            except Exception as error:  # noqa: BLE001 - PyTorch re-raises any, in the main process
                batch = [Failed(error)]
            if batch is not None:
                stream.batches += 1
        return s, self._position(stream), batch

    def _position(self, stream: _Stream) -> dict:
        iterator = stream.iterator
        return {"batches": stream.batches, "ended": stream.ended,
                "dataset": self.dataset.state_dict() if stateful(self.dataset) else None,
                "iterator": iterator.state_dict()
                if iterator is not None and iterator is not self.dataset and stateful(iterator)
                else None}


class StreamCollate:
    """The converter for streams: the loader's collate step on a stream's examples."""

    def __init__(self, collate: Any) -> None:
        self.collate = collate

    def __call__(self, answer: Any) -> Any:
        (s, position, examples), = answer
        if examples is None:
            return s, position, None
        if len(examples) == 1 and isinstance(examples[0], Failed):
            return s, position, examples[0]
        return s, position, self.collate(examples)
