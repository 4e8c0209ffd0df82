"""Ranged reads of a cached file: as few as chunk_size allows, of equal size."""

from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.filecache._download import range_size


@given(st.integers(1, 10**12), st.integers(1, 10**10))
def test_ranges_are_as_few_as_the_chunk_size_allows_and_of_equal_size(size, chunk_size):
    step = range_size(size, chunk_size)
    ranges = -(-size // step)
    assert 0 < step <= chunk_size
    assert ranges == -(-size // chunk_size)  # no more requests than chunk_size needs
    last = size - step * (ranges - 1)
    assert 0 < last <= step and step - last < ranges  # no range much smaller than the rest
