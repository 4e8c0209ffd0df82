"""CreateCache: NNabla's create_cache writes a cache that both readers agree with."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from dataset_kit.image.decode import pillow
from dataset_kit.sources import CacheDataSource, CreateCache, CsvDataSource


@pytest.fixture
def dataset(tmp_path):
    lines = ["x:image,y"]
    for i in range(7):
        pillow().fromarray(np.full((3, 4), i * 30, np.uint8)).save(tmp_path / f"{i}.png")
        lines.append(f"{i}.png,{i}")
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_the_cache_holds_the_csvs_examples_in_the_recorded_order(dataset, tmp_path, shuffle,
                                                                  normalize):
    out = tmp_path / "cache"
    CreateCache(str(dataset), shuffle=shuffle, num_of_threads=0).create(str(out),
                                                                        normalize=normalize)
    assert (out / "original.csv").read_bytes() == dataset.read_bytes()
    with open(out / "order.csv") as f:
        order = [int(row[1]) for row in csv.reader(f)]
    assert sorted(order) == list(range(7)) and (order != list(range(7))) == shuffle
    cache = CacheDataSource(str(out))
    source = CsvDataSource(str(dataset), normalize=normalize)
    assert cache.size == 7 and cache.variables == source.variables == ("x", "y")
    for position, row in enumerate(order):
        cached, direct = cache.get_example(position), source.get_example(row)
        np.testing.assert_allclose(cached[0], direct[0])
        np.testing.assert_allclose(cached[1], direct[1])
        assert cached[0].dtype == (np.float64 if normalize else np.uint8)
        assert cached[1].dtype == np.float32  # a number cell: NNabla stores float32


def test_create_replaces_a_cache_of_the_same_size(dataset, tmp_path):
    out = tmp_path / "cache"
    CreateCache(str(dataset)).create(str(out), normalize=False)
    CreateCache(str(dataset), shuffle=True).create(str(out), normalize=False)
    with open(out / "order.csv") as f:
        order = [int(row[1]) for row in csv.reader(f)]
    cache = CacheDataSource(str(out))
    assert [int(cache.get_example(k)[1][0]) for k in range(7)] == order != list(range(7))


def test_bad_arguments_are_named(dataset):
    with pytest.raises(ValueError, match="num_of_threads"):
        CreateCache(str(dataset), num_of_threads=-1)
