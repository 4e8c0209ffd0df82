"""ResizeIter and PrefetchingIter: MXNet's iterators over other DataIters."""

from __future__ import annotations

from typing import Any

from dataset_kit._checks import positive_int
from dataset_kit.engine import Ledger
from dataset_kit.engine import states as _checkpoint
from dataset_kit.io.data_iter import DataBatch, DataIter


def _old_prefetching_state(state: dict) -> tuple[Any, dict] | None:
    """PrefetchingIter's state before the envelope (version 2): ``{"inner": [...]}``."""
    if set(state) == {"inner"} and isinstance(state["inner"], list):
        return None, {"inner": state["inner"]}
    return None


def _old_resize_state(state: dict) -> tuple[Any, dict] | None:
    """ResizeIter's state before the envelope (version 2): ``{"inner", "cur"}``."""
    if "inner" in state and set(state) <= {"inner", "cur"}:
        return None, dict(state)
    return None


# In this order: a PrefetchingIter's old state is also a ResizeIter's shape.
_checkpoint.register_upgrade("mxnet.PrefetchingIter", _old_prefetching_state)
_checkpoint.register_upgrade("mxnet.ResizeIter", _old_resize_state)


class _OverBatches(DataIter):
    """A DataIter whose getters read ``current_batch``, a batch of other iterators."""

    current_batch: DataBatch | None = None

    def getdata(self) -> list:
        return self._batch().data

    def getlabel(self) -> list | None:
        return self._batch().label

    def getpad(self) -> int:
        return self._batch().pad

    def getindex(self) -> Any:
        return self._batch().index

    def _batch(self) -> DataBatch:
        """The current batch (the getters follow a successful iter_next)."""
        assert self.current_batch is not None, "no current batch: call next() or iter_next() first"
        return self.current_batch


class ResizeIter(_OverBatches):
    """Exactly ``size`` batches per epoch from ``data_iter``, restarting it when it runs out.

    Args:
        data_iter: the iterator.
        size: batches per epoch.
        reset_internal: reset ``data_iter`` too on :meth:`reset`.
    """

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True) -> None:
        super().__init__(data_iter.batch_size)
        self.data_iter, self.size = data_iter, positive_int("size", size)
        self.reset_internal = reset_internal
        self.cur = 0

    def reset(self) -> None:
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        if self.cur == self.size:
            return False
        try:
            batch = self.data_iter.next()
        except StopIteration:  # the inner iterator wraps around: an epoch is `size` batches
            self.data_iter.reset()
            batch = self.data_iter.next()
        self.current_batch, self.cur = batch, self.cur + 1
        return True

    @property
    def provide_data(self) -> list:
        return self.data_iter.provide_data

    @property
    def provide_label(self) -> list:
        return self.data_iter.provide_label

    def state_dict(self) -> dict:
        """Return the state: door ``"mxnet.ResizeIter"``, the inner iterator's state and ``cur``."""
        return _checkpoint.wrap_state("mxnet.ResizeIter", None,
                                      inner=self.data_iter.state_dict(), cur=self.cur)

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Resume from :meth:`state_dict`; a refused state changes nothing.

        ``strict`` is the inner iterator's (its ledger is checked).

        Raises:
            ValueError: if the state comes from another door or does not fit
                (naming the key).
        """
        _, fields = _checkpoint.unwrap_state(
            state, "mxnet.ResizeIter",
            {"inner": _checkpoint.anything(), "cur": _checkpoint.integer(0, self.size + 1)},
            with_engine=False)
        self.data_iter.load_state_dict(fields["inner"], strict=strict)
        self.cur = fields["cur"]

    def ledger(self) -> Ledger:
        """Return the inner iterator's ledger (what it has consumed)."""
        return self.data_iter.ledger()


class PrefetchingIter(_OverBatches):
    """Several iterators side by side: one batch holds the data and labels of each.

    MXNet ran a thread per iterator here. In dataset_kit prefetching is the
    engine's: dataset_kit's iterators build batches ahead where their
    executor does, so this class only combines and renames; it owns no thread.

    Args:
        iters: one iterator or a list of them (same batch size and epoch length).
        rename_data: per iterator, a dict renaming its data inputs.
        rename_label: likewise for labels.

    Raises:
        ValueError: (on ``next``) if the iterators disagree on padding or end.
    """

    def __init__(self, iters: Any, rename_data: list | None = None,
                 rename_label: list | None = None) -> None:
        self.iters = iters if isinstance(iters, list) else [iters]
        if not self.iters:
            raise ValueError("PrefetchingIter needs at least one iterator")
        super().__init__(self.iters[0].batch_size)
        self.rename_data, self.rename_label = rename_data, rename_label

    @staticmethod
    def _renamed(descs: list, renames: list | None, k: int) -> list:
        if renames is None:
            return list(descs)
        return [d._replace(name=renames[k].get(d.name, d.name)) for d in descs]

    @property
    def provide_data(self) -> list:
        return [d for k, it in enumerate(self.iters)
                for d in self._renamed(it.provide_data, self.rename_data, k)]

    @property
    def provide_label(self) -> list:
        return [d for k, it in enumerate(self.iters)
                for d in self._renamed(it.provide_label, self.rename_label, k)]

    def reset(self) -> None:
        for it in self.iters:
            it.reset()

    def iter_next(self) -> bool:
        batches = []
        for it in self.iters:
            try:
                batches.append(it.next())
            except StopIteration:
                batches.append(None)
        if all(b is None for b in batches):
            return False
        if any(b is None for b in batches) or len({b.pad for b in batches}) > 1:
            raise ValueError("the iterators of a PrefetchingIter disagree on the number of "
                             "batches or on padding")
        self.current_batch = DataBatch(
            [d for b in batches for d in b.data], [x for b in batches for x in (b.label or [])],
            batches[0].pad, batches[0].index, self.provide_data, self.provide_label)
        return True

    def state_dict(self) -> dict:
        """Return the state: door ``"mxnet.PrefetchingIter"`` with each iterator's state."""
        return _checkpoint.wrap_state("mxnet.PrefetchingIter", None,
                                      inner=[it.state_dict() for it in self.iters])

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Resume every iterator from :meth:`state_dict`; a refused state changes none.

        ``strict`` is each iterator's (each one's ledger is checked).

        Raises:
            ValueError: if the state comes from another door or does not fit
                (naming the key).
        """
        _, fields = _checkpoint.unwrap_state(
            state, "mxnet.PrefetchingIter", {"inner": _inner_states(len(self.iters))},
            with_engine=False)
        inner = fields["inner"]
        # Each iterator's load is all or nothing; if a later one refuses, put
        # back the ones already loaded.
        before = [it.state_dict() for it in self.iters]
        loaded = 0
        try:
            for it, part in zip(self.iters, inner):
                it.load_state_dict(part, strict=strict)
                loaded += 1
            # The iterators advance in lockstep, so states saved together agree;
            # states that do not would fail later, mid-epoch, with a vaguer error.
            positions = [_position_of(it) for it in self.iters]
            for k, where in enumerate(positions[1:], 1):
                if where != positions[0]:
                    raise ValueError(
                        f"state['door']['inner'][{k}] stands at {where}, but "
                        f"state['door']['inner'][0] is at {positions[0]}: the iterators of a "
                        f"PrefetchingIter advance together")
        except BaseException:
            for it, old in zip(self.iters[:loaded], before):
                it.load_state_dict(old)
            raise

    def ledger(self) -> Ledger:
        """Return the first iterator's ledger (they advance together over the same order)."""
        return self.iters[0].ledger()


def _inner_states(count: int) -> _checkpoint.FieldCheck:
    """The check of ``inner``: a list of ``count`` states (each iterator checks its own)."""
    def check(where: str, value: Any) -> list:
        if not (isinstance(value, list) and len(value) == count):
            raise ValueError(f"{where} must be a list of {count} iterator states, got "
                             f"{_checkpoint.short(value)}")
        return value
    return check


def _position_of(it: DataIter) -> Any:
    """Where a (loaded) iterator stands in its epochs, or None if it has no engine."""
    state = it.state_dict()  # its own envelope, just loaded
    engine = state["engine"]
    if engine is None:
        return None
    return {"epoch": engine["epoch"], "current_position": engine["current_position"],
            "is_new_epoch": engine["is_new_epoch"], **state["door"]}
