"""Deselect the tests of PyTorch's test_dataloader.py that are out of scope, in both modes.

The patterns are the first column of README.md's "Out of scope" table (one or more
backquoted ``Class::test`` globs per row, the reason in the next column), so every
deselected test has its reason written beside it.
"""

import fnmatch
import os
import re

import pytest


def _patterns() -> list[str]:
    with open(os.environ["TORCH_SUITE_README"], encoding="utf-8") as readme:
        text = readme.read()
    table = text.split("## Out of scope", 1)[1].split("\n## ", 1)[0]
    patterns = []
    for line in table.splitlines():
        cells = line.split("|")
        if len(cells) > 2 and "::" in cells[1] and cells[2].strip() != "why":  # not the header
            patterns += re.findall(r"`([^`]+::[^`]+)`", cells[1])
    if not patterns:
        raise pytest.UsageError("README.md has no 'Out of scope' patterns")
    return patterns


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    patterns = _patterns()
    kept, out = [], []
    for item in items:
        name = item.nodeid.split("::", 1)[1]
        (out if any(fnmatch.fnmatchcase(name, p) for p in patterns) else kept).append(item)
    unused = [p for p in patterns
              if not any(fnmatch.fnmatchcase(i.nodeid.split("::", 1)[1], p) for i in out)]
    if unused:  # a pattern that matches nothing is a typo or a changed test file
        raise pytest.UsageError(f"out-of-scope patterns that match no test: {unused}")
    config.hook.pytest_deselected(items=out)
    items[:] = kept
    print(f"\ntorch suite scope: {len(kept)} kept, {len(out)} out of scope (deselected)")
