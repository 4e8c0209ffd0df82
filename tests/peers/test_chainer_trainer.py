"""Chainer's Trainer takes dataset_kit iterators as they are.

Our own training script in Chainer's idiom (chainer_trainer_script.py beside this
file: a Trainer with a StandardUpdater over dataset_kit iterators, Evaluator,
LogReport and snapshot) trains, and a run interrupted mid-epoch resumes from its
snapshot with ``chainer.serializers.load_npz`` to the very parameters and log of
an uninterrupted run. Runs where Chainer is installed (CI's numpy<2 environment
for tests/peers).
"""

from __future__ import annotations

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
from tests.peers import chainer_trainer_script  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 300  # seconds; a hang fails the test instead of blocking CI
# 200 examples in batches of 32: epochs end at iterations 7, 13 and 19; iteration 10
# is in the middle of the second epoch.
N_TRAIN, BATCH, EPOCHS, INTERRUPTED_AT = 200, 32, 3, 10


def train(out: Path, kind: str, *args: str) -> training.Trainer:
    return chainer_trainer_script.main(
        ["--out", str(out), "--iterator", kind, "--n-train", str(N_TRAIN), "--batchsize",
         str(BATCH), "--epoch", str(EPOCHS), "--snapshot-interval", "5", *args])


def parameters(trainer: training.Trainer) -> dict[str, np.ndarray]:
    model = trainer.updater.get_optimizer("main").target
    return {name: param.array for name, param in model.namedparams()}


def without_times(log: list[dict]) -> list[dict]:
    return [{k: v for k, v in entry.items() if k != "elapsed_time"} for entry in log]


@pytest.mark.parametrize("kind", ["serial", "multiprocess"])
def test_a_trainer_interrupted_mid_epoch_resumes_from_its_snapshot_exactly(tmp_path, kind):
    whole = train(tmp_path / "whole", kind)
    log = whole.get_extension("LogReport").log
    # LogReport writes one entry per epoch, with the Evaluator's figures in it.
    assert [(e["epoch"], e["iteration"]) for e in log] == [(1, 7), (2, 13), (3, 19)]
    assert all("validation/main/accuracy" in entry for entry in log)
    # It trains: the loss falls and the held-out accuracy rises, well above chance.
    assert log[-1]["main/loss"] < log[0]["main/loss"] / 2
    assert log[-1]["validation/main/accuracy"] > max(0.8, log[0]["validation/main/accuracy"])

    first = train(tmp_path / "first", kind, "--stop-iteration", str(INTERRUPTED_AT))
    assert first.updater.iteration == INTERRUPTED_AT
    assert first.updater.get_iterator("main").epoch_detail == pytest.approx(10 * BATCH / N_TRAIN)
    snapshot = tmp_path / "first" / f"snapshot_iter_{INTERRUPTED_AT}"
    assert snapshot.exists(), sorted(os.listdir(tmp_path / "first"))
    with np.load(snapshot) as npz:  # the iterator's state went into the trainer's snapshot
        assert "updater/iterator:main/dataset_kit_state" in npz.files

    resumed = train(tmp_path / "resumed", kind, "--resume", str(snapshot))
    # It went on from iteration 10, with the iterator, the optimizer and the log's
    # summary of the epoch in progress as they were: it ends where the whole run ends.
    assert resumed.updater.iteration == whole.updater.iteration
    assert without_times(resumed.get_extension("LogReport").log) == without_times(log)
    ours, theirs = parameters(resumed), parameters(whole)
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    assert (resumed.updater.get_iterator("main").state_dict()
            == whole.updater.get_iterator("main").state_dict())


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
