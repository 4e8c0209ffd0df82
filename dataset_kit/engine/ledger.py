"""The ledger: what a run has consumed, as a few integers that a checkpoint carries.

A :class:`Ledger` counts the examples consumed in the current epoch and in
total, and keeps a 64-bit hash chain of their global ids in the order they
were consumed, together with the identity of the data (its length and, for
file-backed datasets, a fingerprint of the files taken when they were
opened). Two runs that log the same ledger consumed the same ids in the same
order from the same data.

The chain is a polynomial hash over mixed ids: for ids ``a_0 .. a_{n-1}``,
``H = sum(mix(a_i) * P**(n-1-i)) mod 2**64`` with ``mix`` the splitmix64
finaliser, so appending ids is ``H' = H * P**m + H(new ids)``: a chain is
extended block by block in numpy, and the chain of a concatenation is the
chain of its parts (:func:`extend_chain`). It detects accidents (another
order, another seed, a skipped or repeated example), not adversaries.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

__all__ = ["CHAIN_START", "Ledger", "extend_chain", "mix_sum"]

_MASK = (1 << 64) - 1
_HEX16 = re.compile(r"[0-9a-f]{16}")
_BASE = 0x100000001B3  # FNV's 64-bit prime: odd, so multiplication by it is a bijection
_BLOCK = 1 << 16
#: The chain of no ids.
CHAIN_START = 0


def _tail_powers() -> np.ndarray:
    """``_BASE ** (_BLOCK - 1 - i) mod 2**64`` for i in range(_BLOCK), as uint64."""
    powers = np.empty(_BLOCK, np.uint64)
    value = 1
    for i in range(_BLOCK - 1, -1, -1):
        powers[i] = value
        value = (value * _BASE) & _MASK
    return powers


_POWERS = _tail_powers()
_BLOCK_POWER = pow(_BASE, _BLOCK, 1 << 64)


_C0, _C1, _C2 = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
                 np.uint64(0x94D049BB133111EB))
_S0, _S1, _S2 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix_into(ids: np.ndarray, out: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Write splitmix64's finaliser of every id into ``out`` and return it.

    ``ids`` is uint64 (its arithmetic wraps, as intended); ``out`` and
    ``scratch`` are uint64 arrays of its length. Every step writes into them:
    a temporary per step would cost more than the arithmetic (the load check
    of 10**7 ids spent most of its time allocating them).
    """
    np.add(ids, _C0, out=out)
    for shift, factor in ((_S0, _C1), (_S1, _C2)):
        np.right_shift(out, shift, out=scratch)
        np.bitwise_xor(out, scratch, out=out)
        np.multiply(out, factor, out=out)
    np.right_shift(out, _S2, out=scratch)
    np.bitwise_xor(out, scratch, out=out)
    return out


def _as_u64(ids: np.ndarray) -> np.ndarray:
    """``ids`` as uint64 (wrapping), without a copy where the bits are the same."""
    if ids.dtype.kind in "iu" and ids.dtype.itemsize == 8:
        return ids.view(np.uint64)
    return ids.astype(np.uint64)


def _blocks(ids: np.ndarray):
    """Yield the mixed ids block by block (:data:`_BLOCK` at most), reusing two buffers.

    Each block yielded is overwritten by the next: use it before asking for it.
    """
    ids = _as_u64(ids)
    size = min(_BLOCK, len(ids))
    out, scratch = np.empty(size, np.uint64), np.empty(size, np.uint64)
    for start in range(0, len(ids), _BLOCK):
        block = ids[start:start + _BLOCK]
        n = len(block)
        yield _mix_into(block, out[:n], scratch[:n])


def _checked_ids(ids: Any) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise TypeError(f"ids must be a 1-D array of integers, got dtype {ids.dtype} and "
                        f"shape {ids.shape}")
    return ids


def read_chain(value: Any, where: str) -> int:
    """Return a chain from its state form (16 lower-case hex digits).

    Raises:
        ValueError: naming ``where``, if ``value`` is not that form.
    """
    # Exactly this form: int() would also take "0x", "_", "+" and spaces.
    if not (isinstance(value, str) and _HEX16.fullmatch(value)):
        raise ValueError(f"{where} must be 16 hex digits, got {value!r}")
    return int(value, 16)


def extend_chain(chain: int, ids: Any) -> int:
    """Return ``chain`` extended by ``ids`` (in order): the chain of (what it hashed) + ids.

    Args:
        chain: a chain (:data:`CHAIN_START` for none).
        ids: the global ids consumed next: a 1-D integer array or sequence.

    Raises:
        TypeError: if ``ids`` is not a 1-D array of integers.
    """
    # Two levels: a block's ids hash to one number in a single pass (the dot
    # product of the mixed ids with the powers of P), and the blocks chain by
    # Horner's rule, so hashing costs one vectorised pass over the ids.
    for block in _blocks(_checked_ids(ids)):
        n = len(block)
        power = _BLOCK_POWER if n == _BLOCK else pow(_BASE, n, 1 << 64)
        chain = (chain * power + int(np.dot(block, _POWERS[_BLOCK - n:]))) & _MASK
    return chain


def mix_sum(ids: Any) -> int:
    """Return the order-independent sum of the mixed ``ids``, modulo 2**64.

    The sums of disjoint parts add up to the sum of the whole, whatever the
    order: ranks that each sum what they consumed prove together that they
    consumed an epoch exactly once (a repeat or a gap changes the sum).

    Raises:
        TypeError: if ``ids`` is not a 1-D array of integers.
    """
    total = 0
    for block in _blocks(_checked_ids(ids)):
        total += int(block.sum(dtype=np.uint64))
    return total & _MASK


@dataclasses.dataclass(frozen=True)
class Ledger:
    """What a run has consumed: counts, a hash chain of the ids, and the data's identity.

    Attributes:
        epoch: the epoch being consumed.
        consumed_in_epoch: examples of that epoch consumed so far.
        consumed_total: examples consumed since the run began, every epoch.
        chain: the 64-bit hash chain of the global ids consumed, in order.
        dataset_length: the dataset's length.
        fingerprint: the identity of the data's files (None where the
            dataset has no files, or does not say).
    """

    epoch: int
    consumed_in_epoch: int
    consumed_total: int
    chain: int
    dataset_length: int
    fingerprint: str | None = None

    def to_state(self) -> dict:
        """The JSON-ready form a checkpoint carries (the chain as 16 hex digits)."""
        return {"epoch": self.epoch, "consumed_in_epoch": self.consumed_in_epoch,
                "consumed_total": self.consumed_total, "chain": f"{self.chain:016x}",
                "dataset_length": self.dataset_length, "fingerprint": self.fingerprint}

    @classmethod
    def from_state(cls, state: Any, where: str = "state['ledger']") -> Ledger:
        """Read :meth:`to_state`'s form back.

        Raises:
            ValueError: naming ``where`` and the field, if the form is not a ledger's.
        """
        if not isinstance(state, dict):
            raise ValueError(f"{where} must be a dict, got {type(state).__name__}")
        counts = {}
        for key in ("epoch", "consumed_in_epoch", "consumed_total", "dataset_length"):
            value = state.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{where}[{key!r}] must be an integer >= 0, got {value!r}")
            counts[key] = value
        chain_value = read_chain(state.get("chain"), f"{where}['chain']")
        if "fingerprint" not in state:
            raise ValueError(f"{where}['fingerprint'] is missing (None when the data has none)")
        fingerprint = state["fingerprint"]
        if fingerprint is not None and not isinstance(fingerprint, str):
            raise ValueError(f"{where}['fingerprint'] must be a string or None, got "
                             f"{fingerprint!r}")
        return cls(chain=chain_value, fingerprint=fingerprint, **counts)

    def __str__(self) -> str:
        """One line to log beside the model's step."""
        return (f"epoch {self.epoch}: {self.consumed_in_epoch} consumed "
                f"({self.consumed_total} in all), chain {self.chain:016x}, "
                f"data {self.dataset_length} examples"
                + (f", files {self.fingerprint}" if self.fingerprint else ""))
