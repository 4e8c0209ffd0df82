"""from_hf on real Hugging Face datasets (from_dict, save_to_disk): nothing from the Hub."""

from __future__ import annotations

import os
import pickle
import sys

import numpy as np
import pytest

from dataset_kit import ExampleBatch
from dataset_kit.datasets import RowGroupOrderSampler, from_hf
from dataset_kit.formats import FileChangedError

hf = pytest.importorskip("datasets", reason="from_hf needs Hugging Face datasets (the hf extra)")


def _data(n: int = 30) -> dict:
    return {"label": list(range(n)), "x": [[float(i)] * 3 for i in range(n)],
            "tokens": [list(range(i % 4)) for i in range(n)], "text": [f"t{i}" for i in range(n)]}


def test_rows_and_batches_of_an_in_memory_dataset():
    ds = from_hf(hf.Dataset.from_dict(_data()))
    assert len(ds) == 30
    row = ds[7]
    assert (int(row["label"]), row["x"].tolist(), row["tokens"].tolist(), row["text"]) == \
        (7, [7.0] * 3, [0, 1, 2], "t7")
    assert [int(r["label"]) for r in ds[np.array([29, 0, 13])]] == [29, 0, 13]
    only = from_hf(hf.Dataset.from_dict(_data()), columns=["label"])
    assert isinstance(only[np.array([1, 2])], ExampleBatch)


def test_a_shuffled_dataset_is_flattened_once_and_read_in_its_order():
    shuffled = hf.Dataset.from_dict(_data()).shuffle(seed=4)
    ds = from_hf(shuffled)
    assert [int(r["label"]) for r in ds[0:30]] == shuffled["label"]


def test_a_save_to_disk_folder_a_dataset_dict_and_their_stamps(tmp_path):
    whole = hf.DatasetDict({"train": hf.Dataset.from_dict(_data(20)),
                            "test": hf.Dataset.from_dict(_data(5))})
    whole.save_to_disk(tmp_path / "saved")
    ds = from_hf(tmp_path / "saved", "train")
    assert len(ds) == 20 and ds.files and ds.stamps[0][0] == ds.files[0]
    assert len(from_hf(hf.load_from_disk(tmp_path / "saved")["test"])) == 5
    with pytest.raises(ValueError, match="name one with split"):
        from_hf(whole)
    with pytest.raises(KeyError, match="'dev'"):
        from_hf(whole, "dev")
    copy = pickle.loads(pickle.dumps(ds))  # a spawned worker maps the files again
    assert [int(r["label"]) for r in copy[np.array([19, 3])]] == [19, 3]
    sampler = RowGroupOrderSampler(ds, 1, seed=0)
    state = sampler.state_dict()
    with open(ds.files[0], "r+b") as rewritten:  # the same file, rewritten in place
        rewritten.write(rewritten.read())
    os.utime(ds.files[0], ns=(3, 3))
    again = RowGroupOrderSampler(from_hf(tmp_path / "saved", "train"), 1)
    with pytest.raises(FileChangedError, match=ds.files[0]):
        again.load_state_dict(state)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="datasets.Dataset"):
        from_hf([1, 2, 3])
    with pytest.raises(ValueError, match="no column 'nope'"):
        from_hf(hf.Dataset.from_dict(_data()), columns=["nope"])
    with pytest.raises(ValueError, match="split='train' is for a DatasetDict"):
        from_hf(hf.Dataset.from_dict(_data()), "train")


def test_without_datasets_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if not installed
    with pytest.raises(ImportError, match=r"dataset_kit\[hf\]"):
        from_hf({"a": [1]})


def _lists(n: int = 40) -> dict:
    """Token lists with empty and null lists among them; a fixed-size pair null at times."""
    tokens = [[] if i % 3 == 1 else None if i % 4 == 2 else list(range(i, i + 1 + i % 4))
              for i in range(n)]
    return {"label": list(range(n)), "tokens": tokens,
            "pair": [None if t is None else [float(i), -float(i)] for i, t in enumerate(tokens)]}


def _features():
    return hf.Features({"label": hf.Value("int64"), "tokens": hf.Sequence(hf.Value("int32")),
                        "pair": hf.Sequence(hf.Value("float32"), length=2)})


def _plain(row: dict) -> dict:
    return {k: v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v
            for k, v in row.items()}


def test_empty_and_null_lists_stay_ragged_columns_equal_to_the_datasets_rows(tmp_path):
    from dataset_kit.batch import RaggedColumn
    from dataset_kit.iterators import MultiprocessIterator

    source = hf.Dataset.from_dict(_lists(), features=_features())
    source.save_to_disk(tmp_path / "saved")
    expected = source.data.table.to_pylist()
    for ds in (from_hf(source), from_hf(tmp_path / "saved")):
        assert [_plain(ds[i]) for i in range(len(ds))] == expected
        assert [_plain(r) for r in ds[::-3]] == expected[::-3]
        indices = np.array([39, 1, 2, 0, 2, 17], dtype=np.int64)
        batch = ds[indices]
        assert isinstance(batch, ExampleBatch)
        assert isinstance(batch.columns["tokens"], RaggedColumn)
        assert isinstance(batch.columns["pair"], RaggedColumn)
        assert batch.columns["tokens"].dtype == np.int32  # empty lists keep the dtype
        # A null fixed-size list's slots are nulls in Arrow's values, under the
        # null row: no null value of a list, so float32 stays.
        assert batch.columns["pair"].dtype == np.float32
        assert [_plain(r) for r in batch] == [expected[i] for i in indices.tolist()]
        it = MultiprocessIterator(ds, 6, repeat=False, shuffle=False, n_processes=2)
        try:
            rows = [_plain(r) for b in it for r in b]
        finally:
            it.finalize()
        assert rows == expected


def test_a_null_inside_a_list_of_integers_makes_its_values_float64_with_nan():
    ds = from_hf(hf.Dataset.from_dict({"tokens": [[1, None], [], None]},
                                      features=hf.Features({"tokens": hf.Sequence(
                                          hf.Value("int64"))})))
    first = ds[0]["tokens"]
    assert first.dtype == np.float64 and first[0] == 1.0 and np.isnan(first[1])
    assert ds[1]["tokens"].tolist() == [] and ds[2]["tokens"] is None
