"""The layers, as a contract checked on every module's imports (DESIGN: one engine, many doors).

Every package and public top-level module of ``dataset_kit`` is in exactly one
layer below, and one that is in none fails the contract (it fails closed):

* the engine imports no front door and no storage;
* no front door imports another front door (each is a table of translations
  onto :mod:`dataset_kit.engine`), and a door imports of the engine only its
  public names (``engine.__all__``) and the modules ``errors`` and ``states``;
* storage (datasets, tabular, record files, images, the remote-file cache,
  shards) never imports a
  door, nor the engine, except that ``shards/`` (storage plus an order sampler
  over what it stores) may import the engine's public names as a door does;
* the base (the dataset, batch, converter, serializer and download modules, and
  the private helpers beside them) imports none of the layers above; the
  package's face (``__init__``) and the command line (``cli``) may.

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
import dataset_kit.engine

PACKAGE = Path(dataset_kit.__file__).parent
ENGINE = "engine"
DOORS = frozenset({"iterators", "loader", "io", "sources", "distributed", "torch"})
STORAGE = frozenset({"datasets", "tabular", "recordio", "image", "formats", "shards",
                     "filecache"})
# Storage that also gives an order sampler over what it stores (ShardOrderSampler).
SAMPLER_STORAGE = frozenset({"shards"})
# The modules directly under dataset_kit/ that may import any layer: the face
# re-exports the public names, the command line runs the tools, and the resume
# oracle (testing) drives any door.
FACE = frozenset({"__init__", "cli", "testing"})
# The public modules directly under dataset_kit/ beneath every layer. Private
# helper modules there (``_files.py``...) are base by their name.
BASE = frozenset({"batch", "convert", "dataset", "download", "serializers"})
# What a door (or SAMPLER_STORAGE) may import from dataset_kit.engine.
ENGINE_MODULES_FOR_DOORS = frozenset({"errors", "states"})

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
    """Return the top-level subpackage (or module) of a ``dataset_kit`` module, or None."""
    parts = module.split(".")
    if parts[0] != "dataset_kit" or len(parts) < 2:
        return None
    return parts[1]


def kind_of(layer: str) -> str | None:
    """Return the contract's name for a layer, or None if the contract does not list it."""
    if layer == ENGINE:
        return "engine"
    if layer in DOORS:
        return "door"
    if layer in STORAGE:
        return "storage"
    if layer in FACE:
        return "face"
    if layer in BASE or layer.startswith("_"):
        return "base"
    return None


def from_module(node: ast.ImportFrom, package: str) -> str:
    """Return the module a ``from ... import`` names, relative ones resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(tree: ast.AST, module: str, is_package: bool
                     ) -> list[tuple[int, str, str | None]]:
    """Return ``(line, module, name)`` for every import in ``tree``, relative ones resolved.

    ``name`` is what a ``from module import name`` takes (None for ``import module``).
    """
    found: list[tuple[int, str, str | None]] = []
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            name = from_module(node, package)
            found += [(node.lineno, name, alias.name) for alias in node.names]
    return found


def engine_import_complaint(target: str, name: str | None, public: frozenset[str]) -> str | None:
    """Why a door's import of ``target`` (``name`` from it) reaches past the engine's surface."""
    parts = target.split(".")[2:]
    if name is not None and not parts:
        parts = [name]  # ``from dataset_kit.engine import X``: X is a name or a module
        if name in public:
            return None
    if any(p.startswith("_") for p in parts):
        return "a private engine module"
    if parts and parts[0] not in ENGINE_MODULES_FOR_DOORS:
        what = "engine module" if len(parts) > 1 or name is None or parts[0] != name else "name"
        return f"the {what} {'.'.join(parts)!r}, which is not in dataset_kit.engine.__all__"
    return None


def violations(root: Path, package_name: str = "dataset_kit",
               engine_public: frozenset[str] | None = None) -> list[str]:
    """Return one line per import breaking the contract, and per unlisted layer, under ``root``."""
    public = frozenset(dataset_kit.engine.__all__) if engine_public is None else engine_public
    found = []
    for entry in sorted(root.iterdir()):
        layer = entry.stem if entry.suffix == ".py" else entry.name
        listed = entry.is_dir() and (entry / "__init__.py").exists() or entry.suffix == ".py"
        if listed and kind_of(layer) is None:
            found.append(f"{entry.relative_to(root.parent)} is in no layer of the import "
                         f"contract: add it to one in tests/test_import_contract.py")
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).with_suffix("")
        parts = [package_name, *relative.parts]
        is_package = parts[-1] == "__init__"
        if is_package and len(parts) > 2:
            parts.pop()
        module = ".".join(parts)
        here = layer_of(module)
        tree = ast.parse(path.read_text(), str(path))
        for line, target, name in imported_modules(tree, module, is_package):
            there = layer_of(target)
            if there is None or there == here or here is None:
                continue
            where = f"{path.relative_to(root.parent)}:{line} imports {target}" + (
                f".{name}" if name is not None and target.split(".")[-1] != name else "")
            mine, theirs = kind_of(here), kind_of(there)
            if mine == "engine" and theirs in ("door", "storage"):
                found.append(f"{where}: the engine imports a {theirs}")
            elif mine == "door" and theirs == "door" and (here, there) not in ALLOWED:
                found.append(f"{where}: a front door imports another front door")
            elif theirs == "engine" and (mine == "door" or here in SAMPLER_STORAGE):
                complaint = engine_import_complaint(target, name, public)
                if complaint:
                    found.append(f"{where}: a {mine} imports {complaint}")
            elif mine == "storage" and theirs == "engine":
                found.append(f"{where}: storage imports the engine")
            elif mine == "storage" and theirs == "door" and (here, there) not in ALLOWED:
                found.append(f"{where}: storage imports a front door")
            elif mine == "base" and theirs in ("engine", "door", "storage"):
                found.append(f"{where}: the base imports the {theirs} layer {there}/")
    return found


def test_the_package_keeps_the_import_contract():
    assert violations(PACKAGE) == []


@pytest.mark.parametrize("layer, source, complaint", [
    ("engine", "from dataset_kit.loader import DataLoader\n", "the engine imports a door"),
    ("engine", "def f():\n    import dataset_kit.io.ndarray_iter\n",
     "the engine imports a door"),
    ("engine", "from dataset_kit.datasets import TupleDataset\n",
     "the engine imports a storage"),
    ("loader", "from dataset_kit.io import NDArrayIter\n",
     "a front door imports another front door"),
    ("sources", "from ..loader import DataLoader\n", "a front door imports another front door"),
    ("io", "from dataset_kit.engine._engine import Engine\n",
     "a door imports a private engine module"),
    ("io", "from dataset_kit.engine import _shm\n",
     "a door imports a private engine module"),
    ("io", "from dataset_kit.engine.samplers import sampler_kind\n",
     "a door imports the engine module 'samplers'"),
    ("io", "from dataset_kit.engine import Secret\n",
     "a door imports the name 'Secret', which is not in dataset_kit.engine.__all__"),
    ("shards", "from dataset_kit.engine.protocols import BatchStops\n",
     "a storage imports the engine module 'protocols'"),
    ("datasets", "from dataset_kit.engine import Engine\n", "storage imports the engine"),
    ("tabular", "from dataset_kit.loader import DataLoader\n", "storage imports a front door"),
    ("download", "from dataset_kit.engine import Engine\n",
     "the base imports the engine layer engine/"),
])
def test_a_violation_fails_the_contract(tmp_path, layer, source, complaint):
    root = tmp_path / "dataset_kit"
    root.mkdir()
    (root / "__init__.py").write_text("")
    if layer in BASE:
        bad, shown = root / f"{layer}.py", f"dataset_kit/{layer}.py"
    else:
        (root / layer).mkdir()
        (root / layer / "__init__.py").write_text("")
        bad, shown = root / layer / "bad.py", f"{layer}/bad.py"
    bad.write_text(source)
    found = violations(root, engine_public=frozenset({"Engine"}))
    assert len(found) == 1 and complaint in found[0] and shown in found[0], found


def test_public_engine_imports_from_a_door_are_allowed(tmp_path):
    root = tmp_path / "dataset_kit"
    (root / "loader").mkdir(parents=True)
    (root / "loader" / "__init__.py").write_text("")
    (root / "loader" / "ok.py").write_text(
        "from dataset_kit.engine import Engine, states\n"
        "from dataset_kit.engine.errors import WorkerError\n"
        "from dataset_kit.engine import errors\nimport dataset_kit.engine\n"
        "from dataset_kit.datasets import TupleDataset\n")
    assert violations(root, engine_public=frozenset({"Engine"})) == []


@pytest.mark.parametrize("entry", ["newlayer/__init__.py", "helpers.py"])
def test_a_package_or_module_in_no_layer_fails_the_contract(tmp_path, entry):
    root = tmp_path / "dataset_kit"
    (root / entry).parent.mkdir(parents=True, exist_ok=True)
    (root / "__init__.py").write_text("")
    (root / entry).write_text("import numpy\n")
    found = violations(root)
    name = entry.split("/")[0] if "/" in entry else entry
    assert len(found) == 1 and f"dataset_kit/{name} is in no layer" in found[0], found


def test_every_layer_the_contract_lists_exists():
    present = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} | \
        {p.stem for p in PACKAGE.glob("*.py")}
    listed = {ENGINE} | DOORS | STORAGE | FACE | BASE
    assert listed <= present, f"listed but gone: {sorted(listed - present)}"


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

