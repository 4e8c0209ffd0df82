"""NNabla's data sources and data iterators, on dataset_kit's datasets and engine.

A :class:`DataSource` is a dataset (any iterator can consume it); a
:class:`DataIterator` is the engine with NNabla's names, epoch callbacks and
``slice``; the caches keep NNabla's file layout
(:mod:`dataset_kit.formats.nnabla_cache.writer`) and add atomic writes, crash
detection and a lock.
"""

from dataset_kit.sources.cache_reader import CacheDataSource, CacheFormatError
from dataset_kit.sources.create_cache import CreateCache
from dataset_kit.sources.csv_source import CsvDataSource
from dataset_kit.sources.data_iterator import (
    DataIterator,
    data_iterator,
    data_iterator_cache,
    data_iterator_concat_datasets,
    data_iterator_csv_dataset,
    data_iterator_simple,
    slice_bounds,
)
from dataset_kit.sources.data_source import (
    ConcatDataSource,
    DataSource,
    DataSourceWithMemoryCache,
    SimpleDataSource,
    SlicedDataSource,
)
from dataset_kit.sources.file_cache import DataSourceWithFileCache
from dataset_kit.sources.loader import ResourceFileReader, download, get_data_home, load_image

__all__ = [
    "CacheDataSource",
    "CacheFormatError",
    "ConcatDataSource",
    "CreateCache",
    "CsvDataSource",
    "DataIterator",
    "DataSource",
    "DataSourceWithFileCache",
    "DataSourceWithMemoryCache",
    "ResourceFileReader",
    "SimpleDataSource",
    "SlicedDataSource",
    "data_iterator",
    "data_iterator_cache",
    "data_iterator_concat_datasets",
    "data_iterator_csv_dataset",
    "data_iterator_simple",
    "download",
    "get_data_home",
    "load_image",
    "slice_bounds",
]
