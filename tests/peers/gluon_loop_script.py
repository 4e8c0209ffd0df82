"""A Gluon training loop over dataset_kit's DataLoader (ours, for tests/peers).

Written the way a Gluon user writes one: an ``nn.HybridSequential`` network, a
``gluon.Trainer``, ``autograd.record()`` and ``loss.backward()``, and
``gluon.data``'s names (``vision.MNIST``, ``transform_first``, ``DataLoader``) taken
from :mod:`dataset_kit.loader`. Beyond Gluon, the loader's ``state_dict()`` goes into
a checkpoint beside the network's parameters and the trainer's states, so a run
stopped in the middle of an epoch resumes with the batches it would have had next.

    python -m tests.peers.gluon_loop_script --data DIR --epochs 3
    python -m tests.peers.gluon_loop_script --data DIR --epochs 3 --stop-after 40 \\
        --checkpoint ckpt/run
    python -m tests.peers.gluon_loop_script --data DIR --epochs 3 --resume ckpt/run

``DIR`` holds MNIST's four ``.gz`` IDX files (Gluon's ``MNIST(root=DIR)``).
``--stop-after N`` writes a checkpoint after the N-th batch and ends there, as if
the run had been interrupted; ``--resume`` goes on from such a checkpoint.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

import numpy as np

if not hasattr(np, "bool"):
    np.bool = bool  # MXNet 1.9.1 still reads numpy.bool

import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

from dataset_kit import loader as data  # noqa: E402  (stands where gluon.data stood)


def to_input(image):
    """A flat float32 image in [0, 1], as the network reads it."""
    return image.astype("float32").reshape((-1,)) / 255


def make_net() -> nn.HybridSequential:
    net = nn.HybridSequential()
    net.add(nn.Dense(64, activation="relu"), nn.Dense(10))
    return net


def evaluate(net: nn.HybridSequential, val_data: data.DataLoader) -> float:
    metric = mx.metric.Accuracy()
    for images, labels in val_data:
        metric.update([mx.nd.array(labels)], [net(mx.nd.array(images))])
    return float(metric.get()[1])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the folder of MNIST's IDX files")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--thread-pool", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stop-after", type=int, default=None,
                        help="write --checkpoint after this many batches and end")
    parser.add_argument("--checkpoint", default=None, help="the checkpoint's path prefix")
    parser.add_argument("--resume", default=None, help="a checkpoint's path prefix")
    args = parser.parse_args(argv)
    if args.stop_after is not None and args.checkpoint is None:
        parser.error("--stop-after needs --checkpoint")
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    """Train (or resume training); return the history and the network, for a caller."""
    args = parse_args(argv)
    mx.random.seed(args.seed)
    net = make_net()
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.005})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    train_set = data.vision.MNIST(root=args.data, train=True).transform_first(to_input)
    val_set = data.vision.MNIST(root=args.data, train=False).transform_first(to_input)
    train_data = data.DataLoader(train_set, args.batch_size,
                                 shuffle=True, seed=args.seed, num_workers=args.num_workers,
                                 thread_pool=args.thread_pool)
    val_data = data.DataLoader(val_set, args.batch_size)

    # The loop's own bookkeeping, checkpointed with the loader's position.
    progress = {"epoch": 0, "batches": 0, "loss_sum": 0.0, "examples": 0, "history": []}
    if args.resume:
        net.load_parameters(args.resume + ".params", ctx=mx.cpu())
        trainer.load_states(args.resume + ".states")
        with open(args.resume + ".json") as f:
            saved = json.load(f)
        train_data.load_state_dict(saved.pop("loader"))
        progress = saved
    try:
        while progress["epoch"] < args.epochs:
            # After a resume the first iter() finishes the epoch in progress.
            for images, labels in train_data:
                images, labels = mx.nd.array(images), mx.nd.array(labels)
                with autograd.record():
                    loss = loss_fn(net(images), labels)
                loss.backward()
                trainer.step(images.shape[0])
                progress["loss_sum"] += float(loss.sum().asscalar())
                progress["examples"] += images.shape[0]
                progress["batches"] += 1
                if progress["batches"] == args.stop_after:
                    net.save_parameters(args.checkpoint + ".params")
                    trainer.save_states(args.checkpoint + ".states")
                    with open(args.checkpoint + ".json", "w") as f:
                        json.dump(dict(progress, loader=train_data.state_dict()), f)
                    return {"history": progress["history"], "net": net, "stopped": True}
            progress["history"].append({
                "epoch": progress["epoch"],
                "loss": progress["loss_sum"] / progress["examples"],
                "val_accuracy": evaluate(net, val_data)})
            progress.update(epoch=progress["epoch"] + 1, loss_sum=0.0, examples=0)
    finally:
        train_data.close()
        val_data.close()
    return {"history": progress["history"], "net": net, "stopped": False}


if __name__ == "__main__":
    for entry in main()["history"]:
        print(f"epoch {entry['epoch']}: loss {entry['loss']:.4f}, "
              f"validation accuracy {entry['val_accuracy']:.4f}")
