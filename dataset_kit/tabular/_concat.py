"""``a.concat(b, ...)``: the rows of several datasets with the same keys, one after another."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from dataset_kit.tabular.tabular_dataset import TabularDataset


class Concat(TabularDataset):
    """Rows of ``datasets`` end to end; each inner dataset is asked only for its rows.

    A slice stays a slice for each inner dataset it touches; a list of rows
    is split by dataset and the answers merged back in the asked order.

    Raises:
        ValueError: if the datasets' keys differ.
    """

    def __init__(self, *datasets: TabularDataset) -> None:
        for dataset in datasets[1:]:
            if dataset.keys != datasets[0].keys:
                raise ValueError(f"concatenated datasets must have the same keys, got "
                                 f"{datasets[0].keys} and {dataset.keys}")
        self._datasets = datasets

    def __len__(self) -> int:
        return sum(len(d) for d in self._datasets)

    @property
    def keys(self) -> tuple[str, ...]:
        return self._datasets[0].keys

    @property
    def mode(self) -> Any:
        return self._datasets[0].mode

    def get_examples(self, indices: Any, key_indices: tuple[int, ...] | None) -> tuple:
        width = len(self.keys) if key_indices is None else len(key_indices)
        if indices is None:
            parts = [d.get_examples(None, key_indices) for d in self._datasets]
        elif isinstance(indices, slice):
            parts = self._slice_parts(indices, key_indices)
        else:
            return self._gather(list(indices), key_indices, width)
        if len(parts) == 1:
            return parts[0]
        return tuple([value for part in parts for value in part[c]] for c in range(width))

    def _slice_parts(self, rows: slice, key_indices: tuple[int, ...] | None) -> list:
        start, stop, step = rows.indices(len(self))
        parts, offset = [], 0
        for dataset in self._datasets:
            n = len(dataset)
            inside = _inside(range(start - offset, stop - offset, step), n)
            if inside:
                # The stop is the global stop clipped to this dataset (as Chainer
                # passes it), not one past the last row.
                end = min(stop - offset, n) if step > 0 else max(stop - offset, -1)
                parts.append(dataset.get_examples(
                    slice(inside.start, None if end < 0 else end, step), key_indices))
            offset += len(dataset)
        return parts if step > 0 else parts[::-1]

    def _gather(self, rows: list[int], key_indices: tuple[int, ...] | None, width: int) -> tuple:
        # For each dataset asked: its (asked position, local row) pairs and its answer.
        where: dict[int, list[tuple[int, int]]] = {}
        answers: dict[int, tuple] = {}
        offset = 0
        for d, dataset in enumerate(self._datasets):
            end = offset + len(dataset)
            mine = [(p, i - offset) for p, i in enumerate(rows) if offset <= i < end]
            if mine:
                answers[d] = dataset.get_examples([i for _, i in mine], key_indices)
                where[d] = mine
            offset = end
        if not answers:
            return tuple([] for _ in range(width))
        if len(answers) == 1:
            return next(iter(answers.values()))
        # Chainer's protocol: rows are valid, so each lies in exactly one dataset.
        slot: dict[int, tuple[int, int]] = {}
        for d, mine in where.items():
            for k, (p, _) in enumerate(mine):
                slot[p] = (d, k)
        located = [slot[p] for p in range(len(rows))]
        return tuple([answers[d][c][k] for d, k in located] for c in range(width))

    def convert(self, data: Any) -> Any:
        return self._datasets[0].convert(data)

    @property
    def array_rows(self) -> bool:  # type: ignore[override]
        return all(d.array_rows for d in self._datasets)


def _inside(rows: range, n: int) -> range:
    """The part of ``rows`` that lies in ``[0, n)`` (a range is sorted, so bisect works)."""
    ascending = rows if rows.step > 0 else rows[::-1]
    part = ascending[bisect_left(ascending, 0):bisect_left(ascending, n)]
    return part if rows.step > 0 else part[::-1]
