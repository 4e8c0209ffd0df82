"""Swap PyTorch's DataLoader names for dataset_kit.torch's, in every process of a run.

run_torch_suite.sh puts this folder on PYTHONPATH, so Python imports this module at
start-up in the test process and in every process it starts (spawned and forkserver
workers, ``subprocess`` children). With ``TORCH_SUITE_SWAP=1`` it replaces
``DataLoader``, ``get_worker_info``, ``default_collate`` and ``default_convert`` in
every module of ``torch.utils.data`` that holds PyTorch's own object (the test file
reaches them as ``torch.utils.data.X``, ``torch.utils.data._utils.collate.X`` and
through ``from torch.utils.data import X``), so the tests run against dataset_kit's;
PyTorch's samplers and datasets stay PyTorch's. Without it (the ``pytorch`` mode, the
baseline) it does nothing.
"""

import os
import sys

_NAMES = ("DataLoader", "get_worker_info", "default_collate", "default_convert")


def _swap() -> None:
    import torch.utils.data
    import torch.utils.data.dataloader  # noqa: F401 - holds the names too

    import dataset_kit.torch as ours

    originals = {name: getattr(torch.utils.data, name) for name in _NAMES}
    swapped = []
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("torch.utils.data"):
            continue
        for name, original in originals.items():
            # Only PyTorch's own object is replaced, never a same-named other thing.
            if vars(module).get(name) is original:
                setattr(module, name, getattr(ours, name))
                swapped.append(f"{module_name}.{name}")
    if os.environ.get("TORCH_SUITE_VERBOSE"):
        print(f"torch suite (pid {os.getpid()}): swapped {', '.join(swapped)}",
              file=sys.stderr)


if os.environ.get("TORCH_SUITE_SWAP") == "1":
    _swap()
