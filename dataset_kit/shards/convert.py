"""Sources that ``dataset-kit shards write`` converts: datasets, im2rec lists, WebDataset tars.

Each source is an iterator of sample dicts plus the columns' encodings, so
:class:`ShardWriter` writes them all the same way.
"""

from __future__ import annotations

import importlib
import os
import tarfile
from collections.abc import Iterator
from typing import Any

import numpy as np

_IMAGE_EXTENSIONS = {".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png"}


def encoding_of(value: Any) -> str:
    """The column encoding that keeps ``value`` as it is.

    Raises:
        TypeError: for a value no encoding holds.
    """
    if isinstance(value, (bool, int, np.integer)) and not isinstance(value, bool):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes"
    if isinstance(value, np.ndarray):
        return "ndarray"
    if isinstance(value, (dict, list, bool)) or value is None:
        return "json"
    raise TypeError(f"no shard column encoding holds a {type(value).__name__}")


def as_dict(example: Any) -> dict:
    """An example as a sample dict: dicts stay, a tuple's items become ``'0'``, ``'1'``, ..."""
    if isinstance(example, dict):
        return {str(k): v for k, v in example.items()}
    if isinstance(example, tuple):
        return {str(i): v for i, v in enumerate(example)}
    return {"0": example}


def from_dataset(dataset: Any) -> tuple[dict, int, Iterator[dict]]:
    """``(columns, length, samples)`` of any dataset_kit dataset (encodings from example 0)."""
    length = len(dataset)
    if not length:
        raise ValueError("the dataset is empty; there is nothing to write")
    columns = {k: encoding_of(v) for k, v in as_dict(dataset[0]).items()}
    return columns, length, (as_dict(dataset[i]) for i in range(length))


def load_dataset(spec: str) -> Any:
    """Import ``module:name`` and return it (called when it is a callable class or function).

    Raises:
        ValueError: if ``spec`` is not ``module:name``.
    """
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"a dataset source must be 'module:name', got {spec!r}")
    value = getattr(importlib.import_module(module), name)
    return value() if callable(value) and not hasattr(value, "__getitem__") else value


def is_parquet(source: str) -> bool:
    """Whether ``source`` names Parquet input: a ``.parquet`` file, a glob, a URL, or a
    folder that holds Parquet files and no ``.tar`` shard."""
    if "://" in source or any(c in source for c in "*?[") or \
            source.endswith((".parquet", ".parq", ".pq")):
        return True
    if not os.path.isdir(source):
        return False
    names = [n for _, _, files in os.walk(source) for n in files]
    return not any(n.endswith(".tar") for n in names) and \
        any(n.endswith((".parquet", ".parq", ".pq")) for n in names)


def from_parquet(source: str, storage_options: dict | None = None
                 ) -> tuple[dict, int, Iterator[dict]]:
    """Parquet files (see :class:`~dataset_kit.datasets.ParquetDataset`): one column per column.

    Rows are read a row group at a time; numbers and strings keep their
    encodings, arrays (fixed-size and token lists) become ``ndarray``,
    structs and other lists ``json``.
    """
    from dataset_kit.datasets import ParquetDataset

    dataset = ParquetDataset(source, storage_options=storage_options)
    starts = dataset.row_group_starts.tolist()
    columns, length, rows = from_dataset(dataset)

    def samples() -> Iterator[dict]:
        for first, end in zip(starts[:-1], starts[1:]):
            if end > first:
                yield from (as_dict(row) for row in dataset[first:end])
    del rows  # from_dataset's rows go one at a time; these go a row group at a time
    return columns, length, samples()


def from_lst(path: str, root: str) -> tuple[dict, int, Iterator[dict]]:
    """An im2rec ``.lst``: columns ``image`` (encoded bytes, as stored) and ``label`` (floats).

    The image column's encoding comes from every file's extension: ``jpeg``
    or ``png`` when all are one, ``image`` (each sample its own format) when
    JPEG and PNG mix, ``bytes`` when any other file is listed.
    """
    from dataset_kit.recordio.im2rec import read_list

    items = list(read_list(path))
    if not items:
        raise ValueError(f"{path} lists no image")
    kinds = {_IMAGE_EXTENSIONS.get(os.path.splitext(item[1])[1].lower(), "bytes")
             for item in items}
    kind = kinds.pop() if len(kinds) == 1 else "bytes" if "bytes" in kinds else "image"

    def samples() -> Iterator[dict]:
        for _, relative, *labels in items:
            with open(os.path.join(root, relative), "rb") as f:
                yield {"image": f.read(), "label": [float(x) for x in labels]}
    return {"image": kind, "label": "json"}, len(items), samples()


def from_webdataset(folder: str) -> tuple[dict, int | None, Iterator[dict]]:
    """A folder of WebDataset ``.tar`` shards: one column per file extension.

    Images stay encoded (``jpeg``/``png``); ``.json`` files are parsed;
    ``.cls``/``.txt`` become strings; anything else bytes.
    """
    tars = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".tar"))
    if not tars:
        raise FileNotFoundError(f"no .tar shards in {folder}")
    first = next(_tar_samples(tars[:1]))
    columns = {key: _webdataset_encoding(key) for key in first}
    return columns, None, (_decoded(s) for s in _tar_samples(tars))


def _webdataset_encoding(extension: str) -> str:
    if "." + extension in _IMAGE_EXTENSIONS:
        return _IMAGE_EXTENSIONS["." + extension]
    return {"json": "json", "cls": "str", "txt": "str"}.get(extension, "bytes")


def _decoded(sample: dict) -> dict:
    import json
    out = {}
    for key, data in sample.items():
        encoding = _webdataset_encoding(key)
        out[key] = (json.loads(data) if encoding == "json" else data.decode()
                    if encoding == "str" else data)
    return out


def _tar_samples(tars: list[str]) -> Iterator[dict]:
    """Consecutive members with one key (name up to the first dot) form a sample."""
    for path in tars:
        key, sample = None, {}
        with tarfile.open(path) as tar:
            for member in tar:
                if not member.isfile():
                    continue
                base = os.path.basename(member.name)
                stem, _, extension = base.partition(".")
                name = os.path.join(os.path.dirname(member.name), stem)
                if key is not None and name != key:
                    yield sample
                    sample = {}
                key = name
                content = tar.extractfile(member)
                assert content is not None  # a regular file (checked above) has content
                sample[extension] = content.read()
        if sample:
            yield sample
