"""Sequence packing: token examples into fixed-length sequences, as a random-access dataset.

``pack(dataset, length, method=...)`` reads a dataset of examples that hold
one or more aligned 1-D integer token arrays (a dict ``{key: tokens}``) and
answers ``packed[j]``: a dict with, for every packed key, ``<key>`` (the
tokens, padded with ``pad_id``), ``<key>_segment_ids`` (1, 2, ... for the
documents in the sequence, 0 for padding) and ``<key>_positions`` (the
position of each token within its piece of document), all of ``length``.

Packing is sequential: where a document goes depends on the documents before
it. The packed dataset therefore makes a *plan* once, from the documents'
lengths only (one pass, on first use, in the process that builds the loader;
workers receive it; ``lengths=`` spares the pass): which documents, at which
offsets, form each sequence.
Sequence ``j`` is then a pure function of ``j`` and the plan, so every worker
count, every rank count and every resume reads the same sequences, and the
state of an iterator over a packed dataset is its position, a few integers;
the tokens are never part of a state.

* ``"concat"``: the documents end to end, cut every ``length`` tokens (GPT
  pretraining); a document may continue in the next sequence, where its
  positions restart at 0 (as Grain's ``ConcatThenSplitIterDataset``).
* ``"first_fit"``: Grain's ``FirstFitPackIterDataset``: ``num_bins`` bins
  are filled in order, each document going to the first bin with room for it;
  when one fits none, the non-empty bins are emitted (shuffled when
  ``shuffle_bins``, with Grain's seeds) and a new round starts with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.dataset import DatasetMixin, fetch_examples

METHODS = ("concat", "first_fit")
TOO_LONG = ("split", "error")
_SCAN = 4096  # documents read at once while planning


def _tokens(example: Any, key: str, where: int) -> np.ndarray:
    """The 1-D integer token array ``example[key]``, or an error naming the example and key."""
    if not isinstance(example, dict):
        raise TypeError(f"pack needs examples that are dicts of token arrays; example {where} "
                        f"is a {type(example).__name__}")
    if key not in example:
        raise KeyError(f"example {where} has no key {key!r} to pack (it has "
                       f"{sorted(example)!r})")
    value = np.asarray(example[key])
    if value.ndim != 1 or value.dtype.kind not in "iu":
        raise ValueError(f"example {where}'s {key!r} must be a 1-D integer token array, got "
                         f"dtype {value.dtype} and shape {value.shape}")
    return value


class PackedDataset(DatasetMixin):
    """Fixed-length packed token sequences over a dataset: what :func:`pack` returns.

    Attributes:
        dataset: the documents.
        length: tokens per sequence.
        method: ``"concat"`` or ``"first_fit"``.
        keys: the packed keys.
        num_bins: open bins of ``"first_fit"``.
        pad_id: the padding token.
    """

    def __init__(self, dataset: Any, length: int, *, method: str = "concat",
                 keys: Sequence[str] | None = None, num_bins: int = 64, pad_id: int = 0,
                 too_long: str = "split", shuffle_bins: bool = False, seed: int = 0,
                 lengths: Sequence[int] | None = None) -> None:
        try:
            self._documents = len(dataset)
        except TypeError:
            raise TypeError(f"dataset must be a sized, random-access dataset, got "
                            f"{type(dataset).__name__}") from None
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if too_long not in TOO_LONG:
            raise ValueError(f"too_long must be one of {TOO_LONG}, got {too_long!r}")
        self.dataset = dataset
        self.length = positive_int("length", length)
        self.method = method
        self.num_bins = positive_int("num_bins", num_bins)
        self.pad_id = int(pad_id)
        self.too_long = too_long
        self.shuffle_bins = bool(shuffle_bins)
        self.seed = non_negative_int("seed", seed)
        if keys is not None:
            if isinstance(keys, str) or not all(isinstance(k, str) for k in keys) or not keys:
                raise TypeError(f"keys must be a non-empty sequence of key names, got {keys!r}")
            self.keys: tuple[str, ...] | None = tuple(keys)
        else:
            self.keys = None
        self._given_lengths = None if lengths is None else self._check_lengths(lengths)
        self._plan: _Plan | None = None

    def _check_lengths(self, lengths: Sequence[int]) -> np.ndarray:
        """The ``lengths`` argument as int64, checked against the dataset and ``too_long``."""
        array = np.asarray(lengths)
        if array.ndim != 1 or array.dtype.kind not in "iu" or len(array) != self._documents:
            raise ValueError(f"lengths must be one integer token count per document "
                             f"({self._documents}), got dtype {array.dtype} and shape "
                             f"{array.shape}")
        if len(array) and array.min() < 0:
            raise ValueError(f"lengths must not be negative, got {int(array.min())} for "
                             f"document {int(array.argmin())}")
        if self.too_long == "error" and len(array) and array.max() > self.length:
            d = int(array.argmax())
            raise ValueError(f"example {d} has {int(array[d])} tokens, more than length="
                             f"{self.length} (too_long='error'); pass too_long='split' to cut it")
        return array.astype(np.int64)

    # -- the plan --------------------------------------------------------------

    def _lengths(self) -> np.ndarray:
        """Every document's token count (one pass), checking keys, types and alignment."""
        out = np.empty(self._documents, dtype=np.int64)
        for start in range(0, self._documents, _SCAN):
            stop = min(start + _SCAN, self._documents)
            batch = fetch_examples(self.dataset, np.arange(start, stop, dtype=np.int64))
            for i, example in enumerate(batch, start):
                if self.keys is None:
                    if not isinstance(example, dict) or not example:
                        _tokens(example, "", i)  # the error for a non-dict
                    self.keys = tuple(example)
                first = _tokens(example, self.keys[0], i)
                for key in self.keys[1:]:
                    other = _tokens(example, key, i)
                    if len(other) != len(first):
                        raise ValueError(f"example {i}'s token arrays are not aligned: "
                                         f"{self.keys[0]!r} has {len(first)} tokens, {key!r} "
                                         f"{len(other)}")
                if self.too_long == "error" and len(first) > self.length:
                    raise ValueError(f"example {i} has {len(first)} tokens, more than length="
                                     f"{self.length} (too_long='error'); pass too_long='split' "
                                     f"to cut it")
                out[i] = len(first)
        return out

    @property
    def plan(self) -> _Plan:
        """The packing plan, made on first use from the documents' lengths."""
        if self._plan is None:
            if self._given_lengths is not None:
                lengths = self._given_lengths
                if self.keys is None and self._documents:
                    first = fetch_examples(self.dataset, np.zeros(1, dtype=np.int64))[0]
                    if not isinstance(first, dict) or not first:
                        _tokens(first, "", 0)  # the error for a non-dict
                    self.keys = tuple(first)
            else:
                lengths = self._lengths()
            if self.method == "concat":
                self._plan = _ConcatPlan(lengths, self.length)
            else:
                self._plan = _FirstFitPlan(lengths, self.length, self.num_bins,
                                           self.shuffle_bins, self.seed)
        return self._plan

    def __len__(self) -> int:
        return self.plan.size

    def pieces(self, j: int) -> list[tuple[int, int, int]]:
        """Return the pieces of sequence ``j``: ``(document, start, stop)`` token ranges, in order.

        Args:
            j: a sequence index, ``0 <= j < len(self)``.
        """
        return self.plan.pieces(j)

    def get_example(self, i: int) -> dict:
        return self.get_batch(np.array([i], dtype=np.int64))[0]

    def get_batch(self, indices: np.ndarray) -> list:
        plans = [self.plan.pieces(int(j)) for j in indices]
        documents = sorted({d for pieces in plans for d, _, _ in pieces})
        fetched = dict(zip(documents, fetch_examples(
            self.dataset, np.asarray(documents, dtype=np.int64)))) if documents else {}
        assert self.keys is not None  # set by the plan
        return [self._assemble(pieces, fetched) for pieces in plans]

    def _assemble(self, pieces: list[tuple[int, int, int]], fetched: dict) -> dict:
        size = self.length
        segment_ids = np.zeros(size, dtype=np.int32)
        positions = np.zeros(size, dtype=np.int32)
        at = 0
        for segment, (_, start, stop) in enumerate(pieces, start=1):
            n = stop - start
            segment_ids[at:at + n] = segment
            positions[at:at + n] = np.arange(n, dtype=np.int32)
            at += n
        out: dict[str, np.ndarray] = {}
        assert self.keys is not None
        given = self._given_lengths
        for key in self.keys:
            if given is not None:  # the lengths were the caller's: check what they promised
                for d, _, _ in pieces:
                    n = len(_tokens(fetched[d], key, d))
                    if n != given[d]:
                        raise ValueError(f"example {d}'s {key!r} has {n} tokens, but lengths[{d}]"
                                         f" says {int(given[d])}")
            parts = [np.asarray(fetched[d][key])[start:stop] for d, start, stop in pieces]
            dtype = parts[0].dtype if parts else np.int64
            tokens = np.full(size, self.pad_id, dtype=dtype)
            if parts:
                joined = np.concatenate(parts)
                tokens[:len(joined)] = joined
            out[key] = tokens
            out[f"{key}_segment_ids"] = segment_ids
            out[f"{key}_positions"] = positions
        return out


class _Plan:
    """Which token ranges of which documents form each packed sequence."""

    size: int

    def pieces(self, j: int) -> list[tuple[int, int, int]]:
        raise NotImplementedError


class _ConcatPlan(_Plan):
    """Sequence ``j`` holds tokens ``[j*length, (j+1)*length)`` of the concatenation."""

    def __init__(self, lengths: np.ndarray, length: int) -> None:
        self._ends = np.cumsum(lengths)
        total = int(self._ends[-1]) if len(lengths) else 0
        self._length = length
        self.size = -(-total // length)

    def pieces(self, j: int) -> list[tuple[int, int, int]]:
        low, high = j * self._length, min((j + 1) * self._length, int(self._ends[-1]))
        first = int(np.searchsorted(self._ends, low, side="right"))
        out = []
        d = first
        while d < len(self._ends) and low < high:
            begin = int(self._ends[d - 1]) if d else 0
            end = int(self._ends[d])
            take_to = min(end, high)
            if take_to > low:
                out.append((d, low - begin, take_to - begin))
            low = take_to
            d += 1
        return out


class _FirstFitPlan(_Plan):
    """Grain's first-fit rounds: the bin of every piece, and each round's first sequence."""

    def __init__(self, lengths: np.ndarray, length: int, num_bins: int, shuffle: bool,
                 seed: int) -> None:
        # Documents longer than a sequence were allowed by too_long="split":
        # their pieces are packed as consecutive documents.
        docs, starts, stops = [], [], []
        for d, n in enumerate(lengths.tolist()):
            for s in range(0, max(n, 1), length):
                docs.append(d)
                starts.append(s)
                stops.append(min(n, s + length))
        self._doc = np.asarray(docs, dtype=np.int64)
        self._start = np.asarray(starts, dtype=np.int64)
        self._stop = np.asarray(stops, dtype=np.int64)
        sizes = (self._stop - self._start).tolist()
        bins = np.empty(len(sizes), dtype=np.int32)
        round_first = []  # first piece of each round
        round_bins = []  # bins used by each round
        free = [length] * num_bins
        used = 0
        for p, n in enumerate(sizes):
            row = next((b for b in range(used) if free[b] >= n), -1)
            if row < 0 and used < num_bins:
                row = used
                used += 1
            if row < 0:  # fits no bin: the round is emitted, and a new one starts with it
                round_bins.append(used)
                free = [length] * num_bins
                row, used = 0, 1
                round_first.append(p)
            elif p == 0:
                round_first.append(0)
            free[row] -= n
            bins[p] = row
        if sizes:
            round_bins.append(used)
        self._bins = bins
        self._round_first = np.asarray(round_first + [len(sizes)], dtype=np.int64)
        self._round_out = np.concatenate([[0], np.cumsum(round_bins)]).astype(np.int64)
        self._shuffle, self._seed = shuffle, seed
        self.size = int(self._round_out[-1])

    def pieces(self, j: int) -> list[tuple[int, int, int]]:
        r = int(np.searchsorted(self._round_out, j, side="right")) - 1
        out_start = int(self._round_out[r])
        row = j - out_start
        if self._shuffle:
            # Grain's bin order: default_rng(seed + sequences emitted before the round).
            n = int(self._round_out[r + 1]) - out_start
            row = int(np.random.default_rng(self._seed + out_start).permuted(range(n))[row])
        a, b = int(self._round_first[r]), int(self._round_first[r + 1])
        members = a + np.flatnonzero(self._bins[a:b] == row)
        return [(int(self._doc[p]), int(self._start[p]), int(self._stop[p])) for p in members]


def pack(dataset: Any, length: int, *, method: str = "concat", keys: Sequence[str] | None = None,
         num_bins: int = 64, pad_id: int = 0, too_long: str = "split",
         shuffle_bins: bool = False, seed: int = 0,
         lengths: Sequence[int] | None = None) -> PackedDataset:
    """Pack token examples into sequences of ``length`` tokens (a random-access dataset).

    Args:
        dataset: documents: dicts holding aligned 1-D integer token arrays.
        length: tokens per packed sequence.
        method: ``"concat"`` (concatenate and cut) or ``"first_fit"`` (Grain's
            first-fit bin packing over ``num_bins`` open bins).
        keys: the keys to pack (the others are dropped, as Grain does); None
            packs every key of the first document.
        num_bins: open bins of ``"first_fit"``.
        pad_id: the token that fills the end of a sequence.
        too_long: for a document longer than ``length``: ``"split"`` cuts it
            into pieces of at most ``length`` (packed as consecutive
            documents), ``"error"`` refuses it.
        shuffle_bins: ``"first_fit"`` only: emit each round's bins in Grain's
            shuffled order (its ``shuffle_bins=True`` with ``seed``).
        seed: the seed of that shuffle.
        lengths: each document's token count, if known (a column of the
            corpus): the plan is then made from it without reading the
            documents, and each document is checked against it when read.

    Returns:
        The packed dataset: ``packed[j]`` is a dict of ``<key>``,
        ``<key>_segment_ids`` and ``<key>_positions`` arrays of ``length``.

    Raises:
        ValueError: for an unknown ``method`` or ``too_long``, a bad ``length``
            or ``num_bins``; when the plan is made, for a document that is not
            1-D integer tokens, whose keys' arrays differ in length, or that
            is too long with ``too_long="error"`` (each naming the document,
            the key and the value).
        KeyError: when a document lacks a key to pack.
    """
    return PackedDataset(dataset, length, method=method, keys=keys, num_bins=num_bins,
                         pad_id=pad_id, too_long=too_long, shuffle_bins=shuffle_bins,
                         seed=seed, lengths=lengths)
