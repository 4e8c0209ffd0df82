"""ShardedIterator: each rank's share of one global order, on the ordinary engine.

It is a Chainer-style iterator (:class:`~dataset_kit.iterators.SerialIterator`'s
attributes) whose order sampler yields this rank's cut of the global order
(:mod:`._shards`); worker threads or processes work inside each rank as on
one machine. What it adds to the engine is the translation of checkpoints:
its state records the *global* position, identical on every rank, and loads
on any number of ranks (elastic resume): the engine begins the saved epoch at
that offset of the global order (``order_offset``), and reports it back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit._identity import identity_digest
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
    AutoWorkers,
    Engine,
    ExecutorSpec,
    OrderSampler,
    RandomAccessOrder,
    ResumeMismatchError,
    draw_seed,
    mix_sum,
    sampler_kind,
)
from dataset_kit.engine import (
    states as _checkpoint,
)
from dataset_kit.iterators._chainer_api import ChainerIterator

# The door's name in its states.
DOOR = "sharded"
# Policies of earlier releases under their engine names.
_RENAMED_POLICIES = {"drop": "discard"}


def _old_state(state: dict) -> tuple[Any, dict] | None:
    """This door's state of version 1: format ``"dataset_kit.sharded_iterator"``."""
    if not (_checkpoint.same(state.get("format"), "dataset_kit.sharded_iterator")
            and _checkpoint.same(state.get("version"), 1)):
        return None
    fields = {key: value for key, value in state.items() if key not in ("format", "version")}
    policy = fields.get("last_batch")
    if isinstance(policy, str):
        fields["last_batch"] = _RENAMED_POLICIES.get(policy, policy)
    return None, fields


_checkpoint.register_upgrade(DOOR, _old_state)


class _RankShareSampler(OrderSampler):
    """The order sampler of one rank: its share of each epoch's global order.

    The global order comes from ``sampler`` (a random-access order sampler)
    or, without one, from the shuffle of ``seed``. It is an
    :class:`~dataset_kit.engine.protocols.OffsetOrder`: the engine can begin
    an epoch at any global position (a resume on another number of ranks).
    """

    state_kind = "sharded"

    def __init__(self, seed: int, shuffle: bool, rank: int, ranks: int, batch_size: int,
                 policy: str, sampler: Any = None) -> None:
        self.seed, self.shuffle, self.policy = seed, shuffle, policy
        self.rank, self.ranks, self.batch_size = rank, ranks, batch_size
        self.sampler = sampler

    def epoch_order(self, epoch: int, size: int) -> np.ndarray:
        return self.epoch_order_from(epoch, size, 0)

    def epoch_order_from(self, epoch: int, size: int, offset: int) -> np.ndarray:
        order = global_order(self.seed, epoch, size, self.shuffle, self.sampler)
        return rank_share(order, offset, self.rank, self.ranks, self.batch_size, self.policy)

    def global_sampler_state(self) -> dict | None:
        """The global order sampler's kind and state, or None without one."""
        if self.sampler is None:
            return None
        own = getattr(self.sampler, "state_dict", None)
        state = own() if callable(own) else None
        return {"kind": sampler_kind(self.sampler), **({} if state is None else {"state": state})}

    def state_dict(self) -> dict | None:
        return self.global_sampler_state()

    def load_state_dict(self, state: dict | None) -> None:
        # Checked by ShardedIterator.load_state_dict (kind, presence) first.
        if isinstance(state, dict) and "state" in state:
            self.sampler.load_state_dict(state["state"])

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        raise TypeError("a rank's share is computed per epoch; call epoch_order()")

    def order_fingerprint(self, epoch: int, size: int) -> int:
        """A 64-bit hash of what the global order of ``epoch`` and the cut are functions of.

        The seed, ``shuffle``, the global sampler's kind and state, the epoch,
        the dataset's length, the number of ranks, the batch size and the
        policy: ranks that agree on it cut the same global order the same way.
        """
        identity = [self.seed, self.shuffle, self.global_sampler_state(), epoch, size,
                    self.ranks, self.batch_size, self.policy]
        return int.from_bytes(identity_digest(identity, "blake2b"), "little")


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
        shuffle: whether each epoch's global order is shuffled; None means
            True unless ``order_sampler`` is given.
        seed: the seed of the shuffle and of :func:`~dataset_kit.example_rng`;
            rank 0's (drawn there when None) is used by every rank.
        order_sampler: the global order's sampler instead of the shuffle:
            one whose order of epoch ``e`` is a pure function of its state
            and ``e`` (``epoch_order(epoch, size)``), such as
            :class:`~dataset_kit.shards.ShardOrderSampler`, the same on every
            rank. Each rank takes its cut of that order. The state carries
            the sampler's state and refuses another sampler.
        last_batch: how the end of the global order is cut, in the words of
            the other iterators: ``'keep'`` (padded to a multiple of the
            ranks only, as ChainerMN's ``scatter_dataset`` and PyTorch's
            ``DistributedSampler`` do; the last batch may be short),
            ``'pad'`` (padded to full batches) or ``'discard'`` (cut to full
            batches).
        n_processes: build batches in this many worker processes per rank,
            or ``"auto"``: each rank starts with two and adds or removes
            workers while it runs (:class:`~dataset_kit.engine.AutoWorkers`),
            with the same batches as any fixed count.
        n_threads: build batches on this many threads per rank.
        converter: applied to each batch where it is built (e.g.
            :func:`~dataset_kit.concat_examples`), or None.
        start_method: the worker processes' start method (default: fork where
            available).
        timeout: seconds a worker may stay silent while its batch is awaited
            before a :class:`~dataset_kit.iterators.BatchTimeoutError` (None: wait).
        executor: None (this rank's processes or threads) or ``"ray"``: the
            ``n_processes`` workers are actors of a Ray cluster (:doc:`/cluster`),
            with the same batches; each rank starts its own actors.
        ray_address: the Ray cluster's address for ``executor="ray"``.
        memory_limit: with ``n_processes="auto"``, the bytes of worker memory
            (RSS) not to pass when adding workers (default: half of what is
            available).
        check_epochs: at each epoch's end, prove over the job that every
            example of the epoch was consumed once, by one rank, in the
            allgather the ranks already make; a rank resumed from another
            state than the others then raises
            :class:`~dataset_kit.ResumeMismatchError` (cause ``"ranks"``).
            True (or ``"order"``, the default): each rank sends where it
            began, its count and a 64-bit fingerprint of the epoch's global
            order (seed, epoch, length, sampler state); ranks that agree on
            the order and whose counts fill the epoch from one offset have
            consumed it exactly once, since each rank's share is a fixed cut
            of that order. It costs O(ranks), whatever the epoch's length.
            ``"full"``: each rank also hashes the ids it consumed (a sum of
            mixed ids, order-independent), and the sums must add up to the
            epoch's; it costs a pass over the rank's ids (see
            :doc:`/resume`). False: no check.

    Raises:
        TypeError: if an integer argument is not an integer, ``converter``
            is not callable, or ``order_sampler`` gives no random-access order.
        ValueError: if an argument is out of range, both ``n_processes`` and
            ``n_threads`` (or ``shuffle`` and ``order_sampler``) are given, or
            a repeating epoch would have no batch.
        DistributedError: on every rank, if the ranks' dataset lengths or
            arguments differ (the message names both values).
    """

    def __init__(self, dataset: Any, batch_size: int, comm: Any = None, *, repeat: bool = True,
                 shuffle: bool | None = None, seed: int | None = None,
                 last_batch: str = "keep", order_sampler: Any = None,
                 n_processes: int | str | None = None, n_threads: int | None = None,
                 converter: Callable[[Any], Any] | None = None,
                 start_method: str | None = None,
                 timeout: float | None = DEFAULT_BATCH_TIMEOUT,
                 check_epochs: bool | str = True, executor: str | None = None,
                 ray_address: str | None = None, memory_limit: int | None = None) -> None:
        batch_size = positive_int("batch_size", batch_size)
        # "auto" is each rank's own: worker counts never change the batches.
        n_processes, autotune = AutoWorkers.for_argument("n_processes", n_processes,
                                                         memory_limit)
        if not isinstance(check_epochs, (bool, str)):
            raise TypeError(f"check_epochs must be True, False, 'order' or 'full', got "
                            f"{check_epochs!r}")
        if isinstance(check_epochs, str) and check_epochs not in ("order", "full"):
            raise ValueError(f"check_epochs must be True, False, 'order' or 'full', got "
                             f"{check_epochs!r}")
        #: The exactly-once check at each epoch's end: ``"order"``, ``"full"`` or False.
        self.check_epochs: str | bool = "order" if check_epochs is True else check_epochs
        # The sum of the mixed ids of a whole shuffled epoch does not depend on the epoch.
        self._whole_sum: int | None = None
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
        if order_sampler is not None:
            if shuffle is not None:
                raise ValueError(f"pass either shuffle or order_sampler, not both (got "
                                 f"shuffle={shuffle!r} and order_sampler={order_sampler!r})")
            if not isinstance(order_sampler, RandomAccessOrder):
                raise TypeError(
                    f"order_sampler must give the global order of each epoch as a pure "
                    f"function of its state and the epoch (epoch_order(epoch, size)), as "
                    f"ShardOrderSampler does; got {type(order_sampler).__name__}")
        self.comm = as_communicator(comm)
        self.shuffle = order_sampler is None if shuffle is None else bool(shuffle)
        self.shard_policy = last_batch
        size = len(dataset)
        share = _RankShareSampler(0, self.shuffle, 0, 1, batch_size, last_batch, order_sampler)
        mine = {"dataset length": size, "batch_size": batch_size, "repeat": bool(repeat),
                "shuffle": self.shuffle, "last_batch": last_batch,
                "order_sampler": share.global_sampler_state(), "check_epochs": self.check_epochs}
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
                                    batch_size, last_batch, order_sampler)
        spec = ExecutorSpec(
            "process" if n_processes is not None else "serial" if n_threads is None
            else "thread",
            workers=positive_int("n_processes", n_processes) if n_processes is not None
            else positive_int("n_threads", n_threads) if n_threads is not None else 0,
            start_method=start_method, timeout=timeout, converter=converter,
        ).placed(executor, ray_address)
        super().__init__(Engine(dataset, batch_size=batch_size, repeat=repeat,
                                order_sampler=sampler, seed=seed, last_batch=last_batch,
                                executor=spec, autotune=autotune))

    def __next__(self) -> Any:
        batch = self._engine.next()
        if self._engine.position.is_new_epoch:
            self._check_in()
        return batch

    def check_epoch(self) -> None:
        """Run the check made at each epoch's end again, now: positions, and exactly-once.

        It runs by itself when an epoch ends; call it (on every rank at once:
        it is a collective) to check again, e.g. right after resuming from a
        state saved at an epoch's end. With ``check_epochs`` False it only
        compares the ranks' positions.

        Raises:
            RuntimeError: if the iterator is not at an epoch's end.
            ResumeMismatchError: (cause ``"ranks"``) if the ranks did not
                consume the epoch that ended exactly once.
            DistributedError: if the ranks' positions differ or a rank is lost.
        """
        if not self._engine.position.is_new_epoch:
            raise RuntimeError(f"check_epoch() is for an epoch's end; this rank is at "
                               f"position {self._engine.position.current_position} of epoch "
                               f"{self.epoch}")
        self._check_in()

    def _check_in(self) -> None:
        """Compare positions across ranks at an epoch's end (fails, not hangs, on a lost rank).

        With ``check_epochs``, each rank also sends what it consumed of the
        epoch that ended (where it began, a count, and the order's fingerprint
        or, ``"full"``, a sum of mixed ids), and every rank checks that the
        job consumed the epoch exactly once.
        """
        state = self.state_dict()["door"]
        mine: tuple = (state["epoch"], state["global_position"])
        if self.check_epochs:
            mine += self._epoch_share(state["epoch"] - 1)
        try:
            everyone = self.comm.allgather(mine)
        except Exception as error:  # the engine's own exception types vary
            raise DistributedError(
                f"rank {self.comm.rank}: the ranks' check at the end of epoch "
                f"{mine[0] - 1} failed ({type(error).__name__}: {error}); "
                f"another rank has probably died") from error
        _check_agreement([{"epoch, global position": pos[:2]} for pos in everyone], "position")
        if self.check_epochs:
            self._check_exactly_once(state["epoch"] - 1, [pos[2:] for pos in everyone])

    def _epoch_share(self, epoch: int) -> tuple[int, int, int]:
        """``(offset, count, proof)`` of this rank's examples of ``epoch``, pads excluded.

        The proof is the sum of their mixed ids (``"full"``), or the
        fingerprint of the epoch's global order (``"order"``).
        """
        engine = self._engine
        offset, head = engine.order_offset(epoch), engine.order_head(epoch)
        real = first_padding(engine.dataset_length - offset, self.comm.rank, self.comm.size)
        count = max(0, min(real, engine.epoch_size - head))
        if self.check_epochs != "full":
            sampler: _RankShareSampler = engine.active_sampler
            return offset, count, sampler.order_fingerprint(epoch, engine.dataset_length)
        order = engine.current_order(epoch)
        ids = order[head:head + count] if order is not None else np.arange(head, head + count)
        return offset, len(ids), mix_sum(ids)

    def _check_exactly_once(self, epoch: int, shares: list[tuple]) -> None:
        """Raise on every rank unless the ranks' shares of ``epoch`` cover it once.

        Raises:
            ResumeMismatchError: (cause ``"ranks"``) naming the ranks' offsets,
                counts or the sums that differ: a rank resumed from another
                state than the others, or consumed another part of the epoch.
        """
        engine = self._engine
        sampler: _RankShareSampler = engine.active_sampler
        offsets = [offset for offset, _, _ in shares]
        if len(set(offsets)) > 1:
            raise ResumeMismatchError(
                f"the ranks began epoch {epoch} at different global positions {offsets} (one "
                f"per rank): a rank was resumed from another checkpoint than the others",
                cause="ranks")
        offset, size, ranks = offsets[0], engine.dataset_length, self.comm.size
        remaining = size - offset
        if sampler.policy == "discard":
            expected = share_length(remaining, ranks, sampler.batch_size, "discard") * ranks
        else:
            expected = remaining
        counts = [count for _, count, _ in shares]
        proofs = [int(value) for _, _, value in shares]
        if self.check_epochs != "full":
            if len(set(proofs)) > 1:
                raise ResumeMismatchError(
                    f"the ranks cut epoch {epoch} from different global orders (fingerprints "
                    f"{[f'{p:016x}' for p in proofs]}, one per rank): a rank was resumed from "
                    f"another state, seed or sampler than the others", cause="ranks")
            # One order, one offset, each rank its fixed cut of it (rank_share): the
            # counts filling the epoch are the proof that it was consumed once.
            if sum(counts) == expected:
                return
        elif sum(counts) == expected and \
                sum(proofs) % (1 << 64) == self._expected_sum(epoch, offset, expected):
            return
        raise ResumeMismatchError(
            f"epoch {epoch} was not consumed exactly once over the {ranks} ranks: they consumed "
            f"{counts} examples (one count per rank, {sum(counts)} in all) of the {expected} "
            f"from global position {offset}"
            + ("" if sum(counts) != expected else ", and not the same ones")
            + ": a rank was resumed from another state than the others", cause="ranks")

    def _expected_sum(self, epoch: int, offset: int, count: int) -> int:
        """The sum of mixed ids of ``count`` examples of the global order of ``epoch`` from
        ``offset``."""
        sampler: _RankShareSampler = self._engine.active_sampler
        size = self._engine.dataset_length
        whole = offset == 0 and count == size and sampler.sampler is None
        if whole and self._whole_sum is not None:
            return self._whole_sum
        if whole:
            # A permutation of every index: the same sum every epoch.
            self._whole_sum = mix_sum(np.arange(size, dtype=np.int64))
            return self._whole_sum
        order = global_order(sampler.seed, epoch, size, sampler.shuffle, sampler.sampler)
        return mix_sum(order[offset:offset + count])

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
        epoch = plan.epoch_at(0)
        start, head = engine.order_offset(epoch), engine.order_head(epoch)
        first = head + first_padding(engine.dataset_length - start, self.comm.rank,
                                     self.comm.size)
        return max(0, stop - max(first, stop - len(plan.indices)))

    # -- global checkpoints --------------------------------------------------

    def global_position(self) -> int:
        """Examples of the current epoch's global order consumed by all ranks together."""
        engine = self._engine
        # The epoch began at global position order_offset (0, or where a
        # resume began it), at the local position order_head.
        consumed = engine.position.current_position - engine.order_head()
        return engine.order_offset() + consumed * self.comm.size

    def state_dict(self) -> dict:
        """Return the global state: the same dict on every rank, JSON-ready.

        The envelope of :func:`~dataset_kit.engine.states.wrap_state` with no
        engine part (each rank's engine state is its own) and door
        ``"sharded"``, whose fields are ``dataset_length``, ``seed``,
        ``shuffle``, ``repeat``, ``last_batch``, ``order_sampler`` (the
        global order sampler's ``kind`` and ``state``, or None), ``epoch``,
        ``global_position`` (examples of the epoch's global order consumed by
        all ranks), ``is_new_epoch``, ``previous_epoch_detail``, and ``ranks``
        and ``batch_size`` (informative: any number of ranks and batch size
        may load it).
        """
        engine = self._engine
        position = engine.position
        sampler: _RankShareSampler = engine.active_sampler
        return _checkpoint.wrap_state(
            DOOR, None, dataset_length=engine.dataset_length, seed=engine.seed,
            shuffle=self.shuffle, repeat=self.repeat, last_batch=self.shard_policy,
            order_sampler=sampler.global_sampler_state(), epoch=position.epoch,
            global_position=self.global_position(), is_new_epoch=position.is_new_epoch,
            previous_epoch_detail=position.previous_epoch_detail, ranks=self.comm.size,
            batch_size=self.batch_size)

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Continue from a global state saved on any number of ranks.

        The global state carries no ledger (each rank's ledger is its own);
        ``strict`` is accepted for the doors' one signature.

        The rest of the saved epoch's global order is cut among this
        iterator's ranks (``last_batch`` applies to what remains); later
        epochs are cut as usual. No example of that epoch is seen twice or
        skipped, beyond the padding or discarding the policy asks for.

        Raises:
            ValueError: if ``state`` is not a sharded-iterator state, or was
                saved with another dataset length, seed, shuffle, repeat
                mode, last-batch policy or order sampler (the message names
                both values).
        """
        engine = self._engine
        sampler: _RankShareSampler = engine.active_sampler
        size = engine.dataset_length
        _, door = _checkpoint.unwrap_state(state, DOOR, {
            "dataset_length": _checkpoint.equal(size),
            "order_sampler": _same_sampler(sampler.global_sampler_state()),
            "seed": _checkpoint.equal(engine.seed), "shuffle": _checkpoint.equal(self.shuffle),
            "repeat": _checkpoint.equal(self.repeat),
            "last_batch": _checkpoint.equal(self.shard_policy),
            "epoch": _position_field(2**63), "global_position": _position_field(max(size, 1)),
            "is_new_epoch": _checkpoint.flag(),
            # Checked by the engine, before it changes anything.
            "previous_epoch_detail": _checkpoint.anything(),
            "ranks": _checkpoint.anything(required=False),
            "batch_size": _checkpoint.anything(required=False),
        }, with_engine=False)
        epoch, start, is_new_epoch = door["epoch"], door["global_position"], door["is_new_epoch"]
        offset = position = 0
        if start:
            left = share_length(size - start, sampler.ranks, sampler.batch_size, sampler.policy)
            if left == 0:  # nothing of the epoch is left for this rank
                epoch, is_new_epoch = epoch + 1, True
            else:
                # The engine begins the epoch at global position ``start``: its
                # cut of the rest of the global order ends the local epoch.
                offset, position = start, engine.epoch_size - left
        engine.seek(epoch=epoch, position=position, is_new_epoch=is_new_epoch,
                    previous_epoch_detail=door["previous_epoch_detail"], order_offset=offset,
                    sampler_state=door["order_sampler"])

    def serialize(self, serializer: Any) -> None:
        """Save or load the global state through Chainer's serializer protocol.

        The state travels as JSON under the key ``dataset_kit_sharded_state``.
        """
        key = "dataset_kit_sharded_state"
        text = json.dumps(self.state_dict())
        got = serializer(key, text)
        if got is not None and _checkpoint.json_text(key, got) != text:
            self.load_state_dict(_checkpoint.parse_json(key, got))


def _position_field(end: int) -> _checkpoint.FieldCheck:
    """An integer in ``[0, end)`` of the saved position."""
    check = _checkpoint.integer(0, end)

    def checked(where: str, value: Any) -> int:
        try:
            return check(where, value)
        except ValueError as error:
            key = where.rsplit("[", 1)[-1].strip("]'")
            raise ValueError(f"state has an invalid position: "
                             f"{key}={_checkpoint.short(value)} ({error})") from None
    return checked


def _same_sampler(mine: dict | None) -> _checkpoint.FieldCheck:
    """The global order sampler's part: the same kind of sampler (or none) as this iterator's."""
    def check(where: str, value: Any) -> Any:
        kind = value.get("kind") if isinstance(value, dict) else value
        mine_kind = None if mine is None else mine["kind"]
        if value is _checkpoint.MISSING:
            kind = None  # states of version 1 had no order sampler
            value = None
        if not (kind == mine_kind and (value is None or isinstance(kind, str))):
            raise ValueError(f"state was saved with order sampler {_checkpoint.short(kind)}, "
                             f"but this iterator uses {mine_kind!r} ({where})")
        if value is not None:
            # value's kind is a str equal to mine's, so this iterator has a sampler state.
            assert mine is not None
            if set(value) - {"kind", "state"} or ("state" in value) != ("state" in mine):
                own = "'kind' and 'state'" if "state" in mine else "'kind' only"
                raise ValueError(f"{where} must hold {own} of sampler {mine_kind!r}, got "
                                 f"{_checkpoint.short(value)}")
        return value
    return check


def _check_agreement(values: list[dict], what: str) -> None:
    """Raise on every rank if any rank's ``values`` differ from rank 0's, naming both."""
    for rank, theirs in enumerate(values[1:], start=1):
        for key, value in values[0].items():
            if theirs.get(key) != value:
                raise DistributedError(
                    f"ranks disagree on {key}: rank 0 has {value!r}, rank {rank} has "
                    f"{theirs.get(key)!r}")
