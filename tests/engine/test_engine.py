"""The engine as a part: the front door shown in docs/architecture.rst works as written."""

import importlib.util
import os

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.engine._executors import ProcessExecutor, ThreadExecutor

PATH = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "examples", "epoch_loader.py")
spec = importlib.util.spec_from_file_location("epoch_loader", PATH)
epoch_loader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(epoch_loader)
EpochLoader = epoch_loader.EpochLoader


def flat(loader):
    return [list(batch) for batch in loader]


@given(n=st.integers(1, 30), b=st.integers(1, 12),
       policy=st.sampled_from(["keep", "discard", "rollover", "pad"]))
def test_the_documented_front_door_gives_epochs_of_the_right_length(n, b, policy):
    # Batches larger than the epoch: 'discard' and 'rollover' epochs may be empty.
    loader = EpochLoader(list(range(n)), b, shuffle=True, seed=3, last_batch=policy)
    for _ in range(3):
        expected = len(loader)
        assert len(flat(loader)) == expected


def test_the_documented_front_door_resumes_mid_epoch_and_runs_on_any_executor():
    data = np.arange(23)
    reference = EpochLoader(data, 4, shuffle=True, seed=1, last_batch="rollover")
    epochs = [flat(reference) for _ in range(3)]
    loader = EpochLoader(data, 4, shuffle=True, seed=1, last_batch="rollover")
    first = iter(loader)
    partial = [list(next(first)) for _ in range(2)]
    state = loader.state_dict()
    thread_executor = ThreadExecutor(data, 2)
    process_executor = ProcessExecutor(data, workers=2, start_method="fork")
    try:
        threads = EpochLoader(data, 4, shuffle=True, last_batch="rollover",
                              executor=thread_executor)
        threads.load_state_dict(state)
        assert partial + flat(threads) == epochs[0]
        processes = EpochLoader(data, 4, shuffle=True, last_batch="rollover",
                                executor=process_executor)
        processes.load_state_dict(threads.state_dict())
        assert flat(processes) == epochs[1]
        assert flat(processes) == epochs[2]
    finally:
        thread_executor.close()
        process_executor.close()


class _Reverse:
    """A stateful (Chainer-style) sampler: each epoch is the previous order reversed."""

    def __call__(self, current_order, current_position):
        return np.asarray(current_order)[::-1].copy()


def test_pinning_the_current_order_rederives_later_epochs_planned_ahead():
    from dataset_kit.engine import Engine

    data = np.arange(4)
    executor = ThreadExecutor(data, 2, depth=6)  # plans two epochs ahead
    try:
        engine = Engine(data, batch_size=2, order_sampler=_Reverse(), executor=executor)
        assert list(engine.next()) == [3, 2]
        engine.pin_current_order([1, 3, 0, 2])
        batches = [list(engine.next()) for _ in range(3)]
        assert batches == [[0, 2], [2, 0], [3, 1]]  # epoch 1 reverses the pinned order
    finally:
        executor.close()
