"""MXNet's DataIter vocabulary (NDArrayIter, CSVIter, DataBatch with pad) over the engine."""

from dataset_kit._mxnet_arrays import MXArray
from dataset_kit.io.combinators import PrefetchingIter, ResizeIter
from dataset_kit.io.csr import CSRMatrix
from dataset_kit.io.csv_iter import CSVIter
from dataset_kit.io.data_iter import DataBatch, DataDesc, DataIter
from dataset_kit.io.errors import MXNetError
from dataset_kit.io.image_iter import ImageIter
from dataset_kit.io.image_record_iter import ImageRecordIter
from dataset_kit.io.libsvm_iter import LibSVMIter
from dataset_kit.io.mnist_iter import MNISTIter
from dataset_kit.io.ndarray_iter import NDArrayIter

__all__ = ["CSRMatrix", "CSVIter", "DataBatch", "DataDesc", "DataIter", "ImageIter",
           "ImageRecordIter", "LibSVMIter", "MNISTIter", "MXArray", "MXNetError", "NDArrayIter",
           "PrefetchingIter", "ResizeIter"]
