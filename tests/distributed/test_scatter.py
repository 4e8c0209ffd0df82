"""scatter_dataset and scatter_index: ChainerMN's split, on thread ranks and over MPI."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.datasets import TupleDataset
from dataset_kit.distributed import DistributedError, scatter_dataset, scatter_index
from tests.distributed.thread_ranks import run_ranks, unwrap


def _values(sub) -> list[int]:
    return [int(sub[i][0]) if isinstance(sub[i], tuple) else int(sub[i]) for i in range(len(sub))]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), ranks=st.integers(1, 4), force=st.booleans())
def test_the_split_covers_the_data(n, ranks, force):
    bounds = unwrap(run_ranks(ranks, lambda comm: scatter_index(n, comm,
                                                                force_equal_length=force)))
    covered = sorted({i for b, e in bounds for i in range(b, e)})
    assert covered == list(range(n))
    lengths = [e - b for b, e in bounds]
    if force:
        assert set(lengths) == {-(-n // ranks)}
    else:
        assert sum(lengths) == n and max(lengths) - min(lengths) <= 1


@pytest.mark.parametrize("n,ranks,force,expected", [
    # Worked from ChainerMN's _scatter_index.
    (5, 2, True, [(0, 3), (2, 5)]),
    (4, 3, True, [(0, 2), (1, 3), (2, 4)]),
    (5, 2, False, [(0, 3), (3, 5)]),
    (7, 3, False, [(0, 3), (3, 5), (5, 7)]),
    (0, 2, True, [(0, 0), (0, 0)]),
])
def test_chainermn_bounds(n, ranks, force, expected):
    assert unwrap(run_ranks(ranks, lambda comm: scatter_index(
        n, comm, force_equal_length=force))) == expected


@pytest.mark.parametrize("others_pass", ["dataset", "none"])
def test_shuffled_scatter_is_chainermn_permutation_and_travels_when_needed(others_pass):
    data = TupleDataset(np.arange(11), np.arange(11) * 10)

    def body(comm):
        mine = data if comm.rank == 0 or others_pass == "dataset" else None
        return _values(scatter_dataset(mine, comm, shuffle=True, seed=42))

    parts = unwrap(run_ranks(3, body))
    order = np.random.RandomState(42).permutation(11)
    assert parts == [order[b:e].tolist() for b, e in [(0, 4), (3, 7), (7, 11)]]


def test_root_other_than_zero():
    def body(comm):
        return _values(scatter_dataset(np.arange(6) if comm.rank == 1 else None, comm, root=1))

    assert unwrap(run_ranks(2, body)) == [[0, 1, 2], [3, 4, 5]]


def test_different_lengths_raise_on_every_rank():
    results = run_ranks(2, lambda comm: scatter_dataset(np.arange(5 + comm.rank), comm))
    for result in results:
        assert isinstance(result, DistributedError)
        assert "rank 0 (root) has 5" in str(result) and "rank 1 has 6" in str(result)


def test_no_dataset_on_root_is_an_error():
    results = run_ranks(2, lambda comm: scatter_dataset(None, comm))
    assert all(isinstance(r, ValueError) and "rank 0" in str(r) for r in results)


@pytest.mark.parametrize("kwargs,error", [({"root": 2}, ValueError), ({"root": True}, ValueError),
                                          ({"seed": -3}, ValueError),
                                          ({"comm": 5}, TypeError)])
def test_bad_arguments(kwargs, error):
    kwargs = {"comm": None, **kwargs}
    with pytest.raises(error, match="root|seed|comm"):
        scatter_dataset(np.arange(4), **kwargs)


def test_scatter_index_validates_its_length():
    with pytest.raises(ValueError, match="n_total_samples"):
        scatter_index(-1, None)
