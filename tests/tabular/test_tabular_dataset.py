"""Tabular datasets: Chainer's semantics, checked against numpy, and one fetch per batch."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit import ExampleBatch, TabularDataset, concat_examples, example_rng, tabular
from dataset_kit.iterators import MultiprocessIterator, SerialIterator

N = 12
DATA = {"a": np.arange(N) * 10, "b": np.arange(N) * 1.5, "c": np.arange(N) - 100}


class Counted(TabularDataset):
    """Three array columns; records every get_examples call."""

    def __init__(self, n=N):
        self.n, self.calls = n, []

    def __len__(self):
        return self.n

    @property
    def keys(self):
        return ("a", "b", "c")

    @property
    def mode(self):
        return tuple

    def get_examples(self, indices, key_indices):
        self.calls.append((indices, key_indices))
        rows = slice(None) if indices is None else indices
        keys = range(3) if key_indices is None else key_indices
        return tuple(DATA["abc"[k]][:self.n][rows] for k in keys)


rows = st.one_of(
    st.builds(slice, st.integers(-15, 15) | st.none(), st.integers(-15, 15) | st.none(),
              st.sampled_from([1, 2, 3, -1, -2, None])),
    st.lists(st.integers(-N, N - 1), max_size=8),
    st.lists(st.booleans(), min_size=N, max_size=N))
keys = st.sampled_from([None, "b", 0, ("c", "a"), (-1,), ()])


def numpy_rows(selection, length):
    """The row numbers numpy would select from ``length`` rows."""
    if isinstance(selection, slice):
        return np.arange(length)[selection]
    if selection and all(isinstance(i, bool) for i in selection):
        return np.flatnonzero(selection)
    return np.arange(length)[np.asarray(selection, dtype=np.int64)]


def is_mask(selection):
    return isinstance(selection, list) and selection and isinstance(selection[0], bool)


@given(first=rows, second=rows, key=keys)
def test_a_slice_of_a_slice_selects_what_numpy_would(first, second, key):
    view = Counted().slice[first]
    inner = numpy_rows(first, N)
    if is_mask(second):
        second = second[:len(inner)] if len(second) >= len(inner) else None
        if second is None or not any(second) and not second:
            return
    if second is None:
        return
    if not is_mask(second) and isinstance(second, list) and any(
            not -len(inner) <= i < len(inner) for i in second):
        with pytest.raises(IndexError, match="out of range"):
            view.slice[second]
        return
    final = view.slice[second] if key is None else view.slice[second, key]
    want = inner[numpy_rows(second, len(inner))]
    names = ("a", "b", "c") if key is None else (key if isinstance(key, tuple) else (key,))
    names = tuple("abc"[k] if isinstance(k, int) else k for k in names)
    assert final.keys == names and len(final) == len(want)
    columns = final.fetch()
    columns = columns if isinstance(columns, tuple) else (columns,)
    for name, column in zip(names, columns):
        np.testing.assert_array_equal(np.asarray(column), DATA[name][want])


@given(selection=rows, split=st.integers(0, N))
def test_concat_and_join_agree_with_numpy(selection, split):
    if is_mask(selection):
        return
    whole = tabular.from_data((("a", DATA["a"]), ("b", DATA["b"])))
    joined = tabular.from_data(("a", DATA["a"])).join(tabular.from_data(("b", DATA["b"])))
    stacked = whole.slice[:split].concat(whole.slice[split:])
    for dataset in (joined.astuple(), stacked):
        got = dataset.slice[selection].fetch()
        index = numpy_rows(selection, N)
        np.testing.assert_array_equal(np.asarray(got[0]), DATA["a"][index])
        np.testing.assert_array_equal(np.asarray(got[1]), DATA["b"][index])


def test_an_iterator_fetches_a_batch_with_one_call_and_concat_takes_the_columns():
    dataset = Counted()
    it = SerialIterator(dataset, 5, seed=0)
    dataset.calls.clear()
    batch = next(it)
    assert len(dataset.calls) == 1 and isinstance(dataset.calls[0][0], list)
    assert isinstance(batch, ExampleBatch)
    a, b, c = concat_examples(batch)
    assert a is batch.columns[0]  # no restacking
    np.testing.assert_array_equal(b, DATA["b"][np.asarray(dataset.calls[0][0])])
    assert batch[0] == tuple(column[0] for column in batch.columns)


def test_dict_mode_batches_are_dicts_and_list_columns_give_lists():
    view = tabular.from_data({"x": DATA["a"], "y": list(range(N))})
    batch = next(SerialIterator(view, 4, shuffle=False))
    assert batch == [{"x": DATA["a"][i], "y": i} for i in range(4)]
    assert view.as_dict().mode is dict and view.as_tuple().mode is tuple


def test_transform_gives_each_example_its_own_draws_in_every_iterator_kind():
    noisy = tabular.from_data(("x", np.arange(N, dtype=float))).transform(
        "x", lambda x: x + example_rng().random())
    it = SerialIterator(noisy, 4, seed=2, shuffle=False)
    serial = [float(v) for _ in range(3) for v in next(it)]
    assert len({round(v % 1, 12) for v in serial}) == N
    with MultiprocessIterator(noisy, 4, seed=2, shuffle=False, n_processes=2) as it:
        assert [float(v) for _ in range(3) for v in next(it)] == serial


def test_functions_of_the_row_index_and_delegation():
    class Pairs(tabular.DelegateDataset):
        def __init__(self):
            super().__init__(tabular.from_data(
                (("i", np.arange(5)), (("double", "square"), lambda i: (2 * i, i * i)))))

    dataset = Pairs()
    assert dataset.keys == ("i", "double", "square")
    assert dataset[3] == (3, 6, 9)
    assert dataset.slice[:, "square"].fetch() == [0, 1, 4, 9, 16]


@pytest.mark.parametrize("call, error, message", [
    (lambda d: d.slice[:, "z"], KeyError, "'z' is not one of the keys"),
    (lambda d: d.slice[:, 5], IndexError, "key position 5"),
    (lambda d: d.slice[[N]], IndexError, f"row {N} is out of range"),
    (lambda d: d.slice[[True] * (N + 1)], ValueError, "boolean row mask"),
    (lambda d: d.join(Counted(N - 1)), ValueError, "same length"),
    (lambda d: d.join(Counted()), ValueError, "unique keys"),
    (lambda d: d.concat(d.slice[:, ("a",)]), ValueError, "same keys"),
    (lambda d: tabular.from_data(lambda i: i), ValueError, "needs a key"),
    (lambda d: tabular.from_data(("f", lambda i: i)), ValueError, "size="),
    (lambda d: tabular.from_data(3.5), TypeError, "array, a list or a function"),
    (lambda d: d.with_converter(3), TypeError, "converter must be callable"),
])
def test_bad_arguments_say_what_is_wrong(call, error, message):
    with pytest.raises(error, match=message):
        call(Counted())


def test_a_transform_that_changes_its_return_type_is_an_error():
    flip = iter([(1,), 2])
    view = tabular.from_data(("x", [0, 1])).transform("y", lambda x: next(flip))
    with pytest.raises(ValueError, match="must not change its return type"):
        view.fetch()


def test_tabular_datasets_keep_chainers_vocabulary_and_their_columns():
    # transform(keys, fn) is Chainer's; Gluon's one-argument transform, take
    # and filter are not on tabular datasets (they would drop the columns).
    data = tabular.from_data({"x": DATA["a"], "y": DATA["b"]})
    for name in ("transform_first", "filter", "shard", "take", "sample"):
        assert not hasattr(data, name), name
    first_two = data.slice[:2]  # Chainer's row view keeps the keys and the mode
    assert isinstance(first_two, TabularDataset)
    assert first_two.keys == ("x", "y") and first_two.mode is dict and len(first_two) == 2
    assert data[:2] == [{"x": DATA["a"][i], "y": DATA["b"][i]} for i in range(2)]
    summed = data.transform(("s", "x"), lambda x, y: (x + y, x))
    assert summed.keys == ("s", "x") and summed.mode is tuple
    assert summed.slice[1:3].fetch() == ([DATA["a"][1] + DATA["b"][1],
                                          DATA["a"][2] + DATA["b"][2]],
                                         [DATA["a"][1], DATA["a"][2]])
    assert summed.slice[[-1], ("x",)].fetch() == ([DATA["a"][-1]],)
    with pytest.raises(TypeError, match=r"takes the new column name\(s\) and then the function"):
        data.transform(lambda x, y: x)  # Chainer's signature: keys first


@given(rows=st.lists(st.integers(-N, N - 1), max_size=8))
def test_transform_answers_any_rows_like_the_examples_one_by_one(rows):
    view = tabular.from_data((("x", np.arange(N)), ("y", list(range(N))))).transform(
        ("s", "d"), lambda x, y: {"s": x + y, "d": x - y})
    columns = view.get_examples(rows, None)
    assert columns == ([2 * (r % N) for r in rows], [0] * len(rows))
    assert view.get_examples(rows, (1,)) == ([0] * len(rows),)
