"""The resume oracle (dataset_kit.testing.check_resume): it passes on the real engine,
and it finds deliberate bugs (mutants of the engine's checkpoint) with a short schedule."""

from __future__ import annotations

import copy
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.datasets import TupleDataset
from dataset_kit.distributed import DistributedError, ShardedIterator, ThreadRanks
from dataset_kit.engine import Engine, ResumeMismatchWarning
from dataset_kit.io import NDArrayIter
from dataset_kit.iterators import MultiprocessIterator, SerialIterator
from dataset_kit.loader import DataLoader
from dataset_kit.testing import ResumeCheckError, batch_digest, check_resume, examples_of

X = np.arange(46, dtype=np.float32).reshape(23, 2)
Y = np.arange(23)
DATA = TupleDataset(X, Y)


def chainer_loader(workers: int, comm: object) -> object:
    if workers:
        return MultiprocessIterator(DATA, 4, seed=3, n_processes=workers)
    return SerialIterator(DATA, 4, seed=3)


def sharded_loader(workers: int, comm: object) -> object:
    return ShardedIterator(DATA, 3, comm, seed=3, n_processes=workers or None)


def gluon_loader(workers: int, comm: object) -> object:
    return DataLoader(DATA, batch_size=4, shuffle=True, num_workers=workers,
                      last_batch="rollover", seed=5)


def mxnet_loader(workers: int, comm: object) -> object:
    return NDArrayIter(X, Y, batch_size=4, shuffle=True, last_batch_handle="pad", seed=5)


@pytest.mark.parametrize("make, kwargs", [
    (chainer_loader, {"ranks": None}),
    (gluon_loader, {"ranks": None}),
    (mxnet_loader, {"ranks": None, "workers": (0,)}),
    (sharded_loader, {"ranks": ((2, 3), (3, 2))}),
], ids=["chainer", "gluon", "mxnet", "sharded"])
def test_the_real_engine_passes(make, kwargs):
    check_resume(make, epochs=2, interruptions=6, **kwargs)


def test_the_torch_door_passes_with_a_seeded_generator():
    torch = pytest.importorskip("torch", reason="the torch door needs PyTorch (the torch extra)")
    import dataset_kit.torch as dk_torch

    def make(workers: int, comm: object) -> object:
        return dk_torch.DataLoader(DATA, batch_size=4, shuffle=True, num_workers=workers,
                                   generator=torch.Generator().manual_seed(7))

    check_resume(make, ranks=None, interruptions=6)


def test_a_loader_seeded_afresh_at_every_build_is_caught():
    # What users of PyTorch hit: no generator, so every DataLoader draws a new seed.
    calls = iter(range(100))

    def make(workers: int, comm: object) -> object:
        return SerialIterator(DATA, 4, seed=next(calls))

    with pytest.raises(ResumeCheckError, match="differs"):
        check_resume(make, ranks=None, workers=(0,), interruptions=3)


# -- mutants: bugs put into the engine's checkpoint, each must be found ------------------


def _mutate_load(monkeypatch: pytest.MonkeyPatch, change) -> None:
    original = Engine.load_state_dict

    def load(self, state, strict=True):
        # A mutant engine's state has no ledger to betray it (the ledger check
        # alone refuses these mutants: test_ledger_check.py); the oracle must
        # find them on its own.
        state = copy.deepcopy(state)
        state.pop("ledger", None)
        change(state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResumeMismatchWarning)
            original(self, state, strict)

    monkeypatch.setattr(Engine, "load_state_dict", load)


def _skip_one(state: dict) -> None:
    if state["current_position"] + 1 < state["epoch_size"]:
        state["current_position"] += 1


def _wrong_seed(state: dict) -> None:
    state["seed"] += 1
    sampler = state.get("order_sampler") or {}
    if "seed" in sampler.get("state", {}):
        sampler["state"]["seed"] += 1


def test_a_mutant_that_skips_an_example_on_resume_is_found(monkeypatch):
    _mutate_load(monkeypatch, _skip_one)
    with pytest.raises(ResumeCheckError) as raised:
        check_resume(chainer_loader, ranks=None, workers=(0,), interruptions=10)
    message = str(raised.value)
    assert "Shortest schedule found" in message
    # Shrunk to one interruption: one "after batch" in the schedule.
    assert message.count("after batch") == 1, message


def test_a_mutant_that_repeats_the_last_batch_is_found(monkeypatch):
    original = Engine.state_dict

    def state_dict(self):
        state = original(self)
        state.pop("ledger")  # a mutant's state has no ledger to betray it
        if state["current_position"] >= state["batch_size"]:
            state["current_position"] -= state["batch_size"]
        return state

    monkeypatch.setattr(Engine, "state_dict", state_dict)
    with pytest.raises(ResumeCheckError, match="Shortest schedule found"):
        check_resume(gluon_loader, ranks=None, workers=(0,), interruptions=10)


def test_a_mutant_that_draws_from_the_wrong_seed_is_found(monkeypatch):
    _mutate_load(monkeypatch, _wrong_seed)
    with pytest.raises(ResumeCheckError, match="Shortest schedule found"):
        check_resume(chainer_loader, ranks=None, workers=(0,), interruptions=10)


def test_a_mutant_that_loses_an_example_on_another_rank_count_is_found(monkeypatch):
    original = ShardedIterator.load_state_dict

    def load(self, state):
        state = copy.deepcopy(state)
        state["door"]["global_position"] += 1
        original(self, state)

    monkeypatch.setattr(ShardedIterator, "load_state_dict", load)
    with pytest.raises(ResumeCheckError, match=r"lost 1 example\(s\)"):
        check_resume(sharded_loader, workers=(0,), interruptions=0, ranks=((2, 3),))


# -- arguments and helpers -------------------------------------------------------------


@pytest.mark.parametrize("kwargs, word", [
    ({"epochs": 0}, "epochs"), ({"workers": ()}, "workers"), ({"workers": (-1,)}, "workers"),
    ({"interruptions": -2}, "interruptions"), ({"ranks": ((0, 2),)}, "ranks"),
])
def test_bad_arguments_are_named(kwargs, word):
    with pytest.raises(ValueError, match=word):
        check_resume(chainer_loader, **kwargs)


def test_make_loader_must_be_callable():
    with pytest.raises(TypeError, match="make_loader"):
        check_resume(42)  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=6), st.integers(1, 4))
def test_examples_of_splits_every_form_of_a_batch_alike(values, width):
    rows = [(np.full(width, v, np.int16), np.int64(v)) for v in values]
    stacked = (np.stack([r[0] for r in rows]), np.array([r[1] for r in rows]))
    as_dict = {"x": stacked[0], "y": stacked[1]}
    want = [batch_digest(row) for row in rows]
    assert [batch_digest(row) for row in examples_of(rows)] == want
    assert [batch_digest(row) for row in examples_of(stacked)] == want
    assert [batch_digest({"x": r[0], "y": r[1]}) for r in rows] == [
        batch_digest(row) for row in examples_of(as_dict)]


def test_batch_digest_tells_dtypes_apart():
    assert batch_digest(np.zeros(3, np.float32)) != batch_digest(np.zeros(3, np.float64))
    assert batch_digest([1, 2]) == batch_digest([1, 2])


def test_thread_ranks_gather_in_rank_order_and_break_instead_of_hanging():
    group = ThreadRanks(3, timeout=5)
    results: dict[int, object] = {}

    def run(rank: int) -> None:
        comm = group.communicator(rank)
        results[rank] = (comm.allgather(rank * 10), comm.bcast(f"from {rank}", root=2))

    threads = [threading.Thread(target=run, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {r: ([0, 10, 20], "from 2") for r in range(3)}

    lonely = ThreadRanks(2, timeout=0.2).communicator(0)
    with pytest.raises(DistributedError, match="did not reach a collective"):
        lonely.allgather(1)


def test_thread_ranks_check_their_arguments():
    with pytest.raises(ValueError, match="size"):
        ThreadRanks(0)
    with pytest.raises(ValueError, match="timeout"):
        ThreadRanks(2, timeout=0)
    with pytest.raises(ValueError, match="root"):
        ThreadRanks(2).communicator(2)
