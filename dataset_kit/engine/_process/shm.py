"""Shared-memory blocks: creating, mapping, lending, and unlinking them.

A block is a file in ``/dev/shm`` mapped by both sides. Workers fill blocks
with a batch's arrays (how a batch is laid out in a block is
:mod:`._wire`'s business); the main process keeps a pool of blocks, lends a
free one with each task, and takes it back when the last view of a delivery
is garbage-collected (its *lease*), so an array handed to the caller is never
overwritten while it is referenced.

Every block of an iterator has the iterator's name prefix, so whatever a
crash leaves behind is found and unlinked by prefix.
"""

from __future__ import annotations

import mmap
import os
import re
import threading
import weakref
from collections import deque

import numpy as np

SHM_DIR = "/dev/shm"
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux only


def available() -> bool:
    """Whether POSIX shared memory is usable through ``/dev/shm`` here."""
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


class Block:
    """A named shared-memory file, mapped into this process.

    Args:
        name: the file name in ``/dev/shm``.
        size: its size in bytes.
        create: create it (and reserve its pages) rather than open it.
        populate: map every page at once (a worker, which fills the block):
            one page fault per 4 KiB cost 22 ms for a 48 MB block written
            through a fresh mapping, against 8 ms populated. The main process
            maps without, as its caller may read only part of a batch.

    Raises:
        OSError: if the file cannot be created, reserved or opened (for
            example ``ENOSPC`` when ``/dev/shm`` is full).
    """

    def __init__(self, name: str, size: int, create: bool, populate: bool = True) -> None:
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
        try:
            if create:
                try:
                    # Reserve the pages now: a full /dev/shm is an OSError
                    # here, not a SIGBUS on first write.
                    os.posix_fallocate(fd, 0, size)
                except BaseException:
                    os.unlink(path)
                    raise
            flags = mmap.MAP_SHARED | (_MAP_POPULATE if populate else 0)
            self.mmap = mmap.mmap(fd, size, flags=flags)
        finally:
            os.close(fd)
        self.name = name
        self.size = size

    def close(self) -> None:
        try:
            self.mmap.close()
        except BufferError:
            pass  # views are still alive; the mapping goes when they do


def unlink(name: str) -> None:
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


def unlink_prefix(prefix: str) -> None:
    """Unlink every block whose name starts with ``prefix``."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            unlink(name)


def _pid_namespace() -> str:
    """This process's pid namespace, as its inode number ("0" where unknown)."""
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return "0"
    return "".join(c for c in link if c.isdigit()) or "0"


def pool_prefix() -> str:
    """A new pool's block-name prefix: ``dsk-<pid>-n<pid namespace>-<8 hex digits>-``.

    The pid says whose blocks they are; the namespace says in which pid
    namespace that pid means something (containers sharing one ``/dev/shm``
    may each have a process 1); the random part keeps two pools of one
    process apart.
    """
    return f"dsk-{os.getpid()}-n{_pid_namespace()}-{os.urandom(4).hex()}-"


_BLOCK_NAME = re.compile(r"dsk-(\d+)-n(\d+)-[0-9a-f]{8}-")


def unlink_orphans() -> list[str]:
    """Unlink the blocks of pools whose main process no longer exists.

    A pool's workers unlink its blocks when its main process dies (they see
    the lifeline cut). When the main process and its workers die together
    (a SIGKILL to the whole process group, the OOM killer taking them all, a
    container stopped), nobody is left to, and the blocks would stay in
    ``/dev/shm`` until a reboot. So each new pool sweeps them: a block whose
    name carries a pid of this pid namespace that no process has is
    unreachable (only that process and its workers map its pool's blocks, and
    an orphaned worker unlinks by prefix anyway, so unlinking twice is
    harmless). A pid that exists, even one reused by an unrelated process,
    keeps its blocks, and so does every block named in another namespace
    (whose pids this process cannot check) or in no namespace (an older
    release's): this never removes a block a live pool could use.

    Returns:
        The names unlinked.
    """
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return []
    namespace = _pid_namespace()
    if namespace == "0":
        return []
    alive: dict[int, bool] = {}
    removed = []
    for name in names:
        match = _BLOCK_NAME.match(name)
        if match is None or match.group(2) != namespace:
            continue
        pid = int(match.group(1))
        if pid not in alive:
            alive[pid] = _process_exists(pid)
        if not alive[pid]:
            try:
                os.unlink(os.path.join(SHM_DIR, name))
            except OSError:
                # Gone already (a worker or another sweep was first), or
                # another user's (``/dev/shm`` is sticky): not ours to remove,
                # and never a reason for this pool not to start.
                continue
            removed.append(name)
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def block_size_for(nbytes: int) -> int:
    """Size a new block for ``nbytes``, with headroom so later batches fit too."""
    size = max(nbytes + nbytes // 4, 1 << 16)
    return -(-size // mmap.PAGESIZE) * mmap.PAGESIZE




class BlockPool:
    """The main process's blocks: free ones to lend to workers, leased ones in use.

    Args:
        prefix: the name prefix of this iterator's blocks.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._blocks: dict[str, Block] = {}
        self._free: deque[Block] = deque()
        # Re-entrant: a lease's finalizer (give_back) can run during a garbage
        # collection triggered while this thread already holds the lock.
        self._lock = threading.RLock()
        self._closed = False
        self._size = 0  # of the largest block adopted: what a batch needs
        self._made = 0

    def take(self) -> Block | None:
        """Lend a free block (the most recently freed), else a new one, else None.

        With none free, a new block is made here the size of the largest a
        worker made so far. Left to the worker, a batch without a block was
        built in fresh private memory and then copied into a new block: 20-30
        ms more per 38 MB batch (ImageRecordIter's batches of 64), several
        times per iterator. None before any worker made a block (the size is
        unknown), or if the block cannot be made (the worker then makes its
        own, or reports why it cannot).
        """
        with self._lock:
            if self._free:
                return self._free.pop()
            if self._closed or not self._size:
                return None
            self._made += 1
            name, size = f"{self.prefix}m{self._made}", self._size
        try:
            block = Block(name, size, create=True, populate=False)
        except OSError:
            return None
        with self._lock:
            if self._closed:
                unlink(name)
                block.close()
                return None
            self._blocks[name] = block
        return block

    def give_back(self, block: Block) -> None:
        """Return a block that holds nothing the caller can see."""
        with self._lock:
            if self._closed:
                block.close()
            else:
                self._free.append(block)

    def adopt(self, name: str, size: int) -> Block:
        """Map a block a worker created; the pool owns (and will unlink) it."""
        block = Block(name, size, create=False, populate=False)
        with self._lock:
            self._blocks[name] = block
            self._size = max(self._size, size)
        return block

    def retire(self, block: Block) -> None:
        """Unlink a block that is too small to keep lending."""
        with self._lock:
            self._blocks.pop(block.name, None)
        unlink(block.name)
        block.close()

    def lease(self, block: Block, nbytes: int) -> np.ndarray:
        """Return ``block``'s first ``nbytes`` as bytes; the block returns when they die.

        Every view of a delivery must be cut from this array, so the block
        is lent again only once nothing the caller holds can see it.
        """
        lease = np.frombuffer(block.mmap, np.uint8, count=nbytes)
        weakref.finalize(lease, self.give_back, block)
        return lease

    def close(self) -> None:
        """Unlink every block of this iterator, including any a crash left unreported."""
        with self._lock:
            self._closed = True
            blocks = list(self._blocks.values())
            self._blocks.clear()
            self._free.clear()
        unlink_prefix(self.prefix)
        for block in blocks:
            block.close()
