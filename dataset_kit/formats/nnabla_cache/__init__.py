"""NNabla's file cache (``cache_file_format = .npy``): the layout, its reader and its writer.

``writer`` writes a cache atomically (every chunk, then ``cache_index.csv``
last, under the directory's lock); ``reader`` opens one only after checking
every file against the others (``_npy_chunk`` checks a chunk's arrays,
``_open_chunks`` bounds the open descriptors). NNabla's data sources over a
cache are in :mod:`dataset_kit.sources`.
"""

from dataset_kit.formats.nnabla_cache.reader import CacheFormatError, CacheReader
from dataset_kit.formats.nnabla_cache.writer import write_cache

__all__ = ["CacheFormatError", "CacheReader", "write_cache"]
