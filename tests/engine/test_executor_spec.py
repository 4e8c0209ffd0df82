"""ExecutorSpec: validated once, the same words and defaults for every door."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.engine import DEFAULT_BATCH_TIMEOUT, ExecutorSpec, make_executor
from dataset_kit.engine._executors import ProcessExecutor, SerialExecutor, ThreadExecutor


def test_defaults_are_serial_with_the_documented_timeout():
    spec = ExecutorSpec()
    assert (spec.kind, spec.workers, spec.timeout) == ("serial", 0, DEFAULT_BATCH_TIMEOUT)
    assert DEFAULT_BATCH_TIMEOUT == 300.0


def test_a_process_spec_resolves_the_platform_default_start_method():
    spec = ExecutorSpec("process", workers=2)
    expected = "fork" if "fork" in multiprocessing.get_all_start_methods() else \
        multiprocessing.get_all_start_methods()[0]
    assert spec.start_method == expected


@pytest.mark.parametrize("kwargs, name", [
    ({"kind": "gpu"}, "kind"),
    ({"kind": "thread", "workers": 0}, "workers"),
    ({"kind": "process", "workers": -1}, "workers"),
    ({"kind": "process", "workers": 1.5}, "workers"),
    ({"kind": "thread", "workers": 1, "depth": 0}, "depth"),
    ({"kind": "process", "workers": 1, "start_method": "teleport"}, "start_method"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": -3}, "timeout"),
    ({"timeout": "soon"}, "timeout"),
    ({"timeout": True}, "timeout"),
    ({"warn_after": 0}, "warn_after"),
    ({"converter": 3}, "converter"),
    ({"worker_init": "x"}, "worker_init"),
    ({"kind": "process", "workers": 1, "max_tasks": 0}, "max_tasks"),
])
def test_bad_values_are_named(kwargs, name):
    with pytest.raises((TypeError, ValueError), match=name):
        ExecutorSpec(**kwargs)


@given(st.sampled_from(["serial", "thread", "process"]), st.integers(1, 4),
       st.one_of(st.none(), st.integers(1, 8)),
       st.one_of(st.none(), st.floats(0.001, 1e6)))
def test_the_factory_builds_what_the_spec_says(kind, workers, depth, timeout):
    spec = ExecutorSpec(kind, workers=workers, depth=depth, timeout=timeout)
    executor = make_executor(spec, np.arange(10))
    try:
        expected = {"serial": SerialExecutor, "thread": ThreadExecutor,
                    "process": ProcessExecutor}[kind]
        assert type(executor) is expected
        if kind != "serial":
            assert executor.depth == (2 * workers if depth is None else depth)
    finally:
        executor.close()  # no process starts before the first batch


def test_specs_are_frozen_values():
    spec = ExecutorSpec("thread", workers=2)
    with pytest.raises(AttributeError):
        spec.workers = 3
    assert spec == ExecutorSpec("thread", workers=2)


def test_the_spec_checks_its_ray_settings():
    with pytest.raises(ValueError, match="are for kind='ray'"):
        ExecutorSpec("process", workers=1, address="127.0.0.1:1")
    with pytest.raises(TypeError, match="resources"):
        ExecutorSpec("ray", workers=1, resources=[1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="workers"):
        ExecutorSpec("ray", workers=0)
    with pytest.raises(TypeError, match="dataset_factory"):
        ExecutorSpec("ray", workers=1, dataset_factory=3)  # type: ignore[arg-type]
    local = ExecutorSpec("process", workers=2, start_method="fork", max_tasks=5)
    assert local.placed(None) is local and local.placed("local") is local
    on_ray = local.placed("ray", "127.0.0.1:1")
    assert (on_ray.kind, on_ray.workers, on_ray.address, on_ray.max_tasks) == \
        ("ray", 2, "127.0.0.1:1", None)
    with pytest.raises(ValueError, match="executor must be"):
        local.placed("dask")
    with pytest.raises(ValueError, match="ray_address is for executor='ray'"):
        local.placed(None, "127.0.0.1:1")
    with pytest.raises(ValueError, match="got 0"):
        ExecutorSpec("serial").placed("ray")


def test_a_door_refuses_an_unknown_executor_naming_it():
    from dataset_kit.iterators import MultiprocessIterator
    from dataset_kit.loader import DataLoader

    with pytest.raises(ValueError, match="executor must be None, 'local' or 'ray', got 'dask'"):
        DataLoader(np.arange(8), batch_size=2, num_workers=1, executor="dask")
    with pytest.raises(ValueError, match="ray_address is for executor='ray'"):
        MultiprocessIterator(np.arange(8), 2, n_processes=1, ray_address="127.0.0.1:1")
    with pytest.raises(ValueError, match="got 0"):
        DataLoader(np.arange(8), batch_size=2, num_workers=0, executor="ray")

