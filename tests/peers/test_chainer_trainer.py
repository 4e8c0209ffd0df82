"""Chainer's Trainer takes dataset_kit iterators as they are.

Chainer 7.8.1's ``examples/mnist/train_mnist.py`` (verbatim in chainer_examples/,
MIT) is ported the way docs/porting_chainer.rst says, imports only, and run on
a small synthetic MNIST under a temporary dataset root (offline: a missing file
is an error, never a download): once with snapshots, then with ``--resume``.
Runs where Chainer is installed (CI's numpy<2 environment for tests/peers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

chainer = pytest.importorskip("chainer", reason="Chainer 7.8.1 is not installed here "
                              "(CI runs tests/peers in a numpy<2 environment that has it)")

import chainer.links as L  # noqa: E402
from chainer import training  # noqa: E402
from chainer.training import extensions  # noqa: E402

from dataset_kit import concat_examples  # noqa: E402
from dataset_kit.datasets import TupleDataset  # noqa: E402
from dataset_kit.distributed import ShardedIterator  # noqa: E402
from dataset_kit.iterators import (  # noqa: E402
    MultiprocessIterator,
    MultithreadIterator,
    SerialIterator,
)

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("chainer_examples") / "train_mnist.py"
RUN_TIMEOUT = 300  # seconds; a hang fails the test instead of blocking CI
N_TRAIN, N_TEST, BATCH = 200, 50, 32

# The porting guide's changes: the module names, nothing else.
PORTING = [("import chainer\n", "import chainer\nimport dataset_kit\n", 1),
           ("chainer.datasets.", "dataset_kit.datasets.", 1),
           ("chainer.iterators.", "dataset_kit.iterators.", 2)]


def ported_script(path: Path) -> Path:
    text = SCRIPT.read_text()
    for old, new, count in PORTING:
        assert text.count(old) == count, old
        text = text.replace(old, new)
    path.write_text(text)
    return path


def synthetic_mnist(root: Path) -> None:
    """Write the arrays get_mnist caches, where it looks for them under ``root``."""
    rng = np.random.default_rng(0)
    directory = root / "pfnet" / "chainer" / "mnist"
    directory.mkdir(parents=True)
    for split, n in (("train", N_TRAIN), ("test", N_TEST)):
        np.savez_compressed(directory / f"{split}.npz",
                            x=rng.integers(0, 256, (n, 784), dtype=np.uint8),
                            y=rng.integers(0, 10, n, dtype=np.uint8))


def run(script: Path, cwd: Path, root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DATASET_KIT_DATASET_ROOT=str(root), DATASET_KIT_OFFLINE="1",
               MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join(
                   [str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(script), "--batchsize", str(BATCH),
                           "--unit", "16", "--frequency", "1", *args],
                          cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


def iterator_state(snapshot: Path) -> dict:
    with np.load(snapshot, allow_pickle=True) as npz:
        return json.loads(str(npz["updater/iterator:main/dataset_kit_state"]))


def test_train_mnist_with_changed_imports_trains_snapshots_and_resumes(tmp_path):
    pytest.importorskip("matplotlib", reason="train_mnist.py imports matplotlib (the test "
                        "extra installs it: pip install -e '.[test]')")
    root = tmp_path / "datasets"
    synthetic_mnist(root)
    script = ported_script(tmp_path / "train_mnist.py")

    run(script, tmp_path, root, "--epoch", "2", "--out", "first")
    # Epochs end at iterations ceil(e * 200 / 32): 7, 13, 19.
    first_snapshot = tmp_path / "first" / "snapshot_iter_13"
    assert first_snapshot.exists(), sorted(os.listdir(tmp_path / "first"))
    first_log = json.loads((tmp_path / "first" / "log").read_text())
    # (LogReport and Evaluator are also called before training: the first entry.)
    assert [(e["epoch"], e["iteration"]) for e in first_log] == [(0, 0), (1, 7), (2, 13)]
    assert all("validation/main/loss" in entry for entry in first_log)  # the Evaluator ran

    run(script, tmp_path, root, "--epoch", "3", "--out", "second",
        "--resume", str(first_snapshot))
    second_log = json.loads((tmp_path / "second" / "log").read_text())
    # The resumed trainer went on from iteration 13; it did not start over.
    assert [(e["epoch"], e["iteration"]) for e in second_log] == [(0, 0), (1, 7), (2, 13), (3, 19)]
    assert second_log[:3] == first_log

    # The training iterator continued the saved one: its order (seed) was
    # restored, and it stands where six more batches of 32 lead.
    saved, final = (iterator_state(first_snapshot),
                    iterator_state(tmp_path / "second" / "snapshot_iter_19"))
    expected = SerialIterator(TupleDataset(np.zeros(N_TRAIN)), BATCH,
                              seed=saved["engine"]["seed"])
    expected.load_state_dict(saved)
    for _ in range(6):
        next(expected)
    assert final == expected.state_dict()
    position = final["engine"]
    assert (position["epoch"], position["current_position"]) == (3, 19 * BATCH - 3 * N_TRAIN)


KINDS = {
    "serial": lambda ds, **kw: SerialIterator(ds, 4, **kw),
    "multithread": lambda ds, **kw: MultithreadIterator(ds, 4, n_threads=2, **kw),
    "multiprocess": lambda ds, **kw: MultiprocessIterator(ds, 4, n_processes=2, **kw),
    "sharded": lambda ds, **kw: ShardedIterator(ds, 4, **kw),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_updater_and_evaluator_take_each_iterator_as_it_is(kind):
    rng = np.random.default_rng(1)
    ds = TupleDataset(rng.normal(size=(10, 3)).astype(np.float32),
                      rng.integers(0, 2, 10).astype(np.int32))
    model = L.Classifier(L.Linear(3, 2))
    optimizer = chainer.optimizers.SGD()
    optimizer.setup(model)
    train, test = KINDS[kind](ds, seed=0), KINDS[kind](ds, repeat=False, shuffle=False)
    try:
        assert isinstance(train, chainer.dataset.Iterator)
        updater = training.updaters.StandardUpdater(train, optimizer)
        assert updater.get_iterator("main") is train
        for _ in range(4):
            updater.update()
        assert updater.iteration == 4 and updater.epoch == 1
        evaluator = extensions.Evaluator(test, model)
        assert evaluator.get_iterator("main") is test
        assert any(key.endswith("main/loss") for key in evaluator())
    finally:
        train.finalize()
        test.finalize()


@pytest.mark.parametrize("first", ["dataset_kit", "chainer"])
def test_either_import_order_makes_our_iterators_chainer_iterators(first):
    code = f"""
import sys
import {first}
assert ("chainer" in sys.modules) == ({first!r} == "chainer"), "dataset_kit imported Chainer"
import chainer.dataset, dataset_kit
it = dataset_kit.iterators.SerialIterator(list(range(5)), 2)
assert isinstance(it, chainer.dataset.Iterator)
assert isinstance(it, dataset_kit.Iterator)
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO),
                                                       os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr


@chainer.dataset.converter()
def host_then_device(batch, device):
    """The porting guide's converter: dataset_kit's stacking, then Chainer's copy."""
    return chainer.dataset.to_device(device, concat_examples(batch))


@chainer.dataset.converter()
def device_only(batch, device):
    return chainer.dataset.to_device(device, batch)


@pytest.mark.parametrize("converted_in_workers", [False, True])
def test_the_guides_converters_feed_the_updater_and_the_evaluator(converted_in_workers):
    rng = np.random.default_rng(2)
    ds = TupleDataset(rng.normal(size=(12, 3)).astype(np.float32),
                      rng.integers(0, 2, 12).astype(np.int32))
    model = L.Classifier(L.Linear(3, 2))
    optimizer = chainer.optimizers.SGD()
    optimizer.setup(model)
    device = chainer.get_device("@numpy")
    if converted_in_workers:
        train = MultiprocessIterator(ds, 4, n_processes=2, seed=0, converter=concat_examples)
        converter = device_only
    else:
        train, converter = SerialIterator(ds, 4, seed=0), host_then_device
    test = SerialIterator(ds, 5, repeat=False, shuffle=False)
    try:
        updater = training.updaters.StandardUpdater(train, optimizer, converter=converter,
                                                    device=device)
        for _ in range(3):
            updater.update()
        assert updater.epoch == 1
        evaluator = extensions.Evaluator(test, model, converter=host_then_device,
                                         device=device)
        assert any(key.endswith("main/accuracy") for key in evaluator())
    finally:
        train.finalize()
