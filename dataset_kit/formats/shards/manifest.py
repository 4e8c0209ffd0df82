"""The manifest: the one file that makes a set of shards a dataset.

It is written last and atomically, so shards without a manifest (a writer
that crashed) never look complete. It pins every shard's sample count, byte
size and sha256, the columns' encodings and the shards' file format (our
layout, or Parquet: ``"shard_format": "parquet"``; a manifest without the
field is our layout, as every manifest written before Parquet shards is).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from dataset_kit._resume_errors import ResumeMismatchError
from dataset_kit.formats.shards._columns import ENCODINGS

MANIFEST_NAME = "index.json"
FORMAT = "dataset_kit.shards"
VERSION = 1
#: The shard file formats: our layout (``_layout``) and Parquet (``_parquet``).
SHARD_FORMATS = ("shards", "parquet")
_DIGEST = 8  # hex digits of each shard's sha256 that a summary keeps
_SHARD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class ManifestError(ValueError):
    """A manifest is malformed (names the manifest and the field)."""


class ManifestChangedError(ResumeMismatchError):
    """The manifest differs from the one a checkpoint was made with (names what changed).

    A kind of :class:`~dataset_kit.engine.ResumeMismatchError` (cause ``"files"``).
    """

    def __init__(self, *args: object, cause: str = "files") -> None:
        super().__init__(*args, cause=cause)


@dataclass(frozen=True)
class ShardInfo:
    """One shard's entry: file name, samples, bytes and sha256."""

    name: str
    samples: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """The columns, compression and shards of a written dataset.

    Attributes:
        columns: ``{column name: encoding}``, in sample order.
        compression: None or ``'zstd'``.
        shards: the shards, in global index order.
        shard_format: ``'shards'`` (our layout) or ``'parquet'``.
    """

    columns: dict
    compression: str | None
    shards: tuple[ShardInfo, ...]
    shard_format: str = "shards"

    @property
    def samples(self) -> int:
        """The total number of samples."""
        return sum(s.samples for s in self.shards)

    @property
    def starts(self) -> np.ndarray:
        """Global index of each shard's first sample, plus the total at the end."""
        return np.concatenate([[0], np.cumsum([s.samples for s in self.shards])]).astype(
            np.int64)

    def to_json(self) -> str:
        """The manifest's text, as written."""
        fields = {"format": FORMAT, "version": VERSION, "columns": self.columns,
                  "compression": self.compression, "samples": self.samples,
                  "shards": [vars(s) for s in self.shards]}
        if self.shard_format != "shards":
            # Our layout's manifests keep the text (and so the sha256 their
            # checkpoints recorded) they had before Parquet shards.
            fields["shard_format"] = self.shard_format
        return json.dumps(fields, indent=1)

    @property
    def sha256(self) -> str:
        """The digest of :meth:`to_json`: changes whenever anything in the manifest does."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def summary(self) -> dict:
        """A small JSON-ready description a checkpoint records to detect a changed manifest."""
        return {"sha256": self.sha256, "samples": self.samples, "shards": len(self.shards),
                "columns": self.columns, "compression": self.compression,
                "names": hashlib.sha256(" ".join(s.name for s in self.shards).encode())
                .hexdigest()[:16],
                # Eight hex digits of each shard's sha256 (a few bytes a shard):
                # enough to name the shard whose bytes changed.
                "shard_digests": "".join(s.sha256[:_DIGEST] for s in self.shards)}

    def check_unchanged(self, saved: Any) -> None:
        """Raise unless ``saved`` (a :meth:`summary`) describes this manifest.

        Raises:
            ManifestChangedError: naming each field that changed, old and new.
        """
        mine = self.summary()
        if not isinstance(saved, dict):
            raise ManifestChangedError(f"the checkpoint has no manifest summary, got {saved!r}")
        if saved.get("sha256") == mine["sha256"]:
            return
        changed = [f"{key} {saved.get(key)!r} -> {mine[key]!r}"
                   for key in ("samples", "shards", "columns", "compression", "names")
                   if saved.get(key) != mine[key]]
        what = "; ".join(changed) if changed else self._changed_shards(saved)
        raise ManifestChangedError(
            f"the shards' manifest changed since the checkpoint was written: {what} (manifest "
            f"sha256 {saved.get('sha256')} -> {mine['sha256']}); resuming would not continue "
            f"the same order")

    def _changed_shards(self, saved: dict) -> str:
        """Name the shards whose bytes changed, as far as ``saved``'s digests tell."""
        digests = saved.get("shard_digests")
        if not (isinstance(digests, str) and len(digests) == _DIGEST * len(self.shards)):
            return "the shards' contents (sha256 or sizes)"  # a summary from before digests
        changed = [f"shard {number} ({info.name}) sha256 {old}... -> {info.sha256[:_DIGEST]}..."
                   for number, info in enumerate(self.shards)
                   if (old := digests[number * _DIGEST:(number + 1) * _DIGEST])
                   != info.sha256[:_DIGEST]]
        if not changed:  # the first digits agree: another field of the manifest
            return "the shards' contents (sha256 or sizes)"
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        return "the bytes of " + ", ".join(changed[:5]) + more

    @classmethod
    def from_json(cls, text: str | bytes, where: str) -> Manifest:
        """Parse and check a manifest's text.

        Args:
            text: the file's content.
            where: the manifest's URL or path, for errors.

        Raises:
            ManifestError: naming ``where`` and the offending field.
        """
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ManifestError(f"manifest {where} is not JSON: {error}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ManifestError(f"{where} is not a dataset_kit shards manifest (format "
                                f"{data.get('format') if isinstance(data, dict) else data!r})")
        if data.get("version") != VERSION:
            raise ManifestError(f"manifest {where} has version {data.get('version')!r}; this "
                                f"dataset_kit reads version {VERSION}")
        columns = data.get("columns")
        if not (isinstance(columns, dict) and columns
                and all(v in ENCODINGS for v in columns.values())):
            raise ManifestError(f"manifest {where}: 'columns' must map names to one of "
                                f"{list(ENCODINGS)}, got {columns!r}")
        if data.get("compression") not in (None, "zstd"):
            raise ManifestError(f"manifest {where}: unknown compression "
                                f"{data.get('compression')!r}")
        shard_format = data.get("shard_format", "shards")
        if shard_format not in SHARD_FORMATS:
            raise ManifestError(f"manifest {where}: unknown shard_format {shard_format!r}; "
                                f"expected one of {list(SHARD_FORMATS)}")
        shards = []
        for number, entry in enumerate(data.get("shards") or []):
            shards.append(_shard_info(entry, f"manifest {where}, shards[{number}]"))
        if not shards:
            raise ManifestError(f"manifest {where} lists no shards")
        manifest = cls(columns, data["compression"], tuple(shards), shard_format)
        if data.get("samples") != manifest.samples:
            raise ManifestError(f"manifest {where}: 'samples' is {data.get('samples')!r}, but "
                                f"its shards hold {manifest.samples}")
        return manifest


def _shard_info(entry: Any, where: str) -> ShardInfo:
    if not isinstance(entry, dict):
        raise ManifestError(f"{where} must be an object, got {entry!r}")
    name, samples, size, sha = (entry.get(k) for k in ("name", "samples", "bytes", "sha256"))
    if not (isinstance(name, str) and _SHARD_NAME.fullmatch(name)):
        raise ManifestError(f"{where}: 'name' must be a plain file name, got {name!r}")
    for key, value in (("samples", samples), ("bytes", size)):
        if type(value) is not int or value < (1 if key == "samples" else 0):
            raise ManifestError(f"{where}: {key!r} must be a positive integer, got {value!r}")
    if not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
        raise ManifestError(f"{where}: 'sha256' must be 64 lowercase hex digits, got {sha!r}")
    return ShardInfo(name, cast(int, samples), cast(int, size), sha)  # checked above
