"""Chainer's tabular datasets: named columns, views, and batches fetched column by column."""

from dataset_kit.tabular.delegate_dataset import DelegateDataset
from dataset_kit.tabular.from_data import from_data
from dataset_kit.tabular.tabular_dataset import TabularDataset

__all__ = ["DelegateDataset", "TabularDataset", "from_data"]
