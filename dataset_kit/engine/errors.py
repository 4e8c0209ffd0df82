"""The errors the engine raises, public so every door and its users can catch them.

Every door re-exports the ones its users meet (``dataset_kit.iterators``
keeps ``WorkerError``, ``WorkerDiedError`` and ``BatchTimeoutError``).
"""

from __future__ import annotations

import functools

# Defined beneath every layer, so that storage (a shard manifest) raises them too.
from dataset_kit._resume_errors import (
    RESUME_MISMATCH_CAUSES,
    ResumeMismatchError,
    ResumeMismatchWarning,
)

__all__ = ["RESUME_MISMATCH_CAUSES", "BatchTimeoutError", "ResumeMismatchError",
           "ResumeMismatchWarning", "SamplerMismatchError", "TimeoutWarning", "WorkerDiedError",
           "WorkerError", "worker_failure"]


class TimeoutWarning(RuntimeWarning):
    """A batch has taken longer than ``dataset_timeout`` seconds to build."""


class WorkerError(RuntimeError):
    """A worker process raised while building a batch.

    The message names the worker and its pid and holds the worker's
    traceback; ``__cause__`` is the original exception when it could be
    pickled, and the error is then also an instance of the original's class
    (made by ``worker_failure``), so ``except ShardFormatError`` catches it as
    it catches the error raised without workers. The iterator stays usable:
    the next call retries the batch.
    """


def worker_failure(message: str, cause: BaseException | None) -> WorkerError:
    """A :class:`WorkerError` with ``message`` that is also of ``cause``'s class, if it can be.

    So ``except ShardFormatError`` (or any class) catches a failure raised in a
    worker process as it catches one raised in the main process, and
    ``except WorkerError`` catches both kinds. ``cause`` becomes ``__cause__``.
    A plain :class:`WorkerError` when ``cause`` is None (it did not pickle) or
    its class cannot be combined (a class whose constructor needs more than a
    message).
    """
    failure: WorkerError = WorkerError(message)
    if isinstance(cause, Exception) and not isinstance(cause, WorkerError):
        try:
            failure = _combined(type(cause))(message)  # type: ignore[arg-type]  # hashable
        except TypeError:  # layouts that do not combine, or a constructor wanting more
            pass
    failure.__cause__ = cause
    return failure


@functools.cache
def _combined(kind: type) -> type:
    return type(f"WorkerError[{kind.__name__}]", (WorkerError, kind), {
        "__module__": __name__,
        "__str__": BaseException.__str__,  # the worker's message, as a WorkerError reads
        # Made at run time, so no pickle finds it by name: pickled as a WorkerError.
        "__reduce__": lambda error: (WorkerError, error.args)})


class BatchTimeoutError(WorkerError, TimeoutError):
    """A worker stayed silent for longer than the iterator's ``timeout``.

    Raised when the batch the caller waits for has not arrived and its worker
    has sent nothing for ``timeout`` seconds (a dataset stuck in I/O, a
    stopped process). The message names the worker, its pid and how long it
    has been silent. The iterator stops every worker: a worker that hangs
    leaves the pipeline in an unknown state.
    """


class WorkerDiedError(WorkerError):
    """A worker process died (a signal, ``os._exit``, a crash).

    The message names the worker's pid and its exit code or signal. The
    iterator has stopped every worker and cannot continue.

    Attributes:
        pid: the dead worker's process id (None when not known).
        exitcode: its exit code, ``-N`` for signal ``N`` (None when not known),
            so a door can word the failure in its own vocabulary.
    """

    def __init__(self, *args: object, pid: int | None = None,
                 exitcode: int | None = None) -> None:
        super().__init__(*args)
        self.pid = pid
        self.exitcode = exitcode


class SamplerMismatchError(ResumeMismatchError):
    """A state was saved with another kind of order sampler than this iterator's."""

    def __init__(self, *args: object, cause: str = "sampler") -> None:
        super().__init__(*args, cause=cause)
