import numpy as np
import pytest

from dataset_kit.datasets import TransformDataset, TupleDataset


def test_transform_applies_to_single_examples_and_batches():
    ds = TransformDataset(TupleDataset(np.arange(5), np.arange(5) * 2), lambda e: e[0] + e[1])
    assert len(ds) == 5
    assert ds[2] == 6
    assert ds[[4, 1]] == [12, 3]
    assert ds[::2] == [0, 6, 12]


def test_transform_must_be_callable():
    with pytest.raises(TypeError, match="transform must be callable"):
        TransformDataset([1, 2], 3)
