"""The layers, as a contract checked on every module's imports (DESIGN: one engine, many doors).

* the engine imports no front door;
* no front door imports another front door (each is a table of translations
  onto :mod:`dataset_kit.engine`), nor a private engine module;
* storage (datasets, tabular, record files, images) never imports the engine
  nor a door.

Imports inside functions count too: a lazy import is still a dependency.
The contract and its allowed crossings are also written down in
docs/architecture.rst ("Guardrails"); a test keeps the two in step.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import dataset_kit

PACKAGE = Path(dataset_kit.__file__).parent
DOORS = frozenset({"iterators", "loader", "io", "sources", "distributed", "shards", "torch"})
STORAGE = frozenset({"datasets", "tabular", "recordio", "image"})

# Known crossings that this contract does not yet forbid, each with its reason.
# Remove an entry once the crossing is gone; a new one needs a reason here.
ALLOWED = {
    # ChainerMN's ShardedIterator is a Chainer iterator: it shares Chainer's
    # attribute and serialize() façade instead of copying it.
    ("distributed", "iterators"),
    # im2rec (the record-packing tool) reads images with Chainer's iterators
    # to use worker processes; it is a tool next to the format, not storage.
    ("recordio", "iterators"),
    # MXNet keeps ImageIter in mx.image, so dataset_kit.image resolves the name
    # ImageIter lazily (a module __getattr__) from the io door, where it is built.
    ("image", "io"),
}


def layer_of(module: str) -> str | None:
    """Return the top-level subpackage of a ``dataset_kit`` module, or None."""
    parts = module.split(".")
    if parts[0] != "dataset_kit" or len(parts) < 2:
        return None
    return parts[1]


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Return ``(line, module)`` for every import in ``tree``, relative ones resolved."""
    found = []
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            # ``from dataset_kit.engine import _shm`` imports a private module too.
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def violations(root: Path, package_name: str = "dataset_kit") -> list[str]:
    """Return one line per import that breaks the contract, for every module under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).with_suffix("")
        parts = [package_name, *relative.parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        module = ".".join(parts)
        here = layer_of(module)
        tree = ast.parse(path.read_text(), str(path))
        for line, target in imported_modules(tree, module, is_package):
            there = layer_of(target)
            if there is None or there == here:
                continue
            where = f"{path.relative_to(root.parent)}:{line} imports {target}"
            if here == "engine" and there in DOORS:
                found.append(f"{where}: the engine imports a front door")
            elif here in DOORS and there in DOORS and (here, there) not in ALLOWED:
                found.append(f"{where}: a front door imports another front door")
            elif here in DOORS and there == "engine" and any(
                    p.startswith("_") for p in target.split(".")[2:]):
                found.append(f"{where}: a front door imports a private engine module")
            elif here in STORAGE and there == "engine":
                found.append(f"{where}: storage imports the engine")
            elif here in STORAGE and there in DOORS and (here, there) not in ALLOWED:
                found.append(f"{where}: storage imports a front door")
    return found


def test_the_package_keeps_the_import_contract():
    assert violations(PACKAGE) == []


@pytest.mark.parametrize("layer, source, complaint", [
    ("engine", "from dataset_kit.loader import DataLoader\n", "the engine imports a front door"),
    ("engine", "def f():\n    import dataset_kit.io.ndarray_iter\n",
     "the engine imports a front door"),
    ("loader", "from dataset_kit.io import NDArrayIter\n",
     "a front door imports another front door"),
    ("sources", "from ..loader import DataLoader\n", "a front door imports another front door"),
    ("io", "from dataset_kit.engine._engine import Engine\n",
     "a front door imports a private engine module"),
    ("io", "from dataset_kit.engine import _shm\n",
     "a front door imports a private engine module"),
    ("datasets", "from dataset_kit.engine import Engine\n", "storage imports the engine"),
    ("tabular", "from dataset_kit.loader import DataLoader\n", "storage imports a front door"),
])
def test_a_violation_fails_the_contract(tmp_path, layer, source, complaint):
    root = tmp_path / "dataset_kit"
    (root / layer).mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / layer / "__init__.py").write_text("")
    (root / layer / "bad.py").write_text(source)
    found = violations(root)
    assert len(found) == 1 and complaint in found[0] and f"{layer}/bad.py" in found[0]


def test_public_engine_imports_from_a_door_are_allowed(tmp_path):
    root = tmp_path / "dataset_kit"
    (root / "loader").mkdir(parents=True)
    (root / "loader" / "ok.py").write_text(
        "from dataset_kit.engine import Engine\nfrom dataset_kit.engine.errors import WorkerError\n"
        "from dataset_kit.datasets import TupleDataset\n")
    assert violations(root) == []


def guardrails_section() -> str:
    """The "Guardrails" section of docs/architecture.rst."""
    text = (PACKAGE.parent / "docs" / "architecture.rst").read_text(encoding="utf-8")
    start = text.index("\nGuardrails\n----------\n")
    following = re.search(r"\n[^\n]+\n-{3,}\n", text[start + 1:])
    return text[start:start + 1 + following.start()] if following else text[start:]


def test_the_architecture_page_lists_the_same_layers_and_allowed_crossings():
    section = guardrails_section()
    documented = set(re.findall(r"``(\w+)/`` → ``(\w+)/``", section))
    assert documented == ALLOWED, "docs/architecture.rst's Guardrails list the crossings " \
        "that ALLOWED permits, no more, no fewer"
    for layer in DOORS | STORAGE:
        assert f"``{layer}/``" in section, f"the Guardrails section does not name {layer}/"
