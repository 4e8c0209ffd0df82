import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dataset_kit
from dataset_kit import DatasetMixin


class Squares(DatasetMixin):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def get_example(self, i):
        return i * i


slices = st.builds(
    slice,
    st.none() | st.integers(-30, 30),
    st.none() | st.integers(-30, 30),
    st.none() | st.integers(-5, 5).filter(lambda s: s != 0),
)


@given(n=st.integers(0, 25), s=slices)
def test_slice_matches_list_slicing(n, s):
    expected = [i * i for i in range(n)][s]
    assert list(Squares(n)[s]) == expected


@given(n=st.integers(1, 25), data=st.data())
def test_index_array_matches_list_indexing(n, data):
    idx = data.draw(st.lists(st.integers(-n, n - 1), max_size=40))
    reference = [i * i for i in range(n)]
    expected = [reference[i] for i in idx]
    assert list(Squares(n)[idx]) == expected
    assert list(Squares(n)[np.array(idx, dtype=np.int32)]) == expected


@given(n=st.integers(1, 25), data=st.data())
def test_integer_index_accepts_exactly_minus_len_to_len(n, data):
    i = data.draw(st.integers(-3 * n, 3 * n))
    ds = Squares(n)
    if -n <= i < n:
        assert ds[i] == (i % n) ** 2
        assert ds[np.int64(i)] == (i % n) ** 2
    else:
        with pytest.raises(IndexError, match=f"{i}.*length {n}"):
            ds[i]


@pytest.mark.parametrize("index, error", [
    (1.0, TypeError),
    ("a", TypeError),
    (True, TypeError),
    (np.array([True, False, True]), TypeError),
    (np.array([0.0, 1.0]), TypeError),
    (np.array([[0, 1]]), IndexError),
    ([0, 3], IndexError),
    ([-4], IndexError),
    ((0, 1), TypeError),
])
def test_bad_indices_raise_with_index_and_length(index, error):
    with pytest.raises(error) as info:
        Squares(3)[index]
    message = str(info.value)
    assert "index" in message and "length 3" in message


def test_empty_index_array_gives_empty_list():
    assert list(Squares(3)[[]]) == []
    assert list(Squares(3)[np.array([], dtype=np.int64)]) == []


def test_get_batch_default_calls_get_example_per_index():
    assert Squares(5).get_batch(np.array([4, 0, 4])) == [16, 0, 16]


def test_the_base_class_has_one_batch_hook_and_no_gluon_views():
    for name in ("get_examples", "transform", "transform_first", "filter", "shard", "take",
                 "sample"):
        assert not hasattr(dataset_kit.DatasetMixin, name), name


class LegacyHook(Squares):
    """A 0.1 subclass: its batch hook was called get_examples(indices)."""

    def get_examples(self, indices):
        return [("batch", int(i)) for i in indices]


class LegacyHookChild(LegacyHook):
    def get_examples(self, indices):
        return [("child", int(i)) for i in indices]


def test_a_subclass_overriding_the_old_get_examples_hook_is_still_asked_through_it():
    assert LegacyHook(5)[[3, 1]] == [("batch", 3), ("batch", 1)]
    assert LegacyHook(5)[1:3] == [("batch", 1), ("batch", 2)]
    assert LegacyHookChild(5)[[0]] == [("child", 0)]
    it = dataset_kit.iterators.SerialIterator(LegacyHook(4), 2, shuffle=False)
    assert next(it) == [("batch", 0), ("batch", 1)]
    assert LegacyHook(5)[2] == 4  # single examples still come from get_example


def test_a_subclass_defining_get_batch_wins_over_an_inherited_old_hook():
    class Both(LegacyHook):
        def get_batch(self, indices):
            return ["new"] * len(indices)

    assert Both(3)[[0, 1]] == ["new", "new"]


class NotAMixin:
    """Any object with __len__, __getitem__ and get_batch is a BatchDataset."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return -i

    def get_batch(self, indices):
        return ("batch", indices.tolist())


def test_the_dataset_protocols_describe_what_the_engine_asks_for():
    from dataset_kit.dataset import (
        BatchDataset,
        MapDataset,
        builds_one_by_one,
        fetch_examples,
    )

    assert isinstance([1, 2], MapDataset) and not isinstance([1, 2], BatchDataset)
    assert isinstance(Squares(3), BatchDataset) and isinstance(NotAMixin(), BatchDataset)
    assert fetch_examples(NotAMixin(), np.array([1, 3])) == ("batch", [1, 3])
    assert builds_one_by_one([1, 2]) and builds_one_by_one(Squares(2))
    assert not builds_one_by_one(NotAMixin()) and not builds_one_by_one(LegacyHook(2))


def test_fetch_examples_handles_lists_and_arrays():
    from dataset_kit.dataset import fetch_examples

    idx = np.array([2, 0])
    assert fetch_examples([10, 11, 12], idx) == [12, 10]
    batch = fetch_examples(np.arange(3) * 10, idx)
    assert isinstance(batch, dataset_kit.ExampleBatch)
    assert list(batch) == [20, 0]


def _package_subclasses(cls):
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("dataset_kit."):
            yield sub
        yield from _package_subclasses(sub)


def test_the_package_datasets_define_get_batch_not_the_old_hook():
    # Only Chainer's tabular datasets define get_examples: there it is their
    # column protocol, get_examples(indices, key_indices), not a batch hook.
    import importlib
    import pkgutil

    for module in pkgutil.walk_packages(dataset_kit.__path__, "dataset_kit."):
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as error:  # an optional extra (mxnet, ...) not installed
            assert not (error.name or "").startswith("dataset_kit"), error
        except ImportError as error:
            # A door over an optional dependency (dataset_kit.torch without torch) says
            # which extra to install; anything else is a real import failure.
            assert "pip install 'dataset_kit[" in str(error), error
    doors = set(_package_subclasses(DatasetMixin))
    assert {"StreamingDataset", "_ImageExamples"} <= {c.__name__ for c in doors}
    old = [c for c in doors if "get_examples" in c.__dict__
           and not issubclass(c, dataset_kit.TabularDataset)]
    assert old == []
