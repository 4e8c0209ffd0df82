"""Moving messages to and from worker pipes without ever blocking the caller's thread.

A ``send`` blocks when the pipe's buffer is full, and a worker that answers a
big batch blocks the same way. If the main thread did both it could wait on
a worker that waits on it, forever (a big task queued behind a big reply).
So, as CPython's ``ProcessPoolExecutor`` does, the pipes belong to two
threads of the main process:

* the *sender* takes messages from an unbounded queue and sends them, in
  order, blocking only itself;
* the *receiver* waits on every pipe, reads whole messages into each
  channel's inbox, and wakes the main thread through a notification pipe.

The main thread then never touches a pipe: it waits on the notification
pipe and on the workers' sentinels together, with a timeout
(:class:`~.pool.ProcessPool`), so a worker that dies, hangs or stops
mid-message is always noticed.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import os
import queue
import threading
import time
from collections import deque
from typing import Any

JOIN_SECONDS = 1.0


class Channel:
    """One worker's pipe, as the transport threads see it.

    Attributes:
        inbox: messages read from the worker, oldest first.
        last_heard: ``time.monotonic()`` of the last message (or of creation).
        ended: True once the pipe gave end-of-file or failed: nothing more
            will arrive beyond what is in ``inbox``.
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.inbox: deque = deque()
        self.last_heard = time.monotonic()
        self.ended = False
        self.send_failed = False
        self.discarded = False


class Transport:
    """The sender and receiver threads of one pool."""

    def __init__(self) -> None:
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._channels: list[Channel] = []
        self._lock = threading.Lock()
        self._stopping = False
        self._wake_r, self._wake_w = os.pipe()
        self._notify_r, self._notify_w = os.pipe()
        for fd in (self._wake_w, self._notify_r, self._notify_w):
            os.set_blocking(fd, False)
        self._sender = threading.Thread(target=self._send_loop, name="dataset_kit-sender",
                                        daemon=True)
        self._receiver = threading.Thread(target=self._receive_loop,
                                          name="dataset_kit-receiver", daemon=True)
        self._sender.start()
        self._receiver.start()

    # -- the main thread's side ------------------------------------------------

    @property
    def notify_fd(self) -> int:
        """Readable whenever a message arrived or a pipe ended since :meth:`drain`."""
        return self._notify_r

    def drain(self) -> None:
        """Consume pending notifications (call before checking the inboxes)."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self._notify_r, 4096):
                pass

    def add(self, conn: Any) -> Channel:
        """Start carrying messages on ``conn``; return its channel."""
        channel = Channel(conn)
        with self._lock:
            self._channels.append(channel)
        self._wake()
        return channel

    def discard(self, channel: Channel) -> None:
        """Stop watching ``channel``; the receiver closes its pipe."""
        channel.discarded = True
        self._wake()

    def send(self, channel: Channel, message: Any) -> None:
        """Queue ``message`` for ``channel``; never blocks."""
        self._outbox.put((channel, message))

    def close(self) -> None:
        """Stop both threads and close every pipe.

        Call it once the workers are gone: a send blocked on a live, stuck
        worker would keep the sender thread (a daemon) until the worker dies.
        """
        if self._stopping:
            return
        self._stopping = True
        self._outbox.put(None)
        self._wake()
        self._sender.join(JOIN_SECONDS)
        self._receiver.join(JOIN_SECONDS)
        if not self._receiver.is_alive():
            for channel in self._channels:
                channel.conn.close()
            for fd in (self._wake_r, self._wake_w, self._notify_r, self._notify_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    # -- the threads -------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"w")

    def _notify(self) -> None:
        # A full pipe means the main thread has wake-ups pending already.
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._notify_w, b"n")

    def _send_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                return
            channel, message = item
            if channel.send_failed or channel.discarded:
                continue
            try:
                channel.conn.send(message)
            except (OSError, ValueError):
                # The worker is gone; its sentinel tells the main thread.
                channel.send_failed = True

    def _receive_loop(self) -> None:
        while not self._stopping:
            with self._lock:
                for channel in [c for c in self._channels if c.discarded]:
                    self._channels.remove(channel)
                    channel.conn.close()
                live = [c for c in self._channels if not c.ended]
            by_conn = {c.conn: c for c in live}
            ready = multiprocessing.connection.wait(list(by_conn) + [self._wake_r])
            if self._wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            heard = False
            for conn in ready:
                sender = by_conn.get(conn)
                if sender is None:
                    continue
                try:
                    sender.inbox.append(sender.conn.recv())
                except (EOFError, OSError):
                    sender.ended = True
                except Exception as error:  # noqa: BLE001 - an answer that cannot be unpickled
                    sender.inbox.append(_Undecodable(error))
                sender.last_heard = time.monotonic()
                heard = True
            if heard:
                self._notify()


class _Undecodable:
    """Stands in the inbox for a message that could not be unpickled."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
