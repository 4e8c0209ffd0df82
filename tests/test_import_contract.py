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
STORAGE = frozenset({"datasets", "tabular", "recordio", "image", "formats"})

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


def from_module(node: ast.ImportFrom, package: str) -> str:
    """Return the module a ``from ... import`` names, relative ones resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Return ``(line, module)`` for every import in ``tree``, relative ones resolved."""
    found = []
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            name = from_module(node, package)
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


# -- the dataset contract: the base class sits below everything built on it --

# Modules the base class (dataset.py) and the batch (batch.py) may import: the
# private helpers beneath them. Everything in datasets/ and tabular/, every door
# and the engine are built on them, never the other way round.
BASE_MODULES = ("dataset_kit.dataset", "dataset_kit.batch")
BENEATH_BASE = frozenset({"dataset_kit._example_context", "dataset_kit._gather",
                          "dataset_kit.batch"})

# Import cycles this contract allows, by the package they stay inside, with reasons.
ALLOWED_CYCLES = {
    # Chainer's layout: TabularDataset's view methods (slice, concat, join,
    # transform...) import their combinator modules lazily, and each combinator
    # subclasses TabularDataset. The cycle never leaves tabular/.
    "dataset_kit.tabular",
}


def module_graph(root: Path, package_name: str = "dataset_kit") -> dict[str, set[str]]:
    """Return each module's imports of other modules of the package (lazy ones included).

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a
    module; a module's own parent packages are not counted (Python imports
    them before the module in any case).
    """
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package_name, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = (path, is_package)
    graph = {}
    for module, (path, is_package) in modules.items():
        package = module if is_package else module.rsplit(".", 1)[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                name = from_module(node, package)
                names = [f"{name}.{alias.name}" if f"{name}.{alias.name}" in modules else name
                         for alias in node.names]
            else:
                continue
            for target in names:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module and not module.startswith(target + "."):
                    targets.add(target)
        graph[module] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the import cycles of ``graph`` (its strongly connected components of 2+ modules)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:  # Tarjan's algorithm; the graph is a few hundred nodes
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


def dataset_contract_violations(graph: dict[str, set[str]]) -> list[str]:
    """Return one line per breach of the dataset contract's import rules."""
    found = []
    for base in BASE_MODULES:
        for target in sorted(graph.get(base, set()) - BENEATH_BASE - {base}):
            found.append(f"{base} imports {target}: the base class imports what is built on it")
    for cycle in import_cycles(graph):
        if not any(all(m.startswith(p + ".") for m in cycle) for p in ALLOWED_CYCLES):
            found.append(f"import cycle: {' <-> '.join(cycle)}")
    return found


def test_the_dataset_base_imports_nothing_built_on_it_and_there_is_no_cycle():
    assert dataset_contract_violations(module_graph(PACKAGE)) == []


@pytest.mark.parametrize("files, complaint", [
    ({"dataset.py": "def f():\n    from dataset_kit.datasets import gluon_ops\n",
      "datasets/gluon_ops.py": "from dataset_kit.dataset import DatasetMixin\n"},
     "dataset_kit.dataset imports dataset_kit.datasets.gluon_ops"),
    ({"datasets/a.py": "from dataset_kit.datasets.b import B\n",
      "datasets/b.py": "def f():\n    from dataset_kit.datasets import a\n"},
     "import cycle: dataset_kit.datasets.a <-> dataset_kit.datasets.b"),
    ({"batch.py": "from dataset_kit.engine import Engine\n"},
     "dataset_kit.batch imports dataset_kit.engine"),
])
def test_a_breach_of_the_dataset_contract_is_found(tmp_path, files, complaint):
    root = tmp_path / "dataset_kit"
    for name in ("__init__.py", "datasets/__init__.py", "engine/__init__.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    for name, source in files.items():
        (root / name).write_text(source)
    found = dataset_contract_violations(module_graph(root))
    assert found and complaint in found[0], found

