"""Resume of a Stateful IterableDataset against torchdata's StatefulDataLoader (torchdata)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the comparison needs PyTorch")
stateful = pytest.importorskip("torchdata.stateful_dataloader",
                               reason="the comparison needs torchdata (pip install torchdata)")

from dataset_kit.torch import DataLoader  # noqa: E402
from tests.torch.helpers import StatefulCounter as Counter  # noqa: E402


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
