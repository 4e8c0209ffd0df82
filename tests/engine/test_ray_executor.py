"""The Ray executor on a real two-node Ray cluster on 127.0.0.1.

A head and a second node are started with ``ray start`` as separate processes
(1 CPU each, a small object store) and always stopped in a ``finally``. The
batches must equal the serial executor's, through a node killed with SIGKILL
mid-epoch, and a resume must continue exactly.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs Ray (the ray extra)")

from dataset_kit.engine import Engine, ExecutorSpec, WorkerDiedError, WorkerError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RAY = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_env() -> dict:
    # The actors import dataset_kit from this checkout, as the driver does.
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")])))
    return env


def raylet_pids(node_manager_port: int) -> list[int]:
    """The pids of the raylet listening on ``node_manager_port``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"raylet") and \
                f"--node_manager_port={node_manager_port}".encode() in cmdline:
            found.append(int(entry.name))
    return found


def actor_pids() -> list[int]:
    """The pids of this machine's batch-building actors (Ray titles them ray::_BatchBuilder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(b"ray::_BatchBuilder"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


class Cluster:
    """A head and one more node, started by ``ray start``; stop() in a finally."""

    def __init__(self) -> None:
        if RAY is None:
            pytest.skip("the ray command is not on PATH")
        self.port = free_port()
        self.node_port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp = tempfile.mkdtemp(prefix="dk-ray-")
        common = ["--num-cpus=1", "--object-store-memory=80000000", "--disable-usage-stats",
                  "--node-ip-address=127.0.0.1"]
        self._run([RAY, "start", "--head", f"--port={self.port}", "--include-dashboard=false",
                   f"--temp-dir={self.temp}", *common])
        self._run([RAY, "start", f"--address={self.address}",
                   f"--node-manager-port={self.node_port}", *common])

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(command, env=ray_env(), capture_output=True, text=True,
                              timeout=300)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")

    def kill_second_node(self) -> None:
        pids = raylet_pids(self.node_port)
        assert pids, "the second node's raylet is not running"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        try:
            if ray.is_initialized():
                ray.shutdown()
        finally:
            subprocess.run([RAY, "stop", "--force"], env=ray_env(), capture_output=True,
                           timeout=120)
            shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    # One cluster for the module (starting one takes seconds); the test that kills
    # its second node comes last.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = None
    try:
        started = Cluster()
        ray.init(address=started.address, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
        yield started
    finally:
        if started is not None:
            started.stop()
        elif ray.is_initialized():
            ray.shutdown()


class Slow:
    """~2 ms per example, so a batch is still being built when a node dies."""

    def __init__(self, n: int = 240) -> None:
        self.x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(0.002)
        return self.x[i] * 2, int(i)


class FailsAt:
    def __init__(self, bad: int) -> None:
        self.bad = bad

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i):
        if i == self.bad:
            raise KeyError(f"example {i} is broken")
        return np.float32(i)


def batches(engine: Engine, count: int) -> list:
    out = []
    for _ in range(count):
        batch = engine.next()
        out.append([(np.asarray(x).copy(), y) for x, y in batch])
    return out


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        len(p) == len(q) and all((x1 == x2).all() and y1 == y2 for (x1, y1), (x2, y2) in zip(p, q))
        for p, q in zip(a, b))


def serial_batches(dataset, count: int, seed: int = 4) -> list:
    return batches(Engine(dataset, batch_size=8, seed=seed), count)


def test_the_batches_and_a_resume_are_the_local_executors(cluster):
    data = Slow()
    want = serial_batches(data, 45)
    engine = Engine(data, batch_size=8, seed=4,
                    executor=ExecutorSpec("ray", workers=2, address=cluster.address,
                                          timeout=120))
    try:
        first = batches(engine, 20)
        state = engine.state_dict()
    finally:
        engine.close()
    resumed = Engine(data, batch_size=8, seed=4,
                     executor=ExecutorSpec("ray", workers=2, address=cluster.address,
                                           timeout=120))
    try:
        resumed.load_state_dict(state)
        rest = batches(resumed, 25)
    finally:
        resumed.close()
    assert same(first + rest, want)


def make_slow() -> Slow:
    return Slow(64)


def test_a_dataset_factory_builds_the_dataset_on_each_actor(cluster):
    want = serial_batches(Slow(64), 8)
    engine = Engine(Slow(64), batch_size=8, seed=4,
                    executor=ExecutorSpec("ray", workers=2, address=cluster.address,
                                          timeout=120, dataset_factory=make_slow))
    try:
        assert same(batches(engine, 8), want)
    finally:
        engine.close()


def test_a_dataset_error_is_a_worker_error_and_the_batch_is_retried(cluster):
    engine = Engine(FailsAt(bad=10), batch_size=4, shuffle=False,
                    executor=ExecutorSpec("ray", workers=1, address=cluster.address,
                                          timeout=120))
    try:
        engine.next(), engine.next()
        with pytest.raises(WorkerError, match="example 10 is broken"):
            engine.next()
    finally:
        engine.close()


def test_losing_every_actor_is_an_error_naming_the_cluster(cluster):
    engine = Engine(Slow(), batch_size=8, seed=4,
                    executor=ExecutorSpec("ray", workers=2, address=cluster.address,
                                          timeout=120))
    try:
        engine.next()
        # Both actors have tasks by now; the second may still be starting (its process
        # takes Ray's title once it runs): wait for it, with a liveness bound.
        deadline = time.monotonic() + 120
        while len(actors := actor_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(actors) == 2, actors
        for pid in actors:
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=cluster.address.replace(".", r"\.")):
            for _ in range(30):
                engine.next()
    finally:
        engine.close()


def test_the_doors_place_their_workers_on_ray(cluster):
    from dataset_kit.distributed import ShardedIterator
    from dataset_kit.iterators import MultiprocessIterator, SerialIterator

    data = Slow(96)
    want = [[y for _, y in b] for b in take(SerialIterator(data, 8, seed=4), 14)]
    with MultiprocessIterator(data, 8, seed=4, n_processes=2, executor="ray",
                              ray_address=cluster.address) as it:
        assert [[y for _, y in b] for b in take(it, 14)] == want
    sharded_local = [[y for _, y in b] for b in take(ShardedIterator(data, 8, seed=4), 14)]
    with ShardedIterator(data, 8, seed=4, n_processes=2, executor="ray",
                         ray_address=cluster.address) as it:
        assert [[y for _, y in b] for b in take(it, 14)] == sharded_local


def test_gluons_loader_places_its_workers_on_ray(cluster):
    from dataset_kit.loader import DataLoader

    data = Slow(64)
    want = [b[1].tolist() for b in DataLoader(data, batch_size=8, shuffle=True, seed=2,
                                              num_workers=2, device="@numpy")]
    got = [b[1].tolist() for b in DataLoader(data, batch_size=8, shuffle=True, seed=2,
                                             num_workers=2, device="@numpy", executor="ray",
                                             ray_address=cluster.address)]
    assert got == want


def nnabla_example(i: int) -> tuple:
    return (np.full(3, i, np.float32), np.int64(i))


def test_nnablas_data_iterator_places_its_workers_on_ray(cluster):
    from dataset_kit.sources import DataIterator, SimpleDataSource

    def batches(**kwargs) -> list:
        source = SimpleDataSource(nnabla_example, 40, shuffle=True,
                                  rng=np.random.RandomState(5))
        it = DataIterator(source, 8, n_processes=2, **kwargs)
        try:
            return [it.next()[1].tolist() for _ in range(10)]
        finally:
            it.close()

    assert batches(executor="ray", ray_address=cluster.address) == batches()


def test_the_torch_door_places_its_workers_on_ray(cluster):
    torch = pytest.importorskip("torch", reason="the torch door needs PyTorch (the torch extra)")
    import dataset_kit.torch as dk_torch

    data = Slow(64)

    def loader(**kwargs):
        return dk_torch.DataLoader(data, batch_size=8, shuffle=True, num_workers=2,
                                   generator=torch.Generator().manual_seed(3), **kwargs)

    want = [b[1].tolist() for b in loader()]
    assert [b[1].tolist() for b in loader(executor="ray", ray_address=cluster.address)] == want


def take(it, count: int) -> list:
    return [next(it) for _ in range(count)]


# Last: it leaves the cluster with one node.
def test_a_node_killed_mid_epoch_changes_no_batch(cluster):
    data = Slow()
    want = serial_batches(data, 30)
    engine = Engine(data, batch_size=8, seed=4,
                    executor=ExecutorSpec("ray", workers=2, address=cluster.address,
                                          timeout=180))
    try:
        got = batches(engine, 4)
        cluster.kill_second_node()
        got += batches(engine, 26)
    finally:
        engine.close()
    assert same(got, want)
