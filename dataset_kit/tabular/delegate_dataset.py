"""DelegateDataset: build a TabularDataset class by wrapping another one."""

from __future__ import annotations

from typing import Any

from dataset_kit.tabular.tabular_dataset import TabularDataset


class DelegateDataset(TabularDataset):
    """A :class:`TabularDataset` that answers with ``dataset``; subclass it.

    A subclass calls ``super().__init__(tabular.from_data(...))`` and gets
    every tabular operation, while adding methods of its own.

    Args:
        dataset: the tabular dataset that holds the data.
    """

    def __init__(self, dataset: TabularDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    @property
    def keys(self) -> tuple[str, ...]:
        return self.dataset.keys

    @property
    def mode(self) -> Any:
        return self.dataset.mode

    def get_examples(self, indices: Any, key_indices: tuple[int, ...] | None) -> tuple:
        return self.dataset.get_examples(indices, key_indices)

    @property
    def array_rows(self) -> bool:  # type: ignore[override]
        return self.dataset.array_rows
