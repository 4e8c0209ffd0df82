"""NNabla's CSV dataset format through data_iterator_csv_dataset."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from dataset_kit.sources import CsvDataSource, data_iterator_csv_dataset
from tests.http_server import Route

Image = pytest.importorskip("PIL.Image", reason="Pillow is in the test extra")


@pytest.fixture
def dataset(tmp_path):
    """6 rows: an RGB or gray PNG, a .csv array, a label, a 2-vector and a comment column."""
    (tmp_path / "img").mkdir()
    (tmp_path / "arr").mkdir()
    lines = ["x:image,a,y:label,v__0,v__1,#note"]
    for i in range(6):
        pixels = (np.arange(4 * 5 * 3).reshape(4, 5, 3) * (i + 1) % 256).astype(np.uint8)
        Image.fromarray(pixels).save(tmp_path / "img" / f"{i}.png")
        with open(tmp_path / "arr" / f"{i}.csv", "w") as f:
            f.write(f"{i},1.5\n2,{-i}\n")
        lines.append(f"img/{i}.png,arr/{i}.csv,{i % 3},{i},{i * 10},ignored {i}")
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def _pixels(i):
    return (np.arange(4 * 5 * 3).reshape(4, 5, 3) * (i + 1) % 256).astype(np.uint8)


def test_cells_load_as_nnabla_loads_them(dataset):
    source = CsvDataSource(str(dataset / "data.csv"))
    assert source.variables == ("x", "a", "y", "v") and source.size == 6
    x, a, y, v = source.get_example(4)
    np.testing.assert_array_equal(x, _pixels(4).transpose(2, 0, 1))  # CHW uint8
    assert x.dtype == np.uint8
    np.testing.assert_array_equal(a, [[4.0, 1.5], [2.0, -4.0]])
    # as NNabla's: a lone number is a 1-element list, a vector a list (the file cache
    # stores them as float32)
    assert y == [1.0] and v == [4.0, 40.0]
    normalized = CsvDataSource(str(dataset / "data.csv"), normalize=True).get_example(4)[0]
    np.testing.assert_allclose(normalized, _pixels(4).transpose(2, 0, 1) / 255.0)


@pytest.mark.parametrize("caches", [(True, True), (False, True), (True, False), (False, False)])
def test_the_iterator_over_every_cache_combination(dataset, caches):
    memory, file = caches
    with data_iterator_csv_dataset(str(dataset / "data.csv"), 3, with_memory_cache=memory,
                                   with_file_cache=file, use_thread=False) as it:
        x, a, y, v = it.next()
    assert x.shape == (3, 3, 4, 5) and a.shape == (3, 2, 2) and y.shape == (3, 1)
    np.testing.assert_allclose(x[1], _pixels(1).transpose(2, 0, 1) / 255.0, rtol=1e-6)
    assert v[2].tolist() == [2.0, 20.0]


def test_a_missing_file_names_line_and_column(dataset):
    os.remove(dataset / "arr" / "3.csv")
    source = CsvDataSource(str(dataset / "data.csv"))
    with pytest.raises(FileNotFoundError, match=r"data.csv line 5, column 'a'.*arr/3.csv"):
        source.get_example(3)


def test_a_malformed_cell_names_line_and_column(tmp_path):
    (tmp_path / "d.csv").write_text("x,y\n1,2\n3,oops\n")
    with pytest.raises(ValueError, match=r"d.csv line 3, column 'y': 'oops' is neither"):
        CsvDataSource(str(tmp_path / "d.csv")).get_example(1)


def test_a_short_row_names_its_line(tmp_path):
    (tmp_path / "d.csv").write_text("x,y\n1,2\n3\n")
    with pytest.raises(ValueError, match="line 3: 1 cells, but the header has 2"):
        CsvDataSource(str(tmp_path / "d.csv"))


def test_a_csv_dataset_over_http(dataset, http_server, dataset_root):
    for folder, names in (("", ["data.csv"]), ("img", os.listdir(dataset / "img")),
                          ("arr", os.listdir(dataset / "arr"))):
        for name in names:
            path = f"/{folder}/{name}" if folder else f"/{name}"
            http_server.add("/ds" + path, Route((dataset / folder / name).read_bytes()))
    with data_iterator_csv_dataset(http_server.url("/ds/data.csv"), 2, normalize=False,
                                   with_memory_cache=False, with_file_cache=False,
                                   use_thread=False) as it:
        x, a, *_ = it.next()
    np.testing.assert_array_equal(x[1], _pixels(1).transpose(2, 0, 1))
    np.testing.assert_array_equal(a[0], [[0.0, 1.5], [2.0, 0.0]])


def test_file_urls_work(dataset):
    source = CsvDataSource((dataset / "data.csv").as_uri())
    assert source.get_example(0)[2] == [0.0]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_a_file_that_is_not_utf8_names_the_file_line_and_offset(tmp_path, bom):
    path = tmp_path / "latin.csv"
    path.write_bytes(bom + b"x,y\n1,2\n3,caf\xe9\n")
    with pytest.raises(ValueError, match=r"latin.csv line 3: byte 0xe9 at offset "
                                         f"{len(bom) + 13} is not UTF-8"):
        CsvDataSource(str(path))


def test_a_cell_file_that_is_not_utf8_names_the_row_and_the_file(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"1,2\n\xff\n")
    (tmp_path / "d.csv").write_text("x\na.csv\n")
    with pytest.raises(ValueError, match=r"d.csv line 2, column 'x'.*a.csv line 2: byte 0xff"):
        CsvDataSource(str(tmp_path / "d.csv")).get_example(0)


def test_a_cell_over_the_field_limit_names_the_file_and_line(tmp_path):
    import csv

    path = tmp_path / "big.csv"
    path.write_text("x,y\n1,2\n3," + "9" * (csv.field_size_limit() + 1) + "\n")
    with pytest.raises(ValueError, match=r"big.csv line 3: field larger than field limit"):
        CsvDataSource(str(path))


@pytest.mark.parametrize("header, column, first", [
    ("x,y,x", "column 3 ('x')", "column 1 ('x')"),
    ("x__0,x__1,x__0", "column 3 ('x__0')", "column 1 ('x__0')"),
    ("x,x__0", "column 2 ('x__0')", "column 1 ('x')"),
    ("#note,x__0,x", "column 3 ('x')", "column 2 ('x__0')"),
    ("x:a,x:b", "column 2 ('x:b')", "column 1 ('x:a')"),
])
def test_two_columns_naming_one_variable_are_refused_naming_both(tmp_path, header, column, first):
    # Before, one silently replaced the other.
    path = tmp_path / "dup.csv"
    path.write_text(header + "\n" + ",".join(["1"] * len(header.split(","))) + "\n")
    with pytest.raises(ValueError, match=re.escape(f"dup.csv line 1: {column} names the same "
                                                   f"variable as {first}")):
        CsvDataSource(str(path))
