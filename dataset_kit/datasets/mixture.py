"""Weighted mixtures of datasets with an exact, low-discrepancy schedule.

``mix(datasets, weights, seed=...)`` is a random-access dataset whose ``k``-th
example is a pure function of ``(seed, k)``:

* **which source**: a periodic schedule built once by Tijdeman's rule (the
  chairman assignment: earliest deadline first among the sources that may
  go next). After any ``n`` examples, source ``i`` has given within one
  example of ``n * w_i`` (within ``1 - 1/(2m - 2)`` for ``m`` sources). With
  weights that are ratios of small integers (``0.1``, ``1/3``, ``[1, 2, 5]``)
  the schedule's period ``D`` is their common denominator and the bound is
  exact; other weights are rounded to multiples of ``1/65536`` first.
* **which example of that source**: the ``n``-th draw of source ``i`` is
  position ``n % len_i`` of that source's epoch ``n // len_i``, in a
  permutation drawn from ``(seed, i, epoch)``. It does not depend on the
  weights, which is what lets a re-weighted mixture continue every source
  where it stopped (:meth:`Mixture.state_at` and ``mix(..., state=...)``).

Reading is O(1) per example, without a search: the schedule is one period,
built once, so index ``k``'s source is ``schedule[k % period]``. A batch of
consecutive indices (an iterator reading the mixture in order) or of indices
inside one block of them (a rank's stride) is located a block at a time: in a
run of indices each source's draws are consecutive, so its examples are a
slice of its epoch's permutation. The batch is then grouped by source, each
source answers its group at once (array sources with one gather, into one
array), and the examples are put back in the batch's order.

Stopping follows Hugging Face's ``interleave_datasets(probabilities=...,
stopping_strategy=...)``: ``"first_exhausted"`` ends right after the draw
that takes the last example of a source, ``"all_exhausted"`` once every source
has been exhausted at least once (earlier ones start a new epoch), and
``"never"`` re-epochs every source for ever.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dataset_kit import _example_context, _gather
from dataset_kit._checks import non_negative_int
from dataset_kit._identity import identity_digest
from dataset_kit._resume_errors import MIXTURE_FINGERPRINT, ResumeMismatchError
from dataset_kit.batch import ExampleBatch
from dataset_kit.dataset import DatasetMixin, fetch_examples
from dataset_kit.datasets._states import check_state, checksum

STOPS = ("first_exhausted", "all_exhausted", "never")
#: The period of the schedule when weights are not ratios of small integers.
ROUNDED_PERIOD = 1 << 16
_STATE_KIND = "mixture"
_STATE_VERSION = 2  # the first format had no version: lengths and counts per source in full
_SOURCE_STREAM = 2  # seeds [seed, stream, source, epoch]: apart from the engine's streams


def exact_weights(weights: Any, count: int) -> list[int]:
    """Return the weights as integer shares of a period (their sum), checking them.

    Weights that are ratios of integers with a common denominator up to
    :data:`ROUNDED_PERIOD` are kept exactly (``[0.1, 0.2, 0.7]`` gives
    ``[1, 2, 7]``); others are rounded to shares of :data:`ROUNDED_PERIOD` by
    largest remainders, every positive weight keeping at least one share.

    Args:
        weights: one non-negative, finite number per source, not all zero.
        count: the number of sources.

    Raises:
        TypeError: if ``weights`` is not a sequence of numbers.
        ValueError: if a weight is negative, NaN or infinite, if all are zero,
            or if there is not one per source.
    """
    try:
        values = [float(w) for w in weights]
    except (TypeError, ValueError):
        raise TypeError(f"weights must be a sequence of numbers, one per source, "
                        f"got {weights!r}") from None
    if len(values) != count:
        raise ValueError(f"weights must have one number per source: got {len(values)} "
                         f"weights {values!r} for {count} datasets")
    for i, w in enumerate(values):
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"weights[{i}] must be a finite number >= 0, got {w!r}")
    total = sum(values)
    if total <= 0:
        raise ValueError(f"weights must not all be zero, got {values!r}")
    small = [Fraction(w).limit_denominator(ROUNDED_PERIOD) for w in values]
    if all(abs(float(f) - w) <= 1e-12 * max(1.0, w) for f, w in zip(small, values)):
        share_sum = sum(small)
        shares = [f / share_sum for f in small]
        period = math.lcm(*(f.denominator for f in shares))
        if period <= ROUNDED_PERIOD:
            return [int(f * period) for f in shares]
    exact = [w / total * ROUNDED_PERIOD for w in values]
    shares_int = [max(1, math.floor(x)) if x > 0 else 0 for x in exact]
    # Largest remainders (ties to the lower index) until the shares fill the period.
    by_remainder = sorted(range(count), key=lambda i: (-(exact[i] - math.floor(exact[i])), i))
    missing = ROUNDED_PERIOD - sum(shares_int)
    for i in by_remainder:
        if missing <= 0:
            break
        if exact[i] > 0:
            shares_int[i] += 1
            missing -= 1
    while missing < 0:  # rare: many tiny weights raised to one share each
        i = max(range(count), key=lambda j: shares_int[j])
        shares_int[i] -= 1
        missing += 1
    return shares_int


def tijdeman_schedule(shares: Sequence[int]) -> np.ndarray:
    """Return one period of the schedule: the source of each step, as int32.

    Tijdeman's rule with ``Delta = 1 - 1/(2m - 2)`` over the ``m`` sources with a
    share: at step ``t`` (from 1) source ``i`` may go when ``t*w_i - c_i >=
    1 - Delta`` (``c_i`` its count so far), and among those goes the one whose
    next deadline ``(c_i + Delta) / w_i`` comes first (ties: lower index).
    After every prefix each count is within ``Delta`` of ``t*w_i``; after a
    whole period each count equals its share exactly, so the schedule repeats.

    Args:
        shares: non-negative integer shares, not all zero; their sum is the period.
    """
    period = sum(shares)
    live = [i for i, q in enumerate(shares) if q > 0]
    if len(live) == 1:
        return np.full(period, live[0], dtype=np.int32)
    k = 2 * len(live) - 2  # 1 - Delta = 1/k, Delta = (k - 1)/k
    scale = math.lcm(*(shares[i] for i in live))  # integer deadlines: (k*j - 1) * scale / q
    jobs = []  # (release step, deadline, source) of every draw of the period
    for i in live:
        q = shares[i]
        for j in range(1, q + 1):
            release = max(1, -(-(period * (k * (j - 1) + 1)) // (k * q)))
            jobs.append((release, (k * j - 1) * (scale // q), i))
    jobs.sort()
    schedule = np.empty(period, dtype=np.int32)
    ready: list[tuple[int, int]] = []
    next_job = 0
    for t in range(1, period + 1):
        while next_job < len(jobs) and jobs[next_job][0] <= t:
            heapq.heappush(ready, (jobs[next_job][1], jobs[next_job][2]))
            next_job += 1
        # Tijdeman's theorem: some source is always ready.
        schedule[t - 1] = heapq.heappop(ready)[1]
    return schedule


@functools.lru_cache(maxsize=16)
def _schedule_of(shares: tuple[int, ...]) -> np.ndarray:
    schedule = tijdeman_schedule(shares)
    schedule.flags.writeable = False  # shared by every mixture of these shares
    return schedule


def _schedule_counts(shares: Sequence[int], k: int) -> list[int]:
    """How many of the first ``k`` steps of the schedule of ``shares`` draw each source.

    Whole periods give each source its share; the rest is counted in one
    period of the schedule (built once per shares, and cached).

    Args:
        shares: the integer shares of one period (see :func:`exact_weights`).
        k: a number of steps, ``>= 0``.
    """
    shares = tuple(int(q) for q in shares)
    full, part = divmod(k, sum(shares))
    counts = np.bincount(_schedule_of(shares)[:part], minlength=len(shares))
    return [full * q + int(c) for q, c in zip(shares, counts.tolist())]


class _Block:
    """Where a block of consecutive mixture indices reads from, grouped by source.

    Attributes:
        indices: the block's mixture indices (``begin, begin + 1, ...``).
        source, example: the source and the example of each index.
        present: the sources the block draws from.
        positions: per source, the positions in the block that draw from it (ascending).
        examples: per source, the examples those positions read.
        rank: per position, how many earlier positions of the block draw from its source.
        counts: ``counts[p, s]``: how many of the block's first ``p`` positions draw from ``s``.
    """

    def __init__(self, indices: np.ndarray, source: np.ndarray,
                 positions: list[np.ndarray], examples: list[np.ndarray]) -> None:
        self.indices, self.source = indices, source
        self.positions, self.examples = positions, examples
        self.present = [s for s, p in enumerate(positions) if len(p)]
        self.example = np.empty(len(indices), dtype=np.int64)
        self.rank = np.empty(len(indices), dtype=np.int64)
        for where, example in zip(positions, examples):
            self.example[where] = example
            self.rank[where] = np.arange(len(where))
        # Source-major, so each source's counts are one cumulative sum along a row.
        counts = np.empty((len(positions), len(indices) + 1), dtype=np.int32)
        counts[:, 0] = 0
        np.cumsum(source[None, :] == np.arange(len(positions), dtype=source.dtype)[:, None],
                  axis=1, dtype=np.int32, out=counts[:, 1:])
        self.counts = counts.T


def _as_rows(array: np.ndarray) -> np.ndarray:
    """A 1-D view of a C-contiguous array with one opaque item per row (faster to move).

    Other arrays are returned as they are.
    """
    if array.ndim < 2 or not array.flags.c_contiguous or array.dtype.hasobject \
            or array.size == 0:
        return array
    rows = array.reshape(len(array), -1) if array.ndim > 2 else array
    return rows.view(_row_dtype(array.strides[0])).reshape(len(array))


@functools.lru_cache(maxsize=64)
def _row_dtype(row_bytes: int) -> np.dtype:
    return np.dtype((np.void, row_bytes))


class Mixture(DatasetMixin):
    """A weighted mixture of datasets: what :func:`mix` returns.

    Attributes:
        datasets: the sources, in order.
        shares: the integer shares of one period (the exact weights are
            ``shares[i] / period``).
        period: the schedule's period.
        seed: the seed of the sources' permutations.
        stop: ``"first_exhausted"``, ``"all_exhausted"`` or ``"never"``.
        start: how many examples each source had given before this mixture's
            example 0 (zeros, unless built from a state).
    """

    def __init__(self, datasets: Sequence[Any], weights: Any, *, seed: int,
                 stop: str = "first_exhausted", shuffle: bool = True,
                 state: dict | None = None) -> None:
        if isinstance(datasets, (str, bytes)) or not isinstance(datasets, Sequence):
            raise TypeError(f"datasets must be a sequence of datasets, got "
                            f"{type(datasets).__name__}")
        if not datasets:
            raise ValueError("datasets must hold at least one dataset, got none")
        lengths = []
        for i, d in enumerate(datasets):
            try:
                n = len(d)
            except TypeError:
                raise TypeError(f"datasets[{i}] must be a sized, random-access dataset, got "
                                f"{type(d).__name__}") from None
            if n <= 0:
                raise ValueError(f"datasets[{i}] is empty (length {n}): every source of a "
                                 f"mixture needs at least one example")
            lengths.append(n)
        if stop not in STOPS:
            raise ValueError(f"stop must be one of {STOPS}, got {stop!r}")
        self.datasets = tuple(datasets)
        self.lengths = tuple(lengths)
        self.seed = non_negative_int("seed", seed)
        self.stop = stop
        self.shuffle = bool(shuffle)
        self.shares = tuple(exact_weights(weights, len(datasets)))
        self.period = sum(self.shares)
        self.start = tuple(self._check_state(state)) if state is not None \
            else (0,) * len(datasets)
        self._schedule = _schedule_of(self.shares)
        # The same, in 16 bits where it fits: a block groups its indices by
        # source with a stable argsort, a radix sort on 16 bits.
        self._schedule_small = self._schedule.astype(
            np.int16 if len(datasets) < 1 << 15 else np.int32)
        # rank[p]: how many earlier steps of the period drew the same source.
        self._rank = np.zeros(self.period, dtype=np.int64)
        self._steps = []  # per source: the steps of the period that draw it
        for i in range(len(datasets)):
            steps = np.flatnonzero(self._schedule == i)
            self._rank[steps] = np.arange(len(steps))
            self._steps.append(steps)
        self._length = self._stop_length()
        self._orders: dict[tuple[int, int], np.ndarray] = {}
        # The per-source numbers as arrays, indexed by a batch's sources at once.
        self._shares_array = np.asarray(self.shares, dtype=np.int64)
        self._start_array = np.asarray(self.start, dtype=np.int64)
        self._lengths_array = np.asarray(self.lengths, dtype=np.int64)
        # Sources that answer a batch at once (arrays, DatasetMixin) are asked
        # per source; others one example at a time, in batch order.
        self._batched_sources = all(isinstance(d, (np.ndarray, DatasetMixin))
                                    for d in self.datasets)
        # Arrays of one dtype and row shape: a batch is one array, gathered
        # source by source into its rows.
        first = self.datasets[0]
        self._alike_arrays = all(
            isinstance(d, np.ndarray) and d.ndim >= 1 and not d.dtype.hasobject
            and d.dtype == first.dtype and d.shape[1:] == first.shape[1:]
            for d in self.datasets)
        # Contiguous runs of indices (an iterator reading the mixture in order)
        # are located a block at a time; the block's size keeps its table of
        # counts per source near a million entries, and a short mixture's short.
        self._block_size = max(256, min(8192, (1 << 20) // len(self.datasets),
                                        1 << (self._length - 1).bit_length()))
        self._blocks: dict[int, _Block] = {}
        self._row_views: list[np.ndarray] | None = None

    def fingerprint(self) -> str:
        """The mixture's identity, for a checkpoint's ledger: ``"mixture:"`` and 16 hex digits.

        A hash of the sources' lengths and fingerprints (where they have one),
        the shares, the seed, the stop, ``shuffle`` and where each source
        started. A state saved over another mixture is refused on load with
        cause ``"mixture"`` (:class:`~dataset_kit.ResumeMismatchError`), even
        when the mixture's length, and so its ids, did not change.
        """
        sources = []
        for d in self.datasets:
            value = getattr(d, "fingerprint", None)
            sources.append(value() if callable(value) else value)
        identity = {"lengths": self.lengths, "shares": self.shares, "seed": self.seed,
                    "stop": self.stop, "shuffle": self.shuffle, "start": self.start,
                    "sources": sources}
        # A source's fingerprint of another type still names it (as its str).
        return MIXTURE_FINGERPRINT + identity_digest(identity, "sha256").hex()

    @property
    def weights(self) -> tuple[float, ...]:
        """The exact weights the schedule follows (``shares / period``)."""
        return tuple(q / self.period for q in self.shares)

    def _check_state(self, state: Any) -> list[int]:
        """Validate a state of either format and return how many examples each source gave."""
        check_state(state, _STATE_KIND, "Mixture.state_at",
                    (("seed", self.seed), ("shuffle", self.shuffle)), "mixture",
                    "the sources' orders would differ", cause="mixture")
        if "version" not in state:
            return self._check_first_state(state)
        if state["version"] != _STATE_VERSION:
            raise ValueError(f"state's version is {state['version']!r}; this dataset_kit reads "
                             f"mixture states of version {_STATE_VERSION} and the first format")
        count = state.get("sources")
        if count != len(self.lengths):
            raise ResumeMismatchError(f"state is of a mixture of {count} sources, this one "
                                      f"has {len(self.lengths)}", cause="mixture")
        if state.get("lengths") != checksum(self.lengths):
            raise ResumeMismatchError(
                f"state's sources have other lengths: their checksum is "
                f"{state.get('lengths')!r}, datasets' lengths {list(self.lengths)} give "
                f"{checksum(self.lengths)!r}: a state continues the same sources",
                cause="mixture")
        shares = state.get("shares")
        shares = [shares] * count if isinstance(shares, int) else shares
        if not isinstance(shares, list) or len(shares) != count:
            raise ValueError(f"state's shares must be one integer per source, or one for all, "
                             f"got {state.get('shares')!r}")
        shares = [non_negative_int(f"state['shares'][{i}]", q) for i, q in enumerate(shares)]
        if not any(shares):
            raise ValueError(f"state's shares must not all be zero, got {shares!r}")
        start = state.get("start", [0] * count)
        if not isinstance(start, list) or len(start) != count:
            raise ValueError(f"state's start must be one count per source, got {start!r}")
        start = [non_negative_int(f"state['start'][{i}]", c) for i, c in enumerate(start)]
        k = non_negative_int("state['k']", state.get("k"))
        return [s + c for s, c in zip(start, _schedule_counts(tuple(shares), k))]

    def _check_first_state(self, state: dict) -> list[int]:
        """The first format: the lengths and how many examples each source gave, in full."""
        lengths = list(state.get("lengths", ()))
        if len(lengths) != len(self.lengths):
            raise ResumeMismatchError(f"state is of a mixture of {len(lengths)} sources, this "
                                      f"one has {len(self.lengths)}", cause="mixture")
        for i, (saved, now) in enumerate(zip(lengths, self.lengths)):
            if saved != now:
                raise ResumeMismatchError(f"state's source {i} had {saved} examples, "
                                          f"datasets[{i}] has {now}: a state continues the "
                                          f"same sources", cause="mixture")
        consumed = state.get("consumed")
        if not isinstance(consumed, list) or len(consumed) != len(self.lengths):
            raise ValueError(f"state's consumed must be one count per source, got "
                             f"{consumed!r}")
        return [non_negative_int(f"state['consumed'][{i}]", c) for i, c in enumerate(consumed)]

    def _draw_step(self, source: int, n: int) -> int:
        """The mixture index of this mixture's ``n``-th draw (from 0) of ``source``."""
        q = self.shares[source]
        return (n // q) * self.period + int(self._steps[source][n % q])

    def _stop_length(self) -> int:
        """The mixture's length: up to the draw that ends the stop's epoch."""
        ends = [self._draw_step(i, self.lengths[i] - self.start[i] % self.lengths[i] - 1) + 1
                for i in range(len(self.lengths)) if self.shares[i] > 0]
        if self.stop == "first_exhausted":
            return min(ends)
        # "all_exhausted", and "never"'s nominal length: every source seen once.
        return max(ends)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if self.stop == "never" and not isinstance(index, slice):
            # Beyond its nominal length a never-ending mixture goes on answering.
            if isinstance(index, (list, np.ndarray)):
                array = np.asarray(index)
                if array.size and array.dtype.kind in "iu" and array.ndim == 1 \
                        and array.min() >= 0:
                    return self.get_batch(array.astype(np.int64))
            elif not isinstance(index, (bool, np.bool_)) and isinstance(
                    index, (int, np.integer)) and index >= 0:
                return self.get_example(int(index))
        return super().__getitem__(index)

    def draws(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(source, draw)`` for mixture indices: which source, its how-many-th draw.

        Args:
            indices: non-negative mixture indices (int64).

        Returns:
            Two int64 arrays: the source of each index, and the total number
            of that source's examples given before it (``start`` included).
        """
        indices = np.asarray(indices, dtype=np.int64)
        turns, within = np.divmod(indices, self.period)
        source = self._schedule[within]
        draw = turns * self._shares_array[source] + self._rank[within] + \
            self._start_array[source]
        return source.astype(np.int64), draw

    def _order(self, source: int, epoch: int) -> np.ndarray:
        key = (source, epoch)
        order = self._orders.get(key)
        if order is None:
            if len(self._orders) > 4 * len(self.lengths):
                self._orders.clear()  # a few epochs per source are in use at once
            rng = np.random.default_rng(
                np.random.SeedSequence([self.seed, _SOURCE_STREAM, source, epoch]))
            order = self._orders[key] = rng.permutation(self.lengths[source])
        return order

    def locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(source, example)``: where each mixture index reads from.

        Args:
            indices: non-negative mixture indices.
        """
        source, draw = self.draws(indices)
        epoch, position = np.divmod(draw, self._lengths_array[source])
        if not self.shuffle:
            return source, position
        example = np.empty_like(position)
        keys = source * (int(epoch.max()) + 1) + epoch  # one group per (source, epoch)
        for key in np.unique(keys).tolist():
            where = keys == key
            s, e = divmod(key, int(epoch.max()) + 1)
            example[where] = self._order(s, e)[position[where]]
        return source, example

    def get_example(self, i: int) -> Any:
        source, example = self.locate(np.array([i], dtype=np.int64))
        return self.datasets[int(source[0])][int(example[0])]

    def __getstate__(self) -> dict:
        # Caches stay behind: the row views would pickle as copies of the sources.
        state = dict(self.__dict__)
        state.update(_blocks={}, _row_views=None, _orders={})
        return state

    def _block(self, number: int) -> _Block:
        """The located indices of block ``number``, built once and kept while in use.

        A source's draws in a run of consecutive indices are consecutive too:
        its examples there are slices of its epochs' permutations, after the
        draws that came before the block (counted from the schedule, O(1)
        per index and no search).
        """
        block = self._blocks.get(number)
        if block is None:
            begin = number * self._block_size
            indices = np.arange(begin, begin + self._block_size, dtype=np.int64)
            source = self._schedule_small.take(indices % self.period)
            order = np.argsort(source, kind="stable")
            bounds = np.cumsum(np.bincount(source, minlength=len(self.datasets))).tolist()
            positions = [order[lo:hi] for lo, hi in zip([0, *bounds[:-1]], bounds)]
            examples = [self._examples_of(s, first, len(p)) for s, (first, p) in
                        enumerate(zip(self.consumed_at(begin), positions))]
            block = _Block(indices, source, positions, examples)
            if len(self._blocks) >= 4:
                self._blocks.clear()  # an iterator reads one block at a time, or two
            self._blocks[number] = block
        return block

    def _examples_of(self, source: int, first: int, count: int) -> np.ndarray:
        """The examples of ``source``'s draws ``first, first + 1, ...`` (``count`` of them)."""
        length = self.lengths[source]
        pieces = []
        draw, end = first, first + count
        while draw < end:
            epoch, position = divmod(draw, length)
            stop = min(length, position + end - draw)
            order = self._order(source, epoch) if self.shuffle else None
            pieces.append(order[position:stop] if order is not None
                          else np.arange(position, stop, dtype=np.int64))
            draw += stop - position
        return np.concatenate(pieces) if pieces else np.empty(0, dtype=np.int64)

    def _run(self, indices: np.ndarray) -> tuple[_Block, int, int] | None:
        """``(block, start, stop)`` when ``indices`` are one run ``a, a+1, ...`` inside a block."""
        n = len(indices)
        if n == 0 or indices.dtype != np.int64 or indices.ndim != 1:
            return None
        number, start = divmod(int(indices[0]), self._block_size)
        stop = start + n
        if stop > self._block_size:
            return None
        block = self._block(number)
        # Comparing the bytes is the cheapest exact test of a run.
        if indices.tobytes() != block.indices[start:stop].tobytes():
            return None
        return block, start, stop

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        run = self._run(indices)
        if run is not None and self._alike_arrays:
            return self._gather_run(*run)
        if run is not None:
            block, start, stop = run
            source, example = block.source[start:stop], block.example[start:stop]
        else:
            # Indices inside one block (a rank's stride, a shuffle within a
            # block) are looked up there; others are located one by one.
            inside = self._inside_block(indices)
            if inside is not None:
                block, offsets = inside
                source, example = block.source.take(offsets), block.example.take(offsets)
            else:
                source, example = self.locate(indices)
        if self._alike_arrays:
            return self._gather_arrays(source, example)
        if not self._batched_sources:
            # Sources read one example at a time: one pass in batch order, so
            # the example cursor (example_rng) follows the batch's positions.
            getters = [d.__getitem__ for d in self.datasets]
            return _example_context.map_examples(
                lambda pair: getters[pair[0]](pair[1]), zip(source.tolist(), example.tolist()))
        groups = [(s, np.flatnonzero(source == s)) for s in np.unique(source).tolist()]
        parts = [fetch_examples(self.datasets[s], example[where]) for s, where in groups]
        batch: list[Any] = [None] * len(indices)
        for (_, where), part in zip(groups, parts):
            for slot, value in zip(where.tolist(), part):
                batch[slot] = value
        return batch

    def _inside_block(self, indices: np.ndarray) -> tuple[_Block, np.ndarray] | None:
        """``(block, offsets)`` when all ``indices`` lie in one block."""
        if not len(indices) or indices.ndim != 1:
            return None
        number = int(indices.min()) // self._block_size
        if number < 0 or int(indices.max()) // self._block_size != number:
            return None
        block = self._block(number)
        return block, indices - number * self._block_size

    def _rows(self) -> list[np.ndarray]:
        """The array sources as rows to move: one opaque item per row where they allow it."""
        rows = self._row_views
        if rows is None:
            rows = [_as_rows(d) for d in self.datasets]
            if any(r.dtype != rows[0].dtype or r.ndim != rows[0].ndim for r in rows):
                rows = list(self.datasets)  # some are not C-contiguous: move them as they are
            self._row_views = rows
        return rows

    def _gather_arrays(self, source: np.ndarray, example: np.ndarray) -> ExampleBatch:
        """Array examples anywhere: grouped by source, one gather each, back in order."""
        rows = self._rows()
        head = self.datasets[0]
        out = _gather.empty((len(source), *head.shape[1:]), head.dtype)
        out_rows = _as_rows(out) if rows[0] is not head else out
        order = np.argsort(source, kind="stable")
        grouped_examples = example.take(order)
        grouped = np.empty_like(out_rows)
        at = 0
        for s, count in enumerate(np.bincount(source, minlength=len(rows)).tolist()):
            if count:
                rows[s].take(grouped_examples[at:at + count], 0, grouped[at:at + count], "clip")
                at += count
        out_rows[order] = grouped
        return ExampleBatch(out)

    def _gather_run(self, block: _Block, start: int, stop: int) -> ExampleBatch:
        """A run of array examples: one gather per source, then one into the batch's order."""
        rows = self._rows()
        head = self.datasets[0]
        n = stop - start
        out = _gather.empty((n, *head.shape[1:]), head.dtype)
        out_rows = _as_rows(out) if rows[0] is not head else out
        low, high = block.counts[start].tolist(), block.counts[stop].tolist()
        drawn = [s for s in block.present if high[s] > low[s]]
        # (ndarray.take with "clip": the examples are valid, and "raise" would
        # gather into a temporary first.)
        if len(drawn) == 1:  # one source: its rows are the batch, in order
            s = drawn[0]
            rows[s].take(block.examples[s][low[s]:high[s]], 0, out_rows, "clip")
            return ExampleBatch(out)
        # Gather each source's rows after the previous source's, then put them
        # in the batch's order: example p is row rank[p] - low[s] + shift[s].
        grouped = np.empty_like(out_rows)
        shift = [0] * len(rows)
        at = 0
        for s in drawn:
            lo, hi = low[s], high[s]
            rows[s].take(block.examples[s][lo:hi], 0, grouped[at:at + hi - lo], "clip")
            shift[s] = at - lo
            at += hi - lo
        where = block.rank[start:stop] + np.array(shift).take(block.source[start:stop])
        grouped.take(where, 0, out_rows, "clip")
        return ExampleBatch(out)

    def consumed_at(self, k: int) -> list[int]:
        """Return how many examples each source has given after this mixture's first ``k``.

        ``start`` included: the counts a re-weighted mixture continues from.

        Args:
            k: how many examples of this mixture were read, in order.

        Raises:
            ValueError: if ``k`` is negative.
        """
        k = non_negative_int("k", k)
        return [s + c for s, c in zip(self.start, _schedule_counts(self.shares, k))]

    def state_at(self, k: int) -> dict:
        """Return the state after this mixture's first ``k`` examples (JSON-ready).

        A few integers, whatever the number of sources: ``k``, this mixture's
        shares (from which the counts per source follow), the seed, the
        sources' count and a checksum of their lengths (to check), and, only
        for a mixture that was itself built from a state, where each source
        started. ``mix(..., state=state)`` with any weights continues every
        source from there; states of the first format (counts per source in
        full) still load.

        Args:
            k: how many examples of this mixture were read, in order.

        Raises:
            ValueError: if ``k`` is negative, or beyond the end of a mixture
                that stops.
        """
        k = non_negative_int("k", k)
        if self.stop != "never" and k > self._length:
            raise ValueError(f"k must be at most the mixture's length {self._length}, got {k}")
        equal = all(q == self.shares[0] for q in self.shares)
        state = {"kind": _STATE_KIND, "version": _STATE_VERSION, "seed": self.seed,
                 "shuffle": self.shuffle, "sources": len(self.lengths),
                 "lengths": checksum(self.lengths),
                 "shares": self.shares[0] if equal else list(self.shares), "k": k}
        if any(self.start):  # only a re-weighted mixture: the counts it began from
            state["start"] = list(self.start)
        return state

def mix(datasets: Sequence[Any], weights: Any, *, seed: int,
        stop: str = "first_exhausted", shuffle: bool = True,
        state: dict | None = None) -> Mixture:
    """Mix datasets with exact weights: example ``k`` is a pure function of ``(seed, k)``.

    After any ``n`` examples, source ``i`` has given within one example of
    ``n * weights[i] / sum(weights)`` (see the module's notes for weights that
    are not ratios of small integers). Each source is read in its own
    permutation per epoch, drawn from ``(seed, source, epoch)`` and independent
    of the weights.

    Args:
        datasets: the sources: sized, random-access datasets, none empty.
        weights: one non-negative number per source, not all zero; they need
            not sum to 1. A zero weight leaves its source out (it never stops
            the mixture).
        seed: the seed of the sources' permutations.
        stop: ``"first_exhausted"`` (end right after the draw that exhausts a
            source), ``"all_exhausted"`` (end once every source has been
            exhausted at least once) or ``"never"`` (every index ``k >= 0``
            answers; ``len()`` is then the ``"all_exhausted"`` length).
        shuffle: read each source in a fresh permutation per epoch; False
            reads it in order.
        state: a state from :meth:`Mixture.state_at` of a mixture of the same
            sources and seed: each source continues where it stopped (with
            these weights, which may differ), and the stop counts to the end
            of the epoch each source is in.

    Returns:
        The mixture, a dataset.

    Raises:
        TypeError: if ``datasets`` or ``weights`` are not sequences.
        ValueError: for a bad weight, an empty source, an unknown ``stop``, or
            a state of other sources (naming what differs).
    """
    return Mixture(datasets, weights, seed=seed, stop=stop, shuffle=shuffle, state=state)


def source_counts(mixture: Mixture, n: int) -> list[int]:
    """How many of a mixture's first ``n`` examples came from each source."""
    return [c - s for c, s in zip(mixture.consumed_at(n), mixture.start)]

