"""The downloads of a file cache in flight in one process, and each one's verified bytes.

A file's download holds its inter-process lock until the file is published
in the cache; other processes wait for that. Threads of the same process
need not: as soon as a download's bytes have passed their verification
they are handed to every reader of this process that waits for the file,
while the downloading thread goes on writing them to the cache. Writing a
file costs as much as downloading it on some machines (fresh page-cache
pages), so a reader that caught up with a prefetch, or a first batch, no
longer waits for the disk. Unverified bytes are never handed over.

A job also keeps one thread of a process from starting a second download of
a file that another thread of it is fetching (it joins that one instead).
"""

from __future__ import annotations

import os
import threading
from typing import Any


def _new_lock() -> None:
    global MAKING  # noqa: PLW0603 - replaced in a forked child, read at each use
    MAKING = threading.Lock()


#: Held while a thread makes an object's per-process state (a ``Downloads``
#: table, a prefetcher's queue), so that two threads never make two. A forked
#: child gets a new one: the parent's may have been held by another thread.
MAKING = threading.Lock()
os.register_at_fork(after_in_child=_new_lock)


class Job:
    """One download in this process.

    Attributes:
        data: the file's bytes once verified, until the job ends.
        error: what ended the download, if it failed.
        done: whether the downloading thread has finished (published or failed).
        for_reader: whether a reader asked for it (its error is the reader's),
            rather than a prefetch (whose error a reader meets again itself).
    """

    def __init__(self, for_reader: bool) -> None:
        self.data: bytes | None = None
        self.error: BaseException | None = None
        self.done = False
        self.for_reader = for_reader


class Downloads:
    """The jobs of one process, by file number; made again in a forked child."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._jobs: dict[int, Job] = {}
        self._changed = threading.Condition()
        #: Errors of jobs that failed after handing their bytes over (the
        #: write or the rename): raised by the next reader of this process.
        self.late_errors: list[BaseException] = []

    @property
    def stale(self) -> bool:
        """Whether this table belongs to another process (we are a forked child)."""
        return self._pid != os.getpid()

    def begin(self, item: int, for_reader: bool) -> tuple[Job, bool]:
        """Return ``(a new job, True)`` for file ``item``, or ``(its job, False)`` if one runs."""
        with self._changed:
            job = self._jobs.get(item)
            if job is not None:
                return job, False
            job = self._jobs[item] = Job(for_reader)
            return job, True

    def hand_over(self, job: Job, data: bytes) -> None:
        """Give the verified ``data`` of ``job`` to the readers waiting for it."""
        with self._changed:
            job.data = data
            self._changed.notify_all()

    def end(self, item: int, job: Job, error: BaseException | None) -> None:
        """Mark ``job`` finished (``error``: why it failed, or None) and forget it."""
        with self._changed:
            job.done, job.error = True, error
            if error is not None and job.data is not None:
                self.late_errors.append(error)
            if error is None:
                job.data = None  # the published file replaces it
            # After a failed write the verified bytes stay: a reader handed them may not
            # have woken yet, and it must get them, not the write's error (the next read
            # raises that, from late_errors).
            if self._jobs.get(item) is job:
                del self._jobs[item]
            self._changed.notify_all()

    def wait(self, job: Job, until_done: bool = False, poll: float = 1.0) -> Any:
        """Wait until ``job`` has verified bytes, or has ended.

        The downloading thread always ends: each of its ranged reads has a
        timeout. ``poll`` only bounds each wait on the condition.

        Args:
            job: the job.
            until_done: wait for the end even after the bytes were handed over.

        Returns:
            ``until_done``: the job's error (None if it succeeded). Else the
            verified bytes, or None if the job ended without them.
        """
        with self._changed:
            while not job.done and (until_done or job.data is None):
                self._changed.wait(poll)
            return job.error if until_done else job.data

    def wait_all(self, poll: float = 1.0) -> None:
        """Wait until every job of this process has ended (its file published, or failed)."""
        with self._changed:
            while self._jobs:
                self._changed.wait(poll)

    def wait_writes(self, poll: float = 1.0) -> bool:
        """Wait for the jobs that handed their bytes over and are writing them; False if none.

        Their staging files take room in the cache that only their end (the
        item published, hence evictable) gives back; the writes are local,
        so this wait is short.
        """
        with self._changed:
            writing = [job for job in self._jobs.values() if job.data is not None]
            while not all(job.done for job in writing):
                self._changed.wait(poll)
            return bool(writing)
