"""A state from the wrong door is a ValueError naming both doors (issue 21, part 3).

Every door's state goes into every other door: the three Chainer iterators
load each other's (one family, as before), every other pair is refused with
both door names in the message, and the refusing door is left unchanged.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataset_kit.datasets import TupleDataset
from dataset_kit.distributed import ShardedIterator
from dataset_kit.io import NDArrayIter, PrefetchingIter, ResizeIter
from dataset_kit.iterators import (
    MultiprocessIterator,
    MultithreadIterator,
    SerialIterator,
)
from dataset_kit.loader import ArrayDataset, DataLoader
from dataset_kit.sources import data_iterator_simple

N = 10
_EXAMPLE = Path(__file__).parent.parent / "docs" / "examples" / "epoch_loader.py"


def _epoch_loader() -> Any:
    """The docs' example door, as written there."""
    spec = importlib.util.spec_from_file_location("epoch_loader", _EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EpochLoader(np.arange(N), 2)


def _torch_loader() -> Any:
    # Skip on the dependency itself: pytest 9's importorskip does not skip on the
    # ImportError our module raises without torch, only on ModuleNotFoundError.
    pytest.importorskip("torch", reason="the torch door needs PyTorch (the torch extra)")
    import dataset_kit.torch as torch_door

    return torch_door.DataLoader(np.arange(N), batch_size=2)


# name -> (door family in the state, constructor)
DOORS: dict[str, tuple[str, Callable[[], Any]]] = {
    "SerialIterator": ("chainer", lambda: SerialIterator(np.arange(N), 2, seed=1)),
    "MultithreadIterator": ("chainer", lambda: MultithreadIterator(np.arange(N), 2, seed=1,
                                                                   n_threads=1)),
    "MultiprocessIterator": ("chainer", lambda: MultiprocessIterator(np.arange(N), 2, seed=1,
                                                                     n_processes=1)),
    "loader.DataLoader": ("gluon", lambda: DataLoader(ArrayDataset(np.arange(N)), 2)),
    "io.NDArrayIter": ("mxnet", lambda: NDArrayIter(np.arange(float(N)), batch_size=2)),
    "io.ResizeIter": ("mxnet.ResizeIter", lambda: ResizeIter(
        NDArrayIter(np.arange(float(N)), batch_size=2), size=3)),
    "io.PrefetchingIter": ("mxnet.PrefetchingIter", lambda: PrefetchingIter(
        [NDArrayIter(np.arange(float(N)), batch_size=2)])),
    "sources.DataIterator": ("nnabla", lambda: data_iterator_simple(
        lambda i: (np.float32(i),), N, 2, with_file_cache=False)),
    "distributed.ShardedIterator": ("sharded", lambda: ShardedIterator(
        TupleDataset(np.arange(N)), 2, seed=1)),
    "torch.DataLoader": ("torch", _torch_loader),
    "docs EpochLoader": ("epoch-loader", _epoch_loader),
}


def _close(door: Any) -> None:
    for name in ("finalize", "close"):
        if callable(getattr(door, name, None)):
            getattr(door, name)()
            return


@pytest.mark.parametrize("source", sorted(DOORS))
@pytest.mark.parametrize("target", sorted(DOORS))
def test_a_state_of_one_door_loads_into_another_only_within_its_family(source, target):
    (family, make), (target_family, make_target) = DOORS[source], DOORS[target]
    saving, loading = make(), make_target()
    try:
        state = json.loads(json.dumps(saving.state_dict()))
        assert state["format"] == "dataset_kit.state" and state["version"] == 3
        assert state["door"]["name"] == family
        before = loading.state_dict()
        if family == target_family:
            loading.load_state_dict(state)
            return
        with pytest.raises(ValueError) as refused:
            loading.load_state_dict(state)
        assert f"door '{family}'" in str(refused.value)
        assert f"door '{target_family}'" in str(refused.value)
        assert loading.state_dict() == before
    finally:
        _close(saving)
        _close(loading)


def test_a_gluon_state_of_the_released_version_into_resize_iter_names_both_doors():
    # Issue 21's example: this was a bare KeyError: 'inner'.
    frozen = json.loads((Path(__file__).parent / "data" / "door_states_main.json").read_text())
    state = frozen["loader.DataLoader"]["state"]
    with pytest.raises(ValueError, match=r"state is from door 'chainer, gluon or nnabla .*', "
                                         r"but this is door 'mxnet.ResizeIter'"):
        DOORS["io.ResizeIter"][1]().load_state_dict(state)
