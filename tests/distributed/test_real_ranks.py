"""ShardedIterator across real ranks: mpiexec over mpi4py, and torch.distributed (gloo).

Each test launches the ranks as processes running rank_main.py; rank 0
gathers what every rank saw. The torch cases skip, saying why, where PyTorch
is not installed (``pip install 'dataset_kit[torch]'``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dataset_kit.distributed._shards import global_order

RANK_MAIN = Path(__file__).with_name("rank_main.py")
LAUNCH_TIMEOUT = 120  # seconds; a hang fails the test instead of blocking CI


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


ENGINES = [
    pytest.param("mpi", marks=pytest.mark.skipif(
        not _has("mpi4py"), reason="mpi4py is not installed: pip install 'dataset_kit[mpi]'")),
    pytest.param("torch", marks=pytest.mark.skipif(
        not _has("torch.distributed"),
        reason="PyTorch is not installed: pip install 'dataset_kit[torch]'")),
]


def _mpiexec() -> str:
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else "mpiexec"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(engine: str, ranks: int, scenario: str, out: Path, **options) -> int:
    """Run ``ranks`` ranks of rank_main.py; return the exit code (the launcher's for MPI)."""
    args = [str(RANK_MAIN), engine, scenario, str(out)] + [f"{k}={v}" for k, v in
                                                          options.items()]
    env = dict(os.environ, PYTHONHASHSEED="0")
    if engine == "mpi":
        done = subprocess.run([_mpiexec(), "-n", str(ranks), sys.executable, *args], env=env,
                              timeout=LAUNCH_TIMEOUT, capture_output=True, text=True)
        return done.returncode
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(ranks))
    procs = [subprocess.Popen([sys.executable, *args], env=dict(env, RANK=str(rank)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for rank in range(ranks)]
    try:
        codes = [proc.wait(timeout=LAUNCH_TIMEOUT) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    return max(codes, key=abs)


def _mpich_segments() -> set[Path]:
    return set(Path("/dev/shm").glob("mpich_shm_*"))


def _remove_unmapped(segments: set[Path]) -> None:
    """Unlink the segments no live process maps (another job's stay where they are)."""
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            mapped.update(line.split(maxsplit=5)[-1].strip() for line in maps.open()
                          if "/dev/shm/mpich_shm_" in line)
        except OSError:  # the process has exited, or is not ours to read
            continue
    for segment in segments:
        if str(segment) not in mapped:
            segment.unlink(missing_ok=True)


def _gathered(out: Path) -> list[dict]:
    return json.loads(out.read_text())["ranks"]


def _interleave(per_rank: list[list[list[int]]]) -> list[int]:
    flat = [[i for batch in batches for i in batch] for batches in per_rank]
    return [flat[r][j] for j in range(len(flat[0])) for r in range(len(flat))]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ranks", [2, 3])
def test_every_example_once_per_epoch_with_equal_batch_counts(engine, ranks, tmp_path):
    out = tmp_path / "out.json"
    assert launch(engine, ranks, "epochs", out, n=60, batch=4, policy="discard") == 0
    per_rank = _gathered(out)
    for epoch in range(2):
        batches = [report["epochs"][epoch] for report in per_rank]
        assert len({len(b) for b in batches}) == 1
        seen = _interleave(batches)
        width = ranks * 4
        assert seen == global_order(7, epoch, 60, True)[:60 // width * width].tolist()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("workers", ["threads", "processes"])
def test_workers_per_rank_do_not_change_the_batches(engine, workers, tmp_path):
    plain, parallel = tmp_path / "plain.json", tmp_path / "parallel.json"
    assert launch(engine, 2, "epochs", plain, n=50, batch=3) == 0
    assert launch(engine, 2, "epochs", parallel, n=50, batch=3, workers=workers) == 0
    assert _gathered(plain) == _gathered(parallel)
    assert set(_interleave([r["epochs"][0] for r in _gathered(plain)])) == set(range(50))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("before,after,policy", [(2, 3, "keep"), (3, 2, "keep"),
                                                 (3, 2, "pad")])
def test_elastic_resume_equals_the_uninterrupted_run(engine, before, after, policy, tmp_path):
    n, batch = 61, 2
    saved, resumed, whole = tmp_path / "saved.json", tmp_path / "resumed.json", \
        tmp_path / "whole.json"
    assert launch(engine, before, "save", saved, n=n, batch=batch, steps=5, policy=policy) == 0
    first = _gathered(saved)
    states = [report["state"] for report in first]
    assert all(state == states[0] for state in states)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(states[0]))
    assert launch(engine, after, "resume", resumed, n=n, batch=batch, state=state_file,
                  policy=policy) == 0
    assert launch(engine, after, "epochs", whole, n=n, batch=batch, epochs=2,
                  policy=policy) == 0

    start = states[0]["door"]["global_position"]
    assert start == 5 * batch * before
    order = global_order(7, 0, n, True).tolist()
    assert sorted(_interleave([r["seen"] for r in first])) == sorted(order[:start])
    rest = _interleave([r["rest"] for r in _gathered(resumed)])
    # The uninterrupted run's remaining examples, in the same global order, then padding:
    # to full batches ('pad') or only to a multiple of the ranks ('keep').
    assert rest[:n - start] == order[start:]
    width = after * batch if policy == "pad" else after
    padding = len(rest) - (n - start)
    assert len(rest) % width == 0 and padding < width
    assert sum(sum(r["pads"]) for r in _gathered(resumed)) == padding
    assert sorted(order[:start] + rest[:n - start]) == list(range(n))
    # The next epoch is the ordinary one on `after` ranks.
    assert [r["next"] for r in _gathered(resumed)] == [r["epochs"][1] for r in _gathered(whole)]


@pytest.mark.parametrize("engine", ENGINES)
def test_ranks_with_different_lengths_fail_on_every_rank(engine, tmp_path):
    out = tmp_path / "out.json"
    assert launch(engine, 2, "epochs", out, n=20, batch=2, extra_per_rank=1) == 0
    for rank in range(2):
        message = Path(f"{out}.rank{rank}").read_text()
        assert "rank 0 has 20" in message and "rank 1 has 21" in message


@pytest.mark.parametrize("engine", ENGINES)
def test_a_killed_rank_makes_the_others_fail_not_hang(engine, tmp_path):
    out = tmp_path / "out.json"
    before = _mpich_segments()
    try:
        code = launch(engine, 2, "kill", out, n=4000, batch=2)
    finally:
        # A SIGKILLed MPICH rank cannot unlink its node's shared-memory segment;
        # once the launcher has returned, remove what this run left that no
        # live process still maps.
        _remove_unmapped(_mpich_segments() - before)
    assert code != 0  # the killed rank (and, under MPI, the launcher) report it
    if engine == "torch":
        # Rank 0 reaches its end-of-epoch check and fails there with an error.
        assert "another rank has probably died" in Path(f"{out}.rank0").read_text()


@pytest.mark.parametrize("engine", ENGINES)
def test_scatter_dataset_ships_rank_zeros_arrays(engine, tmp_path):
    out = tmp_path / "out.json"
    assert launch(engine, 3, "scatter", out, n=10, seed=5) == 0
    order = np.random.RandomState(5).permutation(10)
    parts = _gathered(out)
    assert [[x for x, _ in part] for part in parts] == [order[b:e].tolist() for b, e in
                                                       [(0, 4), (3, 7), (6, 10)]]
    assert all(y == x * 0.5 for part in parts for x, y in part)


@pytest.mark.parametrize("engine", ENGINES[:1])
def test_elastic_resume_in_a_shard_aware_order(engine, tmp_path):
    from dataset_kit.shards import ShardOrderSampler, StreamingDataset
    from tests.shards.conftest import write

    n, batch = 60, 3
    write(tmp_path / "set", n=n, shard_size=700)
    saved, resumed = tmp_path / "saved.json", tmp_path / "resumed.json"
    shards = dict(shards=tmp_path / "set", sampler_seed=4, n=n, batch=batch)
    assert launch(engine, 2, "save", saved, steps=3, **shards) == 0
    states = [report["state"] for report in _gathered(saved)]
    assert all(state == states[0] for state in states)
    assert states[0]["door"]["order_sampler"]["state"]["seed"] == 4
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(states[0]))
    # Another sampler seed on the resumed ranks: the state brings the saved one back.
    assert launch(engine, 3, "resume", resumed, state=state_file,
                  **dict(shards, sampler_seed=9)) == 0
    sampler = ShardOrderSampler(StreamingDataset(tmp_path / "set", local=tmp_path / "c"), 2,
                                seed=4)
    order = sampler.epoch_order(0, n).tolist()
    start = states[0]["door"]["global_position"]
    assert start == 3 * batch * 2
    assert sorted(_interleave([r["seen"] for r in _gathered(saved)])) == sorted(order[:start])
    rest = _interleave([r["rest"] for r in _gathered(resumed)])
    assert rest[:n - start] == order[start:] and len(rest) - (n - start) < 3
    assert _interleave([r["next"] for r in _gathered(resumed)]) == \
        sampler.epoch_order(1, n).tolist()
