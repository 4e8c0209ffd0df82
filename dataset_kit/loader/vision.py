"""``gluon.data.vision``'s datasets, for code that writes ``data.vision.MNIST(...)``."""

from dataset_kit.datasets.gluon_vision import CIFAR10, CIFAR100, MNIST, FashionMNIST
from dataset_kit.datasets.image_folder import ImageFolderDataset
from dataset_kit.datasets.record_dataset import ImageRecordDataset

__all__ = ["CIFAR10", "CIFAR100", "FashionMNIST", "ImageFolderDataset", "ImageRecordDataset",
           "MNIST"]
