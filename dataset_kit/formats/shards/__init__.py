"""dataset_kit's shard format: the shard file, the column encodings and the manifest.

``_layout`` is one shard file (a header, an offset table, the samples),
``_columns`` how a column's value becomes bytes and back, ``manifest`` the one
file that makes a set of shards a dataset. Users import these through
:mod:`dataset_kit.shards`, which re-exports the public names and adds the
writer, the cache, the dataset and the sampler.
"""

from dataset_kit.formats.shards._layout import ShardFormatError
from dataset_kit.formats.shards.manifest import (
    Manifest,
    ManifestChangedError,
    ManifestError,
    ShardInfo,
)

__all__ = ["Manifest", "ManifestChangedError", "ManifestError", "ShardFormatError", "ShardInfo"]
