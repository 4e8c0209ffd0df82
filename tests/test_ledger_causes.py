"""A refused resume names its cause: seed, sampler, mixture, ranks (issue 34).

Each is made for real; the refusing iterator is unchanged after the error (its
next batches equal an untouched twin's), and ``strict=False`` warns saying
what changed.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dataset_kit import ResumeMismatchError
from dataset_kit.datasets.mixture import mix
from dataset_kit.engine import Engine, ResumeMismatchWarning
from dataset_kit.iterators import SerialIterator
from tests.engine.test_ledger_check import SeededOrder


def ids(batch) -> list[int]:
    return np.asarray([np.asarray(x) for x in batch]).ravel().astype(int).tolist()


def take(loader, k: int) -> list[list[int]]:
    if hasattr(loader, "__next__"):
        return [ids(next(loader)) for _ in range(k)]
    return [ids(batch) for batch in itertools.islice(iter(loader), k)]


def refused(make, saved_state: dict, cause: str, match: str, loose: bool = True) -> None:
    """Loading ``saved_state`` into ``make()`` raises ``cause``; the loader goes on as its twin.

    ``loose``: ``strict=False`` loads it with a warning (else it cannot be loaded at all).
    """
    loader, twin = make(), make()
    take(loader, 1), take(twin, 1)
    with pytest.raises(ResumeMismatchError, match=match) as info:
        loader.load_state_dict(saved_state)
    assert info.value.cause == cause
    assert take(loader, 4) == take(twin, 4)
    if not loose:
        with pytest.raises(ResumeMismatchError, match=match):
            make().load_state_dict(saved_state, strict=False)
        return
    with pytest.warns(ResumeMismatchWarning, match=match):
        make().load_state_dict(saved_state, strict=False)


# -- mixture -------------------------------------------------------------------------


def same_length_weights() -> tuple[list[int], list[int]]:
    """Two weightings of the same two sources whose mixtures have the same length."""
    sources = [np.arange(12), np.arange(100, 112)]
    for w in itertools.product(range(1, 6), repeat=2):
        for v in itertools.product(range(1, 6), repeat=2):
            if w[0] * v[1] != w[1] * v[0] and \
                    len(mix(sources, list(w), seed=0)) == len(mix(sources, list(v), seed=0)):
                return list(w), list(v)
    raise AssertionError("no two weightings of the same length")


def test_a_state_over_another_mixture_of_the_same_length_is_refused_naming_the_mixture():
    # The ids (indices into the mixture) are the same: only the mixture's identity tells.
    sources = [np.arange(12), np.arange(100, 112)]
    before, after = same_length_weights()
    saved = SerialIterator(mix(sources, before, seed=0), 3, seed=0)
    take(saved, 2)
    refused(lambda: SerialIterator(mix(sources, after, seed=0), 3, seed=0), saved.state_dict(),
            "mixture", "mixture's sources, weights or files changed")


def test_the_same_mixture_resumes_silently():
    sources = [np.arange(12), np.arange(100, 112)]
    saved = SerialIterator(mix(sources, [1, 2], seed=0), 3, seed=0)
    take(saved, 2)
    again = SerialIterator(mix(sources, [1, 2], seed=0), 3, seed=0)
    again.load_state_dict(saved.state_dict())
    assert take(again, 3) == take(saved, 3)


@pytest.mark.parametrize("change, cause", [("sources", "mixture"), ("seed", "seed"),
                                           ("shuffle", "mixture")])
def test_a_mixture_state_of_other_sources_is_a_resume_mismatch(change, cause):
    sources = [np.arange(12), np.arange(100, 112)]
    state = mix(sources, [1, 1], seed=0).state_at(5)
    kwargs = {"seed": 0, "shuffle": True}
    if change == "sources":
        sources = [np.arange(12), np.arange(100, 113)]
    elif change == "seed":
        kwargs["seed"] = 1
    else:
        kwargs["shuffle"] = False
    with pytest.raises(ResumeMismatchError, match=change) as info:
        mix(sources, [1, 1], state=state, **kwargs)
    assert info.value.cause == cause


# -- seed ----------------------------------------------------------------------------


def test_a_changed_seed_of_a_user_sampler_is_named_the_seed():
    saved = SerialIterator(np.arange(20), 3, order_sampler=SeededOrder(1))
    take(saved, 3)
    refused(lambda: SerialIterator(np.arange(20), 3, order_sampler=SeededOrder(2)),
            saved.state_dict(), "seed", r"seed changed \(1 -> 2\)")


def test_a_state_whose_seed_was_edited_is_named_the_seed():
    engine = Engine(np.arange(20), batch_size=3, seed=0)
    engine.next()
    state = engine.state_dict()
    state["order_sampler"]["state"]["seed"] = 5
    with pytest.raises(ResumeMismatchError, match=r"seed changed \(0 -> 5\)") as info:
        Engine(np.arange(20), batch_size=3, seed=0).load_state_dict(state)
    assert info.value.cause == "seed"


# -- sampler and ranks (PyTorch's samplers) ---------------------------------------------


def torch_loader(sampler_of, n: int = 20):
    torch = pytest.importorskip("torch")
    from dataset_kit.torch import DataLoader
    data = np.arange(n)
    return DataLoader(data, batch_size=3, sampler=sampler_of(data),
                      generator=torch.Generator().manual_seed(0))


def test_a_swapped_torch_sampler_is_named_the_sampler():
    torch = pytest.importorskip("torch")
    from torch.utils.data import RandomSampler, SequentialSampler

    saved = torch_loader(RandomSampler)
    take(saved, 2)
    refused(lambda: torch_loader(SequentialSampler), saved.state_dict(), "sampler",
            "RandomSampler.*SequentialSampler")
    # A sampler with a generator of its own, swapped for one without: refused before
    # the generators' states are restored into the wrong generators.
    owned = torch_loader(lambda data: RandomSampler(
        data, generator=torch.Generator().manual_seed(0)))
    take(owned, 2)
    refused(lambda: torch_loader(SequentialSampler), owned.state_dict(), "sampler",
            "generator state", loose=False)


def test_a_rank_s_state_loaded_into_another_rank_is_named_the_ranks():
    pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler

    def rank(r):
        return lambda data: DistributedSampler(data, num_replicas=2, rank=r, seed=3)

    saved = torch_loader(rank(1))
    take(saved, 2)
    refused(lambda: torch_loader(rank(0)), saved.state_dict(), "ranks",
            "rank 1 of 2, this iterator is rank 0 of 2")
    again = torch_loader(rank(1))  # the right rank loads it
    again.load_state_dict(saved.state_dict())
    assert again.ledger() == saved.ledger()
