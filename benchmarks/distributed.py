"""A sharded epoch over MPI ranks, against the single-process iterator of the same run.

Workload: parallel.py's CPU-bound examples (~0.25 ms each), batch 32. Rows:

* the single-process SerialIterator's epoch: the baseline (examples/s);
* ShardedIterator on 1 and 2 MPI ranks (this machine has 2 cores): examples/s
  per rank, in all, their ratio to the baseline, and the coordination cost:
  the seconds spent in collectives (construction and the end-of-epoch check,
  waiting for the slowest rank included) as a share of the epoch's time
  (target: under 2%).

Run: .venv/bin/python benchmarks/distributed.py [--examples 8000]
(needs pip install 'dataset_kit[mpi]'; the script runs mpiexec itself).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from parallel import CpuBound, calibrate_rounds

from dataset_kit.iterators import SerialIterator

BATCH, EXAMPLE_SECONDS = 32, 2.5e-4


class _TimedComm:
    """A communicator that counts the seconds spent in collectives."""

    def __init__(self, comm) -> None:
        self._comm, self.rank, self.size, self.seconds = comm, comm.rank, comm.size, 0.0

    def _timed(self, name: str, *args):
        start = time.perf_counter()
        try:
            return getattr(self._comm, name)(*args)
        finally:
            self.seconds += time.perf_counter() - start

    def bcast(self, obj, root=0):
        return self._timed("bcast", obj, root)

    def allgather(self, obj):
        return self._timed("allgather", obj)

    def barrier(self):
        return self._timed("barrier")


def _epoch(it) -> int:
    examples = 0
    while True:
        examples += len(next(it))
        if it.is_new_epoch:
            return examples


def rank_run(examples: int, rounds: int) -> None:
    """One rank: time one sharded epoch; rank 0 prints the gathered figures as JSON."""
    from dataset_kit.distributed import MpiCommunicator, ShardedIterator

    comm = _TimedComm(MpiCommunicator())
    comm.barrier()
    comm.seconds = 0.0
    start = time.perf_counter()
    it = ShardedIterator(CpuBound(examples, rounds), BATCH, comm, seed=0, last_batch="discard")
    seen = _epoch(it)
    elapsed = time.perf_counter() - start
    figures = comm.allgather({"seen": seen, "seconds": elapsed, "collective": comm.seconds})
    if comm.rank == 0:
        print(json.dumps(figures))


def single_process(examples: int, rounds: int) -> float:
    start = time.perf_counter()
    _epoch(SerialIterator(CpuBound(examples, rounds), BATCH, seed=0))
    return examples / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=8000)
    parser.add_argument("--rank-run", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_run:
        rank_run(*args.rank_run)
        return
    rounds = calibrate_rounds(EXAMPLE_SECONDS)
    mpiexec = str(Path(sys.executable).with_name("mpiexec"))
    print(f"sharded epoch of {args.examples} CPU-bound examples (~{EXAMPLE_SECONDS * 1e3:.2f} "
          f"ms each), batch {BATCH}")
    baseline = single_process(args.examples, rounds)
    print(f"single-process SerialIterator: {baseline:.0f} ex/s")
    for ranks in (1, 2):
        out = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, __file__, "--rank-run",
                              str(args.examples), str(rounds)],
                             capture_output=True, text=True, check=True, timeout=600)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        per_rank = [f["seen"] / f["seconds"] for f in figures]
        total = sum(f["seen"] for f in figures) / max(f["seconds"] for f in figures)
        # The rank that arrives last at a collective waits least: its time in
        # collectives is what coordination costs the epoch; the others' extra
        # time there is waiting for it (imbalance between ranks, not messages).
        slowest = max(figures, key=lambda f: f["seconds"] - f["collective"])
        cost = slowest["collective"] / slowest["seconds"]
        waited = max(f["collective"] for f in figures) / slowest["seconds"]
        print(f"{ranks} rank{'s' if ranks > 1 else ' '}: {min(per_rank):.0f} ex/s per rank "
              f"(slowest), {total:.0f} ex/s in all = {total / baseline:.2f}x single-process; "
              f"coordination {cost * 100:.2f}% of the epoch (target < 2%), "
              f"longest wait for another rank {waited * 100:.2f}%")


if __name__ == "__main__":
    main()
