"""TextDataset: one example per line of one or more parallel text files, by offset."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from dataset_kit.dataset import DatasetMixin


def _per_file(name: str, value: Any, n: int) -> list:
    if value is None or isinstance(value, str):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise ValueError(f"{name} gives {len(value)} values for {n} text files; give one per "
                         f"file or one for all")
    return value


class TextDataset(DatasetMixin):
    """Line ``i`` of a text file, or a tuple of line ``i`` of several parallel files.

    The files are scanned once to index where each line starts; examples are
    then read by seeking, so the corpus is never held in memory. Lines keep
    their line ending, as Chainer's do. Files are reopened in each process
    (fork or spawn), never shared; pickling keeps paths and the index.

    Args:
        paths: a path or a list of paths (parallel files, one line each per example).
        encoding: one encoding, or one per file.
        errors: one ``errors`` policy, or one per file.
        newline: one ``newline`` mode, or one per file.
        filter_func: keeps line ``i`` when ``filter_func(*lines_i)`` is true.

    Raises:
        ValueError: if no path is given, an option's length does not match,
            or the files have different numbers of lines.
        FileNotFoundError: if a file does not exist.
    """

    def __init__(self, paths: str | os.PathLike | Sequence[str | os.PathLike],
                 encoding: Any = None, errors: Any = None, newline: Any = None,
                 filter_func: Callable[..., bool] | None = None) -> None:
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        if not paths:
            raise ValueError("TextDataset needs at least one text file, got none")
        self._paths = [os.fspath(p) for p in paths]
        n = len(self._paths)
        self._options = list(zip(_per_file("encoding", encoding, n),
                                 _per_file("errors", errors, n),
                                 _per_file("newline", newline, n)))
        self._closed = False
        self._pid: int | None = None
        self._files: list | None = None
        self._lock = threading.Lock()
        self._bounds, self._lines = self._index(filter_func)

    def _index(self, filter_func: Callable[..., bool] | None) -> tuple[list, list]:
        bounds: list[list] = [[] for _ in self._paths]
        lines, number = [], 0
        files = self._fps
        while True:
            positions = [f.tell() for f in files]
            texts = [f.readline() for f in files]
            if not all(texts):
                if any(texts):
                    raise ValueError(f"text files {self._paths} have different numbers of lines")
                break
            for k, position in enumerate(positions):
                bounds[k].append(position)
            if filter_func is None or filter_func(*texts):
                lines.append(number)
            number += 1
        return bounds, lines

    @property
    def _fps(self) -> list:
        """This process's open files (opened on first use and after a fork)."""
        if self._pid != os.getpid():
            if self._closed:
                raise ValueError(f"I/O on a closed TextDataset ({self._paths})")
            self._files = [open(path, encoding=enc, errors=err, newline=nl)
                           for path, (enc, err, nl) in zip(self._paths, self._options)]
            self._pid = os.getpid()
        # _pid and _files are set together, and both cleared when pickled.
        assert self._files is not None
        return self._files

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_files", "_lock")} | {
            "_pid": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _files=None, _lock=threading.Lock())

    def __len__(self) -> int:
        return len(self._lines)

    def close(self) -> None:
        """Close the files; the first error is raised after all were tried."""
        # The closed files stay in place: reading them is a ValueError, as in Chainer.
        files, self._closed = self._files or [], True
        error = None
        for f in files:
            try:
                f.close()
            except Exception as exc:  # noqa: BLE001 - close the others, then report
                error = error or exc
        if error is not None:
            raise error

    def get_example(self, i: int) -> str | tuple[str, ...]:
        number = self._lines[i]
        with self._lock:
            files = self._fps
            for k, f in enumerate(files):
                f.seek(self._bounds[k][number])
            texts = [f.readline() for f in files]
        return texts[0] if len(texts) == 1 else tuple(texts)
