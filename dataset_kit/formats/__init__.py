"""File formats: one home for every format's reader and writer.

Formats are storage: they import no door and no engine.
"""

from dataset_kit.formats.idx import IdxFormatError
from dataset_kit.formats.libsvm import LibSVMFormatError
from dataset_kit.formats.parquet import (
    FileChangedError,
    FileStamp,
    ParquetFormatError,
    ParquetPart,
    ParquetReadError,
    ParquetTimeoutError,
)

__all__ = [
    "FileChangedError",
    "FileStamp",
    "IdxFormatError",
    "LibSVMFormatError",
    "ParquetFormatError",
    "ParquetPart",
    "ParquetReadError",
    "ParquetTimeoutError",
]
