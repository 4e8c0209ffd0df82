"""The communicator protocol: the one-process stand-in, adapters, and missing engines."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dataset_kit.distributed import (
    Communicator,
    SingleProcessCommunicator,
    as_communicator,
)
from tests.distributed.thread_ranks import ThreadComm, ThreadGroup


def test_single_process_collectives():
    comm = as_communicator(None)
    assert isinstance(comm, SingleProcessCommunicator) and isinstance(comm, Communicator)
    assert (comm.rank, comm.size) == (0, 1)
    assert comm.bcast({"a": 1}) == {"a": 1} and comm.allgather(3) == [3]
    comm.barrier()
    with pytest.raises(ValueError, match="root must be a rank in \\[0, 1\\), got 1"):
        comm.bcast(0, root=1)


def test_an_object_with_the_protocol_is_used_as_it_is():
    comm = ThreadComm(ThreadGroup(1), 0)
    assert as_communicator(comm) is comm


@pytest.mark.parametrize("module,name,extra", [("mpi4py", "mpi", "dataset_kit[mpi]"),
                                               ("torch", "torch", "dataset_kit[torch]")])
def test_a_missing_engine_names_its_extra(module, name, extra):
    # A fresh interpreter in which the engine cannot be imported.
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from dataset_kit.distributed import as_communicator\n"
            f"try:\n    as_communicator({name!r})\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert extra in out.stdout, out.stderr


def test_torch_needs_an_initialized_group():
    torch_distributed = pytest.importorskip(
        "torch.distributed", reason="PyTorch is not installed: pip install 'dataset_kit[torch]'")
    if torch_distributed.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        as_communicator("torch")
