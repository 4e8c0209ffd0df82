"""Record files, byte-compatible with MXNet's RecordIO (dmlc-core), and their headers.

The public package, with MXNet's names. The format itself (the record layout,
the index, the readers and writers) lives in :mod:`dataset_kit.formats.recordio`;
this package re-exports it and adds MXNet's ``MXRecordIO`` classes and ``im2rec``.
"""

from dataset_kit.formats.recordio import (
    IndexedRecordReader,
    IndexedRecordWriter,
    IRHeader,
    RecordIOError,
    RecordReader,
    RecordWriter,
    pack,
    pack_img,
    unpack,
    unpack_img,
)
from dataset_kit.recordio.mxrecordio import MXIndexedRecordIO, MXRecordIO

__all__ = ["IRHeader", "IndexedRecordReader", "IndexedRecordWriter", "MXIndexedRecordIO",
           "MXRecordIO", "RecordIOError", "RecordReader", "RecordWriter", "pack", "pack_img",
           "unpack", "unpack_img"]
