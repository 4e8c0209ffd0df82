"""RecordIO, byte-compatible with MXNet's (dmlc-core): the record layout, the index, the files.

``_format`` frames records, ``_index`` reads and checks ``.idx`` files,
``_source`` reads a ``.rec`` by position, ``_publish`` publishes a pair as one
unit, ``record_file`` holds the readers and writers and ``header`` MXNet's
record header. Users import these through :mod:`dataset_kit.recordio`
(MXNet's names), which re-exports them.
"""

from dataset_kit.formats.recordio._format import RecordIOError
from dataset_kit.formats.recordio.header import IRHeader, pack, pack_img, unpack, unpack_img
from dataset_kit.formats.recordio.record_file import (
    IndexedRecordReader,
    IndexedRecordWriter,
    RecordReader,
    RecordWriter,
)

__all__ = ["IRHeader", "IndexedRecordReader", "IndexedRecordWriter", "RecordIOError",
           "RecordReader", "RecordWriter", "pack", "pack_img", "unpack", "unpack_img"]
