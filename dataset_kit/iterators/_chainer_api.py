"""Chainer's iterator vocabulary over the engine: attributes, reset, checkpoints.

:class:`ChainerIterator` holds one :class:`~._engine.Engine` and translates
Chainer's names onto it; :class:`~dataset_kit.iterators.SerialIterator`,
:class:`~dataset_kit.iterators.MultithreadIterator` and
:class:`~dataset_kit.iterators.MultiprocessIterator` only choose the
executor. Nothing here plans, fetches or prefetches a batch.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np

from dataset_kit.engine import Engine, Ledger
from dataset_kit.engine import states as _checkpoint
from dataset_kit.engine.errors import SamplerMismatchError
from dataset_kit.iterators.iterator import Iterator

# Chainer's keys, in the order Chainer's iterators serialize them.
_CHAINER_KEYS = ("current_position", "epoch", "is_new_epoch")
# The door's name in its states: the three iterators load each other's.
DOOR = "chainer"
# Before the envelope (versions 1 and 2) this door saved the bare engine state.
_checkpoint.register_upgrade(DOOR, bare_engine_states=True)


class ChainerIterator(Iterator):
    """A Chainer-style iterator over an engine.

    Args:
        engine: the engine that plans, builds and checkpoints the batches.
    """

    #: The keys under which Chainer's iterator of the same kind keeps its
    #: order: the one it writes, then the other one, which it also reads.
    _ORDER_KEYS: tuple[str, str] = ("order", "_order")
    #: Whether Chainer's iterator of the same kind writes its order key even
    #: without an order (and then needs it to load).
    _ORDER_KEY_WITHOUT_ORDER = False

    def __init__(self, engine: Engine) -> None:
        spec = engine.spec
        if spec.repeat and spec.epoch_size and not spec.yields_batches:
            # next() would have no batch to return, ever (the engine says so too).
            raise ValueError(
                f"last_batch={spec.last_batch!r} with repeat=True needs batch_size <= the epoch "
                f"size, got batch_size={spec.batch_size} and epoch size {spec.epoch_size} "
                f"(no epoch would yield a batch)")
        self._engine = engine

    def __next__(self) -> Any:
        return self._engine.next()

    def __copy__(self) -> ChainerIterator:
        """An independent iterator at the same position (Chainer's ``copy.copy(it)``).

        It shares the dataset and the order sampler; batches in flight and
        worker threads or processes are not copied (the copy starts its own).
        """
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._engine = copy.copy(self._engine)
        return other

    def statistics(self) -> Any:
        """Return the engine's :class:`~dataset_kit.EngineStatistics`: batches and
        examples handed out, how long ``next()`` waited, batches in flight."""
        return self._engine.statistics()

    def add_statistics_hook(self, callback: Any, *, every: int) -> Any:
        """Call ``callback(self.statistics())`` after every ``every``-th batch.

        Args:
            callback: takes an :class:`~dataset_kit.EngineStatistics`.
            every: how many batches between calls.

        Returns:
            A function that removes the hook.

        Raises:
            TypeError: if ``callback`` is not callable or ``every`` is not an integer.
            ValueError: if ``every`` is not positive.
        """
        return self._engine.add_statistics_hook(callback, every=every)

    # -- Chainer's attributes ------------------------------------------------

    @property
    def dataset(self) -> Any:
        """The dataset."""
        return self._engine.dataset

    @property
    def batch_size(self) -> int:
        """Examples per batch."""
        return self._engine.batch_size

    @property
    def repeat(self) -> bool:
        """Whether the iterator loops over the dataset forever."""
        return self._engine.spec.repeat

    @property
    def last_batch(self) -> str | None:
        """How each epoch ends: None (Chainer's), 'keep', 'discard', 'rollover' or 'pad'."""
        return self._engine.spec.last_batch

    @property
    def order_sampler(self) -> Any:
        """The order sampler passed in (or the default shuffle), never changed by a load."""
        return self._engine.order_sampler

    @property
    def seed(self) -> int:
        """The seed of the shuffle and of :func:`~dataset_kit.example_rng`."""
        return self._engine.seed

    @property
    def epoch(self) -> int:
        """Completed epochs."""
        return self._engine.position.epoch

    @property
    def current_position(self) -> int:
        """Index of the next example in the current epoch's order."""
        return self._engine.position.current_position

    @property
    def is_new_epoch(self) -> bool:
        """Whether the last batch completed an epoch."""
        return self._engine.position.is_new_epoch

    @property
    def epoch_detail(self) -> float:
        """Epochs consumed, as a float: ``epoch + current_position / epoch size``."""
        return self._engine.epoch_detail

    @property
    def previous_epoch_detail(self) -> float | None:
        """``epoch_detail`` before the last batch, or None before the first batch."""
        return self._engine.position.previous_epoch_detail

    @property
    def last_pad(self) -> int:
        """How many trailing examples of the last batch are padding (``last_batch='pad'``)."""
        plan = self._engine.last_plan
        return 0 if plan is None else plan.pad

    def reset(self) -> None:
        """Start over from the first batch of epoch 0.

        A seeded shuffle replays the same orders; a stateful order sampler is
        asked for a new epoch-0 order, as in Chainer. Unlike Chainer, this
        also works after :meth:`finalize`.
        """
        self._engine.reset()

    def finalize(self) -> None:
        """Release threads, processes and shared memory. Idempotent.

        Arrays already handed out stay valid.
        """
        self._engine.close()

    # -- checkpoints ---------------------------------------------------------

    def state_dict(self) -> dict:
        """Return the iterator's state: a small JSON-serialisable dict.

        The envelope of :func:`~dataset_kit.engine.states.wrap_state` with the
        engine's state and door ``"chainer"`` (no fields of its own). It
        counts only the batches already handed to the caller, and does not
        grow with the dataset unless a stateful order sampler forces it to
        carry the current epoch's order.
        """
        return _checkpoint.wrap_state(DOOR, self._engine.state_dict())

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Restore a state from :meth:`state_dict` of any of Chainer's iterators.

        The iterator then yields exactly the batches the saved one would have
        yielded next. States of earlier versions load too.

        Args:
            state: the state.
            strict: refuse a state whose ledger does not fit this iterator's
                data and orders (:class:`~dataset_kit.engine.ResumeMismatchError`,
                naming the cause); False warns instead and loads it.

        Raises:
            ResumeMismatchError: (``strict``) if the state's ledger does not fit.
            ValueError: if the state is not an iterator state, comes from
                another door, has an unknown format version, or was saved for
                another dataset length, batch size, repeat mode, last-batch
                policy or order sampler.
        """
        engine, _ = _checkpoint.unwrap_state(state, DOOR)
        self._engine.load_state_dict(engine, strict=strict)

    def ledger(self) -> Ledger:
        """Return what has been consumed: counts, the chain of the ids, the data's identity.

        Log it beside the model's step; two runs that logged the same ledger
        consumed the same examples in the same order
        (:meth:`dataset_kit.engine.Engine.ledger`).
        """
        return self._engine.ledger()

    def serialize(self, serializer: Any) -> None:
        """Save or load the state through Chainer's serializer protocol.

        Like Chainer's iterators, this calls ``value = serializer(key, value)``
        for every key and takes back the returned values, so any serializer
        that follows the protocol works: Chainer's npz and HDF5 serializers,
        dataset_kit's, a user's. The keys are those Chainer's iterator of the
        same kind writes (``current_position``, ``epoch``, ``is_new_epoch``,
        the order, ``previous_epoch_detail``), so the snapshot loads into it,
        plus ``dataset_kit_state``, the JSON of :meth:`state_dict`. The order
        is ``order`` (written when shuffled), or ``_order`` for
        :class:`~dataset_kit.iterators.MultithreadIterator` (always written,
        None when not shuffled), as in Chainer 7.8.1.

        Loading prefers ``dataset_kit_state``. Without it (a Chainer snapshot),
        or when it was saved with another kind of order sampler (which Chainer
        accepts and :meth:`load_state_dict` refuses), the iterator resumes
        from Chainer's keys: the epoch in progress continues in the snapshot's
        order (``_order`` in older snapshots), and later epochs come from this
        iterator's own sampler.

        Raises:
            KeyError: if a deserializer lacks a key the state needs, naming it.
            ValueError: if the state does not fit this iterator.
        """
        whole = self.state_dict()
        text = json.dumps(whole)
        state = whole["engine"]
        previous = state["previous_epoch_detail"]
        sent = {key: state[key] for key in _CHAINER_KEYS}
        sent["previous_epoch_detail"] = -1.0 if previous is None else previous
        missing: list[str] = []  # keys a deserializer lacks; they matter only without ours
        got = {key: _ask(serializer, key, value, missing) for key, value in sent.items()
               if key != "previous_epoch_detail"}
        order = self._engine.current_order()
        got_order = None
        written, other = self._ORDER_KEYS
        if order is not None:
            try:
                got_order = serializer(written, order.copy())
            except KeyError:
                got_order = _ask(serializer, other, order.copy(), missing)
        elif self._ORDER_KEY_WITHOUT_ORDER:
            try:
                serializer(written, None)  # what is read back is no order of ours: ignored
            except KeyError:
                pass
        try:
            got["previous_epoch_detail"] = serializer("previous_epoch_detail",
                                                      sent["previous_epoch_detail"])
        except KeyError:
            got["previous_epoch_detail"] = None  # older Chainer snapshots: guessed below
        try:
            got_text = serializer("dataset_kit_state", text)
        except KeyError:
            got_text = None
        self._load_serialized(sent, got, order, got_order, text, got_text, missing)

    def _load_serialized(self, sent: dict, got: dict, order: np.ndarray | None,
                         got_order: Any, text: str, got_text: Any, missing: list[str]) -> None:
        """Load what a deserializer returned (nothing, for a serializer that writes)."""
        if got_text is not None:
            if _checkpoint.json_text("dataset_kit_state", got_text) == text:
                return  # a serializer that writes, or the state this iterator has
            try:
                self.load_state_dict(_checkpoint.parse_json("dataset_kit_state", got_text))
                return
            except SamplerMismatchError as mismatch:
                if missing:
                    raise SamplerMismatchError(
                        f"the checkpoint's 'dataset_kit_state' does not fit: {mismatch}; and "
                        f"it has no {_names(missing)} entry to continue the epoch in progress "
                        f"from, as Chainer would, so it cannot be resumed by this iterator "
                        f"(build it with the saved shuffle or order sampler)") from None
                # Chainer's semantics: resume the epoch in the saved order, below.
        elif missing:
            raise KeyError(
                f"the iterator state has no {missing[0]!r} entry (and no 'dataset_kit_state'); "
                f"it cannot be resumed")
        got = {key: _chainer_value(key, sent[key] if value is None and
                                   key != "previous_epoch_detail" else value)
               for key, value in got.items()}
        # A serializer gives an order back only when it was sent one.
        same_order = got_order is None or (order is not None
                                           and np.array_equal(np.asarray(got_order), order))
        if got == sent and same_order:
            return  # a serializer that writes, or the state this iterator has
        self._load_chainer_keys(got, None if same_order else got_order)

    def _load_chainer_keys(self, got: dict, order: Any) -> None:
        """Resume from a state written by Chainer's iterators."""
        engine = self._engine
        epoch, position = got["epoch"], got["current_position"]
        previous = got["previous_epoch_detail"]
        if previous is None:
            # Chainer's guess for snapshots older than previous_epoch_detail.
            n = engine.epoch_size
            previous = epoch + (position - engine.batch_size) / n
            previous = max(previous, 0.0) if epoch + position / n > 0 else -1.0
        try:
            engine.seek(epoch=epoch, position=position, is_new_epoch=got["is_new_epoch"],
                        previous_epoch_detail=None if float(previous) < 0 else float(previous),
                        order=order)
        except ValueError as error:
            raise ValueError(f"the checkpoint's Chainer keys ({', '.join(_CHAINER_KEYS)}, "
                             f"order, previous_epoch_detail) do not fit this iterator: "
                             f"{error}") from None


def _ask(serializer: Any, key: str, value: Any, missing: list[str]) -> Any:
    """``serializer(key, value)``; a missing key is noted in ``missing`` and gives None."""
    try:
        return serializer(key, value)
    except KeyError:
        missing.append(key)
        return None


def _names(missing: list[str]) -> str:
    return "'order' (nor '_order')" if missing[-1] == "_order" else repr(missing[-1])


def _chainer_value(key: str, value: Any) -> Any:
    """A value of one of Chainer's keys as the Python scalar it stands for.

    Raises:
        ValueError: naming the key, if the value is not one scalar of its kind.
    """
    array = np.asarray(value)
    kinds, expected = {"epoch": ("iu", "an integer >= 0"),
                       "current_position": ("iu", "an integer >= 0"),
                       "is_new_epoch": ("b", "True or False"),
                       "previous_epoch_detail": ("iuf", "a number")}[key]
    if value is None and key == "previous_epoch_detail":
        return None
    if array.size != 1 or array.dtype.kind not in kinds:
        raise ValueError(f"the checkpoint's {key!r} must be {expected}, got "
                         f"{_checkpoint.short(value)}")
    item = array.reshape(()).item()
    if kinds == "iu" and item < 0:
        raise ValueError(f"the checkpoint's {key!r} must be {expected}, got {item}")
    return float(item) if key == "previous_epoch_detail" else item
