"""A Chainer training script over dataset_kit's datasets and iterators (ours, for tests/peers).

It is written the way a Chainer user writes one: a ``Chain``, an optimizer, a
training and a test iterator, a ``StandardUpdater``, a ``Trainer`` with the
usual extensions (``Evaluator``, ``LogReport``, ``snapshot``), and ``--resume``
through ``chainer.serializers.load_npz``. Only the dataset and the iterators are
dataset_kit's. The data is a small synthetic set a small MLP learns in a few
epochs, so the script needs no download.

    python -m tests.peers.chainer_trainer_script --out result --epoch 3
    python -m tests.peers.chainer_trainer_script --out result --epoch 3 \\
        --resume result/snapshot_iter_10

``--stop-iteration N`` ends the run after iteration N (as if it had been
interrupted there); ``--snapshot-interval`` says how often a snapshot is
written, in iterations.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
from chainer import training
from chainer.training import extensions

import dataset_kit

N_CLASSES, N_FEATURES = 10, 64


def synthetic_digits(n: int, seed: int) -> dataset_kit.datasets.TupleDataset:
    """``n`` noisy examples of 10 classes; class k lights features 6k .. 6k + 3."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, N_CLASSES, n).astype(np.int32)
    x = rng.normal(0, 0.5, (n, N_FEATURES)).astype(np.float32)
    for k, label in enumerate(labels):
        x[k, 6 * label:6 * label + 4] += 2
    return dataset_kit.datasets.TupleDataset(x, labels)


class MLP(chainer.Chain):
    """Two layers: enough for the synthetic digits."""

    def __init__(self, n_units: int) -> None:
        super().__init__()
        with self.init_scope():
            self.l1 = L.Linear(None, n_units)
            self.l2 = L.Linear(None, N_CLASSES)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))


def make_iterator(kind: str, dataset, batch_size: int, **kwargs) -> dataset_kit.Iterator:
    """The training or test iterator, of dataset_kit's ``kind``."""
    if kind == "serial":
        return dataset_kit.iterators.SerialIterator(dataset, batch_size, **kwargs)
    if kind == "multiprocess":
        return dataset_kit.iterators.MultiprocessIterator(dataset, batch_size, n_processes=2,
                                                          **kwargs)
    raise ValueError(f"--iterator must be 'serial' or 'multiprocess', got {kind!r}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batchsize", type=int, default=32)
    parser.add_argument("--epoch", type=int, default=3)
    parser.add_argument("--unit", type=int, default=32)
    parser.add_argument("--n-train", type=int, default=200)
    parser.add_argument("--n-test", type=int, default=100)
    parser.add_argument("--iterator", default="serial", choices=["serial", "multiprocess"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="result")
    parser.add_argument("--snapshot-interval", type=int, default=5,
                        help="iterations between snapshots")
    parser.add_argument("--stop-iteration", type=int, default=None,
                        help="end after this iteration, as if interrupted there")
    parser.add_argument("--resume", default=None, help="a snapshot to resume from")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> training.Trainer:
    """Train (or resume training) and return the trainer, for a caller to inspect."""
    args = parse_args(argv)
    np.random.seed(args.seed)  # Chainer's initializers draw from numpy's global generator
    model = L.Classifier(MLP(args.unit))
    optimizer = chainer.optimizers.Adam(alpha=0.01)
    optimizer.setup(model)

    train = synthetic_digits(args.n_train, seed=args.seed)
    test = synthetic_digits(args.n_test, seed=args.seed + 1)
    train_iter = make_iterator(args.iterator, train, args.batchsize, seed=args.seed)
    test_iter = make_iterator(args.iterator, test, args.batchsize, repeat=False, shuffle=False)

    updater = training.updaters.StandardUpdater(train_iter, optimizer)
    stop = (args.epoch, "epoch") if args.stop_iteration is None else \
        (args.stop_iteration, "iteration")
    trainer = training.Trainer(updater, stop, out=args.out)
    trainer.extend(extensions.Evaluator(test_iter, model))
    trainer.extend(extensions.LogReport())
    trainer.extend(extensions.snapshot(), trigger=(args.snapshot_interval, "iteration"))
    if args.resume:
        chainer.serializers.load_npz(args.resume, trainer)
    try:
        trainer.run()
    finally:
        train_iter.finalize()
        test_iter.finalize()
    return trainer


if __name__ == "__main__":
    main()
