"""Ranks streaming one shard set from the S3 server: mpiexec over mpi4py, and gloo.

Each test launches the ranks as processes running rank_stream.py; they share
one cache folder, as the ranks of one node do. Every spawned process is
killed in a ``finally``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.test_real_ranks import ENGINES, _free_port, _mpiexec
from tests.shards.conftest import write

RANK_MAIN = Path(__file__).with_name("rank_stream.py")
LAUNCH_TIMEOUT = 180  # seconds; a hang fails the test instead of blocking CI
N, BATCH = 60, 5


def launch(engine: str, ranks: int, scenario: str, out: Path, config: dict) -> None:
    """Run ``ranks`` ranks of rank_stream.py; fail with their errors if one fails."""
    args = [sys.executable, str(RANK_MAIN), engine, scenario, str(out), json.dumps(config)]
    env = dict(os.environ, PYTHONHASHSEED="0")
    if engine == "mpi":
        commands = [([_mpiexec(), "-n", str(ranks), *args], env)]
    else:
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
                   WORLD_SIZE=str(ranks))
        commands = [(args, dict(env, RANK=str(rank))) for rank in range(ranks)]
    procs = []
    try:
        for command, environment in commands:
            procs.append(subprocess.Popen(command, env=environment, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
        outputs = [proc.communicate(timeout=LAUNCH_TIMEOUT)[0] for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    errors = [Path(f"{out}.rank{r}").read_text() for r in range(ranks)
              if Path(f"{out}.rank{r}").exists()]
    codes = [proc.returncode for proc in procs]
    assert not errors and codes == [0] * len(procs), (codes, errors,
                                                      [o.decode()[-2000:] for o in outputs])


@pytest.fixture
def config(s3, tmp_path):
    write("s3://data/set", n=N, shard_size=700, storage_options=s3)
    return {"url": "s3://data/set", "options": s3, "cache": str(tmp_path / "node-cache"),
            "batch": BATCH}


def _ranks(out: Path) -> list[dict]:
    return json.loads(out.read_text())["ranks"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ranks", [2, 3])
def test_every_sample_is_seen_once_per_epoch_across_ranks(engine, ranks, config, tmp_path):
    out = tmp_path / "out.json"
    launch(engine, ranks, "epochs", out, config)
    for epoch in range(2):
        seen = [y for report in _ranks(out) for batch in report["epochs"][epoch]
                for y in batch]
        assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("engine", ENGINES)
def test_two_ranks_resumed_on_three_see_exactly_the_remaining_samples(engine, config,
                                                                      tmp_path):
    saved, resumed = tmp_path / "saved.json", tmp_path / "resumed.json"
    launch(engine, 2, "save", saved, dict(config, steps=3))
    before = _ranks(saved)
    states = [report["state"] for report in before]
    assert all(state == states[0] for state in states)
    assert states[0]["door"]["global_position"] == 2 * 3 * BATCH
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(states[0]))
    launch(engine, 3, "resume", resumed, dict(config, state=str(state_file)))
    seen = [y for report in before for batch in report["seen"] for y in batch]
    rest = [y for report in _ranks(resumed) for batch in report["rest"] for y in batch]
    assert len(rest) == N - len(seen)  # 30 left, 10 per rank: no padding
    assert sorted(seen + rest) == list(range(N))
