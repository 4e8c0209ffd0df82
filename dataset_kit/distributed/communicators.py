"""The communicator protocol, and adapters for MPI, torch.distributed and one process.

Everything in :mod:`dataset_kit.distributed` talks to the other ranks through
five members, and nothing else knows which engine carries them:

======================  ==============================================
``rank``, ``size``      this process's rank, and how many ranks there are
``bcast(obj, root)``    ``obj`` of rank ``root``, returned on every rank
``allgather(obj)``      the list of every rank's ``obj``, in rank order
``barrier()``           returns when every rank has called it
======================  ==============================================

Objects travel pickled; only small ones (seeds, lengths, positions) do,
unless :func:`~dataset_kit.distributed.scatter_dataset` must ship a dataset.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable


class DistributedError(RuntimeError):
    """Ranks disagree, or a collective failed (a rank died or the network broke)."""


@runtime_checkable
class Communicator(Protocol):
    """What dataset_kit needs of a group of ranks."""

    rank: int
    size: int

    def bcast(self, obj: Any, root: int = 0) -> Any: ...

    def allgather(self, obj: Any) -> list: ...

    def barrier(self) -> None: ...


class SingleProcessCommunicator:
    """A group of one rank: every collective returns at once."""

    rank = 0
    size = 1

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Return ``obj``."""
        _check_root(root, 1)
        return obj

    def allgather(self, obj: Any) -> list:
        """Return ``[obj]``."""
        return [obj]

    def barrier(self) -> None:
        """Return at once."""

    def __repr__(self) -> str:
        return "SingleProcessCommunicator()"


class ThreadRanks:
    """A group of ``size`` ranks that are threads of this process, for tests.

    Each rank's thread uses its own member, ``group.communicator(rank)``; the
    collectives meet at a barrier. It lets one process simulate a job of
    several ranks (:func:`dataset_kit.testing.check_resume` does): every rank
    runs its loop on a thread of its own.

    Args:
        size: the number of ranks.
        timeout: seconds a collective waits for the other ranks before a
            :class:`DistributedError` (a rank that stopped early or died).

    Raises:
        ValueError: if ``size`` is not a positive integer or ``timeout`` is
            not positive.
    """

    def __init__(self, size: int, timeout: float = 60.0) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive integer, got {size!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.size = size
        self._timeout = timeout
        self._barrier = threading.Barrier(size)
        self._slots: list[Any] = [None] * size

    def communicator(self, rank: int) -> ThreadRankCommunicator:
        """Return the communicator rank ``rank``'s thread uses."""
        _check_root(rank, self.size)
        return ThreadRankCommunicator(self, rank)

    def exchange(self, rank: int, obj: Any) -> list:
        """Put ``obj`` in rank ``rank``'s slot; return every rank's, once all have put theirs."""
        self._wait()
        self._slots[rank] = obj
        self._wait()
        gathered = list(self._slots)
        self._wait()  # nobody overwrites a slot before every rank has read them all
        return gathered

    def _wait(self) -> None:
        try:
            self._barrier.wait(self._timeout)
        except threading.BrokenBarrierError as error:
            raise DistributedError(
                f"a rank of this {self.size}-rank thread group did not reach a collective "
                f"within {self._timeout} s (it stopped early or raised)") from error

    def abort(self) -> None:
        """Break the barrier: every rank waiting in a collective gets a DistributedError."""
        self._barrier.abort()


class ThreadRankCommunicator:
    """One rank's view of a :class:`ThreadRanks` group (the communicator protocol)."""

    def __init__(self, group: ThreadRanks, rank: int) -> None:
        self.group, self.rank, self.size = group, rank, group.size

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Return rank ``root``'s ``obj`` on every rank."""
        _check_root(root, self.size)
        return self.group.exchange(self.rank, obj)[root]

    def allgather(self, obj: Any) -> list:
        """Return every rank's ``obj``, in rank order."""
        return self.group.exchange(self.rank, obj)

    def barrier(self) -> None:
        """Wait for every rank."""
        self.group.exchange(self.rank, None)

    def __repr__(self) -> str:
        return f"ThreadRankCommunicator(rank={self.rank}, size={self.size})"


class MpiCommunicator:
    """An ``mpi4py`` communicator (``MPI.COMM_WORLD`` unless another is given).

    Args:
        comm: an ``mpi4py.MPI.Comm``, or a ChainerMN communicator (its
            ``mpi_comm`` is used); None for ``MPI.COMM_WORLD``.

    Raises:
        ImportError: if mpi4py is not installed (``pip install 'dataset_kit[mpi]'``).
    """

    def __init__(self, comm: Any = None) -> None:
        if comm is None:
            try:
                from mpi4py import MPI
            except ImportError as error:
                raise ImportError(
                    "MPI needs mpi4py and an MPI library: pip install 'dataset_kit[mpi]' "
                    f"({error})") from error
            comm = MPI.COMM_WORLD
        self.comm = getattr(comm, "mpi_comm", comm)
        self.rank = int(self.comm.Get_rank())
        self.size = int(self.comm.Get_size())

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Return rank ``root``'s ``obj`` on every rank."""
        _check_root(root, self.size)
        return self.comm.bcast(obj, root=root)

    def allgather(self, obj: Any) -> list:
        """Return every rank's ``obj``, in rank order."""
        return list(self.comm.allgather(obj))

    def barrier(self) -> None:
        """Wait for every rank."""
        self.comm.Barrier()

    def __repr__(self) -> str:
        return f"MpiCommunicator(rank={self.rank}, size={self.size})"


class TorchCommunicator:
    """A ``torch.distributed`` process group (the default group unless another is given).

    Any backend works, gloo included; objects travel with
    ``broadcast_object_list`` and ``all_gather_object``.

    Args:
        group: a process group, or None for the default one.

    Raises:
        ImportError: if PyTorch is not installed (``pip install 'dataset_kit[torch]'``).
        RuntimeError: if ``torch.distributed.init_process_group`` was not called.
    """

    def __init__(self, group: Any = None) -> None:
        try:
            import torch.distributed as dist
        except ImportError as error:
            raise ImportError(
                "torch.distributed needs PyTorch: pip install 'dataset_kit[torch]' "
                f"({error})") from error
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "torch.distributed is not initialized: call "
                "torch.distributed.init_process_group(...) before making a TorchCommunicator")
        self._dist = dist
        self.group = group
        self.rank = int(dist.get_rank(group))
        self.size = int(dist.get_world_size(group))

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Return rank ``root``'s ``obj`` on every rank."""
        _check_root(root, self.size)
        box = [obj]
        source = root if self.group is None else self._dist.get_global_rank(self.group, root)
        self._dist.broadcast_object_list(box, src=source, group=self.group)
        return box[0]

    def allgather(self, obj: Any) -> list:
        """Return every rank's ``obj``, in rank order."""
        out: list = [None] * self.size
        self._dist.all_gather_object(out, obj, group=self.group)
        return out

    def barrier(self) -> None:
        """Wait for every rank."""
        self._dist.barrier(group=self.group)

    def __repr__(self) -> str:
        return f"TorchCommunicator(rank={self.rank}, size={self.size})"


def as_communicator(comm: Any) -> Any:
    """Return ``comm`` as an object of the communicator protocol.

    Args:
        comm: None (one process), ``'mpi'`` (``MPI.COMM_WORLD``), ``'torch'``
            (the default torch.distributed group), an ``mpi4py`` communicator,
            a ChainerMN communicator, a torch.distributed process group, or an
            object that already has ``rank``, ``size``, ``bcast``,
            ``allgather`` and ``barrier``.

    Raises:
        TypeError: if ``comm`` is none of these.
        ValueError: if ``comm`` is a string other than ``'mpi'`` or ``'torch'``.
        ImportError: if the engine it names is not installed (the message
            names the extra).
    """
    if comm is None:
        return SingleProcessCommunicator()
    if isinstance(comm, str):
        if comm == "mpi":
            return MpiCommunicator()
        if comm == "torch":
            return TorchCommunicator()
        raise ValueError(f"comm must be 'mpi' or 'torch' when given by name, got {comm!r}")
    if isinstance(comm, Communicator) and not hasattr(comm, "mpi_comm"):
        return comm
    if callable(getattr(comm, "Get_rank", None)) or hasattr(comm, "mpi_comm"):
        return MpiCommunicator(comm)
    if type(comm).__module__.startswith("torch"):
        return TorchCommunicator(comm)
    raise TypeError(
        "comm must be None, 'mpi', 'torch', an mpi4py or ChainerMN communicator, a "
        "torch.distributed process group, or an object with rank, size, bcast, allgather "
        f"and barrier; got {type(comm).__name__}")


def _check_root(root: Any, size: int) -> None:
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < size:
        raise ValueError(f"root must be a rank in [0, {size}), got {root!r}")
