"""A checkpoint's ledger names the shards by their manifest: replaced shards are refused."""

from __future__ import annotations

import shutil

import pytest

from dataset_kit import ResumeMismatchError
from dataset_kit.iterators import SerialIterator
from tests.shards.conftest import write

pytest.importorskip("fsspec")


def test_a_state_over_replaced_shards_is_refused_naming_the_files(tmp_path):
    from dataset_kit.shards import StreamingDataset
    write(tmp_path / "set", n=30, shard_size=700)
    saved = SerialIterator(StreamingDataset(tmp_path / "set", local=tmp_path / "c1"), 4, seed=0)
    next(saved)
    state = saved.state_dict()
    assert state["engine"]["ledger"]["fingerprint"].startswith("manifest:")
    shutil.rmtree(tmp_path / "set")
    write(tmp_path / "set", n=30, shard_size=500)  # the same samples, other shards
    resumed = SerialIterator(StreamingDataset(tmp_path / "set", local=tmp_path / "c2"), 4, seed=0)
    with pytest.raises(ResumeMismatchError) as info:
        resumed.load_state_dict(state)
    assert info.value.cause == "files"
    assert resumed.epoch == 0 and resumed.current_position == 0
