"""The engine's errors carry what a door needs to word them in its own vocabulary."""

from __future__ import annotations

import os
import pickle
import signal
import time

import pytest

from dataset_kit.engine import Engine, ExecutorSpec, WorkerDiedError


class _EndsAt:
    """A list-like dataset whose worker ends at index ``at``: by SIGKILL, or exit code 7."""

    def __init__(self, at: int, how: str) -> None:
        self.at, self.how = at, how

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        if i == self.at:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(7)
        return i


@pytest.mark.parametrize("how, exitcode", [("kill", -signal.SIGKILL), ("exit", 7)])
def test_a_dead_worker_error_names_the_pid_and_exit_code(how, exitcode):
    engine = Engine(_EndsAt(2, how), batch_size=1, shuffle=False,
                    executor=ExecutorSpec(kind="process", workers=1, timeout=60))
    start = time.monotonic()
    try:
        with pytest.raises(WorkerDiedError) as raised:
            for _ in range(8):
                engine.next()
        assert time.monotonic() - start < 60  # not a hang
    finally:
        engine.close()
    error = raised.value
    assert error.exitcode == exitcode
    assert isinstance(error.pid, int) and f"pid {error.pid}" in str(error)
    copy = pickle.loads(pickle.dumps(error))  # a spawned process sends it back whole
    assert (copy.pid, copy.exitcode, str(copy)) == (error.pid, exitcode, str(error))
