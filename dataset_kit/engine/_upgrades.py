"""Every upgrade of an old state, in one place: what versions 1 and 2 saved, read as version 3.

Before version 3 there was no envelope. Chainer's, Gluon's and NNabla's doors
saved the engine's bare state (format ``"dataset_kit.iterator"``, version 1
or 2); MXNet's iterators ``{"engine", "epoch_open", "exhausted"}``;
``ResizeIter`` ``{"inner", "cur"}``; ``PrefetchingIter`` ``{"inner": [...]}``;
the torch door ``{"engine", "torch"}``; ``ShardedIterator`` a dict of format
``"dataset_kit.sharded_iterator"`` (version 1). :func:`door_state` turns each
into the envelope it stands for; :func:`engine_part` turns an old bare engine
state into today's engine part. Nothing is checked beyond the shape that
identifies the old door: the envelope's validator checks the rest.
"""

from __future__ import annotations

from typing import Any

from dataset_kit.engine._checkpoint import STATE_FORMAT, STATE_VERSION, same, short

ENGINE_FORMAT = "dataset_kit.iterator"
SHARDED_FORMAT = "dataset_kit.sharded_iterator"
# The doors whose states were the engine's bare state.
BARE_DOORS = ("chainer", "gluon", "nnabla")
# How a wrong-door message names a bare state: it does not say which door saved it.
BARE_NAME = "chainer, gluon or nnabla (a bare engine state of version 1 or 2)"
_V1_SHUFFLE_KIND = "dataset_kit.iterators.order_samplers.ShuffleOrderSampler"
# ShardedIterator's policies of earlier releases under their engine names.
_RENAMED_POLICIES = {"drop": "discard"}
_MXNET_FLAGS = ("epoch_open", "exhausted")


def door_state(state: Any, door: str) -> Any:
    """Return ``state`` as a version-3 envelope if it is a door state of versions 1 or 2.

    Args:
        state: what a door was asked to load.
        door: the loading door's name (a bare engine state carries none; it is
            taken as this door's when the door saved bare states).

    Returns:
        The envelope, or ``state`` itself when it has no old door's shape (the
        validator then says what is wrong with it).
    """
    if not isinstance(state, dict) or same(state.get("format"), STATE_FORMAT):
        return state
    if same(state.get("format"), ENGINE_FORMAT):
        return _envelope(door if door in BARE_DOORS else BARE_NAME, state, {})
    if same(state.get("format"), SHARDED_FORMAT) and same(state.get("version"), 1):
        fields = {k: v for k, v in state.items() if k not in ("format", "version")}
        policy = fields.get("last_batch")
        if isinstance(policy, str):
            fields["last_batch"] = _RENAMED_POLICIES.get(policy, policy)
        return _envelope("sharded", None, fields)
    if "format" in state:
        return state
    keys = set(state)
    if keys == {"engine", "torch"}:
        return _envelope("torch", state["engine"], {"torch": state["torch"]})
    if "engine" in keys and keys <= {"engine", *_MXNET_FLAGS}:
        flags = {k: state[k] for k in _MXNET_FLAGS if k in state}
        return _envelope("mxnet", state["engine"], flags)
    if keys == {"inner"} and isinstance(state["inner"], list):
        return _envelope("mxnet.PrefetchingIter", None, {"inner": state["inner"]})
    if "inner" in keys and keys <= {"inner", "cur"}:
        return _envelope("mxnet.ResizeIter", None, dict(state))
    return state


def _envelope(door: str, engine: Any, fields: dict) -> dict:
    return {"format": STATE_FORMAT, "version": STATE_VERSION, "engine": engine,
            "door": {"name": door, **fields}}


def engine_part(state: Any, sampler_kind: str) -> Any:
    """Return an engine's bare state of version 1 or 2 as today's engine part.

    Args:
        state: the engine part of an envelope (today's has no ``format``), or
            an old bare state.
        sampler_kind: the engine's sampler kind (version 1 named a user's
            sampler by its module path).

    Raises:
        ValueError: if ``state`` has a ``format`` that is not an engine
            state's of version 1 or 2.
    """
    if not (isinstance(state, dict) and "format" in state):
        return state
    if same(state.get("format"), STATE_FORMAT):
        raise ValueError("state is a front door's whole state (format 'dataset_kit.state'); "
                         "an engine loads its 'engine' part")
    if not same(state.get("format"), ENGINE_FORMAT):
        raise ValueError(f"state is not a dataset_kit iterator state: {short(state)}")
    version = state.get("version")
    if same(version, 1):
        state = _upgrade_v1(state, sampler_kind)
    elif not same(version, 2):
        raise ValueError(f"state has format version {short(version)}; this dataset_kit reads "
                         f"versions 1, 2 and {STATE_VERSION}")
    upgraded = {key: value for key, value in state.items() if key not in ("format", "version")}
    upgraded["order_offset"] = 0
    return upgraded


def _upgrade_v1(state: dict, sampler_kind: str) -> dict:
    upgraded = dict(state, version=2, epoch_size=state.get("dataset_length"),
                    last_batch=None, carry=0)
    sampler = state.get("order_sampler")
    if isinstance(sampler, dict):
        sampler = dict(sampler)
        kind = sampler.get("kind")
        if kind == _V1_SHUFFLE_KIND:
            sampler = {"kind": "shuffle", "state": {"seed": sampler.get("seed")}}
        elif isinstance(kind, str) and kind.endswith("." + sampler_kind):
            # 0.1 named a user's sampler by module path; today's name is stable.
            sampler["kind"] = sampler_kind
        upgraded["order_sampler"] = sampler
    return upgraded
