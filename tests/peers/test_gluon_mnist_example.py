"""MXNet 1.9.1's Gluon MNIST training script, unchanged apart from its imports.

The script (tests/peers/mxnet_examples/gluon_mnist.py) trains an MLP with
``gluon.data.vision.MNIST``, ``gluon.data.DataLoader``, ``data.as_in_context(ctx)``
and ``net(data)``. Its ``gluon`` import is pointed at a module whose ``data`` is
dataset_kit's Gluon door; the network, trainer and loss stay MXNet's. MNIST is a
small synthetic set in the IDX format, written into the script's ``./data``; the
dataset root is a temporary folder and the process is offline.
"""

import gzip
import os
import re
import subprocess
import sys

import numpy as np
import pytest

if not hasattr(np, "bool"):
    np.bool = bool  # MXNet 1.9.1 still reads numpy.bool
mx = pytest.importorskip("mxnet", reason="MXNet 1.9.1 is not installed here (CI runs "
                         "tests/peers in a numpy<2 environment that has it)")

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "mxnet_examples", "gluon_mnist.py")
ROOT = os.path.dirname(os.path.dirname(HERE))
ORIGINAL_IMPORT = "from mxnet import gluon, autograd\n"
PORTED_IMPORT = "from mxnet import autograd\nimport gluon_with_dataset_kit as gluon\n"
# The ported imports: MXNet's gluon, with dataset_kit's Gluon door as gluon.data.
SHIM = '''"""mxnet.gluon, with dataset_kit.loader standing where mxnet.gluon.data stood."""
from mxnet.gluon import Trainer, loss, nn  # noqa: F401
import dataset_kit.loader as data  # noqa: F401
'''
# Runs the script as ``python mnist.py ...`` would; MXNet 1.9.1 needs numpy.bool.
RUNNER = ("import numpy, runpy, sys; numpy.bool = bool; sys.argv = ['mnist.py'] + sys.argv[1:]; "
          "runpy.run_path('mnist.py', run_name='__main__')")


def write_idx(path, array, magic):
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def write_synthetic_mnist(folder, counts=(("train", 600), ("t10k", 200))):
    """Digits a small MLP can learn: label k lights rows 2k .. 2k + 2 of the image."""
    rng = np.random.default_rng(0)
    folder.mkdir()
    for prefix, n in counts:
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 40, (n, 28, 28)).astype(np.uint8)
        for k, label in enumerate(labels):
            images[k, 2 * label + 4:2 * label + 7, 4:24] = 255
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", images, 2051)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels, 2049)


def test_the_gluon_mnist_example_trains_on_dataset_kit(tmp_path):
    original = open(SCRIPT).read()
    assert original.count(ORIGINAL_IMPORT) == 1
    ported = original.replace(ORIGINAL_IMPORT, PORTED_IMPORT)
    # Only the import line differs.
    assert ported.replace(PORTED_IMPORT, ORIGINAL_IMPORT) == original
    (tmp_path / "mnist.py").write_text(ported)
    (tmp_path / "gluon_with_dataset_kit.py").write_text(SHIM)
    write_synthetic_mnist(tmp_path / "data")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]),
               DATASET_KIT_DATASET_ROOT=str(tmp_path / "dataset_root"),
               DATASET_KIT_OFFLINE="1", MXNET_HOME=str(tmp_path / "mxnet_home"),
               OMP_NUM_THREADS="1")
    process = subprocess.Popen(
        [sys.executable, "-c", RUNNER, "--epochs", "3", "--batch-size", "20",
         "--log-interval", "10"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = process.communicate(timeout=600)  # a deadline, not a measurement
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, output
    validation = [float(v) for v in re.findall(r"Validation: accuracy=([0-9.]+)", output)]
    assert len(validation) == 3, output
    assert validation[-1] >= 0.9, output  # the loop really trained on the batches
    assert (tmp_path / "mnist.params").is_file()
    assert not (tmp_path / "dataset_root").exists()  # the files in ./data were read as they are
