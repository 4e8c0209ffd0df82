"""CSVArrayDataset: the same numbers or the same error whether pandas is installed or not."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataset_kit.datasets import CSVArrayDataset
from dataset_kit.formats.csv import MISSING

MISSING_SPELLINGS = ["", "NA", "null", "N/A", "#N/A", "None", "<NA>", " NA ", "NULL", "n/a"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(params=["pandas", "numpy"])
def parser(request, monkeypatch):
    """Run with pandas' parser, and with pandas' import failing in this process."""
    if request.param == "numpy":
        monkeypatch.setitem(sys.modules, "pandas", None)
    return request.param


def read_all(path, row_shape=(2,), **kwargs):
    """Every row, or the error's text: what a user of the file gets."""
    try:
        return CSVArrayDataset(path, row_shape, **kwargs)[:].columns.tolist()
    except ValueError as error:
        return str(error)


@pytest.mark.parametrize("cell", MISSING_SPELLINGS)
def test_a_missing_value_is_an_error_naming_the_file_line_and_column(tmp_path, parser, cell):
    path = tmp_path / "m.csv"
    path.write_text(f"1,2\n3,4\n5,{cell}\n7,8\n")
    with pytest.raises(ValueError, match=r"m.csv, line 3: missing value .* column 2"):
        CSVArrayDataset(path, (2,))[:]
    with pytest.raises(ValueError, match=r"line 3"):
        CSVArrayDataset(path, (2,))[2]
    assert CSVArrayDataset(path, (2,))[3].tolist() == [7, 8]  # rows before and after still read


@pytest.mark.parametrize("cell", MISSING_SPELLINGS)
def test_fill_value_replaces_missing_values_only(tmp_path, parser, cell):
    path = tmp_path / "m.csv"
    path.write_text(f"{cell},nan\n-inf,{cell}\n1e3,.5\n")
    got = CSVArrayDataset(path, (2,), fill_value=-1)[:].columns
    assert got[0, 0] == -1 and np.isnan(got[0, 1])  # "nan" is a number, not a missing value
    assert got[1].tolist() == [-np.inf, -1] and got[2].tolist() == [1000, 0.5]


def test_fill_value_fills_blank_lines_of_a_one_column_file_and_int_dtypes(tmp_path, parser):
    path = tmp_path / "one.csv"
    path.write_text("1\n\n3\r\n\r\nNA\n")
    assert CSVArrayDataset(path, (1,), dtype=np.int32, fill_value=0)[:].columns.ravel().tolist() \
        == [1, 0, 3, 0, 0]
    with pytest.raises(ValueError, match=r"one.csv, line 2: missing value ''"):
        CSVArrayDataset(path, (1,))[:]


@pytest.mark.parametrize("fill, dtype", [("x", np.float32), (1.5, np.int32), (np.nan, np.int64),
                                         (2**40, np.int16), (True, np.float32)])
def test_a_fill_value_the_dtype_cannot_hold_is_rejected(tmp_path, fill, dtype):
    (tmp_path / "a.csv").write_text("1\n")
    with pytest.raises(ValueError, match="fill_value must be a number"):
        CSVArrayDataset(tmp_path / "a.csv", (1,), dtype=dtype, fill_value=fill)


def test_a_directory_is_named_as_a_directory(tmp_path):
    with pytest.raises(IsADirectoryError, match=f"{tmp_path} is a directory"):
        CSVArrayDataset(tmp_path, (1,))


FILES = {
    "missing": "1,2\n3,NA\n",
    "empty_cell": "1,\n3,4\n",
    "good": "1,2\n3.5,-4e-3\nnan,inf\n 5 , 6\r\n",
    "short_row": "1,2\n3\n",
    "junk": "1,2\n3,x\n",
    "quoted": '1,"2"\n',
}


def test_the_result_does_not_depend_on_whether_pandas_is_installed(tmp_path):
    """The same files read in a child whose ``import pandas`` raises ImportError."""
    for name, content in FILES.items():
        (tmp_path / f"{name}.csv").write_text(content)
    paths = {name: str(tmp_path / f"{name}.csv") for name in FILES}
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "pandas.py").write_text("raise ImportError('pandas is blocked for this test')\n")
    child = textwrap.dedent(f"""
        import json, sys
        from tests.datasets.test_csv_dataset import read_all
        try:
            import pandas
        except ImportError:
            pass
        else:
            sys.exit("pandas was not blocked")
        print(json.dumps({{name: read_all(path) for name, path in {paths!r}.items()}}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), ROOT]))
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    without = json.loads(done.stdout)
    pytest.importorskip("pandas", reason="the comparison needs pandas in this process")
    with_pandas = json.loads(json.dumps({name: read_all(path) for name, path in paths.items()}))
    assert with_pandas == without
    assert without["good"][2][0] is None or np.isnan(without["good"][2][0])  # json: NaN
    assert "line 2: missing value 'NA'" in without["missing"]
    assert "line 1: missing value ''" in without["empty_cell"]


# -- fuzzing --------------------------------------------------------------------

NUMBERS = st.one_of(
    st.floats(allow_nan=False, width=32).map(repr),
    st.integers(-10**6, 10**6).map(str),
    st.sampled_from(["nan", "-inf", "inf", "1e3", ".5", "5.", " 7 ", "-0", "+2"]),
)
CELLS = st.one_of(NUMBERS, NUMBERS, NUMBERS, st.sampled_from(MISSING),
                  st.sampled_from(["x", "1.2.3", "--1", "e5", "1e", "0x10", '"1"']))


def reference_row(line, columns):
    """What the row must hold, or None if it must be refused (an independent parser)."""
    if "\r" in line[:-1]:  # a lone carriage return ends a line for numpy: a row too many
        return None
    cells = line.split(",")
    if len(cells) != columns:
        return None
    row = []
    for cell in cells:
        text = cell.strip()
        if text in MISSING or "_" in text or any(c.isspace() for c in text):
            return None
        try:
            row.append(float(np.float32(float(text))))
        except ValueError:
            return None
    return row


def check_rows(path, lines, columns, read):
    """Each requested row is the reference's, or the error names its line."""
    expected = [reference_row(line, columns) for line in lines]
    for i, want in enumerate(expected):
        try:
            got = read(i)
        except ValueError as error:
            assert want is None, f"line {i + 1} {lines[i]!r} refused: {error}"
            assert str(path) in str(error) and f"line {i + 1}:" in str(error)
            continue
        assert want is not None, f"line {i + 1} {lines[i]!r} accepted as {got}"
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.float32(want))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(CELLS, min_size=2, max_size=2), min_size=1, max_size=12),
       newline=st.sampled_from(["\n", "\r\n"]), use_pandas=st.booleans(), data=st.data())
def test_fuzz_rows_are_right_or_the_error_names_their_line(tmp_path, rows, newline, use_pandas,
                                                           data):
    path = tmp_path / "fuzz.csv"
    lines = [",".join(row) + newline.rstrip("\n") for row in rows]
    path.write_bytes("".join(line + "\n" for line in lines).encode())
    with pytest.MonkeyPatch.context() as patch:
        if not use_pandas:
            patch.setitem(sys.modules, "pandas", None)
        dataset = CSVArrayDataset(path, (2,))
        check_rows(path, lines, 2, lambda i: dataset[i])
        order = data.draw(st.permutations(range(len(lines))))
        scattered = CSVArrayDataset(path, (2,))
        try:
            batch = scattered[np.array(order * 3)].columns  # many runs: the scattered path
        except ValueError as error:
            bad = [i for i in order if reference_row(lines[i], 2) is None]
            assert bad and f"line {bad[0] + 1}:" in str(error)
        else:
            check_rows(path, [lines[i] for i in order], 2, lambda k: batch[k])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), use_pandas=st.booleans())
def test_fuzz_truncated_or_bit_flipped_files_never_give_wrong_rows(tmp_path, data, use_pandas):
    good = b"".join(b"%r,%d\n" % (k * 0.25, -k) for k in range(20))
    raw = bytearray(good[:data.draw(st.integers(0, len(good)), "cut")])
    for position in data.draw(st.lists(st.integers(0, max(len(raw) - 1, 0)), max_size=3)):
        if raw:
            raw[position] ^= 1 << data.draw(st.integers(0, 7))
    path = tmp_path / "flipped.csv"
    path.write_bytes(bytes(raw))
    lines = bytes(raw).decode("latin-1").split("\n")
    if lines[-1] == "":
        lines.pop()
    with pytest.MonkeyPatch.context() as patch:
        if not use_pandas:
            patch.setitem(sys.modules, "pandas", None)
        dataset = CSVArrayDataset(path, (2,))
        assert len(dataset) == len(lines)
        check_rows(path, lines, 2, lambda i: dataset[i])
