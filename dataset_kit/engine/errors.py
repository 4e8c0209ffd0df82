"""The errors the engine raises, public so every door and its users can catch them.

Every door re-exports the ones its users meet (``dataset_kit.iterators``
keeps ``WorkerError``, ``WorkerDiedError`` and ``BatchTimeoutError``).
"""

from __future__ import annotations


class TimeoutWarning(RuntimeWarning):
    """A batch has taken longer than ``dataset_timeout`` seconds to build."""


class WorkerError(RuntimeError):
    """A worker process raised while building a batch.

    The message names the worker and its pid and holds the worker's
    traceback; ``__cause__`` is the original exception when it could be
    pickled. The iterator stays usable: the next call retries the batch.
    """


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


class SamplerMismatchError(ValueError):
    """A state was saved with another kind of order sampler than this iterator's."""
