"""The manifest of a set of shards: kept as a public import path.

The code lives in :mod:`dataset_kit.formats.shards.manifest`.
"""

from dataset_kit.formats.shards.manifest import (
    MANIFEST_NAME,
    Manifest,
    ManifestChangedError,
    ManifestError,
    ShardInfo,
)

__all__ = ["MANIFEST_NAME", "Manifest", "ManifestChangedError", "ManifestError", "ShardInfo"]
