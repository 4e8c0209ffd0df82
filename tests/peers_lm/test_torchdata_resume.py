"""Resume of a Stateful IterableDataset against torchdata's StatefulDataLoader (torchdata)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the comparison needs PyTorch")
stateful = pytest.importorskip("torchdata.stateful_dataloader",
                               reason="the comparison needs torchdata (pip install torchdata)")

from torch.utils.data import IterableDataset, get_worker_info  # noqa: E402

from dataset_kit.torch import DataLoader  # noqa: E402


class Counter(IterableDataset):
    """A Stateful stream split by worker; a loaded state is where its next iter() starts."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.start = 0
        self.resume_at: int | None = None

    def __iter__(self):
        info = get_worker_info()
        w, k = (0, 1) if info is None else (info.id, info.num_workers)
        i, self.resume_at = self.resume_at or 0, None
        while w + k * i < self.n:
            self.start = i + 1
            yield w + k * i
            i += 1

    def state_dict(self) -> dict:
        return {"start": self.start}

    def load_state_dict(self, state: dict) -> None:
        self.resume_at = state["start"]


def rest_after(make, taken: int) -> list:
    loader = make()
    it = iter(loader)
    for _ in range(taken):
        next(it)
    state = loader.state_dict()
    del it
    again = make()
    again.load_state_dict(state)
    return [b.tolist() for b in again]


@pytest.mark.parametrize("num_workers", [0, 1, 2])
@pytest.mark.parametrize("taken", [1, 4, 7])
def test_our_resume_gives_stateful_dataloaders_batches(num_workers, taken):
    theirs = rest_after(lambda: stateful.StatefulDataLoader(
        Counter(27), batch_size=2, num_workers=num_workers), taken)
    ours = rest_after(lambda: DataLoader(Counter(27), batch_size=2, num_workers=num_workers),
                      taken)
    assert ours == theirs
