"""Ready datasets and dataset combinators."""

from dataset_kit.datasets.array_dataset import ArrayDataset, SimpleDataset
from dataset_kit.datasets.cifar import (
    get_cifar10,
    get_cifar10_labels,
    get_cifar100,
    get_cifar100_labels,
)
from dataset_kit.datasets.columnar import ColumnarDataset
from dataset_kit.datasets.concatenated_dataset import ConcatenatedDataset
from dataset_kit.datasets.csv_dataset import CSVArrayDataset
from dataset_kit.datasets.gluon_dataset import Dataset
from dataset_kit.datasets.gluon_vision import CIFAR10, CIFAR100, MNIST, FashionMNIST
from dataset_kit.datasets.hf import ArrowDataset, from_hf
from dataset_kit.datasets.image_dataset import (
    ImageDataset,
    LabeledImageDataset,
    LabeledZippedImageDataset,
    MultiZippedImageDataset,
    ZippedImageDataset,
)
from dataset_kit.datasets.image_folder import ImageFolderDataset
from dataset_kit.datasets.mixture import Mixture, mix
from dataset_kit.datasets.mnist import (
    get_fashion_mnist,
    get_fashion_mnist_labels,
    get_kuzushiji_mnist,
    get_kuzushiji_mnist_labels,
    get_mnist,
)
from dataset_kit.datasets.packing import PackedDataset, pack
from dataset_kit.datasets.parquet import ParquetDataset
from dataset_kit.datasets.pickle_dataset import (
    PickleDataset,
    PickleDatasetWriter,
    open_pickle_dataset,
    open_pickle_dataset_writer,
)
from dataset_kit.datasets.ptb import get_ptb_words, get_ptb_words_vocabulary
from dataset_kit.datasets.record_dataset import ImageRecordDataset, RecordFileDataset
from dataset_kit.datasets.row_group_sampler import RowGroupOrderSampler
from dataset_kit.datasets.sub_dataset import (
    SubDataset,
    get_cross_validation_datasets,
    get_cross_validation_datasets_random,
    split_dataset,
    split_dataset_n,
    split_dataset_n_random,
    split_dataset_random,
)
from dataset_kit.datasets.svhn import get_svhn
from dataset_kit.datasets.text_dataset import TextDataset
from dataset_kit.datasets.transform_dataset import TransformDataset
from dataset_kit.datasets.tuple_dataset import DictDataset, TupleDataset

__all__ = [
    "CIFAR10",
    "CIFAR100",
    "FashionMNIST",
    "MNIST",
    "ImageRecordDataset",
    "RecordFileDataset",
    "ImageDataset",
    "ImageFolderDataset",
    "LabeledImageDataset",
    "LabeledZippedImageDataset",
    "MultiZippedImageDataset",
    "ZippedImageDataset",
    "CSVArrayDataset",
    "ParquetDataset",
    "ArrowDataset",
    "from_hf",
    "RowGroupOrderSampler",
    "PickleDataset",
    "PickleDatasetWriter",
    "TextDataset",
    "get_cifar10",
    "get_cifar10_labels",
    "get_cifar100",
    "get_cifar100_labels",
    "get_fashion_mnist",
    "get_fashion_mnist_labels",
    "get_kuzushiji_mnist",
    "get_kuzushiji_mnist_labels",
    "get_mnist",
    "get_ptb_words",
    "get_ptb_words_vocabulary",
    "get_svhn",
    "open_pickle_dataset",
    "open_pickle_dataset_writer",
    "ArrayDataset",
    "Dataset",
    "SimpleDataset",
    "ColumnarDataset",
    "ConcatenatedDataset",
    "Mixture",
    "mix",
    "PackedDataset",
    "pack",
    "DictDataset",
    "SubDataset",
    "TransformDataset",
    "TupleDataset",
    "get_cross_validation_datasets",
    "get_cross_validation_datasets_random",
    "split_dataset",
    "split_dataset_n",
    "split_dataset_n_random",
    "split_dataset_random",
]
