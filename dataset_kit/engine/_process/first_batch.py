"""The first batch of a fresh worker pool, split across its workers and joined again.

Until the first batch arrives nothing else can be delivered, and with one
worker building it every other worker is idle: the first batch then costs a
whole batch's time in one process. Cutting it into one consecutive part per
worker and joining the parts brings it in that time divided by the workers.
The join lays the examples out as one worker would have, so the batch is the
same either way.

Forked workers do not start together: each fork of a large process takes
milliseconds in the main process (3-7 ms after ``import torch``), so worker
k starts that much after worker k-1, and equal parts made the last worker
finish that much after the first. So forked workers *claim* the examples
instead (:class:`Claims`): the main process writes one token per chunk of
the batch into a pipe before forking, and each worker reads tokens (a read
of a few bytes from a pipe is atomic) and builds those chunks until none is
left. The first worker starts on the batch at once and the others join in
as they come; no lock is shared, so a worker that dies holding nothing
leaves the others unaffected (its death is reported as usual). Other start
methods cannot inherit the pipe, and take equal consecutive parts.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

import numpy as np

from dataset_kit.dataset import builds_one_by_one
from dataset_kit.engine import _wire
from dataset_kit.engine._fetch import fetch_batch
from dataset_kit.engine._statemachine import BatchPlan

_TOKEN = struct.Struct("<I")  # the position of a chunk's first example
# At most this many tokens (4 KiB): any pipe's buffer holds them, so writing
# them all before a worker reads never blocks.
_MOST_TOKENS = 1024
# Chunks per worker: the claims balance the workers to within one chunk.
_CHUNKS_PER_WORKER = 16


def worth_splitting(plan: BatchPlan, workers: int, dataset: Any, converter: Any) -> bool:
    """Whether the first batch of a fresh pool of ``workers`` is built in parts.

    Only where examples are built one by one (a batch gather is cheap) and
    without a converter (its output cannot be joined).
    """
    return workers > 1 and converter is None and len(plan.indices) >= 2 * workers \
        and builds_one_by_one(dataset)


def split(plan: BatchPlan, parts: int) -> list[BatchPlan]:
    """Cut a plan into ``parts`` consecutive plans (the example rng keys go with them)."""
    bounds = np.linspace(0, len(plan.indices), parts + 1).astype(int)
    epochs = plan.epochs
    return [plan._replace(indices=plan.indices[a:b],
                          epochs=epochs if isinstance(epochs, int) else epochs[a:b])
            for a, b in pairwise(bounds)]


def join(parts: list) -> Any:
    """Join the batches of a split plan into what one worker would have delivered.

    The examples are put back in order and laid out the way a worker lays out
    a whole batch: stacked columns when they are uniform across every part
    (each part may have been uniform on its own, with other shapes), a list
    otherwise.
    """
    examples = [example for part in parts for example in part]
    uniform = _wire.uniform_columns(examples)
    return examples if uniform is None else _wire.stacked_batch(*uniform)


class Claims:
    """The chunks of a first batch, as tokens in a pipe that forked workers inherit.

    Args:
        size: the batch's number of examples.
        workers: the workers that will claim them.

    Attributes:
        fd: the pipe's read end (non-blocking), for the workers.
        chunk: examples per chunk (the last may be shorter).
    """

    def __init__(self, size: int, workers: int) -> None:
        if size < 1 or workers < 1:
            raise ValueError(f"Claims needs size >= 1 and workers >= 1, got size={size}, "
                             f"workers={workers}")
        self.chunk = max(1, -(-size // min(_MOST_TOKENS, _CHUNKS_PER_WORKER * workers)))
        read_end, write_end = os.pipe()
        try:
            os.write(write_end, b"".join(_TOKEN.pack(start)
                                         for start in range(0, size, self.chunk)))
        finally:
            os.close(write_end)  # once the tokens are gone, a read sees the end
        os.set_blocking(read_end, False)
        self.fd = read_end

    def close(self) -> None:
        """Close the main process's read end (once every worker is forked). Idempotent."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def build_claimed(dataset: Any, plan: BatchPlan, seed: int, fd: int,
                  chunk: int) -> tuple[list[int], list]:
    """Build the chunks of ``plan`` this worker claims from ``fd``, until none is left.

    Each example is built as in any batch (its rng keyed by seed, epoch and
    index), so which worker builds it changes nothing. Closes ``fd``.

    Returns:
        ``(positions, examples)``: each built example and its position in the plan.
    """
    positions: list[int] = []
    examples: list = []
    epochs = plan.epochs
    try:
        while True:
            try:
                token = os.read(fd, _TOKEN.size)
            except BlockingIOError:
                break
            if len(token) < _TOKEN.size:  # the end (a token is never read in part)
                break
            (start,) = _TOKEN.unpack(token)
            end = min(start + chunk, len(plan.indices))
            part = plan._replace(indices=plan.indices[start:end],
                                 epochs=epochs if isinstance(epochs, int) else epochs[start:end])
            examples.extend(fetch_batch(dataset, part, seed))
            positions.extend(range(start, end))
    finally:
        os.close(fd)
    return positions, examples


def join_claimed(answers: Iterable[tuple[list[int], list]], size: int) -> Any:
    """Join the answers of :func:`build_claimed` into what one worker would have delivered.

    ``answers`` is read lazily, in worker order, and only until all ``size``
    examples are in: a worker that came too late to claim any chunk is not
    waited for (its empty answer is dropped when its next batch is read).

    Raises:
        RuntimeError: if the answers do not hold each of the ``size`` positions once.
    """
    examples: list = [None] * size
    built = [False] * size
    seen = 0
    for positions, part in answers:
        for position, example in zip(positions, part):
            if built[position]:
                raise RuntimeError(f"two workers built example {position} of a first batch")
            examples[position], built[position] = example, True
        seen += len(positions)
        if seen == size:
            return join([examples])
    raise RuntimeError(f"the workers built {seen} examples of a first batch of {size}")
