"""MXNet's DataIter vocabulary (NDArrayIter, CSVIter, DataBatch with pad) over dataset_kit's engine."""

from dataset_kit.io.combinators import PrefetchingIter, ResizeIter
from dataset_kit.io.csv_iter import CSVIter
from dataset_kit.io.data_iter import DataBatch, DataDesc, DataIter
from dataset_kit.io.image_record_iter import ImageRecordIter
from dataset_kit.io.ndarray_iter import NDArrayIter

__all__ = ["CSVIter", "DataBatch", "DataDesc", "DataIter", "ImageRecordIter", "NDArrayIter",
           "PrefetchingIter", "ResizeIter"]
