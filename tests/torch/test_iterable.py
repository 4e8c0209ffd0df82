"""IterableDataset in dataset_kit.torch.DataLoader: PyTorch's batches, and exact resume."""

from __future__ import annotations

import pytest

from tests.torch.helpers import StatefulCounter as Counter
from tests.torch.helpers import torch  # noqa: F401 - skips without PyTorch

from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402
from torch.utils.data import IterableDataset, get_worker_info  # noqa: E402

from dataset_kit.torch import DataLoader  # noqa: E402


class Shared(IterableDataset):
    """Numbers below ``n``, split between workers by get_worker_info (PyTorch's recipe)."""

    def __init__(self, n: int, skew: bool = False) -> None:
        self.n = n
        self.skew = skew

    def __iter__(self):
        info = get_worker_info()
        w, k = (0, 1) if info is None else (info.id, info.num_workers)
        stop = self.n if not self.skew else self.n - 7 * w  # workers of unequal length
        return iter(range(w, max(stop, 0), k))

    def __len__(self) -> int:
        return self.n


def plain(batches) -> list:
    return [b.tolist() if hasattr(b, "tolist") else b for b in batches]


@pytest.mark.parametrize("num_workers", [0, 1, 2])
@pytest.mark.parametrize("kwargs", [dict(batch_size=None), dict(batch_size=4),
                                    dict(batch_size=4, drop_last=True)])
@pytest.mark.parametrize("skew", [False, True])
def test_the_batches_are_pytorchs(num_workers, kwargs, skew):
    ours = plain(DataLoader(Shared(29, skew), num_workers=num_workers, **kwargs))
    theirs = plain(TorchDataLoader(Shared(29, skew), num_workers=num_workers, **kwargs))
    assert ours == theirs


def test_each_iter_starts_every_stream_afresh_and_len_is_pytorchs():
    loader = DataLoader(Shared(10), batch_size=3, num_workers=2)
    first = plain(loader)
    assert plain(loader) == first
    it = iter(loader)
    next(it)
    assert plain(loader) == first  # a newer iter() restarts
    assert len(loader) == len(TorchDataLoader(Shared(10), batch_size=3)) == 4
    assert len(DataLoader(Shared(10), batch_size=3, drop_last=True)) == 3


def test_more_batches_than_len_warns_as_pytorch():
    class Liar(Shared):
        def __len__(self) -> int:
            return 2

    loader = DataLoader(Liar(5), batch_size=None)
    assert len(loader) == 2
    with pytest.warns(UserWarning, match="was reported to be 2.*but 3 samples have been fetched"):
        list(loader)


@pytest.mark.parametrize("dataset", [Counter, Shared])
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("taken", [0, 1, 3, 6])
def test_resume_gives_the_batches_the_uninterrupted_loader_gives(dataset, num_workers, taken):
    whole = plain(DataLoader(dataset(23), batch_size=2, num_workers=num_workers))
    loader = DataLoader(dataset(23), batch_size=2, num_workers=num_workers)
    it = iter(loader)
    head = [next(it).tolist() for _ in range(taken)]
    state = loader.state_dict()
    loader.close()
    again = DataLoader(dataset(23), batch_size=2, num_workers=num_workers)
    again.load_state_dict(state)
    assert head + plain(again) == whole
    assert plain(again) == whole  # the iter() after that is a fresh epoch


def test_a_changed_worker_count_is_refused_saying_why():
    loader = DataLoader(Counter(10), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    loader.close()
    with pytest.raises(ValueError, match=r"positions of 2 worker streams of .*Counter.*"
                                         r"num_workers=3.*get_worker_info.*num_workers=2"):
        DataLoader(Counter(10), batch_size=2, num_workers=3).load_state_dict(state)


def test_an_error_in_a_stream_is_raised_and_the_stream_goes_on():
    class Flaky(IterableDataset):
        def __iter__(self):
            yield 1
            yield 2

    class Broken(IterableDataset):
        def __iter__(self):
            raise RuntimeError("no stream today")

    assert plain(DataLoader(Flaky(), batch_size=None)) == [1, 2]
    with pytest.raises(RuntimeError, match="no stream today"):
        list(DataLoader(Broken(), batch_size=None, num_workers=1))


def test_a_datapipe_is_a_type_error_saying_why():
    from torch.utils.data.datapipes.iter import IterableWrapper

    with pytest.raises(TypeError, match="not DataPipes"):
        DataLoader(IterableWrapper([1, 2, 3]))


def test_a_malformed_streams_state_is_refused_and_changes_nothing():
    loader = DataLoader(Counter(10), batch_size=2, num_workers=0)
    state = loader.state_dict()
    state["door"]["streams"]["positions"] = []
    with pytest.raises(ValueError, match=r"one position per worker stream \(1\)"):
        loader.load_state_dict(state)
    assert plain(loader) == plain(TorchDataLoader(Counter(10), batch_size=2))
