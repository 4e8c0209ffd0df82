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
the tokens are never part of a state. To change a mixture's weights under
packing at any sequence, :meth:`PackedDataset.state_at` names what the packer
holds open (the rest of a first-fit round, a cut document) by position, and
``pack(..., state=...)`` emits it first.

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
from typing import Any, cast

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.dataset import DatasetMixin, fetch_examples
from dataset_kit.datasets._states import check_state, checksum
from dataset_kit.datasets.mixture import Mixture

METHODS = ("concat", "first_fit")
TOO_LONG = ("split", "error")
_STATE_KIND = "packing"
_STATE_VERSION = 1
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
                 lengths: Sequence[int] | None = None, state: dict | None = None) -> None:
        try:
            len(dataset)
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
        # What a state left open: whole sequences still to emit, and the rest
        # of a cut document, which the plan packs first (see state_at).
        self._pending: list[list[tuple[int, int, int, int]]] = []
        self._tail: tuple[int, int, int] | None = None
        self._source: Any = dataset
        if state is not None:
            self._continue(state)
        self._documents = len(self._source)
        self._given_lengths = None if lengths is None else self._check_lengths(lengths)
        self._plan: _Plan | None = None

    def _continue(self, state: Any) -> None:
        """Take what a state of another packing left open (checked against this one)."""
        check_state(state, _STATE_KIND, "PackedDataset.state_at",
                    (("version", _STATE_VERSION), ("length", self.length),
                     ("method", self.method)), "packing",
                    "the open sequences were packed for it", cause="order")
        if not isinstance(self.dataset, Mixture):
            raise TypeError(f"a packing state continues a mixture: dataset must be "
                            f"mix(..., state=state['mixture']), got {type(self.dataset).__name__}")
        if checksum(self.dataset.start) != state.get("consumed"):
            raise ValueError(f"dataset is not the mixture continued from state['mixture']: its "
                             f"sources start at {list(self.dataset.start)} (checksum "
                             f"{checksum(self.dataset.start)}), the state's at checksum "
                             f"{state.get('consumed')!r}; build it with "
                             f"mix(..., state=state['mixture'])")
        keys = state.get("keys")
        if self.keys is None and keys:
            self.keys = tuple(keys)
        sources = len(self.dataset.datasets)
        try:
            self._pending = [[cast(tuple[int, int, int, int], _piece(p, sources, 4))
                              for p in sequence] for sequence in state.get("pending", [])]
            tail = state.get("tail")
            self._tail = None if tail is None else cast(tuple[int, int, int],
                                                        _piece(tail, sources, 3))
        except (TypeError, ValueError) as error:
            raise ValueError(f"state's pending pieces must be [source, example, start, stop] "
                             f"(the tail [source, example, start]): {error}") from None
        if self._tail is not None:
            self._source = _Continued(self.dataset, self._tail, self.keys)

    def _check_lengths(self, lengths: Sequence[int]) -> np.ndarray:
        """The ``lengths`` argument as int64, checked against the dataset and ``too_long``.

        A continued packing's documents begin with the rest of a cut
        document: its length is read and put first.
        """
        array = np.asarray(lengths)
        count = len(self.dataset)
        if array.ndim != 1 or array.dtype.kind not in "iu" or len(array) != count:
            raise ValueError(f"lengths must be one integer token count per document "
                             f"({count}), got dtype {array.dtype} and shape {array.shape}")
        if isinstance(self._source, _Continued):
            array = np.concatenate(([self._source.tail_length()], array))
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
            batch = fetch_examples(self._source, np.arange(start, stop, dtype=np.int64))
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
                    first = fetch_examples(self._source, np.zeros(1, dtype=np.int64))[0]
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
        return len(self._pending) + self.plan.size

    def pieces(self, j: int) -> list[tuple[int, int, int]]:
        """Return the pieces of sequence ``j``: ``(document, start, stop)`` token ranges, in order.

        For a packing continued from a state, the sequences it had left open
        come first (their pieces are ``(source, example, start, stop)``: see
        :meth:`state_at`), and documents are counted from the rest of the cut
        document, if any (0), then the dataset's (from 1).

        Args:
            j: a sequence index, ``0 <= j < len(self)``.
        """
        if j < len(self._pending):
            return list(self._pending[j])  # type: ignore[arg-type]
        return self.plan.pieces(j - len(self._pending))

    def get_example(self, i: int) -> dict:
        return self.get_batch(np.array([i], dtype=np.int64))[0]

    def get_batch(self, indices: np.ndarray) -> list:
        opened = len(self._pending)
        if opened and len(indices) and int(indices.min()) < opened:
            return [self._assemble_pending(int(j)) if j < opened else
                    self.get_batch(np.array([j], dtype=np.int64))[0] for j in indices.tolist()]
        plans = [self.plan.pieces(int(j) - opened) for j in indices]
        documents = sorted({d for pieces in plans for d, _, _ in pieces})
        fetched = dict(zip(documents, fetch_examples(
            self._source, np.asarray(documents, dtype=np.int64)))) if documents else {}
        assert self.keys is not None  # set by the plan
        return [self._assemble(pieces, fetched) for pieces in plans]

    def _assemble_pending(self, j: int) -> dict:
        """A sequence a state left open: its pieces name their sources' examples."""
        self.plan  # noqa: B018 (the keys, when not given, come from the plan)
        datasets = self.dataset.datasets
        fetched = {(s, e): datasets[s][e] for s, e, _, _ in self._pending[j]}
        return self._assemble([((s, e), a, b) for s, e, a, b in self._pending[j]], fetched,
                              check=False)

    def state_at(self, j: int) -> dict:
        """Return what the packing leaves open after its first ``j`` sequences (JSON-ready).

        For a packing of a mixture (``pack(mix(...), ...)``), so that the
        mixture's weights can change there exactly: the state holds the
        mixture's state after the last document the packer has drawn, the
        sequences the packer had already filled but not emitted (the rest of
        a first-fit round), and the rest of a document cut at ``j`` (a
        ``"concat"`` boundary, or a piece of a too-long document), each piece
        as ``[source, example, start, stop]``: never the tokens. Continue
        with::

            state = packed.state_at(j)
            mixture = mix(sources, new_weights, seed=..., state=state["mixture"])
            packed = pack(mixture, length, method=..., state=state)

        Every token of every document each source has given is then emitted
        exactly once (before ``j`` or after), each source continues where it
        stopped, and the new weights hold for every document drawn after the
        checkpoint.

        Args:
            j: how many sequences were read, ``0 <= j <= len(self)``.

        Raises:
            TypeError: if the dataset is not a mixture.
            ValueError: if ``j`` is out of range.
        """
        j = non_negative_int("j", j)
        if not isinstance(self.dataset, Mixture):
            raise TypeError(f"state_at continues a mixture: the dataset is a "
                            f"{type(self.dataset).__name__}; a packing of other documents "
                            f"resumes by its iterator's state")
        if j > len(self):
            raise ValueError(f"j must be at most the packing's length {len(self)}, got {j}")
        opened = len(self._pending)
        if j < opened:  # still in the sequences a state left open: the plan is untouched
            pending: list[list[list[int]]] = [[list(p) for p in seq] for seq in self._pending[j:]]
            plan_pending, resume = [], self.plan.resume_point(0)
        else:
            pending = []
            plan_pending, resume = self.plan.pending(j - opened), self.plan.resume_point(
                j - opened)
        for sequence in plan_pending:
            pieces = []
            for d, a, b in sequence:
                source, example, base = self._where(d)
                pieces.append([source, example, base + a, base + b])
            pending.append(pieces)
        shift = 1 if isinstance(self._source, _Continued) else 0
        tail = None
        if resume is None:
            next_doc = len(self.dataset)
        else:
            d, a = resume
            if a > 0 or d < shift:  # the rest of a cut document goes first
                s_, e_, base = self._where(d)
                tail = [s_, e_, base + a]
                next_doc = d + 1 - shift
            else:
                next_doc = d - shift
        consumed = self.dataset.consumed_at(next_doc)
        state: dict = {"kind": _STATE_KIND, "version": _STATE_VERSION, "length": self.length,
                       "method": self.method, "keys": list(self.keys or ()),
                       "mixture": self.dataset.state_at(next_doc),
                       "consumed": checksum(consumed), "pending": pending}
        if tail is not None:
            state["tail"] = tail
        return state

    def _where(self, d: int) -> tuple[int, int, int]:
        """``(source, example, offset)`` of the plan's document ``d`` in the mixture's sources."""
        if isinstance(self._source, _Continued):
            if d == 0:
                return self._source.tail
            d -= 1
        source, example = self.dataset.locate(np.array([d], dtype=np.int64))
        return int(source[0]), int(example[0]), 0

    def _assemble(self, pieces: list[tuple[Any, int, int]], fetched: dict,
                  check: bool = True) -> dict:
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
        given = self._given_lengths if check else None
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

    def pending(self, j: int) -> list[list[tuple[int, int, int]]]:
        """The sequences after the first ``j`` whose documents were all drawn already."""
        return []

    def resume_point(self, j: int) -> tuple[int, int] | None:
        """``(document, start)``: the first token not drawn after ``j`` sequences (None: none)."""
        raise NotImplementedError


class _ConcatPlan(_Plan):
    """Sequence ``j`` holds tokens ``[j*length, (j+1)*length)`` of the concatenation."""

    def __init__(self, lengths: np.ndarray, length: int) -> None:
        self._ends = np.cumsum(lengths)
        total = int(self._ends[-1]) if len(lengths) else 0
        self._length = length
        self.size = -(-total // length)

    def resume_point(self, j: int) -> tuple[int, int] | None:
        # The concatenation is cut at j * length: the rest is drawn afresh.
        if j >= self.size:
            return None
        d, start, _ = self.pieces(j)[0]
        return d, start

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

    def _round_of(self, j: int) -> int:
        return int(np.searchsorted(self._round_out, j, side="right")) - 1

    def pending(self, j: int) -> list[list[tuple[int, int, int]]]:
        # A round's documents were all drawn before its first sequence was
        # emitted: the rest of the round goes out as it is.
        if j >= self.size:
            return []
        r = self._round_of(j)
        if j == int(self._round_out[r]):
            return []
        return [self.pieces(k) for k in range(j, int(self._round_out[r + 1]))]

    def resume_point(self, j: int) -> tuple[int, int] | None:
        if j >= self.size:
            return None
        r = self._round_of(j)
        p = int(self._round_first[r if j == int(self._round_out[r]) else r + 1])
        if p >= len(self._doc):
            return None
        return int(self._doc[p]), int(self._start[p])

    def pieces(self, j: int) -> list[tuple[int, int, int]]:
        r = self._round_of(j)
        out_start = int(self._round_out[r])
        row = j - out_start
        if self._shuffle:
            # Grain's bin order: default_rng(seed + sequences emitted before the round).
            n = int(self._round_out[r + 1]) - out_start
            row = int(np.random.default_rng(self._seed + out_start).permuted(range(n))[row])
        a, b = int(self._round_first[r]), int(self._round_first[r + 1])
        members = a + np.flatnonzero(self._bins[a:b] == row)
        return [(int(self._doc[p]), int(self._start[p]), int(self._stop[p])) for p in members]


class _Continued(DatasetMixin):
    """The rest of a cut document, then a dataset's documents: what a continued packing packs."""

    def __init__(self, mixture: Mixture, tail: tuple[int, int, int],
                 keys: tuple[str, ...] | None) -> None:
        self.mixture, self.tail, self.keys = mixture, tail, keys

    def __len__(self) -> int:
        return len(self.mixture) + 1

    def _rest(self) -> dict:
        source, example, start = self.tail
        document = self.mixture.datasets[source][example]
        if not isinstance(document, dict):
            _tokens(document, "", 0)  # the error for a non-dict
        keys = self.keys or tuple(document)
        return {k: (np.asarray(v)[start:] if k in keys else v) for k, v in document.items()}

    def tail_length(self) -> int:
        rest = self._rest()
        return len(_tokens(rest, (self.keys or tuple(rest))[0], 0))

    def get_example(self, i: int) -> Any:
        return self.get_batch(np.array([i], dtype=np.int64))[0]

    def get_batch(self, indices: np.ndarray) -> list:
        later = indices[indices > 0] - 1
        documents = iter(fetch_examples(self.mixture, later) if len(later) else [])
        return [self._rest() if i == 0 else next(documents) for i in indices.tolist()]


def _piece(value: Any, sources: int, size: int) -> tuple[int, ...]:
    """A state's piece as a tuple of ``size`` non-negative integers, its source in range."""
    if not isinstance(value, list) or len(value) != size:
        raise ValueError(f"got {value!r}")
    numbers = tuple(non_negative_int("piece", v) for v in value)
    if numbers[0] >= sources:
        raise ValueError(f"source {numbers[0]} of {value!r} is not one of the {sources} sources")
    return numbers


def pack(dataset: Any, length: int, *, method: str = "concat", keys: Sequence[str] | None = None,
         num_bins: int = 64, pad_id: int = 0, too_long: str = "split",
         shuffle_bins: bool = False, seed: int = 0,
         lengths: Sequence[int] | None = None, state: dict | None = None) -> PackedDataset:
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
        state: a state from :meth:`PackedDataset.state_at` of a packing of
            a mixture, with ``dataset`` the mixture continued from
            ``state["mixture"]`` (with any weights): the sequences it left
            open come first, then the rest of the document it cut, then the
            dataset's documents.

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
                         seed=seed, lengths=lengths, state=state)
