"""Record files, byte-compatible with MXNet's RecordIO (dmlc-core), and their headers."""

from dataset_kit.recordio._format import RecordIOError
from dataset_kit.recordio.header import IRHeader, pack, pack_img, unpack, unpack_img
from dataset_kit.recordio.mxrecordio import MXIndexedRecordIO, MXRecordIO
from dataset_kit.recordio.record_file import (
    IndexedRecordReader,
    IndexedRecordWriter,
    RecordReader,
    RecordWriter,
)

__all__ = ["IRHeader", "IndexedRecordReader", "IndexedRecordWriter", "MXIndexedRecordIO",
           "MXRecordIO", "RecordIOError", "RecordReader", "RecordWriter", "pack", "pack_img",
           "unpack", "unpack_img"]
