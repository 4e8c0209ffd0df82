"""One rank of a real multi-process run (mpiexec, or one process per rank for torch).

Run by test_mpi.py and test_torch.py as
``python tests/distributed/rank_main.py ENGINE SCENARIO OUT [key=value ...]``.
Each rank runs a scenario on a ShardedIterator; what the ranks saw is
gathered to rank 0, which writes it as JSON to OUT (errors: OUT.rank<N>).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from dataset_kit.datasets import TupleDataset  # noqa: E402
from dataset_kit.distributed import DistributedError, ShardedIterator  # noqa: E402


def _connect(engine: str):
    if engine == "mpi":
        return "mpi"
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get(
        "DATASET_KIT_TEST_TIMEOUT", "30"))))
    return "torch"


def _ids(batch) -> list[int]:
    # A TupleDataset's example, or a StreamingDataset's (a dict whose "y" is its index).
    return [int(example["y"] if isinstance(example, dict) else example[0])
            for example in batch]


def _rest_of_epoch(it, pads: list | None = None) -> list[list[int]]:
    batches = []
    while True:
        batches.append(_ids(next(it)))
        if pads is not None:
            pads.append(it.last_pad)
        if it.is_new_epoch:
            return batches


def _iterator(comm, options: dict) -> ShardedIterator:
    n = int(options["n"]) + (int(options.get("extra_per_rank", 0)) * _rank(comm))
    ds = TupleDataset(np.arange(n), np.arange(n) * 0.5)
    workers = {}
    if options.get("workers") == "threads":
        workers = {"n_threads": 2}
    elif options.get("workers") == "processes":
        workers = {"n_processes": 2}
    if "policy" in options:  # else the iterator's default
        workers["last_batch"] = options["policy"]
    if "shards" in options:  # shards written by the test: a shard-aware global order
        from dataset_kit.shards import ShardOrderSampler, StreamingDataset

        ds = StreamingDataset(options["shards"],
                              local=Path(options["shards"]).with_name(f"cache{_rank(comm)}"))
        workers["order_sampler"] = ShardOrderSampler(ds, 2, seed=int(options["sampler_seed"]))
    return ShardedIterator(ds, int(options["batch"]), comm, seed=int(options.get("seed", 7)),
                           **workers)


def _rank(comm) -> int:
    if comm == "mpi":
        from mpi4py import MPI

        return MPI.COMM_WORLD.Get_rank()
    import torch.distributed as dist

    return dist.get_rank()


def _scatter(comm, rank: int, out: str, options: dict) -> None:
    """Rank 0 alone holds the arrays (the others pass None): the data travel."""
    from dataset_kit.distributed import as_communicator, scatter_dataset

    n = int(options["n"])
    data = TupleDataset(np.arange(n), np.arange(n) * 0.5) if rank == 0 else None
    sub = scatter_dataset(data, comm, shuffle=True, seed=int(options["seed"]))
    mine = [[int(x), float(y)] for x, y in (sub[i] for i in range(len(sub)))]
    gathered = as_communicator(comm).allgather(mine)
    if rank == 0:
        Path(out).write_text(json.dumps({"ranks": gathered}))


def main(engine: str, scenario: str, out: str, options: dict) -> None:
    comm = _connect(engine)
    rank = _rank(comm)
    if scenario == "scatter":
        _scatter(comm, rank, out, options)
        return
    try:
        it = _iterator(comm, options)
    except DistributedError as error:
        Path(f"{out}.rank{rank}").write_text(str(error))
        return
    report: dict = {}
    if scenario == "epochs":
        report["epochs"] = [_rest_of_epoch(it) for _ in range(int(options.get("epochs", 2)))]
    elif scenario == "save":
        report["seen"] = [_ids(next(it)) for _ in range(int(options["steps"]))]
        report["state"] = it.state_dict()
    elif scenario == "resume":
        it.load_state_dict(json.loads(Path(options["state"]).read_text()))
        report["pads"] = []
        report["rest"] = _rest_of_epoch(it, report["pads"])
        report["next"] = _rest_of_epoch(it)
    elif scenario == "kill":
        try:
            for step in range(10**6):
                next(it)
                if rank == 1 and step == 2:
                    os.kill(os.getpid(), signal.SIGKILL)
        except DistributedError as error:
            Path(f"{out}.rank{rank}").write_text(str(error))
        return
    it.finalize()
    gathered = it.comm.allgather(report)
    if rank == 0:
        Path(out).write_text(json.dumps({"ranks": gathered}))


if __name__ == "__main__":
    engine, scenario, out, *rest = sys.argv[1:]
    try:
        main(engine, scenario, out, dict(item.split("=", 1) for item in rest))
    finally:
        if engine == "torch":
            import torch.distributed as dist

            # Without it, gloo's threads abort the interpreter at exit.
            dist.destroy_process_group()
