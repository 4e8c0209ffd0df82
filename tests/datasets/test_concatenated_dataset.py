import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.datasets import ConcatenatedDataset, TupleDataset


@given(sizes=st.lists(st.integers(0, 6), min_size=1, max_size=4), data=st.data())
def test_concatenation_matches_list_concatenation(sizes, data):
    parts, start = [], 0
    for s in sizes:
        parts.append(list(range(start, start + s)))
        start += s
    ds = ConcatenatedDataset(*parts)
    reference = sum(parts, [])
    assert len(ds) == len(reference)
    if reference:
        idx = data.draw(st.lists(st.integers(-len(reference), len(reference) - 1), max_size=10))
        assert list(ds[idx]) == [reference[i] for i in idx]
    assert list(ds[::-1]) == reference[::-1]


def test_batch_within_one_array_dataset_stays_columnar():
    ds = ConcatenatedDataset(TupleDataset(np.arange(3)), TupleDataset(np.arange(3, 6)))
    assert [int(e[0]) for e in ds[[4, 5]]] == [4, 5]
    assert [int(e[0]) for e in ds[[0, 5]]] == [0, 5]
