"""An engine's checkpoint: the state it saves, and what loading one replaces.

The format itself (fields, checks, old versions) is :mod:`._checkpoint`'s
and :mod:`._upgrades`'; this module takes an engine's parts to it and back.
Plain functions over an engine (see :mod:`._parts`).
"""

from __future__ import annotations

from dataset_kit.engine import _checkpoint, _moves, _upgrades, _window
from dataset_kit.engine._parts import EngineParts


def state_dict(engine: EngineParts) -> dict:
    """Return the engine's state: a small JSON-ready dict (see :mod:`._checkpoint`).

    A door puts it in its own state with
    :func:`~dataset_kit.engine.states.wrap_state`.

    It counts only the batches already handed to the caller, and does not
    grow with the dataset unless a stateful order sampler forces it to
    carry the current epoch's order.

    Raises:
        ValueError: if a stateful order sampler's orders would be needed for
            a rolled-over tail longer than an epoch (only the previous
            epoch's order is kept).
    """
    p, spec, orders = engine._position, engine._spec, engine._orders
    if p.carry > spec.epoch_size and not orders.recomputable:
        raise ValueError(
            f"cannot checkpoint a rolled-over tail of {p.carry} examples that spans several "
            f"epochs of {spec.epoch_size} with order sampler {orders.kind!r}: "
            f"it keeps one order per epoch; use a seeded sampler")
    sampler = orders.state_dict(p.epoch, with_previous=p.carry > 0)
    return _checkpoint.make_state(spec, engine._dataset_length, p, engine._seed, sampler,
                                  _moves.order_offset(engine))


def load_state_dict(engine: EngineParts, state: dict) -> None:
    """Restore a state from :func:`state_dict` of any engine over the same data.

    The engine then yields exactly the batches the saved one would have
    yielded next. Bare engine states of format versions 1 and 2 load too.
    A state may begin the epoch in progress at an offset of its sampler's
    order (``order_offset``, see :func:`._moves.order_offset`).

    Raises:
        ValueError: if the state is not an engine state, has an unknown
            format version, or was saved for another dataset length,
            batching spec or order sampler, or its offset does not fit
            the sampler.
    """
    # Check everything first, then apply: a rejected state changes nothing.
    state = _upgrades.engine_part(state, engine._orders.kind)
    state = _checkpoint.read_state(state, engine._spec, engine._dataset_length)
    position = _checkpoint.position_of(state)
    orders = engine._orders.loaded(state["order_sampler"], position, int(state["order_offset"]))
    _window.discard(engine)
    engine._deferred = None
    engine._orders = orders
    engine._seed = int(state["seed"])
    engine._position = engine._planned = position
