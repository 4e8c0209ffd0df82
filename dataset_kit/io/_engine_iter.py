"""The DataIter that MXNet-style front doors share: an engine plus MXNet's epoch protocol.

MXNet                         engine
============================  ==================================================
``next()`` / ``iter_next()``  ``engine.next()`` until the batch that ends the epoch
``StopIteration``             after that batch, until ``reset()``; at once for an
                              epoch without a batch (``skip_empty_epoch()``)
``reset()`` mid-epoch         ``start_next_epoch()`` (MXNet restarts the epoch)
``DataBatch.pad``             from the batch's plan (see :data:`PAD_RULES`)
``data`` / ``label``          the first / last columns of each stacked batch, as
                              ``mx.nd.NDArray`` when MXNet is in use, else as
                              :class:`~dataset_kit.io.MXArray` views (numpy arrays
                              with ``asnumpy()``, ``context``, ``copyto()``...)
============================  ==================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit._mxnet_arrays import mxnet_output
from dataset_kit.convert import concat_examples
from dataset_kit.engine import LAST_BATCH, BatchPlan, Engine, LastBatch, Ledger
from dataset_kit.engine import states as _checkpoint
from dataset_kit.io.data_iter import DataBatch, DataDesc, DataIter

# How DataBatch.pad is counted:
#   "padding": the examples the 'pad' policy added (MXNet's pad);
#   "rolled":  examples rolled over from the previous epoch (MXNet's roll_over reports these);
#   "wrapped": examples taken from the next epoch to fill the batch (CSVIter's round_batch).
PAD_RULES = ("padding", "rolled", "wrapped")
# MXNet's last_batch_handle words as the engine's policies (NDArrayIter, ImageIter...).
# How a class counts DataBatch.pad under each is its own pad rule, not the word's.
LAST_BATCH_HANDLE: dict[str, LastBatch] = {"pad": LAST_BATCH["pad"],
                                           "discard": LAST_BATCH["discard"],
                                           "roll_over": LAST_BATCH["rollover"]}
# The door's name in its states, and its fields (missing ones: states of 0.1).
DOOR = "mxnet"
_FLAGS = ("epoch_open", "exhausted")


def _old_state(state: dict) -> tuple[Any, dict] | None:
    """This door's state before the envelope (version 2): ``{"engine", "epoch_open",
    "exhausted"}``."""
    if "engine" in state and set(state) <= {"engine", *_FLAGS}:
        return state["engine"], {key: state[key] for key in _FLAGS if key in state}
    return None


_checkpoint.register_upgrade(DOOR, _old_state)
_FIELDS = {"epoch_open": _checkpoint.flag(default=True),
           "exhausted": _checkpoint.flag(default=False)}


class EngineDataIter(DataIter):
    """A :class:`DataIter` whose examples are tuples ``(data..., label...)`` of an engine's dataset.

    Args:
        engine: the engine (repeating), which owns order, epochs and checkpoints.
        data_descs: the data inputs' names and per-example shapes and dtypes.
        label_descs: the labels', likewise.
        pad_rule: one of :data:`PAD_RULES`.
        with_index: whether ``DataBatch.index`` gives the examples' indices.
    """

    def __init__(self, engine: Engine, data_descs: list[DataDesc], label_descs: list[DataDesc],
                 pad_rule: str, with_index: bool) -> None:
        super().__init__(engine.batch_size)
        self._engine = engine
        self._data_descs, self._label_descs = data_descs, label_descs
        self._pad_rule, self._with_index = pad_rule, with_index
        self._epoch_open = True   # False once the batch that ends the epoch was delivered
        self._exhausted = False   # StopIteration was raised since then
        self._current: tuple | None = None
        self._batched_descs: tuple | None = None

    def iter_next(self) -> bool:
        if not self._epoch_open:
            self._exhausted = True
            return False
        if self._engine.skip_empty_epoch():  # an epoch without a batch, consumed
            self._epoch_open, self._exhausted = False, True
            return False
        batch = self._engine.next()
        # A tuple is a batch the executor's converter already stacked (in a worker).
        columns = batch if isinstance(batch, tuple) else concat_examples(batch)
        columns = self._finish(columns if isinstance(columns, tuple) else (columns,))
        # Converted once per batch: every getdata() of a batch gives the same arrays, as MXNet.
        self._current = tuple(mxnet_output(c) for c in columns)
        self._epoch_open = not self._engine.position.is_new_epoch
        return True

    def _finish(self, columns: tuple) -> tuple:
        """The stacked numpy columns as the iterator gives them (a subclass reshapes or casts)."""
        return columns

    def reset(self) -> None:
        """Start the next epoch; mid-epoch, the rest of the epoch is skipped (MXNet restarts)."""
        # MXNet rolls a leftover over only when the epoch ran into StopIteration.
        self._engine.start_next_epoch(keep_rollover=self._exhausted or self._epoch_open)
        self._epoch_open, self._exhausted = True, False

    def getdata(self) -> list:
        return list(self._columns()[:len(self._data_descs)])

    def getlabel(self) -> list:
        return list(self._columns()[len(self._data_descs):])

    def _columns(self) -> tuple:
        """The current batch's stacked columns (the getters follow a successful iter_next)."""
        assert self._current is not None, "no current batch: call next() or iter_next() first"
        return self._current

    def _plan(self) -> BatchPlan:
        """The current batch's plan (the getters follow a successful iter_next)."""
        plan = self._engine.last_plan
        assert plan is not None, "no current batch: call next() or iter_next() first"
        return plan

    def epoch_order(self) -> np.ndarray:
        """The order of the epoch being read (the one just ended, until :meth:`reset`)."""
        epoch = self._engine.position.epoch - (0 if self._epoch_open else 1)
        order = self._engine.current_order(max(epoch, 0))
        return np.arange(self._engine.epoch_size) if order is None else order.copy()

    def getpad(self) -> int:
        plan = self._plan()
        if self._pad_rule == "padding":
            return plan.pad
        if isinstance(plan.epochs, int):
            return 0
        if self._pad_rule == "rolled":
            return int(np.count_nonzero(plan.epochs < plan.epochs[-1]))
        return int(np.count_nonzero(plan.epochs > plan.epochs[0]))

    def getindex(self) -> Any:
        return self._plan().indices.copy() if self._with_index else None

    @property
    def provide_data(self) -> list:
        return list(self._batched()[0])

    @property
    def provide_label(self) -> list:
        return list(self._batched()[1])

    def _batched(self) -> tuple:
        """The data's and labels' descriptors with the batch axis (made once: every batch asks)."""
        if self._batched_descs is None or self._batched_descs[0] != self.batch_size:
            self._batched_descs = (self.batch_size, *(
                tuple(d._replace(shape=(self.batch_size, *d.shape)) for d in descs)
                for descs in (self._data_descs, self._label_descs)))
        return self._batched_descs[1:]

    def state_dict(self) -> dict:
        """Return the iterator's state: door ``"mxnet"`` with ``epoch_open`` and ``exhausted``."""
        return _checkpoint.wrap_state(DOOR, self._engine.state_dict(),
                                      epoch_open=self._epoch_open, exhausted=self._exhausted)

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Resume from :meth:`state_dict` (any iterator over the same data and settings).

        Args:
            state: the state.
            strict: refuse a state whose ledger does not fit this iterator's
                data and orders (:class:`~dataset_kit.engine.ResumeMismatchError`,
                naming the cause); False warns instead and loads it.

        Raises:
            ResumeMismatchError: (``strict``) if the state's ledger does not fit.
            ValueError: if the state comes from another door or does not fit
                this iterator.
        """
        # The door's fields are checked first: the engine's load is all or nothing.
        engine, flags = _checkpoint.unwrap_state(state, DOOR, _FIELDS)
        self._engine.load_state_dict(engine, strict=strict)

        self._epoch_open, self._exhausted = flags["epoch_open"], flags["exhausted"]

    def ledger(self) -> Ledger:
        """Return what has been consumed: counts, the chain of the ids, the data's identity.

        Log it beside the model's step; two runs that logged the same ledger
        consumed the same examples in the same order
        (:meth:`dataset_kit.engine.Engine.ledger`).
        """
        return self._engine.ledger()

    def close(self) -> None:
        """Release threads, processes and shared memory. Idempotent."""
        self._engine.close()


class NativeDataIter(EngineDataIter):
    """MXNet's iterators written in C++ (``MXDataIter``): one data and one label input.

    Their ``getdata()`` and ``getlabel()`` return the array itself, not a list;
    ``next()`` wraps each in a list, as MXNet's ``MXDataIter`` does.
    """

    # MXNet's MXDataIter breaks DataIter's list contract: its getters give the
    # array itself (next() wraps each in a list). The type system cannot hold a
    # subclass that changes a return type, so each such override says so.
    def getdata(self) -> Any:  # type: ignore[override]
        return self._columns()[0]

    def getlabel(self) -> Any:  # type: ignore[override]
        return self._columns()[1]

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        return DataBatch([self.getdata()], [self.getlabel()], self.getpad(), self.getindex(),
                         self.provide_data, self.provide_label)
