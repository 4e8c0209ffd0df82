"""Record files' readers and writers: kept as a public import path.

The code lives in :mod:`dataset_kit.formats.recordio.record_file`.
"""

from dataset_kit.formats.recordio.record_file import (
    IndexedRecordReader,
    IndexedRecordWriter,
    RecordReader,
    RecordWriter,
)

__all__ = ["IndexedRecordReader", "IndexedRecordWriter", "RecordReader", "RecordWriter"]
