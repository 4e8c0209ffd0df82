"""A resume oracle users run on their own pipelines: :func:`check_resume`.

dataset_kit promises that a loader restored from ``state_dict()`` yields
exactly the batches the uninterrupted loader would have yielded, for any
number of workers, and that a job resumed on another number of ranks covers
each epoch exactly once. :func:`check_resume` checks that promise on *your*
loader, with your dataset and transforms, the way a property-based test
would: it runs the uninterrupted reference, then many runs interrupted at
random steps (across epoch boundaries, resumed with other worker counts, and
N→M ranks simulated as threads of this process), and compares. When a run
differs it shrinks the interruption schedule and reports the shortest one
that still shows the difference, with the first batch that differs.

It knows no door by name. A loader is driven through the protocols users
already drive it with:

* an *iterator* (``next(loader)``; Chainer's iterators, NNabla's
  ``DataIterator``, :class:`~dataset_kit.distributed.ShardedIterator`): one
  stream of batches; ``loader.epoch`` counts epochs;
* an MXNet-style ``DataIter`` (``provide_data`` and ``reset()``): an epoch
  ends with ``StopIteration`` and ``reset()`` starts the next;
* an *iterable* (``iter(loader)`` per epoch: PyTorch's and Gluon's
  ``DataLoader``): an epoch ends with ``StopIteration``, the next ``iter()``
  starts the next epoch, and after ``load_state_dict`` the next ``iter()``
  continues the saved epoch.

Checkpoints go through ``state_dict()`` / ``load_state_dict()``, round-tripped
through JSON (pickle where a state is not JSON-ready), as a real checkpoint
file would be.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import pickle
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dataset_kit.distributed.communicators import SingleProcessCommunicator, ThreadRanks

__all__ = ["ResumeCheckError", "batch_digest", "check_resume", "examples_of"]

#: ``make_loader(workers=..., comm=...)`` builds one rank's loader: ``workers``
#: is the number of worker processes (0: none), ``comm`` the communicator of
#: the rank (a one-rank communicator outside the rank checks).
LoaderFactory = Callable[..., Any]


class ResumeCheckError(AssertionError):
    """A resumed run differed from the uninterrupted one (the message shows the shortest case)."""


# -- what a batch is, for comparison --------------------------------------------------


def _feed(digest: Any, value: Any) -> None:
    """Add ``value``'s canonical bytes to ``digest`` (arrays by dtype, shape and bytes)."""
    value = _as_numpy(value)
    if isinstance(value, np.ndarray):
        digest.update(b"A" + value.dtype.str.encode() + repr(value.shape).encode())
        if value.dtype.hasobject:
            for item in value.ravel():
                _feed(digest, item)
        else:
            digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, dict):
        digest.update(b"D%d" % len(value))
        for key in sorted(value, key=repr):
            _feed(digest, key)
            _feed(digest, value[key])
    elif isinstance(value, (str, bytes, int, float, complex, bool, np.generic)) or value is None:
        digest.update(b"S" + type(value).__name__.encode() + repr(value).encode())
    elif _is_sequence(value):
        digest.update(b"L%d" % len(value))
        for item in value:
            _feed(digest, item)
    else:
        digest.update(b"O" + type(value).__qualname__.encode() + repr(value).encode())


def _as_numpy(value: Any) -> Any:
    """A framework's array (torch tensor, MXNet NDArray) as numpy; anything else as it is."""
    if isinstance(value, np.ndarray):
        return value
    if callable(getattr(value, "asnumpy", None)):  # MXNet's NDArray
        return value.asnumpy()
    if callable(getattr(value, "detach", None)) and callable(getattr(value, "numpy", None)):
        return value.detach().cpu().numpy()  # a torch tensor
    return value


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def batch_digest(batch: Any) -> str:
    """Return a hex digest of a batch (or example) that two equal batches share.

    Arrays count by dtype, shape and bytes, so a float32 batch never equals
    its float64 twin; torch tensors and MXNet NDArrays count as their numpy
    values; dicts by key; lists and tuples item by item.
    """
    digest = hashlib.blake2b(digest_size=16)
    _feed(digest, batch)
    return digest.hexdigest()


def examples_of(batch: Any) -> list[Any]:
    """Split a batch into its examples, whichever form the loader gives it.

    A list of examples (Chainer's batches) is itself; collated arrays, tuples
    and dicts of arrays are cut along their first axis; an MXNet ``DataBatch``
    gives its data's rows without the ``pad`` rows at its end.
    """
    if hasattr(batch, "data") and hasattr(batch, "pad") and _is_sequence(batch.data):
        rows = examples_of(tuple(batch.data))
        return rows[:len(rows) - int(batch.pad or 0)]
    batch = _as_numpy(batch)
    if isinstance(batch, np.ndarray):
        return list(batch) if batch.ndim else [batch]
    if isinstance(batch, dict):
        columns = {key: examples_of(value) for key, value in batch.items()}
        lengths = {len(value) for value in columns.values()}
        if len(lengths) != 1:
            return [batch]
        return [{key: value[i] for key, value in columns.items()} for i in range(lengths.pop())]
    if isinstance(batch, tuple) and batch and all(
            isinstance(_as_numpy(part), (np.ndarray, dict)) for part in batch):
        parts = [examples_of(part) for part in batch]
        if len({len(part) for part in parts}) == 1:
            return [tuple(row) for row in zip(*parts)]
    if _is_sequence(batch):
        return list(batch)
    return [batch]


# -- driving a loader ------------------------------------------------------------------


class _EpochEnded(Exception):
    """The loader ended an epoch; the next call starts the next one."""


class _Stream:
    """One loader driven as a stream of batches across epochs (see the module's doc)."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.is_iterator = callable(getattr(loader, "__next__", None))
        self.is_data_iter = self.is_iterator and hasattr(loader, "provide_data") and callable(
            getattr(loader, "reset", None))
        self._epoch_iterator: Iterator[Any] | None = None

    def next_batch(self) -> Any:
        """Return the next batch.

        Raises:
            _EpochEnded: the loader ended an epoch (an iterable's or a
                ``DataIter``'s); the next call starts the next epoch.
            StopIteration: a non-repeating iterator has ended for good.
        """
        try:
            if self.is_iterator:
                return next(self.loader)
            if self._epoch_iterator is None:
                self._epoch_iterator = iter(self.loader)
            return next(self._epoch_iterator)
        except StopIteration:
            if self.is_data_iter:
                self.loader.reset()
            elif self.is_iterator:
                raise
            else:
                self._epoch_iterator = None
            raise _EpochEnded from None

    def epoch(self) -> int | None:
        """The loader's epoch counter, where it has one."""
        epoch = getattr(self.loader, "epoch", None)
        return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def _saved(state: Any) -> Any:
    """The state as a checkpoint file gives it back: through JSON, or pickle when not JSON-ready."""
    try:
        return json.loads(json.dumps(state))
    except (TypeError, ValueError):
        return pickle.loads(pickle.dumps(state))


def _close(loader: Any) -> None:
    for name in ("finalize", "close", "shutdown"):
        method = getattr(loader, name, None)
        if callable(method):
            method()
            return


def _build(make_loader: LoaderFactory, workers: int, comm: Any) -> Any:
    return make_loader(workers=workers, comm=comm)


# -- single-rank runs ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Cut:
    """An interruption: checkpoint after ``step`` batches, resume with ``workers`` workers."""

    step: int
    workers: int

    def __str__(self) -> str:
        return f"after batch {self.step}, resume with workers={self.workers}"


def _run(make_loader: LoaderFactory, steps: int, first_workers: int,
         cuts: Sequence[_Cut]) -> list[str]:
    """Digests of ``steps`` batches from one run interrupted at ``cuts``."""
    pending = sorted(cuts, key=lambda cut: cut.step)
    digests: list[str] = []
    empty_epochs = 0
    loader = _build(make_loader, first_workers, SingleProcessCommunicator())
    try:
        stream = _Stream(loader)
        while len(digests) < steps:
            while pending and pending[0].step == len(digests):
                cut = pending.pop(0)
                state = _saved(loader.state_dict())
                _close(loader)
                loader = _build(make_loader, cut.workers, SingleProcessCommunicator())
                loader.load_state_dict(state)
                stream = _Stream(loader)
            try:
                digests.append(batch_digest(stream.next_batch()))
                empty_epochs = 0
            except _EpochEnded:
                empty_epochs += 1
                if empty_epochs > 2:  # epochs without batches: the stream has ended
                    break
            except StopIteration:
                break
    finally:
        _close(loader)
    return digests


def _reference(make_loader: LoaderFactory, workers: int, epochs: int,
               max_batches: int) -> tuple[list[str], list[int]]:
    """The uninterrupted run's digests over ``epochs`` epochs, and the step each epoch ended."""
    loader = _build(make_loader, workers, SingleProcessCommunicator())
    digests: list[str] = []
    ends: list[int] = []
    try:
        stream = _Stream(loader)
        while len(ends) < epochs and len(digests) < max_batches:
            before = stream.epoch()
            try:
                batch = stream.next_batch()
            except _EpochEnded:
                if ends and ends[-1] == len(digests):
                    break  # two ends in a row: an empty epoch, the stream has ended
                ends.append(len(digests))
                continue
            except StopIteration:
                break
            digests.append(batch_digest(batch))
            after = stream.epoch()
            if before is not None and after is not None and after > before:
                ends.append(len(digests))
    finally:
        _close(loader)
    return digests, ends


def _first_difference(reference: list[str], got: list[str]) -> int | None:
    for step, (want, have) in enumerate(zip(reference, got)):
        if want != have:
            return step
    if len(reference) != len(got):
        return min(len(reference), len(got))
    return None


def _shrink(fails: Callable[[list[_Cut]], bool], cuts: list[_Cut],
            budget: int = 40) -> list[_Cut]:
    """A shorter schedule that still fails: drop cuts, then move each cut earlier."""
    runs = 0
    changed = True
    while changed and runs < budget:
        changed = False
        for i in range(len(cuts)):
            trial = cuts[:i] + cuts[i + 1:]
            runs += 1
            if trial and fails(trial):
                cuts, changed = trial, True
                break
        if changed:
            continue
        for i, cut in enumerate(cuts):
            for step in sorted({0, 1, cut.step // 2, cut.step - 1}):
                if not 0 <= step < cut.step or runs >= budget:
                    continue
                trial = sorted(cuts[:i] + [_Cut(step, cut.workers)] + cuts[i + 1:],
                               key=lambda c: c.step)
                runs += 1
                if fails(trial):
                    cuts, changed = trial, True
                    break
            if changed:
                break
    return cuts


def _describe_run(cuts: Sequence[_Cut], first_workers: int) -> str:
    steps = "; ".join(str(cut) for cut in cuts) or "no interruption"
    return f"start with workers={first_workers}; {steps}"


# -- rank runs -------------------------------------------------------------------------


def _run_ranks(make_loader: LoaderFactory, ranks: int, workers: int, *, state: Any,
               stop_after: int | None, until_epoch: int,
               timeout: float) -> tuple[list[dict[int, list[str]]], Any, int]:
    """Run ``ranks`` ranks as threads; return per-rank {epoch: example digests}, a state, batches.

    Each rank starts from ``state`` (None: the beginning), takes ``stop_after``
    batches (None: until its epoch counter reaches ``until_epoch``), and the
    state and the number of batches of rank 0 are returned.
    """
    group = ThreadRanks(ranks, timeout=timeout)
    seen: list[dict[int, list[str]]] = [collections.defaultdict(list) for _ in range(ranks)]
    states: list[Any] = [None] * ranks
    taken_by_rank = [0] * ranks
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        loader = None
        try:
            loader = _build(make_loader, workers, group.communicator(rank))
            if state is not None:
                loader.load_state_dict(_saved(state))
            taken = 0
            while True:
                epoch = getattr(loader, "epoch", None)
                if not isinstance(epoch, int):
                    raise TypeError("the rank checks need an iterator with an epoch counter "
                                    f"(ShardedIterator's); {type(loader).__name__} has none")
                if stop_after is not None and taken >= stop_after:
                    break
                if stop_after is None and epoch >= until_epoch:
                    break
                try:
                    batch = next(loader)
                except StopIteration:
                    break
                taken += 1
                rows = examples_of(batch)
                pad = getattr(loader, "last_pad", 0) if loader.is_new_epoch else 0
                rows = rows[:len(rows) - int(pad or 0)]
                seen[rank][epoch] += [batch_digest(row) for row in rows]
            states[rank] = loader.state_dict()
            taken_by_rank[rank] = taken
        except BaseException as error:  # noqa: BLE001 - reported on the caller's thread
            errors.append(error)
            group.abort()
        finally:
            if loader is not None:
                _close(loader)

    threads = [threading.Thread(target=rank_main, args=(rank,), daemon=True)
               for rank in range(ranks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout * 4)
    if any(thread.is_alive() for thread in threads):
        raise ResumeCheckError(f"a run on {ranks} ranks did not finish within {timeout * 4} s")
    if errors:
        raise errors[0]
    return seen, states[0], taken_by_rank[0]


# -- the oracle ------------------------------------------------------------------------


def check_resume(make_loader: LoaderFactory, *, epochs: int = 2,
                 workers: Sequence[int] = (0, 2),
                 ranks: Sequence[tuple[int, int]] | None = ((2, 3), (3, 2)),
                 interruptions: int = 20, seed: int = 0, max_batches: int = 100_000,
                 timeout: float = 120.0) -> None:
    """Check that ``make_loader``'s loader resumes exactly; raise with the shortest failing case.

    1. The reference: one uninterrupted run of ``epochs`` epochs with
       ``workers[0]`` workers. Every other worker count must give the same
       batches.
    2. ``interruptions`` runs, each checkpointed at one to three random steps
       (epoch boundaries among them) and resumed from the saved state (through
       JSON, as from a file) with a worker count drawn from ``workers``: the
       concatenated stream must equal the reference, batch for batch.
    3. For each ``(n, m)`` in ``ranks``: ``n`` ranks (threads of this process)
       run to a random step, save, and ``m`` ranks resume from rank 0's state;
       every epoch must then be covered exactly once: the examples the ranks
       consumed in it, together, are the reference epoch's, as a multiset.

    Args:
        make_loader: ``make_loader(workers=w, comm=c)`` returns a new loader
            (any door) over your dataset, with ``w`` workers, for the rank
            ``c`` (a communicator: pass it to
            :class:`~dataset_kit.distributed.ShardedIterator`, or ignore it and
            pass ``ranks=None``). It must build the same pipeline every call.
        epochs: epochs in the reference run (>= 1).
        workers: worker counts to run and resume with (``workers[0]`` builds
            the reference).
        ranks: pairs ``(n, m)``: save on ``n`` ranks, resume on ``m``; None or
            ``()`` skips the rank checks (a loader that takes no ``comm``).
        interruptions: how many interrupted runs to try (>= 0).
        seed: the seed of the random interruption schedules.
        max_batches: a bound on the reference run, for a loader that never
            ends its epochs.
        timeout: seconds a simulated rank may wait in a collective.

    Raises:
        ResumeCheckError: (an AssertionError) if a run differs: the message
            names the shortest interruption schedule found that still differs
            and the first batch (or epoch and example count) that differs.
        ValueError: if an argument is out of range.
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    workers = tuple(workers)
    if not workers or any(isinstance(w, bool) or not isinstance(w, int) or w < 0
                          for w in workers):
        raise ValueError(f"workers must be a non-empty sequence of integers >= 0, got {workers!r}")
    if isinstance(interruptions, bool) or not isinstance(interruptions, int) or interruptions < 0:
        raise ValueError(f"interruptions must be an integer >= 0, got {interruptions!r}")
    pairs = tuple(ranks or ())
    for pair in pairs:
        if (not isinstance(pair, tuple) or len(pair) != 2
                or any(isinstance(r, bool) or not isinstance(r, int) or r < 1 for r in pair)):
            raise ValueError(f"ranks must hold pairs of positive integers (n, m), got {pair!r}")
    if not callable(make_loader):
        raise TypeError(f"make_loader must be callable, got {type(make_loader).__name__}")

    reference, ends = _reference(make_loader, workers[0], epochs, max_batches)
    if not reference:
        raise ValueError("the reference run yielded no batch: nothing to check")
    steps = len(reference)
    for count in workers[1:]:
        got = _run(make_loader, steps, count, [])
        at = _first_difference(reference, got)
        if at is not None:
            raise ResumeCheckError(
                f"without any interruption, workers={count} differs from workers={workers[0]} "
                f"at batch {at} of {steps}: the batches depend on the number of workers")

    rng = random.Random(seed)
    boundaries = [end for end in ends if 0 < end < steps]

    def failure(cuts: list[_Cut]) -> int | None:
        return _first_difference(reference, _run(make_loader, steps, workers[0], cuts))

    for _ in range(interruptions):
        count = rng.randint(1, min(3, steps))
        points = set(rng.sample(range(1, steps), min(count, steps - 1))) if steps > 1 else {0}
        if boundaries and rng.random() < 0.3:
            points.add(rng.choice(boundaries))  # a checkpoint right at an epoch's end
        cuts = [_Cut(step, rng.choice(workers)) for step in sorted(points)]
        if failure(cuts) is None:
            continue
        shortest = _shrink(lambda trial: failure(trial) is not None, cuts)
        at = failure(shortest)
        raise ResumeCheckError(
            f"a resumed run differs from the uninterrupted one at batch {at} of {steps} "
            f"(its epochs end at batches {ends}). Shortest schedule found: "
            f"{_describe_run(shortest, workers[0])}")

    for before, after in pairs:
        _check_elastic(make_loader, before, after, workers[0], epochs, rng, timeout)


def _check_elastic(make_loader: LoaderFactory, before: int, after: int, workers: int,
                   epochs: int, rng: random.Random, timeout: float) -> None:
    """Save on ``before`` ranks at a random step, resume on ``after``: each epoch exactly once."""
    reference, _, _ = _run_ranks(make_loader, 1, workers, state=None, stop_after=None,
                                 until_epoch=epochs, timeout=timeout)
    want = {epoch: collections.Counter(rows) for epoch, rows in reference[0].items()}
    _, _, batches = _run_ranks(make_loader, before, workers, state=None, stop_after=None,
                               until_epoch=epochs, timeout=timeout)
    stop = rng.randint(1, max(1, batches - 1))
    seen_before, state, _ = _run_ranks(make_loader, before, workers, state=None,
                                       stop_after=stop, until_epoch=epochs, timeout=timeout)
    seen_after, _, _ = _run_ranks(make_loader, after, workers, state=state, stop_after=None,
                                  until_epoch=epochs, timeout=timeout)
    for epoch, expected in sorted(want.items()):
        got: collections.Counter[str] = collections.Counter()
        for seen in (*seen_before, *seen_after):
            got.update(seen.get(epoch, []))
        if got != expected:
            missing = sum((expected - got).values())
            repeated = sum((got - expected).values())
            raise ResumeCheckError(
                f"saved on {before} ranks after {stop} batches each and resumed on {after}: "
                f"epoch {epoch} lost {missing} example(s) and repeated {repeated} "
                f"(of {sum(expected.values())})")
