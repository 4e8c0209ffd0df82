"""The Iterator base class: Python's iteration protocol plus resource handling.

Where Chainer is installed, :class:`Iterator` becomes a subclass of
``chainer.dataset.Iterator`` the moment Chainer defines that class (or at
once, if Chainer was imported first). Chainer's ``StandardUpdater`` and
``Evaluator`` test ``isinstance(iterator, chainer.dataset.Iterator)`` and
treat anything else as a dict of iterators; that class is a plain class, so
ABC registration cannot satisfy the test, and only real inheritance does.
dataset_kit never imports Chainer itself (importing it costs seconds): a
finder on :data:`sys.meta_path` waits for ``chainer.dataset.iterator`` and
then rebases this class, and every iterator class inherits the new base.
"""

from __future__ import annotations

import importlib.abc
import sys
import warnings
from types import ModuleType
from typing import Any

_CHAINER_MODULE = "chainer.dataset.iterator"


class _Root:
    """Iterator's base until Chainer's Iterator replaces it.

    CPython refuses to reassign ``__bases__`` of a class whose only base is
    ``object``; this empty class makes the reassignment possible.
    """


class Iterator(_Root):
    """Base class of dataset iterators.

    An iterator yields batches, keeps epoch bookkeeping, and holds resources
    (threads, processes, shared memory) that :meth:`finalize` releases.
    Iterators are context managers: leaving the ``with`` block finalizes.
    Where Chainer is installed, every dataset_kit iterator is also a
    ``chainer.dataset.Iterator``, so Chainer's updaters and extensions take it.
    """

    def __iter__(self) -> Iterator:
        return self

    def __next__(self) -> Any:
        raise NotImplementedError

    def next(self) -> Any:
        """Return the next batch (Chainer's spelling of ``next(it)``)."""
        return self.__next__()

    def finalize(self) -> None:
        """Release the iterator's resources. Safe to call more than once."""

    def serialize(self, serializer: Any) -> None:
        """Save or load the iterator's state through Chainer's serializer protocol."""

    def __enter__(self) -> Iterator:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.finalize()

    def __del__(self) -> None:
        # Overrides Chainer's __del__ (which calls finalize()) once Chainer's
        # Iterator is the base: workers and shared memory are released by
        # weakref finalizers, which also cope with an iterator whose
        # constructor raised, where finalize() would fail on missing state.
        pass


def _adopt_chainer_base(module: ModuleType) -> None:
    """Make ``module.Iterator`` (Chainer's) the base of :class:`Iterator`."""
    base = getattr(module, "Iterator", None)
    if not isinstance(base, type) or base in Iterator.__mro__:
        return
    try:
        Iterator.__bases__ = (base,)
    except TypeError as error:  # never break the user's import of Chainer
        warnings.warn(f"dataset_kit iterators cannot become {base.__module__}.Iterator "
                      f"subclasses ({error}); Chainer's updaters will not take them",
                      RuntimeWarning, stacklevel=2)


class _ChainerWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of ``chainer.dataset.iterator``."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _CHAINER_MODULE:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _AdoptingLoader(spec.loader, self)
                return spec
        return None


class _AdoptingLoader(importlib.abc.Loader):
    """Chainer's own loader, followed by :func:`_adopt_chainer_base`."""

    def __init__(self, loader: Any, watcher: _ChainerWatcher) -> None:
        self._loader, self._watcher = loader, watcher

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        if self._watcher in sys.meta_path:
            sys.meta_path.remove(self._watcher)
        _adopt_chainer_base(module)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_data, is_package, ...: inspect and linecache use them.
        loader = self.__dict__.get("_loader")
        if loader is None:
            raise AttributeError(name)
        return getattr(loader, name)


def _follow_chainer() -> None:
    module = sys.modules.get(_CHAINER_MODULE)
    if module is not None:
        _adopt_chainer_base(module)
    elif not any(isinstance(finder, _ChainerWatcher) for finder in sys.meta_path):
        sys.meta_path.insert(0, _ChainerWatcher())


_follow_chainer()
