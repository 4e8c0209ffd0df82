"""PyTorch's data-loading vocabulary over the one engine (the ``torch`` extra).

Change ``from torch.utils.data import DataLoader`` to
``from dataset_kit.torch import DataLoader``; torch's datasets and samplers
are used as they are.
"""

try:
    import torch  # noqa: F401 - fail here, with the extra's name
except ImportError as error:  # pragma: no cover - CI installs torch
    raise ImportError("dataset_kit.torch needs PyTorch: pip install 'dataset_kit[torch]'") \
        from error

from dataset_kit.torch._collate import default_collate, default_convert
from dataset_kit.torch._worker import WorkerInfo, get_worker_info
from dataset_kit.torch.dataloader import DataLoader

__all__ = ["DataLoader", "WorkerInfo", "default_collate", "default_convert", "get_worker_info"]
