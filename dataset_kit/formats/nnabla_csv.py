"""NNabla's CSV dataset format: the header's column names, ``NAME[__INDEX][:LABEL]``.

``x`` is variable ``x`` as one cell, ``x__0``, ``x__1``... the elements of
vector ``x``, ``:LABEL`` a human-readable name that changes nothing, and a
column whose name starts with ``#`` a comment. The rows themselves are read
by :func:`dataset_kit.formats.csv.read_csv_rows`; NNabla's data source over
such a file is :class:`dataset_kit.sources.CsvDataSource`.
"""

from __future__ import annotations


def parse_name(name: str) -> tuple[str, bool]:
    """Return (variable, whether the column is one element of a vector) for a header cell."""
    variable = name.split(":", 1)[0]
    if "__" in variable:
        return variable.split("__", 1)[0], True
    return variable, False


def refuse_duplicate_columns(header: list[str], filename: str) -> None:
    """Raise if two header cells name the same value (one would silently replace the other).

    A plain ``x`` twice, the same ``x__k`` twice, or ``x`` beside ``x__k``.

    Raises:
        ValueError: naming the file and both columns (1-based, as an editor counts).
    """
    seen: dict[str, int] = {}
    for column, name in enumerate(header, start=1):
        if name.startswith("#"):  # a comment column: not read
            continue
        element = name.split(":", 1)[0]
        variable, indexed = parse_name(name)
        for key in (element, variable if indexed else variable + "__"):
            if key in seen:
                first = seen[key]
                raise ValueError(
                    f"{filename} line 1: column {column} ({name!r}) names the same variable "
                    f"as column {first} ({header[first - 1]!r}); each column must have a "
                    f"name of its own")
        seen[element] = column
        # An indexed element marks its variable so a plain column of that name is refused.
        seen[variable + "__" if indexed else variable] = column
