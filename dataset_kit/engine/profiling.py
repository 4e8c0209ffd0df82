"""``profile``: where a training loop's time goes, batch by batch.

While a :class:`Profile` is active it is told of every batch every engine of
the process hands out (the engine's ``next()``: when it began and how long
it blocked), and samples memory (the RSS of this process's children, the
workers, and the shared-memory blocks in use) at most every
``memory_interval`` seconds. From that it names the bottleneck in one
sentence, gives its numbers (:meth:`Profile.to_json`), a Chrome trace of
every batch (:meth:`Profile.save_trace`, viewable in Perfetto) and a picture
(:meth:`Profile.plot`: a PNG with matplotlib, a text chart without).

Worker processes send with each batch when they fell idle, fetched, converted
and copied it into shared memory, and the sums of the spans the user marked
with :class:`dataset_kit.phase`; in the main process each marked span (the
converters and device copies mark themselves) is recorded where it ran.

Recording one batch is a few list appends; it stays cheap enough to keep on.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dataset_kit import _phases
from dataset_kit.engine._stats import (
    add_decision_observer,
    add_observer,
    add_phase_observer,
    children_rss,
    remove_decision_observer,
    remove_observer,
    remove_phase_observer,
    shm_blocks_in_use,
)

#: The share of its time the loop may wait on batches before the input
#: pipeline is named the bottleneck.
WAIT_BOTTLENECK = 0.10
#: Slices kept for the trace and the picture, per kind (worker batches, the
#: main process's marked spans); beyond it only the sums grow, so a profile
#: left on for days stays small.
MAX_SLICES = 200_000
# The workers' phases, in the order of their clock readings.
_WORKER_PHASES = ("idle", "fetch", "convert", "pack")
_PHASE_TITLES = {"idle": "idle", "fetch": "fetch", "convert": "converter",
                 "pack": "copy into shared memory"}
_PHASE_COLOURS = {"fetch": "tab:orange", "convert": "tab:purple", "pack": "tab:brown"}

class Profile:
    """What :func:`profile` recorded: each batch's wait, the time between, memory.

    Args:
        memory_interval: seconds between memory samples (0 for none).

    Raises:
        ValueError: if ``memory_interval`` is negative.
    """

    def __init__(self, memory_interval: float = 1.0) -> None:
        if not isinstance(memory_interval, (int, float)) or memory_interval < 0:
            raise ValueError(f"memory_interval must be a number >= 0, got {memory_interval!r}")
        self._memory_interval = float(memory_interval)
        # (engine id, start, wait, examples) per batch, in the order handed out.
        self._batches: list[tuple[int, float, float, int]] = []
        # (time, {pid: rss}, shm blocks)
        self._memory: list[tuple[float, dict[int, int], int | None]] = []
        # (time, num_workers="auto" decision) as the engines made them
        self._decisions: list[tuple[float, Any]] = []
        # per worker index: [idle, fetch, convert, pack] seconds and batches
        self._phases: dict[int, list[float]] = {}
        # per worker batch: (worker, the five clock readings, marks), up to MAX_SLICES
        self._worker_batches: list[tuple[int, tuple, tuple]] = []
        # marked spans' [seconds, spans] by (where, name); where is "workers" or "main"
        self._marks: dict[tuple[str, str], list[float]] = {}
        # the main process's marked spans: (name, start, end, thread), up to MAX_SLICES
        self._main_spans: list[tuple[str, float, float, int]] = []
        self._started: float | None = None
        self._stopped: float | None = None
        self._next_sample = 0.0

    # -- recording ---------------------------------------------------------------

    def start(self) -> None:
        """Begin recording (idempotent)."""
        if self._started is None or self._stopped is not None:
            self._started = time.perf_counter() if self._started is None else self._started
            self._stopped = None
            add_observer(self._observe)
            add_decision_observer(self._decide)
            add_phase_observer(self._phase)
            _phases.add_listener(self._span_marked)
            self._sample(self._started)
            self._next_sample = 0.0  # and at the first batch, when workers are up

    def stop(self) -> None:
        """Stop recording (idempotent)."""
        if self._started is not None and self._stopped is None:
            remove_observer(self._observe)
            remove_decision_observer(self._decide)
            remove_phase_observer(self._phase)
            _phases.remove_listener(self._span_marked)
            self._stopped = time.perf_counter()
            self._sample(self._stopped)

    def _observe(self, engine: Any, start: float, wait: float, examples: int) -> None:
        self._batches.append((id(engine), start, wait, examples))
        if self._memory_interval and start >= self._next_sample:
            self._sample(start)

    def _phase(self, worker: int, phases: tuple, marks: tuple = ()) -> None:
        sums = self._phases.get(worker)
        if sums is None:
            sums = self._phases[worker] = [0.0, 0.0, 0.0, 0.0, 0]
        for i in range(4):
            sums[i] += phases[i + 1] - phases[i]
        sums[4] += 1
        for name, seconds, spans in marks:
            self._add_mark("workers", name, seconds, spans)
        if len(self._worker_batches) < MAX_SLICES:
            self._worker_batches.append((worker, phases, marks))

    def _span_marked(self, name: str, start: float, end: float, thread: int) -> None:
        self._add_mark("main", name, end - start, 1)
        if len(self._main_spans) < MAX_SLICES:
            self._main_spans.append((name, start, end, thread))

    def _add_mark(self, where: str, name: str, seconds: float, spans: int) -> None:
        sums = self._marks.get((where, name))
        if sums is None:
            self._marks[(where, name)] = [seconds, spans]
        else:
            sums[0] += seconds
            sums[1] += spans

    def _decide(self, engine: Any, decision: Any) -> None:
        self._decisions.append((time.perf_counter(), decision))

    def _sample(self, now: float) -> None:
        if self._memory_interval:
            self._memory.append((now, children_rss(), shm_blocks_in_use()))
            self._next_sample = now + self._memory_interval

    # -- the numbers -------------------------------------------------------------

    @property
    def batches(self) -> int:
        """Batches recorded."""
        return len(self._batches)

    def _span(self) -> tuple[float, float]:
        start = self._started if self._started is not None else 0.0
        stop = self._stopped if self._stopped is not None else time.perf_counter()
        return start, stop

    def summary(self) -> dict[str, Any]:
        """Return the totals: wall time, the loop's wait and share, batches, examples, memory."""
        start, stop = self._span()
        wall = max(stop - start, 0.0)
        wait = sum(b[2] for b in self._batches)
        waits = sorted(b[2] for b in self._batches)
        peak_rss = max((sum(rss.values()) for _, rss, _ in self._memory), default=0)
        peak_shm = max((s for _, _, s in self._memory if s is not None), default=None)
        return {
            "wall_seconds": wall,
            "batches": len(self._batches),
            "examples": sum(b[3] for b in self._batches),
            "wait_seconds": wait,
            "wait_fraction": wait / wall if wall else 0.0,
            "median_wait_seconds": waits[len(waits) // 2] if waits else 0.0,
            "max_wait_seconds": waits[-1] if waits else 0.0,
            "workers_peak_rss_bytes": peak_rss,
            "peak_workers": max((len(rss) for _, rss, _ in self._memory), default=0),
            "peak_shm_blocks": peak_shm,
            "workers": self._workers(),
            "marked": self._marked(),
        }

    def _marked(self) -> dict[str, Any]:
        """The marked phases' seconds and spans: in the workers, and in the main process."""
        marked: dict[str, Any] = {"workers": {}, "main": {}}
        for (where, name), (seconds, spans) in sorted(self._marks.items()):
            marked[where][name] = {"seconds": seconds, "spans": int(spans)}
        return marked

    def _workers(self) -> dict[str, Any]:
        """Each worker process's phases in seconds, and the share of its time busy."""
        workers: dict[str, Any] = {}
        for index, (idle, fetch, convert, pack, batches) in sorted(self._phases.items()):
            total = idle + fetch + convert + pack
            workers[str(index)] = {
                "batches": int(batches), "idle": idle, "fetch": fetch, "convert": convert,
                "pack": pack, "busy_fraction": (total - idle) / total if total else 0.0}
        return workers

    def _busiest_phase(self) -> tuple[float, str] | None:
        """The workers' busy share over all, and the phase most of it went to, or None."""
        if not self._phases:
            return None
        sums = [sum(p[i] for p in self._phases.values()) for i in range(4)]
        total = sum(sums)
        if not total:
            return None
        names = {1: "fetching (the dataset's getitem or batch hook)",
                 2: "in the converter", 3: "copying into shared memory"}
        phase = max(names, key=lambda i: sums[i])
        name = names[phase]
        if phase == 1:
            marked = {n: s for (where, n), (s, _) in self._marks.items() if where == "workers"}
            top = max(marked, key=marked.__getitem__, default=None)
            if top is not None and marked[top] > 0.5 * sums[1]:
                name = f"fetching, mostly in the phase marked {top!r}"
        return (total - sums[0]) / total, name

    def bottleneck(self) -> str:
        """Name the bottleneck in one sentence, with what to do about it."""
        s = self.summary()
        if not s["batches"]:
            return "no batch was recorded: was the iterator used inside the profile?"
        share = f"the loop waited {s['wait_fraction']:.0%} of the time"
        if s["wait_fraction"] >= WAIT_BOTTLENECK:
            first = self._batches[0][2]
            if first > 0.5 * s["wait_seconds"] and s["batches"] > 1:
                return (f"{share}, most of it for the first batch ({first:.3f} s): starting "
                        f"workers and opening files dominates; profile a longer run")
            busy = self._busiest_phase()
            if busy is not None and busy[0] < 0.5:
                return (f"{share}; the workers were only {busy[0]:.0%} busy: the main "
                        f"process (unpacking, the converter) or too few batches in flight "
                        f"holds the loop: raise prefetch, or move the converter into the "
                        f"workers (converter=)")
            if busy is not None:
                return (f"{share}; workers were {busy[0]:.0%} busy, most of it {busy[1]}: "
                        f"add workers (num_workers), or make that cheaper")
            return (f"{share}: the input pipeline is the bottleneck: add workers "
                    f"(num_workers), or make get_example (and transforms) cheaper")
        return (f"{share}: the input pipeline keeps up; the training step is the "
                f"bottleneck, so more workers will not help")

    def report(self) -> str:
        """Return a short text report: the numbers and the bottleneck sentence."""
        s = self.summary()
        lines = [
            f"dataset_kit profile: {s['batches']} batches, {s['examples']} examples "
            f"in {s['wall_seconds']:.3f} s",
            f"  loop waited {s['wait_seconds']:.3f} s ({s['wait_fraction']:.1%}); "
            f"median wait {s['median_wait_seconds'] * 1e3:.2f} ms, "
            f"longest {s['max_wait_seconds'] * 1e3:.2f} ms",
        ]
        if s["peak_workers"]:
            lines.append(f"  workers: up to {s['peak_workers']}, peak RSS "
                         f"{s['workers_peak_rss_bytes'] / 2**20:.0f} MiB in all")
        for index, w in s["workers"].items():
            lines.append(f"  worker {index}: {w['batches']} batches, {w['busy_fraction']:.0%} "
                         f"busy: fetch {w['fetch']:.3f} s, convert {w['convert']:.3f} s, "
                         f"into shm {w['pack']:.3f} s, idle {w['idle']:.3f} s")
        for where, title in (("workers", "in the workers"), ("main", "in the main process")):
            for name, m in s["marked"][where].items():
                lines.append(f"  phase {name!r} {title}: {m['seconds']:.3f} s over "
                             f"{m['spans']} spans")
        if s["peak_shm_blocks"]:
            lines.append(f"  shared-memory blocks: up to {s['peak_shm_blocks']}")
        for _, d in self._decisions:
            lines.append(f"  num_workers='auto' at batch {d.batch}: {d.workers} -> "
                         f"{d.new_workers} workers, {d.reason}")
        lines.append(f"  bottleneck: {self.bottleneck()}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """Return every number recorded as a JSON-ready dict.

        Keys: ``summary`` (see :meth:`summary`), ``bottleneck`` (the sentence),
        ``batches`` (per batch: ``engine``, ``start`` in seconds from the
        profile's start, ``wait`` in seconds, ``examples``) and ``memory``
        (per sample: ``time``, ``workers_rss`` by pid, ``shm_blocks``),
        ``decisions`` (each ``num_workers="auto"`` decision and its reason),
        ``worker_batches`` (per batch a worker process built: ``worker``,
        ``idle_from``, then each phase's seconds, and ``marked``: the marked
        phases' seconds) and ``main_spans`` (each marked span of the main
        process: ``name``, ``start``, ``seconds``). The slices stop at
        :data:`MAX_SLICES` of each kind; the sums in ``summary`` do not.
        """
        origin = self._span()[0]
        engines: dict[int, int] = {}
        return {
            "summary": self.summary(),
            "bottleneck": self.bottleneck(),
            "batches": [{"engine": engines.setdefault(e, len(engines)), "start": t - origin,
                         "wait": w, "examples": n} for e, t, w, n in self._batches],
            "memory": [{"time": t - origin, "workers_rss": {str(p): r for p, r in rss.items()},
                        "shm_blocks": shm} for t, rss, shm in self._memory],
            "decisions": [{"time": t - origin, "batch": d.batch, "workers": d.workers,
                           "new_workers": d.new_workers, "wait_fraction": d.wait_fraction,
                           "reason": d.reason} for t, d in self._decisions],
            "worker_batches": [
                {"worker": w, "idle_from": c[0] - origin,
                 **{name: c[i + 1] - c[i] for i, name in enumerate(_WORKER_PHASES)},
                 "marked": {n: sec for n, sec, _ in marks}}
                for w, c, marks in self._worker_batches],
            "main_spans": [{"name": n, "start": a - origin, "seconds": b - a}
                           for n, a, b, _ in self._main_spans],
        }

    def save_json(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_json` to ``path``."""
        with open(path, "w") as f:
            json.dump(self.to_json(), f)

    def save_trace(self, path: str | os.PathLike) -> None:
        """Write a Chrome trace (JSON) of every batch to ``path``; open it in Perfetto.

        The loop's row shows each ``next()`` wait and the step between two
        batches; each worker process has a row of its batches' phases (idle,
        fetch, converter, copy into shared memory), with the phases the user
        marked inside its fetch (their sum over the batch, one slice per
        name, from the fetch's start); the main process's marked spans (the
        converter, device copies, marked transforms run in this process)
        have a row per thread. Counters show the workers' RSS and the
        shared-memory blocks.
        """
        origin = self._span()[0]
        pid = os.getpid()
        events: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "training loop"}}]
        engines: dict[int, int] = {}
        previous_end: dict[int, float] = {}
        for engine, start, wait, examples in self._batches:
            tid = engines.setdefault(engine, len(engines))
            if tid not in previous_end:
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                               "args": {"name": f"loop (engine {tid})"}})
            else:
                events.append({"ph": "X", "name": "step", "cat": "loop", "pid": pid, "tid": tid,
                               "ts": (previous_end[tid] - origin) * 1e6,
                               "dur": max(start - previous_end[tid], 0.0) * 1e6})
            events.append({"ph": "X", "name": "next() wait", "cat": "loop", "pid": pid,
                           "tid": tid, "ts": (start - origin) * 1e6, "dur": wait * 1e6,
                           "args": {"examples": examples}})
            previous_end[tid] = start + wait
        events.extend(self._phase_events(pid, origin))
        for t, rss, shm in self._memory:
            counters = {"workers_rss_mib": sum(rss.values()) / 2**20}
            if shm is not None:
                counters["shm_blocks"] = shm
            events.append({"ph": "C", "name": "memory", "pid": pid, "ts": (t - origin) * 1e6,
                           "args": counters})
        for t, d in self._decisions:
            events.append({"ph": "i", "s": "p", "name": f"workers {d.workers} -> {d.new_workers}",
                           "pid": pid, "ts": (t - origin) * 1e6, "args": {"reason": d.reason}})
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)

    def _phase_events(self, pid: int, origin: float) -> list[dict[str, Any]]:
        """The trace's slices of the workers' phases and of the main process's marked spans."""
        events: list[dict[str, Any]] = []
        named: set[int] = set()

        def slice_(tid: int, label: str, name: str, start: float, seconds: float,
                   args: dict | None = None) -> None:
            if tid not in named:
                named.add(tid)
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                               "args": {"name": label}})
            event = {"ph": "X", "name": name, "cat": "phase", "pid": pid, "tid": tid,
                     "ts": (start - origin) * 1e6, "dur": max(seconds, 0.0) * 1e6}
            if args:
                event["args"] = args
            events.append(event)

        # Rows after the loops' (which are numbered from 0 by engine).
        for worker, clocks, marks in self._worker_batches:
            tid, label = 1000 + worker, f"worker {worker}"
            for i, phase in enumerate(_WORKER_PHASES):
                if phase != "idle" or clocks[i + 1] > clocks[i]:
                    slice_(tid, label, _PHASE_TITLES[phase], clocks[i], clocks[i + 1] - clocks[i])
            at = clocks[1]
            for name, seconds, spans in marks:
                # Summed over the batch's spans, so placed one after another
                # from the fetch's start and cut at its end.
                seconds = min(seconds, clocks[2] - at)
                slice_(tid, label, name, at, seconds,
                       {"spans": spans, "note": "the sum of this batch's spans"})
                at += seconds
        threads: dict[int, int] = {}
        for name, start, end, thread in self._main_spans:
            row = threads.setdefault(thread, len(threads))
            slice_(2000 + row, f"main process, thread {row}: marked phases", name, start,
                   end - start)
        return events

    # -- pictures ---------------------------------------------------------------

    def text_chart(self, width: int = 60) -> str:
        """Return a text picture: where the time went, and the wait along the run.

        Args:
            width: characters of the bars.
        """
        s = self.summary()
        waited = round(s["wait_fraction"] * width)
        lines = ["where the time went (# waiting for batches, . the training step):",
                 "  [" + "#" * waited + "." * (width - waited) + "]"]
        if self._batches:
            # The wait along the run: one column per slice of batches, its height in 8 levels.
            marks = " ▁▂▃▄▅▆▇█"
            n = len(self._batches)
            columns = min(width, n)
            sums = [0.0] * columns
            for i, (_, _, wait, _) in enumerate(self._batches):
                sums[i * columns // n] += wait
            top = max(sums) or 1.0
            lines.append("wait of next() along the run (start → end):")
            lines.append("  |" + "".join(marks[round(v / top * 8)] for v in sums) + "|")
        return "\n".join(lines)

    def plot(self, path: str | os.PathLike | None = None) -> str:
        """Draw the picture: a PNG at ``path`` with matplotlib, else a text chart.

        The PNG has a timeline (each wait of ``next()`` as a red bar, each
        worker's phases, the marked phases, the workers' RSS over it) and
        stacked bars of where the loop's and the workers' time went.

        Args:
            path: where to write the PNG; None to only return the text chart.

        Returns:
            The PNG's path, or the text chart when matplotlib is absent or
            ``path`` is None.
        """
        if path is None:
            return self.text_chart()
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return self.text_chart()
        origin = self._span()[0]
        s = self.summary()
        figure, (timeline, bar) = plt.subplots(
            1, 2, figsize=(12, 3.5 + 0.25 * len(self._phases)),
            gridspec_kw={"width_ratios": [4, 1]})
        engines: dict[int, int] = {}
        for engine, start, wait, _ in self._batches:
            row = engines.setdefault(engine, len(engines))
            timeline.broken_barh([(start - origin, wait)], (row - 0.4, 0.8), color="tab:red")
        labels = [f"loop {i}" for i in range(max(len(engines), 1))]
        # One row per worker: its phases in colour (idle left blank), the marked ones in green.
        rows = {w: len(labels) + k for k, w in enumerate(sorted(self._phases))}
        labels += [f"worker {w}" for w in sorted(self._phases)]
        for worker, clocks, marks in self._worker_batches:
            row = rows[worker]
            for i, phase in enumerate(_WORKER_PHASES[1:], 1):
                timeline.broken_barh([(clocks[i] - origin, clocks[i + 1] - clocks[i])],
                                     (row - 0.4, 0.8), color=_PHASE_COLOURS[phase])
            marked = min(sum(m[1] for m in marks), clocks[2] - clocks[1])
            if marked > 0:
                timeline.broken_barh([(clocks[1] - origin, marked)], (row - 0.2, 0.4),
                                     color="tab:green")
        if self._main_spans:
            row = len(labels)
            labels.append("main: marked")
            timeline.broken_barh([(a - origin, b - a) for _, a, b, _ in self._main_spans],
                                 (row - 0.4, 0.8), color="tab:green")
        timeline.set_yticks(range(len(labels)))
        timeline.set_yticklabels(labels)
        timeline.set_xlabel("seconds (red: the loop waits; workers: orange fetch, purple "
                            "converter, brown into shm; green: marked phases)")
        if self._memory:
            memory = timeline.twinx()
            memory.plot([t - origin for t, _, _ in self._memory],
                        [sum(r.values()) / 2**20 for _, r, _ in self._memory], color="tab:blue")
            memory.set_ylabel("workers' RSS, MiB")
        waited = s["wait_seconds"]
        bar.bar([0], [waited], color="tab:red", label="loop: waiting")
        bar.bar([0], [max(s["wall_seconds"] - waited, 0.0)], bottom=[waited],
                color="tab:grey", label="loop: training step")
        # The workers' time, summed over workers, by phase (the marked part of fetch apart).
        marked = sum(m["seconds"] for m in s["marked"]["workers"].values())
        bottom = 0.0
        for phase in _WORKER_PHASES if self._phases else ():
            seconds = sum(w[phase] for w in s["workers"].values())
            if phase == "fetch":
                seconds -= marked
                bar.bar([1], [marked], bottom=[bottom], color="tab:green",
                        label="workers: marked phases")
                bottom += marked
            bar.bar([1], [max(seconds, 0.0)], bottom=[bottom],
                    color=_PHASE_COLOURS.get(phase, "white"), edgecolor="black",
                    label=f"workers: {_PHASE_TITLES[phase]}")
            bottom += max(seconds, 0.0)
        bar.set_xticks([0, 1] if self._phases else [0])
        bar.set_xticklabels(["loop", "workers"] if self._phases else ["loop"])
        bar.set_ylabel("seconds")
        bar.legend(fontsize="x-small")
        figure.suptitle(self.bottleneck(), fontsize="small")
        figure.tight_layout()
        figure.savefig(path)
        plt.close(figure)
        return os.fspath(path)


@contextmanager
def profile(it: Any = None, *, memory_interval: float = 1.0) -> Iterator[Profile]:
    """Record where a training loop's time goes while the block runs.

    Every engine of the process is recorded (a loop over several iterators
    shows each on its own row); ``it``, when given, is the iterator the
    profile is about, checked to be one of ours.

    Args:
        it: the iterator or loader being profiled (optional).
        memory_interval: seconds between memory samples (0 for none).

    Yields:
        The :class:`Profile`, recording until the block ends.

    Raises:
        TypeError: if ``it`` is given and is not an iterator or loader.
        ValueError: if ``memory_interval`` is negative.

    Example::

        with dataset_kit.profile(it) as p:
            for batch in it:
                step(batch)
        print(p.report())
        p.save_trace("trace.json")
    """
    if it is not None and not hasattr(it, "__iter__") and not hasattr(it, "__next__"):
        raise TypeError(f"it must be an iterator or loader, got {type(it).__name__}")
    p = Profile(memory_interval)
    p.start()
    try:
        yield p
    finally:
        p.stop()
