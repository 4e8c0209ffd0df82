"""ShardedIterator: each rank's share of one global order, on the ordinary engine.

It is a Chainer-style iterator (:class:`~dataset_kit.iterators.SerialIterator`'s
attributes) whose order sampler yields this rank's cut of the global order
(:mod:`._shards`); worker threads or processes work inside each rank as on
one machine. What it adds to the engine is the translation of checkpoints:
its state records the *global* position, identical on every rank, and loads
on any number of ranks (elastic resume).
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.distributed._shards import (
    SHARD_POLICIES,
    first_padding,
    global_order,
    rank_share,
    share_length,
)
from dataset_kit.distributed.communicators import DistributedError, as_communicator
from dataset_kit.engine import (
    DEFAULT_BATCH_TIMEOUT,
    Engine,
    ExecutorSpec,
    OrderSampler,
    draw_seed,
    states as _checkpoint,
)
from dataset_kit.iterators._chainer_api import ChainerIterator

STATE_FORMAT = "dataset_kit.sharded_iterator"
STATE_VERSION = 1
# Policies of earlier releases under their engine names: a state saved with
# them still loads.
_RENAMED_POLICIES = {"drop": "discard"}


class _RankShareSampler(OrderSampler):
    """The order sampler of one rank: its share of each epoch's global order."""

    state_kind = "sharded"

    def __init__(self, seed: int, shuffle: bool, rank: int, ranks: int, batch_size: int,
                 policy: str) -> None:
        self.seed, self.shuffle, self.policy = seed, shuffle, policy
        self.rank, self.ranks, self.batch_size = rank, ranks, batch_size

    def epoch_order(self, epoch: int, size: int) -> np.ndarray:
        order = global_order(self.seed, epoch, size, self.shuffle)
        return rank_share(order, 0, self.rank, self.ranks, self.batch_size, self.policy)

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        raise TypeError("a rank's share is computed per epoch; call epoch_order()")


class ShardedIterator(ChainerIterator):
    """Batches of this rank's share of a dataset that every rank holds in full.

    Every rank computes the same global order per epoch from the seed of rank
    0 and takes every ``size``-th example of it, so the ranks together see
    each example of an epoch once (up to the padding ``last_batch`` asks
    for) and every rank yields the same number of batches. Padding repeats
    examples from the start of the epoch's global order; :attr:`last_pad`
    counts those in the last batch.

    At the end of each epoch the ranks compare their positions (one small
    ``allgather``): a rank that diverged or died is then an error on the
    others, not a hang.

    Args:
        dataset: the whole dataset, the same length on every rank.
        batch_size: examples per batch on each rank.
        comm: a communicator or anything
            :func:`~dataset_kit.distributed.as_communicator` takes (None: one process).
        repeat: whether to loop over the dataset forever.
        shuffle: whether each epoch's global order is shuffled.
        seed: the seed of the shuffle and of :func:`~dataset_kit.example_rng`;
            rank 0's (drawn there when None) is used by every rank.
        last_batch: how the end of the global order is cut, in the words of
            the other iterators: ``'keep'`` (padded to a multiple of the
            ranks only, as ChainerMN's ``scatter_dataset`` and PyTorch's
            ``DistributedSampler`` do; the last batch may be short),
            ``'pad'`` (padded to full batches) or ``'discard'`` (cut to full
            batches).
        n_processes: build batches in this many worker processes per rank.
        n_threads: build batches on this many threads per rank.
        converter: applied to each batch where it is built (e.g.
            :func:`~dataset_kit.concat_examples`), or None.
        start_method: the worker processes' start method (default: fork where
            available).
        timeout: seconds a worker may stay silent while its batch is awaited
            before a :class:`~dataset_kit.iterators.BatchTimeoutError` (None: wait).

    Raises:
        TypeError: if an integer argument is not an integer, or ``converter``
            is not callable.
        ValueError: if an argument is out of range, both ``n_processes`` and
            ``n_threads`` are given, or a repeating epoch would have no batch.
        DistributedError: on every rank, if the ranks' dataset lengths or
            arguments differ (the message names both values).
    """

    def __init__(self, dataset: Any, batch_size: int, comm: Any = None, *, repeat: bool = True,
                 shuffle: bool = True, seed: int | None = None, last_batch: str = "keep",
                 n_processes: int | None = None, n_threads: int | None = None,
                 converter: Callable[[Any], Any] | None = None,
                 start_method: str | None = None,
                 timeout: float | None = DEFAULT_BATCH_TIMEOUT) -> None:
        batch_size = positive_int("batch_size", batch_size)
        if last_batch not in SHARD_POLICIES:
            raise ValueError(f"last_batch must be one of {list(SHARD_POLICIES)}, "
                             f"got {last_batch!r}")
        if seed is not None:
            seed = non_negative_int("seed", seed)
        if n_processes is not None and n_threads is not None:
            raise ValueError(f"pass n_processes or n_threads, not both (got {n_processes!r} "
                             f"and {n_threads!r})")
        if converter is not None and not callable(converter):
            raise TypeError(f"converter must be callable or None, got {type(converter).__name__}")
        self.comm = as_communicator(comm)
        self.shuffle, self.shard_policy = bool(shuffle), last_batch
        size = len(dataset)
        mine = {"dataset length": size, "batch_size": batch_size, "repeat": bool(repeat),
                "shuffle": self.shuffle, "last_batch": last_batch}
        if self.comm.rank == 0 and seed is None:
            seed = draw_seed()
        gathered = self.comm.allgather((mine, seed))
        _check_agreement([config for config, _ in gathered], "argument")
        given = [(rank, s) for rank, (_, s) in enumerate(gathered) if s is not None]
        if any(s != gathered[0][1] for _, s in given):
            raise DistributedError(f"ranks were given different seeds: {dict(given)}")
        seed = gathered[0][1]
        per_rank = share_length(size, self.comm.size, batch_size, last_batch)
        if repeat and per_rank == 0:
            raise ValueError(
                f"a dataset of {size} examples gives no batch of {batch_size} on each of "
                f"{self.comm.size} ranks with last_batch={last_batch!r}")
        sampler = _RankShareSampler(seed, self.shuffle, self.comm.rank, self.comm.size,
                                    batch_size, last_batch)
        executor = ExecutorSpec(
            "process" if n_processes is not None else "serial" if n_threads is None
            else "thread",
            workers=positive_int("n_processes", n_processes) if n_processes is not None
            else positive_int("n_threads", n_threads) if n_threads is not None else 0,
            start_method=start_method, timeout=timeout, converter=converter)
        super().__init__(Engine(dataset, batch_size=batch_size, repeat=repeat,
                                order_sampler=sampler, seed=seed, last_batch=last_batch,
                                executor=executor))
        # The epoch resumed from another number of ranks: (epoch, first
        # global position, local position where its share begins).
        self._segment: tuple[int, int, int] | None = None

    def __next__(self) -> Any:
        batch = self._engine.next()
        if self._engine.position.is_new_epoch:
            self._check_in()
        return batch

    def _check_in(self) -> None:
        """Compare positions across ranks at an epoch's end (fails, not hangs, on a lost rank)."""
        state = self.state_dict()
        mine = (state["epoch"], state["global_position"])
        try:
            everyone = self.comm.allgather(mine)
        except Exception as error:  # the engine's own exception types vary
            raise DistributedError(
                f"rank {self.comm.rank}: the ranks' check at the end of epoch "
                f"{mine[0] - 1} failed ({type(error).__name__}: {error}); "
                f"another rank has probably died") from error
        _check_agreement([{"epoch, global position": pos} for pos in everyone], "position")

    @property
    def last_pad(self) -> int:
        """How many trailing examples of the last batch are padding.

        They repeat examples from the start of the epoch's global order, so
        that every rank has as many batches (and, with ``'pad'``, full ones)
        as the others; a metric can leave them out.
        """
        engine = self._engine
        plan, position = engine.last_plan, engine.position
        if plan is None:
            return 0
        stop = engine.epoch_size if position.is_new_epoch else position.current_position
        epoch, start, offset = plan.epoch_at(0), 0, 0
        if self._segment is not None and self._segment[0] == epoch:
            _, start, offset = self._segment
        first = offset + first_padding(engine.dataset_length - start, self.comm.rank,
                                       self.comm.size)
        return max(0, stop - max(first, stop - len(plan.indices)))

    def reset(self) -> None:
        """Start over from the first batch of epoch 0 (a resumed epoch is forgotten)."""
        super().reset()
        self._segment = None

    # -- global checkpoints --------------------------------------------------

    def global_position(self) -> int:
        """Examples of the current epoch's global order consumed by all ranks together."""
        position = self._engine.position
        local = position.current_position
        if self._segment is not None and self._segment[0] == position.epoch:
            _, start, offset = self._segment
            return start + (local - offset) * self.comm.size
        return local * self.comm.size

    def state_dict(self) -> dict:
        """Return the global state: the same dict on every rank, JSON-ready.

        Keys: ``format``, ``version``, ``dataset_length``, ``seed``,
        ``shuffle``, ``repeat``, ``last_batch``, ``epoch``, ``global_position``
        (examples of the epoch's global order consumed by all ranks),
        ``is_new_epoch``, ``previous_epoch_detail``, and ``ranks`` and
        ``batch_size`` (informative: any number of ranks and batch size may
        load it).
        """
        position = self._engine.position
        return {
            "format": STATE_FORMAT, "version": STATE_VERSION,
            "dataset_length": self._engine.dataset_length, "seed": self._engine.seed,
            "shuffle": self.shuffle, "repeat": self.repeat, "last_batch": self.shard_policy,
            "epoch": position.epoch, "global_position": self.global_position(),
            "is_new_epoch": position.is_new_epoch,
            "previous_epoch_detail": position.previous_epoch_detail,
            "ranks": self.comm.size, "batch_size": self.batch_size,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from a global state saved on any number of ranks.

        The rest of the saved epoch's global order is cut among this
        iterator's ranks (``last_batch`` applies to what remains); later
        epochs are cut as usual. No example of that epoch is seen twice or
        skipped, beyond the padding or discarding the policy asks for.

        Raises:
            ValueError: if ``state`` is not a sharded-iterator state, or was
                saved with another dataset length, seed, shuffle, repeat
                mode or last-batch policy (the message names both values).
        """
        short = _checkpoint.short
        if not (isinstance(state, dict) and _checkpoint.same(state.get("format"), STATE_FORMAT)):
            raise ValueError(f"state is not a ShardedIterator state: {short(state)}")
        if not _checkpoint.same(state.get("version"), STATE_VERSION):
            raise ValueError(f"state has format version {short(state.get('version'))}; this "
                             f"dataset_kit reads version {STATE_VERSION}")
        mine = self.state_dict()
        policy = state.get("last_batch")
        if isinstance(policy, str):
            state = dict(state, last_batch=_RENAMED_POLICIES.get(policy, policy))
        for key in ("dataset_length", "seed", "shuffle", "repeat", "last_batch"):
            if not _checkpoint.same(state.get(key), mine[key]):
                raise ValueError(f"state was saved with {key}={short(state.get(key))}, but this "
                                 f"iterator has {key}={mine[key]!r}")
        size = mine["dataset_length"]
        try:
            epoch = _checkpoint.index_field(state, "epoch", 0, 2**63)
            start = _checkpoint.index_field(state, "global_position", 0, max(size, 1))
        except ValueError as error:
            raise ValueError(f"state has an invalid position: epoch={short(state.get('epoch'))}, "
                             f"global_position={short(state.get('global_position'))} ({error})"
                             ) from None
        if type(state.get("is_new_epoch")) is not bool:
            raise ValueError(f"state['is_new_epoch'] must be True or False, got "
                             f"{short(state.get('is_new_epoch'))}")
        engine = self._engine
        local = engine.state_dict()
        # The engine checks the rest (previous_epoch_detail) before changing anything.
        local.update(epoch=epoch, current_position=0, carry=0,
                     is_new_epoch=state["is_new_epoch"],
                     previous_epoch_detail=state.get("previous_epoch_detail"))
        local["order_sampler"] = {"kind": _RankShareSampler.state_kind}
        segment = None
        if start:
            sampler: _RankShareSampler = engine.order_sampler
            share = rank_share(global_order(sampler.seed, epoch, size, self.shuffle), start,
                               sampler.rank, sampler.ranks, sampler.batch_size, sampler.policy)
            offset = engine.epoch_size - len(share)
            if offset == engine.epoch_size:  # nothing of the epoch is left here
                local.update(epoch=epoch + 1, is_new_epoch=True)
            else:
                # The share fills the end of an epoch-sized order; its head is
                # never visited.
                pinned = np.concatenate([np.zeros(offset, dtype=np.int64), share])
                local.update(current_position=offset)
                local["order_sampler"]["order"] = pinned.tolist()
                segment = (epoch, start, offset)
        engine.load_state_dict(local)
        self._segment = segment

    def serialize(self, serializer: Any) -> None:
        """Save or load the global state through Chainer's serializer protocol.

        The state travels as JSON under the key ``dataset_kit_sharded_state``.
        """
        key = "dataset_kit_sharded_state"
        text = json.dumps(self.state_dict())
        got = serializer(key, text)
        if got is not None and _checkpoint.json_text(key, got) != text:
            self.load_state_dict(_checkpoint.parse_json(key, got))


def _check_agreement(values: list[dict], what: str) -> None:
    """Raise on every rank if any rank's ``values`` differ from rank 0's, naming both."""
    for rank, theirs in enumerate(values[1:], start=1):
        for key, value in values[0].items():
            if theirs.get(key) != value:
                raise DistributedError(
                    f"ranks disagree on {key}: rank 0 has {value!r}, rank {rank} has "
                    f"{theirs.get(key)!r}")
