"""Views that change how examples look or convert: ``astuple``, ``asdict``, ``with_converter``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dataset_kit.tabular.tabular_dataset import TabularDataset


class _View(TabularDataset):
    """The same rows and columns as ``dataset``."""

    def __init__(self, dataset: TabularDataset) -> None:
        self._dataset = dataset

    def __len__(self) -> int:
        return len(self._dataset)

    @property
    def keys(self) -> tuple[str, ...]:
        return self._dataset.keys

    @property
    def mode(self) -> Any:
        return self._dataset.mode

    def get_examples(self, indices: Any, key_indices: tuple[int, ...] | None) -> tuple:
        return self._dataset.get_examples(indices, key_indices)

    @property
    def array_rows(self) -> bool:  # type: ignore[override]
        return self._dataset.array_rows

    def convert(self, data: Any) -> Any:
        return self._dataset.convert(data)


class AsMode(_View):
    """``dataset`` with examples as tuples or dicts."""

    def __init__(self, dataset: TabularDataset, mode: type) -> None:
        super().__init__(dataset)
        self._mode = mode

    @property
    def mode(self) -> Any:
        return self._mode


class WithConverter(_View):
    """``dataset`` whose :meth:`convert` calls ``converter`` with the columns."""

    def __init__(self, dataset: TabularDataset, converter: Callable[..., Any]) -> None:
        if not callable(converter):
            raise TypeError(f"converter must be callable, got {type(converter).__name__}")
        super().__init__(dataset)
        self._converter = converter

    def convert(self, data: Any) -> Any:
        if isinstance(data, tuple):
            return self._converter(*data)
        if isinstance(data, dict):
            return self._converter(**data)
        return self._converter(data)
