"""One rank streaming a StreamingDataset from S3 (mpiexec, or one process per rank for gloo).

Run by test_real_ranks.py as ``python tests/shards/rank_stream.py ENGINE SCENARIO OUT
CONFIG``, CONFIG being JSON: the shard set's URL and storage options, the node's
cache folder, the batch size, and for ``save``/``resume`` the steps or the state
file. What every rank saw is gathered to rank 0, which writes it as JSON to OUT
(an error: OUT.rank<N>).
"""

from __future__ import annotations

import json
import sys
import traceback
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dataset_kit.distributed import ShardedIterator, as_communicator  # noqa: E402
from dataset_kit.shards import ShardOrderSampler, StreamingDataset  # noqa: E402


def _connect(engine: str):
    if engine == "mpi":
        return as_communicator("mpi")
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    return as_communicator("torch")


def _ids(batch) -> list[int]:
    return [int(example["y"]) for example in batch]


def main() -> None:
    engine, scenario, out, config = sys.argv[1], sys.argv[2], sys.argv[3], \
        json.loads(sys.argv[4])
    comm = _connect(engine)
    try:
        ds = StreamingDataset(config["url"], local=config["cache"],
                              storage_options=config["options"])
        # The shard-aware global order, cut among the ranks: each rank reads
        # few shards at a time, and an N -> M resume continues the same order.
        order = ShardOrderSampler(ds, block_shards=2, seed=7)
        it = ShardedIterator(ds, config["batch"], comm, seed=7, order_sampler=order)
        report: dict = {}
        if scenario == "epochs":
            report["epochs"] = []
            for _ in range(2):
                batches = [_ids(next(it))]
                while not it.is_new_epoch:
                    batches.append(_ids(next(it)))
                report["epochs"].append(batches)
        elif scenario == "save":
            report["seen"] = [_ids(next(it)) for _ in range(config["steps"])]
            report["state"] = json.loads(json.dumps(it.state_dict()))
        elif scenario == "resume":
            it.load_state_dict(json.loads(Path(config["state"]).read_text()))
            report["rest"] = [_ids(next(it))]
            while not it.is_new_epoch:
                report["rest"].append(_ids(next(it)))
        ds.close()
    except BaseException:
        Path(f"{out}.rank{comm.rank}").write_text(traceback.format_exc())
        raise
    reports = comm.allgather(report)
    if comm.rank == 0:
        Path(out).write_text(json.dumps({"ranks": reports}))
    comm.barrier()
    if engine == "torch":
        import torch.distributed as dist

        dist.destroy_process_group()


if __name__ == "__main__":
    main()
