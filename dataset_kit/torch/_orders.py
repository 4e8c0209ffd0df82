"""PyTorch's samplers as the engine's order: each epoch asked of the sampler itself.

The engine asks :class:`SamplerOrder` once per epoch (Chainer's stateful
protocol). It draws what PyTorch draws at the start of an epoch, on the same
generators and in the same order: the loader's base seed, then every index
the (batch) sampler yields. So the batches are PyTorch's for the same
generator seed, whatever the sampler. The epoch's batches become the
engine's order and batch ends (the checkpoint carries them); the generator
states and a torchdata-style ``sampler.state_dict()`` after each draw are
kept, so a checkpoint can restore what the following epochs draw from.
"""

from __future__ import annotations

import base64
import contextlib
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import BatchSampler

from dataset_kit.engine import OrderSampler, ResumeMismatchError

_KEPT_EPOCHS = 4  # draws kept: the engine plans at most one epoch ahead


def _generators(index_sampler: Any, generator: Any) -> list:
    """The distinct torch generators the loader and its samplers draw from."""
    found: list = []
    for owner in (None, index_sampler, getattr(index_sampler, "sampler", None)):
        g = generator if owner is None else getattr(owner, "generator", None)
        if isinstance(g, torch.Generator) and all(g is not h for h in found):
            found.append(g)
    return found


def _epoch_owner(index_sampler: Any) -> Any:
    """The sampler that has ``set_epoch`` (a DistributedSampler), if any."""
    for owner in (index_sampler, getattr(index_sampler, "sampler", None)):
        if callable(getattr(owner, "set_epoch", None)):
            return owner
    return None


def _stops(n: int, size: int) -> np.ndarray:
    """The batch ends of ``n`` indices cut into batches of ``size`` (the last may be short)."""
    return np.minimum(np.arange(1, -(-n // size) + 1, dtype=np.int64) * size, n)


class SamplerOrder(OrderSampler):
    """A torch sampler or batch sampler as an engine order sampler with batch ends.

    Args:
        index_sampler: the batch sampler (``batched``) or the sampler.
        batched: whether ``index_sampler`` yields lists of indices.
        generator: the loader's ``generator`` (None: torch's global one).
        base_seed_every_epoch: whether each epoch draws a base seed first
            (PyTorch does, unless ``persistent_workers``).
    """

    state_kind = "torch-sampler"

    def __init__(self, index_sampler: Any, batched: bool, generator: Any,
                 base_seed_every_epoch: bool) -> None:
        self.index_sampler = index_sampler
        self.batched = batched
        self.generator = generator
        self.base_seed_every_epoch = base_seed_every_epoch
        self._generators = _generators(index_sampler, generator)
        self._epoch_owner = _epoch_owner(index_sampler)
        self._drawn = 0
        self._open = False
        self._before: dict[int, dict] = {}  # generator states before each epoch's draw
        self._after: dict[int, dict] = {}  # ... and after it
        self._uses_global: dict[int, bool] = {}
        self._stops = np.zeros(0, np.int64)
        self.base_seeds: dict[int, int] = {}
        #: ``list`` or ``tuple`` when the sampler yields lists of indices as keys.
        self.key_type: type | None = None

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        epoch = self._drawn
        self._before[epoch] = self._snapshot()
        self._before.pop(epoch - _KEPT_EPOCHS, None)
        if self._open:
            order = self._draw_epoch(epoch)
        else:
            # Ahead of PyTorch's time (construction, prefetch): torch's global
            # generator must not move; iter() draws again in the open if the
            # sampler turns out to use it (see redraw).
            with torch.random.fork_rng(devices=[]):
                order = self._draw_epoch(epoch)
        self._drawn = epoch + 1
        return order

    def _draw_epoch(self, epoch: int) -> np.ndarray:
        before = torch.get_rng_state()
        if epoch == 0 or self.base_seed_every_epoch:
            self.base_seeds[epoch] = int(
                torch.empty((), dtype=torch.int64).random_(generator=self.generator).item())
        order = self._draw()
        self._uses_global[epoch] = not torch.equal(before, torch.get_rng_state())
        self._after[epoch] = self._snapshot()
        for kept in (self._after, self._uses_global):
            kept.pop(epoch - _KEPT_EPOCHS, None)
        return order

    def identity(self) -> dict:
        """The torch samplers the orders come from, and the rank a distributed one serves.

        What a checkpoint's ledger records
        (:func:`~dataset_kit.engine.samplers.order_identity`): a state of a
        ``RandomSampler`` loaded under a ``SequentialSampler`` is refused
        (cause ``"sampler"``), and one of rank 1 loaded into rank 0 too
        (cause ``"ranks"``), before any of their ids are compared.
        """
        inner = getattr(self.index_sampler, "sampler", None) if self.batched else None
        name = type(self.index_sampler).__qualname__
        if inner is not None:
            name += f"({type(inner).__qualname__})"
        owner = self._epoch_owner
        rank, ranks = getattr(owner, "rank", None), getattr(owner, "num_replicas", None)
        known = type(rank) is int and type(ranks) is int and 0 <= rank < ranks
        seed = getattr(owner, "seed", None)  # DistributedSampler's
        return {"sampler": f"{self.state_kind}:{name}",
                "seed": seed if type(seed) is int and seed >= 0 else None,
                "rank": [rank, ranks] if known else None}

    @contextlib.contextmanager
    def drawing_in_the_open(self) -> Iterator[None]:
        """Draws made inside move torch's global generator, as PyTorch's do."""
        self._open = True
        try:
            yield
        finally:
            self._open = False

    @property
    def drawn(self) -> int:
        """How many epochs were drawn."""
        return self._drawn

    def _draw(self) -> np.ndarray:
        sampler = self.index_sampler
        if self.batched and type(sampler).__iter__ is BatchSampler.__iter__:
            # PyTorch's own BatchSampler: the same pass over its sampler, cut
            # into batches arithmetically (no list per batch).
            order = np.fromiter(map(operator.index, sampler.sampler), dtype=np.int64)
            size, n = sampler.batch_size, len(order)
            if sampler.drop_last:
                order = order[:n - n % size]
            self._stops = _stops(len(order), size)
            return order
        if self.batched:
            batches = [[operator.index(i) for i in batch] for batch in sampler]
        else:
            batches = self._keys(sampler)
        if any(not batch for batch in batches):
            raise ValueError(f"batch sampler {type(sampler).__name__} yielded an empty batch")
        self._stops = np.cumsum([len(b) for b in batches], dtype=np.int64)
        return np.fromiter((i for b in batches for i in b), dtype=np.int64,
                           count=int(self._stops[-1]) if len(batches) else 0)

    def _keys(self, sampler: Any) -> list:
        """Each key the sampler yields as one batch of indices.

        A key that is a list or tuple of indices (PyTorch passes it to
        ``dataset[key]`` whole when ``batch_size=None``) is one batch of its
        indices, and :attr:`key_type` says so.
        """
        keys = list(sampler)
        kind = type(keys[0]) if keys and isinstance(keys[0], (list, tuple)) else None
        if self._drawn and kind is not self.key_type:
            raise ValueError(f"sampler {type(sampler).__name__} yielded keys of type "
                             f"{(kind or int).__name__} in epoch {self._drawn}, but "
                             f"{(self.key_type or int).__name__} in the first epoch")
        self.key_type = kind
        if kind is None:
            return [[operator.index(i)] for i in keys]
        if not all(type(k) is kind and len(k) for k in keys):
            raise ValueError(f"sampler {type(sampler).__name__} must yield keys of one type: "
                             f"integers, or non-empty {kind.__name__}s of integers")
        return [[operator.index(i) for i in k] for k in keys]

    def batch_stops(self) -> np.ndarray:
        """Where the batches of the order last drawn end."""
        return self._stops

    # -- drawing again at PyTorch's time ---------------------------------------

    def needs_redraw(self, epoch: int) -> bool:
        """Whether ``epoch``, drawn ahead, must be drawn again now that iter() starts it.

        True when it drew from torch's global generator (PyTorch draws at
        iter(), after whatever else used it) or ``set_epoch`` was called since.
        """
        if epoch >= self._drawn or epoch not in self._after:
            return False
        owner = self._epoch_owner
        stale = owner is not None and \
            self._after[epoch].get("sampler_epoch") != getattr(owner, "epoch", None)
        return stale or self._uses_global.get(epoch, False)

    def redraw(self, epoch: int) -> np.ndarray:
        """Draw ``epoch`` again, in the open, from the same generator states.

        Epochs drawn after it are forgotten (the engine forgets their orders
        when this one is pinned) and will be drawn again.
        """
        self._restore(self._before[epoch])
        self._drawn = epoch + 1
        return self._draw_epoch(epoch)

    # -- checkpoints -----------------------------------------------------------

    def _snapshot(self) -> dict:
        state: dict[str, Any] = {"generators": [
            base64.b64encode(g.get_state().numpy().tobytes()).decode("ascii")
            for g in self._generators]}
        own = getattr(self.index_sampler, "state_dict", None)
        if callable(own):
            state["sampler"] = own()
        if self._epoch_owner is not None:
            state["sampler_epoch"] = getattr(self._epoch_owner, "epoch", None)
        return state

    def state_after(self, epoch: int) -> dict:
        """What the generators and sampler held once ``epoch`` was drawn."""
        return self._after[epoch]

    def check_state(self, state: Any) -> list:
        """Return the generator states of ``state``, decoded.

        Raises:
            ResumeMismatchError: (cause ``"sampler"``) if it was made by a loader
                with as many generators as another number of samplers (or a
                sampler with a generator of its own swapped for one without).
            ValueError: if it holds no list of generator states.
        """
        states = state.get("generators") if isinstance(state, dict) else None
        if isinstance(states, list) and len(states) != len(self._generators):
            raise ResumeMismatchError(
                f"state['torch']['generators'] holds {len(states)} generator state(s), this "
                f"loader has {len(self._generators)} (its generator and its samplers'): the "
                f"state was saved with other samplers", cause="sampler")
        if not isinstance(states, list):
            raise ValueError(
                f"state['torch']['generators'] must hold {len(self._generators)} generator "
                f"state(s) (this loader's generator and its samplers'), got {states!r:.80}")
        try:
            decoded = [torch.frombuffer(bytearray(base64.b64decode(s, validate=True)),
                                        dtype=torch.uint8) for s in states]
        except (TypeError, ValueError) as error:
            raise ValueError(f"state['torch']['generators'] is not base64: {error}") from None
        for k, s in enumerate(decoded):
            try:  # on a scratch generator: a bad state must not touch the user's
                torch.Generator().set_state(s)
            except RuntimeError as error:
                raise ValueError(f"state['torch']['generators'][{k}] is not a CPU generator "
                                 f"state: {error}") from None
        return decoded

    def load(self, epoch: int, state: dict, decoded: list) -> None:
        """Continue after ``epoch`` as the saved loader would have."""
        self._restore(state, decoded)
        self._after = {epoch: state}
        self._before, self._uses_global = {}, {}
        self._drawn = epoch + 1

    def _restore(self, state: dict, decoded: list | None = None) -> None:
        if decoded is None:
            decoded = self.check_state(state)
        for g, s in zip(self._generators, decoded):
            g.set_state(s)
        if "sampler" in state:
            self.index_sampler.load_state_dict(state["sampler"])
