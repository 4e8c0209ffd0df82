"""``a.join(b, ...)``: the columns of several datasets of one length, side by side."""

from __future__ import annotations

from typing import Any

from dataset_kit.tabular.tabular_dataset import TabularDataset


class Join(TabularDataset):
    """Columns of ``datasets`` side by side; each inner dataset is asked only for its own.

    Raises:
        ValueError: if the lengths differ or a key appears in two datasets.
    """

    def __init__(self, *datasets: TabularDataset) -> None:
        seen: set[str] = set()
        for dataset in datasets:
            if len(dataset) != len(datasets[0]):
                raise ValueError(
                    f"joined datasets must have the same length, got {len(datasets[0])} and "
                    f"{len(dataset)}")
            repeated = seen.intersection(dataset.keys)
            if repeated:
                raise ValueError(f"joined datasets must have unique keys; {sorted(repeated)} "
                                 f"appear twice")
            seen.update(dataset.keys)
        self._datasets = datasets
        # (dataset, its column) for each column of the join
        self._where = [(d, k) for d, ds in enumerate(datasets) for k in range(len(ds.keys))]

    def __len__(self) -> int:
        return len(self._datasets[0])

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for dataset in self._datasets for key in dataset.keys)

    @property
    def mode(self) -> Any:
        mode = self.__dict__.get("_mode")
        if mode is None:  # fixed once built, like array_rows
            mode = self._mode = next((d.mode for d in self._datasets if d.mode), tuple)
        return mode

    def get_examples(self, indices: Any, key_indices: tuple[int, ...] | None) -> tuple:
        if key_indices is None:
            columns: list = []
            for dataset in self._datasets:
                columns.extend(dataset.get_examples(indices, None))
            return tuple(columns)
        wanted: dict[int, list[int]] = {}  # dataset -> its columns, first-asked order
        for key_index in key_indices:
            d, k = self._where[key_index]
            columns = wanted.setdefault(d, [])
            if k not in columns:
                columns.append(k)
        fetched = {}
        for d, columns in sorted(wanted.items()):
            for k, column in zip(columns, self._datasets[d].get_examples(indices, tuple(columns))):
                fetched[d, k] = column
        return tuple(fetched[self._where[key_index]] for key_index in key_indices)

    def convert(self, data: Any) -> Any:
        return self._datasets[0].convert(data)

    @property
    def array_rows(self) -> bool:  # type: ignore[override]
        array_rows = self.__dict__.get("_array_rows")
        if array_rows is None:  # fixed once built: the inner datasets do not change
            array_rows = self._array_rows = all(d.array_rows for d in self._datasets)
        return array_rows
