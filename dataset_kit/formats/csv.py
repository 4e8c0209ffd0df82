"""CSV files: UTF-8 rows, and blocks of comma-separated numbers parsed the same way always.

:func:`read_csv_rows` reads a UTF-8 file's rows (NNabla's CSV datasets).

``numpy.loadtxt`` defines what a number is. pandas' C parser (the ``csv``
extra) is only a faster way to the same result: it runs with its missing-value
handling off, and whatever it refuses is handed to numpy before anything is
called an error, so a file never parses differently because pandas is, or is
not, installed. Missing values (empty cells, ``NA``, ``null``, ``N/A``, ...)
are errors unless the caller gives a fill value.
"""

from __future__ import annotations

import codecs
import csv
import io
import re

import numpy as np

# pandas' default missing-value spellings, less the spellings of NaN, which
# float() and numpy read as the number NaN (np.savetxt writes them).
MISSING = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "1.#IND", "1.#QNAN",
           "<NA>", "N/A", "NA", "NULL", "None", "n/a", "null")
# The NaN spellings numpy accepts; given to pandas so that it reads them as numpy does.
_NAN = sorted({sign + "".join(c.upper() if mask >> k & 1 else c for k, c in enumerate("nan"))
               for sign in ("", "+", "-") for mask in range(8)})
_MISSING_CELL = re.compile(
    rb"(^|,)[ \t]*(?:" + b"|".join(re.escape(t.encode()) for t in MISSING if t) +
    rb")?[ \t]*(?=,|\r?$)", re.MULTILINE)


def _pandas() -> object | None:
    try:
        import pandas
    except ImportError:
        return None
    return pandas


def _with_numpy(block: bytes, dtype: np.dtype) -> np.ndarray:
    return np.loadtxt(io.BytesIO(block), delimiter=",", dtype=dtype, ndmin=2, comments=None)


def _with_pandas(pandas: object, block: bytes, dtype: np.dtype) -> np.ndarray:
    frame = pandas.read_csv(  # type: ignore[attr-defined]
        io.BytesIO(block), header=None, dtype=dtype, engine="c", encoding="latin-1",
        keep_default_na=False, na_values=_NAN, quoting=csv.QUOTE_NONE, skip_blank_lines=False)
    return frame.to_numpy(dtype=dtype)


def parse_numbers(block: bytes, rows: int, columns: int, dtype: np.dtype) -> np.ndarray | None:
    """Parse ``rows`` lines of ``columns`` numbers each, or return None if any line is bad.

    pandas parses about four times faster than ``numpy.loadtxt``
    (benchmarks/loader.py), so it goes first for float dtypes; a block it
    refuses, or parses to another shape, is parsed again by numpy, which
    decides. pandas also accepts a space after an exponent's ``e`` (``1e 5``),
    which numpy refuses: such blocks go to numpy directly.
    """
    pandas = _pandas() if np.issubdtype(dtype, np.floating) else None
    if pandas is not None and b"e " not in block and b"E " not in block:
        try:
            values = _with_pandas(pandas, block, dtype)
            if values.shape == (rows, columns):
                return values
        except ValueError:  # pandas' ParserError and EmptyDataError are ValueErrors
            pass
    try:
        values = _with_numpy(block, dtype)
    except ValueError:
        return None
    return values if values.shape == (rows, columns) else None


def fill_missing(block: bytes, fill: bytes) -> bytes:
    """Write ``fill`` into every missing cell (empty, or a spelling in :data:`MISSING`)."""
    body = block[:-1] if block.endswith(b"\n") else block  # no phantom line after the last
    return _MISSING_CELL.sub(rb"\g<1>" + fill, body) + block[len(body):]


def first_bad_line(block: bytes, columns: int, dtype: np.dtype) -> tuple[int, str]:
    """Return ``(k, reason)`` for the first line of ``block`` that does not parse (error path).

    Bisection over prefixes with numpy's parser (the reference), so the cost
    is a few parses of the block, not one per line.
    """
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    low, high = 0, len(lines) - 1  # the first bad line is in lines[low:high + 1]
    while low < high:
        middle = (low + high) // 2
        prefix = b"\n".join(lines[:middle + 1]) + b"\n"
        if parse_numbers(prefix, middle + 1, columns, dtype) is None:
            high = middle
        else:
            low = middle + 1
    k = low
    return k, describe_bad_line(lines[k], columns, dtype)


def describe_bad_line(line: bytes, columns: int, dtype: np.dtype) -> str:
    """Say what is wrong with one line that does not parse."""
    cells = line.rstrip(b"\r").split(b",")
    if len(cells) != columns:
        return f"expected {columns} values separated by commas, got {len(cells)}: {line[:80]!r}"
    for c, cell in enumerate(cells):
        if cell.strip(b" \t").decode("latin-1") in MISSING:
            return (f"missing value {cell.decode('latin-1')!r} in column {c + 1} (pass "
                    f"fill_value= to replace missing values)")
        if parse_numbers(cell + b"\n", 1, 1, dtype) is None:
            return f"{cell[:40]!r} in column {c + 1} is not a number of dtype {dtype}"
    return f"cannot be parsed as {columns} numbers: {line[:80]!r}"


def read_csv_rows(path: str, name: str) -> list[list[str]]:
    """Return the rows of a UTF-8 CSV file (a leading byte-order mark is skipped).

    Args:
        path: the local file.
        name: how to name it in an error (its path or URL).

    Raises:
        ValueError: if the file is not UTF-8 (naming the line and byte
            offset) or a row does not parse, such as a cell over
            :func:`csv.field_size_limit` (naming the line).
        OSError: if the file cannot be read.
    """
    with open(path, "rb") as f:
        data = f.read()
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as error:
        offset = skip + error.start
        line = data.count(b"\n", 0, offset) + 1
        raise ValueError(f"{name} line {line}: byte {data[offset]:#04x} at offset {offset} is "
                         f"not UTF-8 ({error.reason}); save the file as UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = []
    try:
        for row in reader:
            rows.append(row)
    except csv.Error as error:
        raise ValueError(f"{name} line {reader.line_num}: {error}") from None
    return rows
