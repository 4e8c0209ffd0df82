"""docs/architecture.rst says what the code is: its state format and policies, checked here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

import dataset_kit
from dataset_kit.engine import (
    LAST_BATCH,
    Engine,
    LastBatch,
    ShuffleOrderSampler,
    _checkpoint,
    states,
)

PAGE = (Path(dataset_kit.__file__).parent.parent / "docs" / "architecture.rst").read_text(
    encoding="utf-8")


def section(title: str) -> str:
    """The text of the section ``title`` of the page (up to the next section)."""
    start = PAGE.index(f"\n{title}\n{'-' * len(title)}\n")
    following = re.search(r"\n[^\n]+\n-{3,}\n", PAGE[start + 1:])
    return PAGE[start:start + 1 + following.start()] if following else PAGE[start:]


def literals(text: str) -> list[str]:
    return re.findall(r"``([^`]+)``", text)


def test_the_engine_part_the_page_lists_is_what_an_engine_saves():
    states_text = section("States")
    paragraph = states_text[states_text.index("The engine's part:"):]
    paragraph = paragraph[:paragraph.index("\n\n")]
    documented = {name for name in literals(paragraph) if name.isidentifier()}
    saved = Engine(np.arange(5), batch_size=2, order_sampler=ShuffleOrderSampler(1)).state_dict()
    # The order sampler's own keys are named inside its entry.
    assert set(saved) <= documented
    assert documented - set(saved) <= {"kind", "state", "order"}


def test_the_envelope_the_page_lists_is_what_wrap_state_makes():
    text = section("States")
    table = text[text.index("key "):text.index("door                          ")]
    documented = {key for key in re.findall(r"^``(\w+)``", table, re.M)}
    assert documented == set(states.wrap_state("gluon", None))


def test_the_format_module_documents_the_same_engine_part():
    saved = Engine(np.arange(5), batch_size=2).state_dict()
    documented = set(re.findall(r"\b([a-z_]+)\b", _checkpoint.__doc__.split(
        "The engine's part")[1].split("Old states")[0]))
    assert set(saved) <= documented


def test_the_policies_the_page_lists_are_the_rows_of_last_batch_and_their_properties():
    text = section("Last-batch policies")
    table = text[text.index("policy            end of each epoch"):]
    rows = re.findall(r"^``(None|'\w+')``\s", table[:table.index("\n\n")], re.M)
    assert [None if row == "None" else row.strip("'") for row in rows] == list(LAST_BATCH)
    properties = {field.name for field in dataclasses.fields(LastBatch)} - {"name"}
    properties |= {name for name, value in vars(LastBatch).items() if isinstance(value, property)}
    assert properties <= set(literals(text))


def test_the_how_to_extend_dry_runs_name_files_that_exist():
    text = section("How to extend")
    root = Path(dataset_kit.__file__).parent.parent
    for name in ("dataset_kit/engine/_statemachine.py", "tests/engine/test_last_batch_policy.py",
                 "tests/test_import_contract.py", "docs/examples/epoch_loader.py",
                 "dataset_kit/formats/idx.py", "tests/formats/test_idx.py",
                 "dataset_kit/formats/__init__.py", "dataset_kit/datasets/mnist.py"):
        assert f"``{name}``" in text and (root / name).exists(), name


def test_the_file_formats_table_names_the_modules_of_formats():
    text = section("File formats")
    formats = Path(dataset_kit.__file__).parent / "formats"
    present = {p.name + ("/" if p.is_dir() else "") for p in formats.iterdir()
               if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())}
    documented = {name.split("/", 1)[1] for name in literals(text)
                  if name.startswith("formats/")}
    assert documented == present
