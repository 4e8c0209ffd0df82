"""dataset_kit.profile and ``dataset-kit profile``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dataset_kit
from dataset_kit.iterators import SerialIterator

ROOT = Path(__file__).resolve().parents[1]


class _Slow:
    """A dataset whose examples take ``cost`` seconds each."""

    def __init__(self, n: int, cost: float) -> None:
        self.n, self.cost = n, cost

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        time.sleep(self.cost)
        return i


def _loop(it: SerialIterator, step: float) -> None:
    for _ in it:
        time.sleep(step)


def test_records_every_batch_and_names_a_slow_pipeline() -> None:
    it = SerialIterator(_Slow(12, 0.004), 2, repeat=False, shuffle=False)
    with dataset_kit.profile(it) as p:
        _loop(it, 0.0)
    data = p.to_json()
    assert p.batches == 6 == len(data["batches"])
    assert data["summary"]["examples"] == 12
    assert data["summary"]["wait_fraction"] > 0.5
    assert "input pipeline is the bottleneck" in p.bottleneck()
    assert p.bottleneck() in p.report()
    json.dumps(data)  # JSON-ready


def test_names_a_slow_training_step() -> None:
    it = SerialIterator(np.arange(12), 2, repeat=False, shuffle=False)
    with dataset_kit.profile(it) as p:
        _loop(it, 0.01)
    assert "the training step is the bottleneck" in p.bottleneck()


def test_records_nothing_outside_the_block() -> None:
    it = SerialIterator(np.arange(12), 2, shuffle=False)
    with dataset_kit.profile(it) as p:
        next(it)
    next(it)
    assert p.batches == 1
    assert "no batch was recorded" in dataset_kit.Profile().bottleneck()


def test_trace_is_chrome_json_with_every_batch(tmp_path: Path) -> None:
    it = SerialIterator(np.arange(10), 2, repeat=False, shuffle=False)
    with dataset_kit.profile(it) as p:
        _loop(it, 0.0)
    p.save_trace(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    waits = [e for e in events if e.get("name") == "next() wait"]
    assert len(waits) == 5
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in waits)
    assert [e["ts"] for e in waits] == sorted(e["ts"] for e in waits)


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra draws the PNG")
    it = SerialIterator(np.arange(10), 2, repeat=False, shuffle=False)
    with dataset_kit.profile(it) as p:
        _loop(it, 0.0)
    out = p.plot(tmp_path / "p.png")
    assert out == str(tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_gives_a_text_chart(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    it = SerialIterator(np.arange(10), 2, repeat=False, shuffle=False)
    with dataset_kit.profile(it) as p:
        _loop(it, 0.0)
    chart = p.plot(tmp_path / "p.png")
    assert "where the time went" in chart and "[" in chart
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("bad", [-1, "1"])
def test_rejects_a_bad_memory_interval(bad: object) -> None:
    with pytest.raises(ValueError, match="memory_interval"):
        with dataset_kit.profile(memory_interval=bad):  # type: ignore[arg-type]
            pass


def test_rejects_what_is_not_an_iterator() -> None:
    with pytest.raises(TypeError, match="it must be"):
        with dataset_kit.profile(3):
            pass


_SCRIPT = """
import sys
import numpy as np
from dataset_kit.iterators import SerialIterator
it = SerialIterator(np.arange(20), 4, shuffle=False)
for _ in range(3):
    next(it)
if sys.argv[1] == "raise":
    raise KeyError("the script's own error")
if sys.argv[1] == "exit":
    sys.exit(3)
"""


def _run_cli(tmp_path: Path, how: str) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # stderr is a pipe, not a terminal, as in CI.
    return subprocess.run(
        [sys.executable, "-m", "dataset_kit.cli", "profile", "--output", str(tmp_path / "out"),
         str(script), how], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize(("how", "status"), [("ok", 0), ("raise", 1), ("exit", 3)])
def test_cli_keeps_the_scripts_status_and_writes_the_profile(tmp_path: Path, how: str,
                                                             status: int) -> None:
    done = _run_cli(tmp_path, how)
    assert done.returncode == status, done.stderr
    if how == "raise":
        assert "KeyError: \"the script's own error\"" in done.stderr
    assert "bottleneck:" in done.stderr
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["summary"]["batches"] == 3
    assert (tmp_path / "out.trace.json").exists()


def test_cli_names_a_missing_script(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dataset_kit.cli", "profile", str(tmp_path / "none.py")],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert done.returncode == 2
    assert str(tmp_path / "none.py") in done.stderr


def test_worker_processes_send_their_phases_with_each_batch() -> None:
    from dataset_kit.iterators import MultiprocessIterator

    it = MultiprocessIterator(_Slow(24, 0.004), 2, repeat=False, shuffle=False, n_processes=2)
    try:
        with dataset_kit.profile(it) as p:
            _loop(it, 0.0)
    finally:
        it.finalize()
    workers = p.summary()["workers"]
    assert set(workers) <= {"0", "1"} and workers
    assert sum(w["batches"] for w in workers.values()) >= 12
    for w in workers.values():
        assert w["fetch"] > 0 and min(w["idle"], w["convert"], w["pack"]) >= 0
        assert 0 <= w["busy_fraction"] <= 1
    # (The sentence may name the first batch instead on a loaded machine.)
    assert "worker 0:" in p.report() or "worker 1:" in p.report()


@dataset_kit.phase("transform")
def _marked_transform(i: int) -> int:
    time.sleep(0.002)
    return i


class _Marked(_Slow):
    """``_Slow``, whose examples then go through a transform marked as a phase."""

    def __getitem__(self, i: int) -> int:
        return _marked_transform(super().__getitem__(i))


def _trace(p: dataset_kit.Profile, tmp_path: Path) -> list[dict]:
    p.save_trace(tmp_path / "trace.json")
    return json.loads((tmp_path / "trace.json").read_text())["traceEvents"]


def test_trace_has_each_workers_phases_and_the_marked_ones_inside_its_fetch(
        tmp_path: Path) -> None:
    from dataset_kit.iterators import MultiprocessIterator

    it = MultiprocessIterator(_Marked(16, 0.001), 2, repeat=False, shuffle=False, n_processes=2)
    try:
        with dataset_kit.profile(it) as p:
            _loop(it, 0.0)
    finally:
        it.finalize()
    events = _trace(p, tmp_path)
    rows = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    slices = [e for e in events if e["ph"] == "X" and rows.get(e["tid"], "").startswith("worker")]
    names = {e["name"] for e in slices}
    assert {"fetch", "converter", "copy into shared memory", "transform"} <= names
    # Every example's transform is counted once, inside the fetch of its batch.
    marked = p.summary()["marked"]["workers"]["transform"]
    assert marked["spans"] == 16 and marked["seconds"] >= 16 * 0.002
    for batch in p.to_json()["worker_batches"]:
        assert 0 < batch["marked"]["transform"] <= batch["fetch"]
    fetches = {(e["tid"], e["ts"]): e for e in slices if e["name"] == "fetch"}
    for e in slices:
        if e["name"] == "transform":
            fetch = fetches[(e["tid"], e["ts"])]  # placed from its fetch's start
            assert e["dur"] <= fetch["dur"] + 1e-3
    assert "phase 'transform' in the workers" in p.report()


def test_main_process_converter_and_marked_spans_are_timed_apart_from_the_wait(
        tmp_path: Path) -> None:
    it = SerialIterator(_Marked(8, 0.0), 2, repeat=False, shuffle=False)
    with dataset_kit.profile(it) as p:
        for batch in it:
            dataset_kit.concat_examples(batch)
    marked = p.summary()["marked"]["main"]
    assert marked["transform"]["spans"] == 8 and marked["converter"]["spans"] == 4
    spans = p.to_json()["main_spans"]
    waits = [(b["start"], b["start"] + b["wait"]) for b in p.to_json()["batches"]]
    # The transform runs inside next() (the serial iterator fetches there); the
    # converter runs in the loop's step, after a batch's wait ended.
    for span in spans:
        inside = any(a <= span["start"] <= b for a, b in waits)
        assert inside == (span["name"] == "transform")
    events = _trace(p, tmp_path)
    assert {e["name"] for e in events if e["ph"] == "X" and e["tid"] >= 2000} == \
        {"transform", "converter"}


def test_a_mark_outside_a_profile_records_nothing() -> None:
    with dataset_kit.phase("outside"):
        pass
    with dataset_kit.profile() as p:
        with dataset_kit.phase("inside"):
            pass
    with dataset_kit.phase("after"):
        pass
    assert set(p.summary()["marked"]["main"]) == {"inside"}


def test_a_marked_function_keeps_its_name_result_and_errors() -> None:
    @dataset_kit.phase("double")
    def double(x: int) -> int:
        """Twice x."""
        if x < 0:
            raise ValueError("negative")
        return 2 * x

    with dataset_kit.profile() as p:
        assert double(3) == 6
        with pytest.raises(ValueError, match="negative"):
            double(-1)
    assert double.__name__ == "double" and double.__doc__ == "Twice x."
    assert p.summary()["marked"]["main"]["double"]["spans"] == 2


@pytest.mark.parametrize("bad, error", [(3, TypeError), ("", ValueError), (None, TypeError)])
def test_phase_rejects_a_bad_name(bad: object, error: type) -> None:
    with pytest.raises(error, match="name"):
        dataset_kit.phase(bad)  # type: ignore[arg-type]


def test_phase_decorates_only_a_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        dataset_kit.phase("x")(3)  # type: ignore[arg-type]


def test_plot_draws_the_workers_rows(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from dataset_kit.iterators import MultiprocessIterator

    it = MultiprocessIterator(_Marked(8, 0.0), 2, repeat=False, shuffle=False, n_processes=2)
    try:
        with dataset_kit.profile(it) as p:
            _loop(it, 0.0)
    finally:
        it.finalize()
    assert p.plot(tmp_path / "p.png") == str(tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
