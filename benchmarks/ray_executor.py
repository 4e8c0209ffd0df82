"""The Ray executor against Ray Data and against our own process pool, side by side.

(Not named ray.py: run as a script, that file would shadow Ray itself.)

Each figure is a ratio of medians over interleaved rounds in one run, on one
local Ray started here (``num_cpus`` = the workers given):

1. Batches/s of a warm epoch (the second of a pool): our engine on Ray actors
   (``ExecutorSpec("ray")``) against Ray Data's ``iter_batches`` over the same
   pipeline (~1 ms of numpy work per example, batch 32, the same number of CPUs).
   The issue's goal: >= 1.0.
2. Batches/s: our engine on Ray actors against our engine on worker
   processes (``ExecutorSpec("process")``), the same number of workers: what
   going through Ray costs on one machine (when the cluster pays).
3. Time to the first batch with a fresh pool: Ray actors against processes.
4. Resume: ours continues exactly mid-epoch; Ray Data has no iterator state
   (``iter_batches`` starts the dataset over), shown by comparing the batches
   after a restart.

Run: ``python benchmarks/ray_executor.py [--workers 2] [--rounds 5]`` with Ray Data
installed (``pip install 'ray[data]'``; the ``ray`` extra has Ray core only).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dataset_kit import concat_examples  # noqa: E402
from dataset_kit.engine import Engine, ExecutorSpec  # noqa: E402

N_EXAMPLES = 2048
BATCH = 32


def work(i: int, rounds: int) -> np.ndarray:
    a = np.full(4096, float(i))
    for _ in range(rounds):
        a = np.sin(a)
    return a.astype(np.float32)


class CpuBound:
    """Each example costs ``rounds`` passes of np.sin over 4096 values (~1 ms)."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def __len__(self) -> int:
        return N_EXAMPLES

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        return work(int(i), self.rounds), int(i)


def calibrate(target: float = 1e-3) -> int:
    start = time.perf_counter()
    for _ in range(20):
        work(0, 100)
    return max(1, round(target / ((time.perf_counter() - start) / 2000)))


def ours(kind: str, workers: int, rounds: int) -> tuple[float, float]:
    """(seconds to the first batch of a fresh pool, seconds of the next, warm epoch)."""
    start = time.perf_counter()
    engine = Engine(CpuBound(rounds), batch_size=BATCH, seed=0,
                    executor=ExecutorSpec(kind, workers=workers, converter=concat_examples,
                                          timeout=600))
    try:
        first = None
        for _ in engine.epoch():
            if first is None:
                first = time.perf_counter() - start
        start = time.perf_counter()
        for _ in engine.epoch():
            pass
        return first or 0.0, time.perf_counter() - start
    finally:
        engine.close()


def ray_data(rounds: int) -> tuple[float, float]:
    """The same two figures for Ray Data: its first batch, then a second whole iteration."""
    import ray.data

    def transform(batch: dict) -> dict:
        ids = batch["id"]
        return {"x": np.stack([work(int(i), rounds) for i in ids]), "y": ids}

    start = time.perf_counter()
    dataset = ray.data.range(N_EXAMPLES).map_batches(transform, batch_size=BATCH)
    first = None
    for _ in dataset.iter_batches(batch_size=BATCH):
        if first is None:
            first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in dataset.iter_batches(batch_size=BATCH):
        pass
    return first or 0.0, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": sys.path[0]}})
    try:
        rounds = calibrate()
        epochs = N_EXAMPLES // BATCH
        times: dict[str, list[tuple[float, float]]] = {"ray": [], "process": [], "raydata": []}
        ray_data(rounds)  # warm Ray Data's own executor once, as ours warms nothing
        for _ in range(args.rounds):
            times["ray"].append(ours("ray", args.workers, rounds))
            times["process"].append(ours("process", args.workers, rounds))
            times["raydata"].append(ray_data(rounds))
        med = {name: (statistics.median(f for f, _ in runs), statistics.median(t for _, t in runs))
               for name, runs in times.items()}
        # Warm epochs: the second epoch of a pool (a fresh pool's start is row 3's figure).
        rate = {name: epochs / total for name, (_, total) in med.items()}
        print(f"{epochs} batches of {BATCH}, ~1 ms per example, {args.workers} workers/CPUs, "
              f"medians of {args.rounds} interleaved rounds")
        print(f"1. Ray executor {rate['ray']:.1f} batches/s vs Ray Data iter_batches "
              f"{rate['raydata']:.1f}: {rate['ray'] / rate['raydata']:.2f}x")
        print(f"2. Ray executor vs our process executor ({rate['process']:.1f} batches/s): "
              f"{rate['ray'] / rate['process']:.2f}x")
        print(f"3. first batch, fresh pool: Ray actors {med['ray'][0] * 1e3:.0f} ms, processes "
              f"{med['process'][0] * 1e3:.0f} ms, Ray Data {med['raydata'][0] * 1e3:.0f} ms")
        show_resume(args.workers, rounds)
    finally:
        ray.shutdown()


def show_resume(workers: int, rounds: int) -> None:
    """Ours resumes mid-epoch exactly; Ray Data's iteration starts over after a restart."""
    import ray.data

    spec = ExecutorSpec("ray", workers=workers, timeout=600)
    engine = Engine(CpuBound(rounds), batch_size=BATCH, seed=0, executor=spec)
    first = [np.array([y for _, y in engine.next()]) for _ in range(5)]
    state = engine.state_dict()
    want = [np.array([y for _, y in engine.next()]) for _ in range(3)]
    engine.close()
    again = Engine(CpuBound(rounds), batch_size=BATCH, seed=0, executor=spec)
    again.load_state_dict(state)
    got = [np.array([y for _, y in again.next()]) for _ in range(3)]
    again.close()
    exact = all((a == b).all() for a, b in zip(want, got))
    dataset = ray.data.range(N_EXAMPLES).random_shuffle(seed=0)
    seen = [b["id"] for _, b in zip(range(5), dataset.iter_batches(batch_size=BATCH))]
    restarted = [b["id"] for _, b in zip(range(3), dataset.iter_batches(batch_size=BATCH))]
    repeats = sum(len(np.intersect1d(r, np.concatenate(seen))) for r in restarted)
    print(f"4. resume after {len(first)} batches: ours continues exactly: {exact}; Ray Data "
          f"has no iterator state, its restarted iteration repeats {repeats} of the "
          f"{5 * BATCH} examples already consumed in its first {3} batches")


if __name__ == "__main__":
    main()
