"""NNabla's CSV dataset header: column names to variables, duplicates refused."""

from __future__ import annotations

import pytest

from dataset_kit.formats.nnabla_csv import parse_name, refuse_duplicate_columns


@pytest.mark.parametrize("name, parsed", [("x", ("x", False)), ("x:image", ("x", False)),
                                          ("y__0", ("y", True)), ("y__1:first", ("y", True))])
def test_a_column_name_gives_its_variable_and_whether_it_is_an_element(name, parsed):
    assert parse_name(name) == parsed


@pytest.mark.parametrize("header, columns", [(["x", "x"], "column 2 .*column 1"),
                                             (["y__0", "y"], "column 2 .*column 1"),
                                             (["a", "y__0:l", "y__0"], "column 3 .*column 2")])
def test_two_columns_naming_one_value_are_refused_naming_the_file(header, columns):
    with pytest.raises(ValueError, match=f"data.csv line 1: {columns}"):
        refuse_duplicate_columns(header, "data.csv")


def test_comment_columns_and_distinct_elements_pass():
    refuse_duplicate_columns(["#note", "#note", "x", "y__0", "y__1"], "data.csv")
