"""ParquetDataset over fsspec URLs: a real S3 server (moto) and the HTTP test server."""

from __future__ import annotations

import io

import numpy as np
import pytest

from dataset_kit.datasets import ParquetDataset, RowGroupOrderSampler
from dataset_kit.formats import FileChangedError, ParquetReadError, ParquetTimeoutError
from tests.datasets.parquet_files import check_row, pa, pq, write
from tests.datasets.parquet_files import parquet_bytes as _bytes
from tests.http_server import Route


def test_files_in_s3_read_as_local_ones_and_carry_their_etag(s3, tmp_path):
    s3fs = pytest.importorskip("s3fs")
    fs = s3fs.S3FileSystem(**s3)
    fs.pipe("data/set/part=a/0.parquet", _bytes([5, 0, 4]))
    fs.pipe("data/set/part=b/1.parquet", _bytes([6], start=9))
    ds = ParquetDataset("s3://data/set", storage_options=s3)
    assert len(ds) == 15 and ds.row_groups == 4
    for row, i in zip(ds[np.arange(15)[::-1]], range(14, -1, -1)):
        assert row.pop("part") == ("a" if i < 9 else "b")
        check_row(row, i)
    assert [stamp[0] for stamp in ds.stamps] == ["s3://data/set/part=a/0.parquet",
                                                 "s3://data/set/part=b/1.parquet"]
    assert all(stamp[3] for stamp in ds.stamps)  # S3 has ETags
    sampler = RowGroupOrderSampler(ds, 2, seed=3)
    state = sampler.state_dict()
    fs.pipe("data/set/part=b/1.parquet", _bytes([6], start=100))
    changed = RowGroupOrderSampler(ParquetDataset("s3://data/set", storage_options=s3), 2)
    with pytest.raises(FileChangedError, match="s3://data/set/part=b/1.parquet changed"):
        changed.load_state_dict(state)


def test_a_glob_of_s3_files(s3):
    s3fs = pytest.importorskip("s3fs")
    fs = s3fs.S3FileSystem(**s3)
    fs.pipe("data/g/a.parquet", _bytes([3]))
    fs.pipe("data/g/b.parquet", _bytes([2], start=3))
    fs.pipe("data/g/notes.txt", b"not parquet")
    ds = ParquetDataset("s3://data/g/*.parquet", ["id"], storage_options=s3)
    assert [int(r["id"]) for r in ds[0:5]] == [0, 1, 2, 3, 4]


@pytest.fixture
def served(http_server):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    route = Route(_bytes([40, 40, 40], compression="none"))
    return route, http_server.add("/d.parquet", route)


def test_a_5xx_and_a_cut_read_are_retried(served):
    route, url = served
    ds = ParquetDataset(url, ["id", "name"], retries=3)
    route.fail = [500, 503]
    assert [int(r["id"]) for r in ds[np.array([5, 45])]] == [5, 45]
    assert route.fail == []
    chunk = pq.ParquetFile(io.BytesIO(route.body)).metadata.row_group(2).column(0)
    route.drop_after = chunk.data_page_offset + chunk.total_compressed_size // 2
    route.drops = 1
    assert int(ds[100]["id"]) == 100 and route.drops == 0


def test_failures_beyond_the_retries_name_the_file(served):
    route, url = served
    ds = ParquetDataset(url, ["id"], retries=1)
    route.fail = [500, 500, 500]
    with pytest.raises(ParquetReadError, match=f"reading {url} failed 2 times"):
        ds[0]
    route.fail = []
    assert int(ds[0]["id"]) == 0  # nothing partial was kept: a later read is whole


def test_a_stalled_read_times_out_naming_the_file(http_server):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    # The server pauses after each 64 KiB it sends: a row group of more than that.
    route = Route(_bytes([20000, 20000], compression="none", use_dictionary=False))
    url = http_server.add("/big.parquet", route)
    ds = ParquetDataset(url, ["id"], timeout=0.5, retries=0)
    route.delay, route.slow_requests = 5.0, route.gets + 10
    with pytest.raises(ParquetTimeoutError, match=f"of {url} stalled"):
        ds[25000]


def test_a_missing_url_is_named(http_server):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    url = http_server.url("/missing.parquet")
    with pytest.raises(FileNotFoundError):
        ParquetDataset(url)


def test_a_local_file_read_through_a_file_url(tmp_path):
    pytest.importorskip("fsspec", reason="file:// URLs go through fsspec")
    write(tmp_path / "a.parquet", [3, 2])
    ds = ParquetDataset(f"file://{tmp_path}/a.parquet", ["id"])
    assert [int(r["id"]) for r in ds[np.array([4, 0])]] == [4, 0]
    assert pa is not None
