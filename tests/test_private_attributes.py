"""No module reads another module's private attributes (STYLE: a module owns its state).

Walks every module's AST: ``obj._name`` where ``obj`` is not ``self`` or
``cls`` is allowed only where ``_name`` is the module's own, that is, a class
of the same module defines it (a method, a class attribute, a ``__slots__``
entry) or the module assigns it on ``self``/``cls``. A read of another
object of the same class (``other._cache`` in ``__copy__``) is therefore
allowed; a read of another module's private function or class attribute
(``mnist._read_idx``, ``ExampleBatch._trusted``) is not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dataset_kit

PACKAGE = Path(dataset_kit.__file__).parent

# The public API of namedtuples, whose names start with an underscore.
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})

# Other projects' private names that we must use, each with its reason.
FOREIGN = {
    # A forked worker leaves with os._exit: the documented way for a child
    # that must not run its parent's atexit handlers or flush its buffers.
    ("engine/_process/worker.py", "os._exit"),
    # argparse names its sub-parsers' type only privately (for a type hint).
    ("shards/_cli.py", "argparse._SubParsersAction"),
    # NNabla's DataSource protocol: a user's subclass defines _get_data and
    # _rng, and NNabla's iterators read them from outside, as we must.
    ("sources/data_iterator.py", "data_source._rng"),
    ("sources/file_cache.py", "source._get_data"),
    # PyTorch's worker state, which get_worker_info() reads: the torch door
    # sets it in its workers so that a user's code sees torch's own answer.
    ("torch/_fetch.py", "_torch_worker._worker_info"),
    ("torch/_worker.py", "_torch_worker._worker_info"),
    ("torch/_worker.py", "_torch_worker._generate_state"),
    # An iterable stream's worker sets it too, for the stream it is reading.
    ("torch/_stream.py", "_torch_worker._worker_info"),
}


def owned_names(tree: ast.AST) -> set[str]:
    """The private names a module owns: defined in its classes or assigned on self/cls."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.Assign):
                    names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
                    if any(isinstance(t, ast.Name) and t.id == "__slots__"
                           for t in item.targets):
                        names |= {c.value for c in ast.walk(item.value)
                                  if isinstance(c, ast.Constant) and isinstance(c.value, str)}
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
    return names


def private_reads(root: Path) -> list[str]:
    """One line per ``obj._name`` under ``root`` that reads another module's private name."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        own = owned_names(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr in own or node.attr in NAMEDTUPLE_API:
                continue
            text = ast.unparse(node)
            if (relative, text) not in FOREIGN:
                found.append(f"{relative}:{node.lineno}: {text}")
    return found


def test_no_module_reads_another_modules_private_attributes():
    assert private_reads(PACKAGE) == []


def test_every_foreign_exception_is_still_needed():
    needed = set()
    for relative, text in FOREIGN:
        source = (PACKAGE / relative).read_text(encoding="utf-8")
        if text in source:
            needed.add((relative, text))
    assert needed == FOREIGN


def test_a_read_of_another_modules_private_name_is_found(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "owner.py").write_text(
        "class Owner:\n    def __init__(self):\n        self._state = 1\n\n"
        "    def same(self, other):\n        return other._state\n")
    (root / "reader.py").write_text(
        "from pkg.owner import Owner\n\ndef peek(owner):\n    return owner._state\n\n"
        "def point(position):\n    return position._replace(epoch=1)\n")
    assert private_reads(root) == ["reader.py:4: owner._state"]
