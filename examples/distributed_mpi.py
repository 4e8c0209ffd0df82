"""Data-parallel training over MPI: checkpoint mid-epoch on 2 ranks, resume on 3.

    mpiexec -n 2 python examples/distributed_mpi.py

Each rank trains the same softmax classifier on its share of every batch
(:class:`~dataset_kit.distributed.ShardedIterator`) and the ranks average
their gradients with ``Allreduce``. Halfway through the first epoch the ranks
save one checkpoint (the iterator's global state and the weights), then rank 0
starts 3 new ranks (``MPI.Comm.Spawn``) that resume from it and finish the
epoch. At the end, every example of the epoch must have been seen exactly once.
Needs ``pip install 'dataset_kit[mpi]'``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from mpi4py import MPI

from dataset_kit import concat_examples
from dataset_kit.datasets import TupleDataset
from dataset_kit.distributed import ShardedIterator

N_EXAMPLES, N_FEATURES, N_CLASSES, BATCH, SEED = 960, 20, 4, 16, 0
STEPS_BEFORE_CHECKPOINT = 6


def make_dataset() -> TupleDataset:
    """Every rank builds the same data from a fixed seed: nothing travels over MPI."""
    rng = np.random.default_rng(SEED)
    centers = rng.normal(0, 2, (N_CLASSES, N_FEATURES))
    labels = rng.integers(0, N_CLASSES, N_EXAMPLES)
    x = (centers[labels] + rng.normal(0, 1, (N_EXAMPLES, N_FEATURES))).astype(np.float32)
    return TupleDataset(np.arange(N_EXAMPLES), x, labels)


def step(comm: MPI.Comm, weights: np.ndarray, x: np.ndarray, t: np.ndarray,
         lr: float = 0.1) -> float:
    """One SGD step with gradients averaged over the ranks; returns the mean loss."""
    logits = x @ weights
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(len(t)), t]).mean()
    p[np.arange(len(t)), t] -= 1
    grad = x.T @ p / len(t)
    total = np.empty_like(grad)
    comm.Allreduce(grad, total, op=MPI.SUM)
    weights -= lr * total / comm.Get_size()
    return float(comm.allreduce(loss, op=MPI.SUM) / comm.Get_size())


def train(comm: MPI.Comm, it: ShardedIterator, weights: np.ndarray,
          steps: int | None) -> tuple[list[int], float]:
    """Train ``steps`` steps (None: to the end of the epoch); return the ids seen and the loss."""
    seen, loss = [], float("nan")
    while steps is None or len(seen) < steps * it.batch_size:
        ids, x, t = concat_examples(next(it))
        seen += ids.tolist()
        loss = step(comm, weights, x, t)
        if it.is_new_epoch:
            break
    return seen, loss


def first_ranks(ranks_after: int) -> None:
    comm = MPI.COMM_WORLD
    it = ShardedIterator(make_dataset(), BATCH, comm, seed=SEED)
    weights = np.zeros((N_FEATURES, N_CLASSES), np.float32)
    seen, loss = train(comm, it, weights, STEPS_BEFORE_CHECKPOINT)
    state = it.state_dict()  # the same on every rank: the global position
    everyone = comm.gather(seen, root=0)
    folder = comm.bcast(tempfile.mkdtemp(prefix="dataset_kit_mpi_") if comm.rank == 0 else None)
    if comm.rank == 0:
        np.save(Path(folder, "weights.npy"), weights)
        Path(folder, "checkpoint.json").write_text(json.dumps(
            {"iterator": state, "seen": sorted(i for ids in everyone for i in ids)}))
        print(f"{comm.size} ranks: {len(seen) * comm.size} examples, loss {loss:.4f}; "
              f"checkpoint at global position {state['door']['global_position']} of epoch "
              f"{state['door']['epoch']}", flush=True)
    it.finalize()
    comm.Barrier()
    children = comm.Spawn(sys.executable, [__file__, "--resume", folder], ranks_after, root=0)
    children.Barrier()  # wait until the resumed ranks have finished
    children.Disconnect()
    if comm.rank == 0:
        exact = Path(folder, "exact").read_text() == "True"
        shutil.rmtree(folder)
        if not exact:
            sys.exit("some example of the epoch was skipped or seen twice")


def resumed_ranks(folder: str) -> None:
    comm, parent = MPI.COMM_WORLD, MPI.Comm.Get_parent()
    checkpoint = json.loads(Path(folder, "checkpoint.json").read_text())
    weights = np.load(Path(folder, "weights.npy"))
    it = ShardedIterator(make_dataset(), BATCH, comm, seed=SEED)
    it.load_state_dict(checkpoint["iterator"])
    seen, loss = train(comm, it, weights, None)
    everyone = comm.gather(seen, root=0)
    if comm.rank == 0:
        after = [i for ids in everyone for i in ids]
        epoch = sorted(checkpoint["seen"] + after)
        print(f"{comm.size} ranks resumed: {len(after)} examples, loss {loss:.4f}", flush=True)
        exact = epoch == list(range(N_EXAMPLES))
        Path(folder, "exact").write_text(str(exact))
        print(f"every example of the epoch seen exactly once: {exact}"
              f" ({len(checkpoint['seen'])} before the checkpoint + {len(after)} after)",
              flush=True)
    it.finalize()
    parent.Barrier()
    parent.Disconnect()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks-after", type=int, default=3,
                        help="how many ranks resume from the checkpoint (default 3)")
    parser.add_argument("--resume", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.resume:
        resumed_ranks(args.resume)
    else:
        first_ranks(args.ranks_after)
